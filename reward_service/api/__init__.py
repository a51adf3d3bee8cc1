"""The HTTP API (FastAPI): ``create_app`` assembles it; ``reward-service serve`` runs it.

Routers, one per resource: :mod:`.routes.score` (``/v1/score``), :mod:`.routes.jobs`,
:mod:`.routes.batches`, :mod:`.routes.problems`, :mod:`.routes.health` (``/healthz``,
``/readyz``, ``/metrics``). See ``docs/api.md``.
"""

from reward_service.api.main import create_app

__all__ = ["create_app"]
