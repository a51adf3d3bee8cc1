"""The dispatcher and stores a service built from settings uses.

Embedded mode (no ``broker_url``): a :class:`LocalDispatcher` around an :class:`Engine`
(bubblewrap sandbox) and in-memory stores. With a broker: the Celery dispatcher
(``reward_service.dispatch.celery``, imported only then) and Redis stores."""

from __future__ import annotations

from reward_service.api.batch_store import BatchStore, InMemoryBatchStore, RedisBatchStore
from reward_service.api.episode_store import EpisodeStore, InMemoryEpisodeStore, RedisEpisodeStore
from reward_service.dispatch.base import Dispatcher
from reward_service.errors import RewardServiceError
from reward_service.problems.store import InMemoryProblemStore, ProblemStore, RedisProblemStore
from reward_service.settings import Settings


class ConfigurationError(RewardServiceError, RuntimeError):
    """The settings ask for something this installation cannot provide."""


def build_dispatcher(settings: Settings) -> Dispatcher:
    if not settings.broker_url:
        from reward_service.dispatch.local import LocalDispatcher
        from reward_service.engine import Engine

        return LocalDispatcher(
            Engine(settings),
            workers=settings.score_workers,
            max_queue=settings.max_queue,
            result_ttl_s=settings.result_expires_s,
        )
    try:
        from reward_service.dispatch.celery import CeleryDispatcher
    except ImportError as exc:
        raise ConfigurationError(
            "REWARD_SERVICE_BROKER_URL is set but the Celery dispatcher "
            f"(reward_service.dispatch.celery) cannot be imported: {exc}"
        ) from exc
    return CeleryDispatcher(settings)


def build_problem_store(settings: Settings) -> ProblemStore:
    url = settings.store_url
    return RedisProblemStore(url, prefix=settings.redis_prefix) if url else InMemoryProblemStore()


def build_batch_store(settings: Settings) -> BatchStore:
    url = settings.store_url
    return (
        RedisBatchStore(url, prefix=settings.redis_prefix, ttl_s=settings.batch_ttl_s) if url else InMemoryBatchStore()
    )


def build_episode_store(settings: Settings) -> EpisodeStore:
    url = settings.store_url
    if url:
        return RedisEpisodeStore(url, prefix=settings.redis_prefix, ttl_s=settings.episode_ttl_s)
    return InMemoryEpisodeStore(ttl_s=settings.episode_ttl_s)
