"""The worker's liveness file: a health check that costs a ``find``, not a Celery client.

A container healthcheck or Kubernetes probe of ``celery inspect ping`` starts a Python process
that imports Celery and the app, connects to Redis and waits for the worker's reply: measured in
the compose worker, 0.6 s of CPU per check (plus the worker's reply and, on a fuse-overlayfs
root, the FUSE daemon's share of the imports), every 15 s, on a machine whose cores the
simulations need. Instead, a consumer bootstep of the worker's main process touches
``Settings.worker_heartbeat_file`` every :data:`INTERVAL_S` from the consumer's own timer (so the
event loop that takes jobs off the queue is the one that must be running) while the consumer is
connected, and removes it when the consumer stops (a lost broker connection, a shutdown). The
check is :data:`CHECK`: the file was touched within :data:`STALE_S`.

Registered on the app by :mod:`workers.celery_app` (bootsteps must be there before the worker
builds its blueprint); does nothing when no file is configured (a worker on a developer's host).
"""

from __future__ import annotations

import logging
from pathlib import Path

from celery import bootsteps

from reward_service.settings import get_settings

log = logging.getLogger(__name__)

#: Seconds between touches of the liveness file.
INTERVAL_S = 5.0
#: A file older than this (seconds) means the worker's event loop stopped.
STALE_S = 30
#: The health check, for ``sh -c`` with the file's path as ``$1`` (docker-compose.yml,
#: deploy/k8s/worker.yaml): exit 0 when the file exists and was touched within STALE_S. Shell
#: and GNU find only (both in every Debian image): no interpreter starts.
CHECK = f'test -n "$(find "$1" -newermt "-{STALE_S} seconds" 2>/dev/null)"'


class Heartbeat(bootsteps.StartStopStep):
    """Consumer bootstep: touches the liveness file while the consumer runs (after the task
    consumer started), removes it when the consumer stops or shuts down."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        path = get_settings().worker_heartbeat_file
        self.path: Path | None = Path(path) if path else None
        self.tref = None

    def start(self, parent) -> None:
        if self.path is None:
            return
        self._touch()
        self.tref = parent.timer.call_repeatedly(INTERVAL_S, self._touch, priority=10)

    def stop(self, parent) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("cannot remove the liveness file %s: %s", self.path, exc)

    shutdown = stop

    def _touch(self) -> None:
        assert self.path is not None
        try:
            self.path.touch()
        except OSError as exc:  # the check then fails: the file says nothing it cannot back
            log.warning("cannot touch the liveness file %s: %s", self.path, exc)
