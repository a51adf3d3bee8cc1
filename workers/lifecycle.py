"""Worker life-cycle hooks (Celery signals, connected when the worker imports this module).

With the Docker sandbox, a worker that was killed (SIGKILL, OOM, a lost machine) leaves its sim
containers and per-step volumes behind; the next worker to start, and every worker every
``REAPER_INTERVAL_S`` after that, removes those whose owner is gone or whose deadline has
passed (:mod:`reward_service.sandbox.reaper`). Runs in the worker's main process only.

Every worker's main process also runs the lease reaper (:mod:`reward_service.dispatch.leases`):
the jobs of a worker that died are requeued by the surviving workers within seconds.

A pool process removes the work dirs still pending in the background
(:mod:`reward_service.scoring.workdir`) when it shuts down: it ends with ``os._exit``, so its
``atexit`` hooks do not run.
"""

from __future__ import annotations

import logging

from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

from reward_service.settings import get_settings

log = logging.getLogger(__name__)
REAPER_INTERVAL_S = 300.0
_lease_reaper = None


@worker_ready.connect
def start_sandbox_reaper(sender=None, **kwargs) -> None:
    """Start the periodic reaper when this worker runs simulations in Docker containers."""
    if get_settings().sandbox != "docker":
        return
    from reward_service.sandbox import reaper

    reaper.ensure_periodic(REAPER_INTERVAL_S)  # now, not at the first job (the sandbox would then)
    log.info("sandbox reaper started (every %g s)", REAPER_INTERVAL_S)


@worker_ready.connect
def start_lease_reaper(sender=None, **kwargs) -> None:
    """Requeue the jobs of dead workers (a dispatcher of this process runs the reaper thread)."""
    global _lease_reaper
    from reward_service.dispatch.celery import CeleryDispatcher

    _lease_reaper = CeleryDispatcher(get_settings(), reaper=True)
    log.info("lease reaper started (leases of %g s)", get_settings().lease_s)


@worker_shutdown.connect
def stop_lease_reaper(sender=None, **kwargs) -> None:
    global _lease_reaper
    if _lease_reaper is not None:
        _lease_reaper.close()
        _lease_reaper = None


@worker_process_shutdown.connect
def remove_pending_work_dirs(sender=None, **kwargs) -> None:
    """Wait (up to 30 s) for this pool process's work dirs still being removed."""
    from reward_service.scoring import workdir

    if not workdir.drain(30.0):
        log.warning("work dirs still being removed after 30 s at pool process shutdown")
