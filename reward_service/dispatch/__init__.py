"""Dispatchers: where score requests run. The API talks only to this interface.

- :class:`~reward_service.dispatch.local.LocalDispatcher`: an in-process thread pool around one
  :class:`~reward_service.scoring.Engine` (embedded mode: no Redis; ``reward-service serve``).
- ``CeleryDispatcher`` (``reward_service.dispatch.celery``): Celery on Redis, workers in
  ``workers/`` (the service).
"""

from reward_service.dispatch.base import BatchTooLarge, BrokerUnavailable, Dispatcher, JobState, JobView, QueueFull

__all__ = ["BatchTooLarge", "BrokerUnavailable", "Dispatcher", "JobState", "JobView", "QueueFull"]
