"""The Celery app and its configuration, nothing else (Celery's guide: the app module holds
only the app). Configuration comes from :class:`reward_service.settings.Settings` and is
evaluated lazily (on first use), so importing this module reads no environment.

``celery -A workers.celery_app worker`` finds :data:`app`; the task lives in
:mod:`workers.tasks`, the remote-control command ``sandbox_check`` in :mod:`workers.control`,
the start-up hooks (the Docker sandbox reaper) in :mod:`workers.lifecycle`
(all listed in ``include``).
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from reward_service.models import Limits
from reward_service.settings import Settings, get_settings

#: The queue of score jobs (a Redis list of that name on the broker).
QUEUE = "reward-service"
#: The registered name of the score task (stable, independent of the module path).
TASK_NAME = "reward_service.score"
#: Default broker when none is configured (a local Redis).
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"

#: Seconds on top of the largest per-request limits before the soft limit fires, and
#: between the soft and the hard limit, and between the hard limit and the visibility timeout.
SOFT_MARGIN_S = 60.0
HARD_MARGIN_S = 30.0
VISIBILITY_MARGIN_S = 300.0


def _largest(field: str) -> float:
    for meta in Limits.model_fields[field].metadata:
        if hasattr(meta, "le"):
            return float(meta.le)
    raise ValueError(f"Limits.{field} has no upper bound")  # pragma: no cover


def time_limits(settings: Settings) -> tuple[float, float, float]:
    """(soft, hard, visibility timeout) in seconds. Defaults derive from the largest limits a
    request may ask for (``Limits.compile_s`` + ``Limits.run_s``): the engine enforces each
    request's own limits; these are the backstop. Raises ValueError when the visibility
    timeout does not exceed the hard limit (a running job would be delivered twice)."""
    soft = settings.task_soft_time_limit_s or _largest("compile_s") + _largest("run_s") + SOFT_MARGIN_S
    hard = settings.task_time_limit_s or soft + HARD_MARGIN_S
    visibility = settings.visibility_timeout_s or hard + VISIBILITY_MARGIN_S
    if hard <= soft:
        raise ValueError(f"task_time_limit_s ({hard:g}) must exceed task_soft_time_limit_s ({soft:g})")
    if visibility <= hard:
        raise ValueError(f"visibility_timeout_s ({visibility:g}) must exceed task_time_limit_s ({hard:g}): "
                         "a job still running at the visibility timeout is delivered again")
    return soft, hard, visibility


def broker_url(settings: Settings) -> str:
    return settings.broker_url or DEFAULT_BROKER


def backend_url(settings: Settings) -> str:
    return settings.result_backend or broker_url(settings)


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for ``settings`` (docs/workers.md lists what each entry is for)."""
    soft, hard, visibility = time_limits(settings)
    return {
        "broker_url": broker_url(settings),
        "result_backend": backend_url(settings),
        "broker_connection_retry_on_startup": True,
        # Redis has no acknowledgements: a delivered, unacknowledged job goes back to the queue
        # after the visibility timeout. Sweep for such jobs often enough for the timeout to matter.
        "broker_transport_options": {
            "visibility_timeout": visibility,
            "unacked_restore_interval": max(1, min(10, int(visibility // 5))),
            "unacked_restore_throttle": 1,
        },
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_default_queue": QUEUE,
        # Delivery: acknowledge after the task ran, one job at a time per process, requeue the
        # job when the process running it dies, cancel running jobs when the broker is lost
        # (they will be redelivered; their results are idempotent).
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_soft_time_limit": soft,
        "task_time_limit": hard,
        "result_expires": settings.result_expires_s,
        "task_track_started": False,  # the dispatcher's own marker says "running" (see tasks.py)
        "worker_send_task_events": False,
        "task_send_sent_event": False,
    }


def make_app(settings: Settings | None = None, main: str = "reward_service", **kwargs: Any) -> Celery:
    """A Celery app configured from ``settings`` (default: :func:`get_settings`, read on first use)."""
    app = Celery(main, include=["workers.tasks", "workers.control", "workers.lifecycle"], **kwargs)
    app.add_defaults(lambda: celery_config(settings or get_settings()))
    return app


app = make_app()
