"""Episodes kept beside batches: :class:`InMemoryEpisodeStore` in embedded mode,
:class:`RedisEpisodeStore` (one JSON document per episode under ``<prefix>episode:<id>``,
expiring ``episode_ttl_s`` after its last change) when the service has a broker, so that any
API process (and one restarted) continues an episode.

Each store also gives a per-episode lock (:meth:`EpisodeStore.lock`) held around a step's
read-modify-write, so that two API processes never apply two steps to one record at once."""

from __future__ import annotations

import abc
import collections
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from reward_service.api.errors import StoreUnavailable
from reward_service.episodes import EpisodeRecord
from reward_service.redis_backed import RedisBacked


class EpisodeStore(abc.ABC):
    """Where episodes are kept: in this process or in Redis."""

    @abc.abstractmethod
    def put(self, episode: EpisodeRecord) -> None:
        """Keep ``episode`` (replacing the record of the same id; its TTL starts again).
        Raises :class:`StoreUnavailable` when the store cannot be reached."""

    @abc.abstractmethod
    def get(self, episode_id: str) -> EpisodeRecord | None:
        """The episode of that id, or None (never created, or expired)."""

    @abc.abstractmethod
    def lock(self, episode_id: str) -> contextlib.AbstractContextManager[None]:
        """A lock on one episode, for a step's read-modify-write (held for milliseconds, never
        while a simulation runs). Raises :class:`StoreUnavailable` when it cannot be taken."""

    def ping(self) -> str:
        """Readiness: "ok" or why the store cannot answer."""
        return "ok"

    def close(self) -> None:
        """Release connections; a store in this process holds none, so by default nothing."""
        return None


class InMemoryEpisodeStore(EpisodeStore):
    """Keeps the ``keep`` most recently changed episodes, each for ``ttl_s`` seconds."""

    def __init__(self, keep: int = 10_000, ttl_s: float = 24 * 3600) -> None:
        self._episodes: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._keep = keep
        self._ttl_s = ttl_s
        self._lock = threading.Lock()

    def put(self, episode: EpisodeRecord) -> None:
        # kept as JSON: a caller changing its record object does not change the stored one
        with self._lock:
            self._episodes[episode.id] = (time.monotonic() + self._ttl_s, episode.model_dump_json())
            self._episodes.move_to_end(episode.id)
            while len(self._episodes) > self._keep:
                old, _ = self._episodes.popitem(last=False)
                self._locks.pop(old, None)

    def get(self, episode_id: str) -> EpisodeRecord | None:
        with self._lock:
            kept = self._episodes.get(episode_id)
            if kept is None:
                return None
            if kept[0] < time.monotonic():
                del self._episodes[episode_id]
                self._locks.pop(episode_id, None)
                return None
        return EpisodeRecord.model_validate_json(kept[1])

    @contextlib.contextmanager
    def lock(self, episode_id: str) -> Iterator[None]:
        with self._lock:
            lock = self._locks.setdefault(episode_id, threading.Lock())
        with lock:
            yield


class RedisEpisodeStore(RedisBacked, EpisodeStore):
    """Episodes in Redis: ``<prefix>episode:<id>`` holds the record's JSON for ``ttl_s``
    seconds after its last change; ``<prefix>episode-lock:<id>`` is its lock (redis-py's
    ``Lock``, expiring after ``lock_s`` so that a crashed API process cannot hold it)."""

    error = StoreUnavailable
    what = "episode store"

    def __init__(
        self,
        url: str | None = None,
        prefix: str = "reward-service:",
        ttl_s: int = 24 * 3600,
        client: Any = None,
        lock_s: float = 30.0,
    ) -> None:
        super().__init__(url, prefix, client)
        self.ttl_s = ttl_s
        self.lock_s = lock_s

    def put(self, episode: EpisodeRecord) -> None:
        self._call(self.client.set, f"{self.prefix}episode:{episode.id}", episode.model_dump_json(), ex=self.ttl_s)

    def get(self, episode_id: str) -> EpisodeRecord | None:
        raw = self._call(self.client.get, f"{self.prefix}episode:{episode_id}")
        return None if raw is None else EpisodeRecord.model_validate_json(raw)

    @contextlib.contextmanager
    def lock(self, episode_id: str) -> Iterator[None]:
        lock = self.client.lock(
            f"{self.prefix}episode-lock:{episode_id}", timeout=self.lock_s, blocking_timeout=self.lock_s
        )
        if not self._call(lock.acquire):
            raise StoreUnavailable(f"episode {episode_id} stayed locked for {self.lock_s:g} s")
        try:
            yield
        finally:
            try:
                lock.release()
            except Exception:  # expired (held past lock_s) or Redis gone: it frees itself
                pass
