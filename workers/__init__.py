"""Celery workers of reward-service (docs/workers.md).

- :mod:`workers.celery_app` holds only the Celery app, built by the job contract
  (:mod:`reward_service.dispatch.contract`: queue and task names, configuration from
  :class:`reward_service.settings.Settings`, Redis keys, payload and result encoding).
- :mod:`workers.tasks` holds the ``score`` task: a thin call into a per-process
  :class:`~reward_service.scoring.Engine`.

Run: ``python -m workers`` (one process per core, ``-O fair``) or
``celery -A workers.celery_app worker -O fair``. The API talks to the workers through
:class:`reward_service.dispatch.celery.CeleryDispatcher`.
"""
