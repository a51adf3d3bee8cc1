"""Batches: which jobs a batch holds, their group labels and its diversity weight.

:class:`InMemoryBatchStore` in embedded mode; :class:`RedisBatchStore` (one JSON document per
batch under ``<prefix>batch:<id>``, expiring after ``batch_ttl_s``) when the service has a
broker, so that any API process answers ``GET /v1/batches/{id}``."""

from __future__ import annotations

import abc
import collections
import threading
import time
from typing import Any

from pydantic import BaseModel, Field

from reward_service.api.errors import StoreUnavailable


class BatchRecord(BaseModel):
    id: str
    job_ids: list[str]
    groups: list[str | None]
    diversity_weight: float = 0.0
    created: float = Field(default_factory=time.time)


class BatchStore(abc.ABC):
    @abc.abstractmethod
    def put(self, batch: BatchRecord) -> None: ...

    @abc.abstractmethod
    def get(self, batch_id: str) -> BatchRecord | None: ...

    def ping(self) -> str:
        return "ok"

    def close(self) -> None:
        pass


class InMemoryBatchStore(BatchStore):
    """Keeps the ``keep`` most recent batches."""

    def __init__(self, keep: int = 10_000) -> None:
        self._batches: collections.OrderedDict[str, BatchRecord] = collections.OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def put(self, batch: BatchRecord) -> None:
        with self._lock:
            self._batches[batch.id] = batch
            while len(self._batches) > self._keep:
                self._batches.popitem(last=False)

    def get(self, batch_id: str) -> BatchRecord | None:
        with self._lock:
            return self._batches.get(batch_id)


class RedisBatchStore(BatchStore):
    def __init__(self, url: str | None = None, prefix: str = "reward-service:", ttl_s: int = 7 * 24 * 3600,
                 client: Any = None) -> None:
        if client is None:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s

    def _call(self, fn, *args, **kwargs):
        import redis

        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise StoreUnavailable(f"batch store (Redis) unavailable: {exc}") from exc

    def put(self, batch: BatchRecord) -> None:
        self._call(self.client.set, f"{self.prefix}batch:{batch.id}", batch.model_dump_json(), ex=self.ttl_s)

    def get(self, batch_id: str) -> BatchRecord | None:
        raw = self._call(self.client.get, f"{self.prefix}batch:{batch_id}")
        return None if raw is None else BatchRecord.model_validate_json(raw)

    def ping(self) -> str:
        try:
            self._call(self.client.ping)
        except StoreUnavailable as exc:
            return str(exc)
        return "ok"

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - best effort
            pass
