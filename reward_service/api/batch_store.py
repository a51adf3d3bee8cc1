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
from reward_service.redis_backed import RedisBacked


class BatchRecord(BaseModel):
    id: str
    job_ids: list[str]
    groups: list[str | None]
    diversity_weight: float = 0.0
    created: float = Field(default_factory=time.time)


class BatchStore(abc.ABC):
    """Where batches are kept: in this process or in Redis."""

    @abc.abstractmethod
    def put(self, batch: BatchRecord) -> None:
        """Keep ``batch`` (replacing one of the same id). Raises :class:`StoreUnavailable` when
        the store cannot be reached."""

    @abc.abstractmethod
    def get(self, batch_id: str) -> BatchRecord | None:
        """The batch of that id, or None (never stored, or expired)."""

    def ping(self) -> str:
        """Readiness: "ok" or why the store cannot answer."""
        return "ok"

    def close(self) -> None:
        """Release connections; a store in this process holds none, so by default nothing."""
        return None


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


class RedisBatchStore(RedisBacked, BatchStore):
    """Batches in Redis: ``<prefix>batch:<id>`` holds the record's JSON for ``ttl_s`` seconds."""

    error = StoreUnavailable
    what = "batch store"

    def __init__(
        self, url: str | None = None, prefix: str = "reward-service:", ttl_s: int = 7 * 24 * 3600, client: Any = None
    ) -> None:
        super().__init__(url, prefix, client)
        self.ttl_s = ttl_s

    def put(self, batch: BatchRecord) -> None:
        self._call(self.client.set, f"{self.prefix}batch:{batch.id}", batch.model_dump_json(), ex=self.ttl_s)

    def get(self, batch_id: str) -> BatchRecord | None:
        raw = self._call(self.client.get, f"{self.prefix}batch:{batch_id}")
        return None if raw is None else BatchRecord.model_validate_json(raw)
