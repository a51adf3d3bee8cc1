"""``python -m workers [celery worker options]``: a worker with the service defaults — one
process per core (``--concurrency``; ``REWARD_SERVICE_WORKER_CONCURRENCY`` overrides it, e.g.
cores / containers when several worker containers share a host), ``-O fair``, the score queue. Options given on the
command line come last and win (e.g. ``--concurrency 4``, ``-n w1@%h``, ``--loglevel DEBUG``)."""

from __future__ import annotations

import os
import sys


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> None:
    from reward_service.dispatch.contract import QUEUE
    from reward_service.settings import get_settings
    from workers.celery_app import app

    concurrency = get_settings().worker_concurrency or cores()
    args = [
        "worker",
        f"--concurrency={concurrency}",
        "-O",
        "fair",
        "-Q",
        QUEUE,
        "--loglevel=INFO",
        *(sys.argv[1:] if argv is None else argv),
    ]
    app.worker_main(args)


if __name__ == "__main__":
    main()
