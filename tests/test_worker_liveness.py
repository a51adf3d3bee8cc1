"""The worker's liveness check (workers/liveness.py): the check command is what docker-compose.yml
and the Kubernetes worker run, and it tells a fresh file from a stale or missing one, with the
real ``sh`` and ``find``. A real worker touching the file is tests/test_workers.py's
test_a_worker_keeps_its_liveness_file_fresh_while_it_runs."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from workers.liveness import CHECK, STALE_S

REPO = Path(__file__).resolve().parents[1]


def check(path: Path) -> int:
    """Exit status of the liveness check on ``path``."""
    return subprocess.run(["sh", "-c", CHECK, "rs-health", str(path)], timeout=10).returncode


def test_the_check_tells_fresh_from_stale_and_missing(tmp_path):
    alive = tmp_path / "worker.alive"
    assert check(alive) == 1  # no file: the worker never started, or stopped
    alive.touch()
    assert check(alive) == 0
    old = time.time() - STALE_S - 10
    os.utime(alive, (old, old))
    assert check(alive) == 1  # the event loop stopped touching it
    os.utime(alive, (old + 20, old + 20))  # STALE_S - 10 s old
    assert check(alive) == 0


def test_compose_and_kubernetes_run_the_check_on_the_file_the_worker_touches():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["worker"]
    test = [part.replace("$$", "$") for part in compose["healthcheck"]["test"]]  # Compose's escape
    path = compose["environment"]["REWARD_SERVICE_WORKER_HEARTBEAT_FILE"]
    assert test == ["CMD", "sh", "-c", CHECK, "rs-health", path]
    assert path.startswith("/tmp/")  # the container's only writable place besides the cache
    deployment = next(
        d for d in yaml.safe_load_all((REPO / "deploy/k8s/worker.yaml").read_text()) if d and d["kind"] == "Deployment"
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["readinessProbe"]["exec"]["command"] == ["sh", "-c", CHECK, "rs-health", path]
    assert env["REWARD_SERVICE_WORKER_HEARTBEAT_FILE"] == path
    assert "livenessProbe" not in container  # a Redis outage must not restart every worker
