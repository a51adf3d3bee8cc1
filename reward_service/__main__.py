"""``python -m reward_service`` runs the CLI (same as the ``reward-service`` command)."""

from reward_service.cli import app

app(prog_name="reward-service")
