"""Registered problems: what the service knows by ``problem_id``.

A :class:`~reward_service.models.ProblemSpec` (the wire model, re-exported here) is a problem
as the API registers it (design, DUT module and instance, metrics, targets, simulator, limits,
reward shaping; CVDP metadata such as the prompt when it came from a cid012 row). A :class:`ProblemStore` keeps them:

* :class:`InMemoryProblemStore` — embedded mode (one process);
* :class:`RedisProblemStore` — the service with a broker: one JSON document per problem under
  ``<prefix>problem:<id>`` plus the id set ``<prefix>problems``, shared by every API process.

:func:`~reward_service.problems.resolve.resolve_request` (re-exported here) turns a request
that names a ``problem_id`` into a full :class:`~reward_service.models.ScoreRequest` (the API
does this before dispatch, so workers need no problem store). Store failures (Redis
unreachable, corrupt entry) raise :class:`ProblemStoreError`.
"""

from __future__ import annotations

import abc
import threading

from pydantic import ValidationError

from reward_service.errors import RewardServiceError
from reward_service.models import PROBLEM_ID_PATTERN, ProblemSpec
from reward_service.problems.resolve import resolve_request
from reward_service.redis_backed import RedisBacked

__all__ = [
    "PROBLEM_ID_PATTERN",
    "ProblemSpec",
    "ProblemStore",
    "ProblemStoreError",
    "InMemoryProblemStore",
    "RedisProblemStore",
    "resolve_request",
]


class ProblemStoreError(RewardServiceError, RuntimeError):
    """The problem store cannot answer (backend down, corrupt entry)."""


class ProblemStore(abc.ABC):
    """Problems by id. Implementations are safe to call from many threads."""

    @abc.abstractmethod
    def get(self, problem_id: str) -> ProblemSpec | None:
        """The problem, or None when unknown."""

    @abc.abstractmethod
    def put(self, problem: ProblemSpec) -> bool:
        """Register (or replace) a problem; True when it was new."""

    def put_many(self, problems: list[ProblemSpec]) -> int:
        """Register several problems; returns how many were new."""
        return sum(self.put(p) for p in problems)

    @abc.abstractmethod
    def delete(self, problem_id: str) -> bool:
        """Forget a problem; True when it existed."""

    @abc.abstractmethod
    def ids(self) -> list[str]:
        """Every registered id, sorted."""

    def list(self) -> list[ProblemSpec]:
        """Every registered problem, sorted by id."""
        return [p for p in (self.get(i) for i in self.ids()) if p is not None]

    def ping(self) -> str:
        """Readiness: "ok" or why the store cannot answer."""
        return "ok"

    def close(self) -> None:
        """Release connections; a store in this process holds none, so by default nothing."""
        return None


class InMemoryProblemStore(ProblemStore):
    """A dict in this process (embedded mode, tests)."""

    def __init__(self, problems: dict[str, ProblemSpec] | None = None) -> None:
        self._problems: dict[str, ProblemSpec] = dict(problems or {})
        self._lock = threading.Lock()

    def get(self, problem_id: str) -> ProblemSpec | None:
        with self._lock:
            return self._problems.get(problem_id)

    def put(self, problem: ProblemSpec) -> bool:
        with self._lock:
            new = problem.id not in self._problems
            self._problems[problem.id] = problem
            return new

    def delete(self, problem_id: str) -> bool:
        with self._lock:
            return self._problems.pop(problem_id, None) is not None

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._problems)


class RedisProblemStore(RedisBacked, ProblemStore):
    """Problems in Redis: ``<prefix>problem:<id>`` holds the JSON of the :class:`ProblemSpec`,
    ``<prefix>problems`` the set of ids. ``client`` may be given (tests, shared pools)."""

    error = ProblemStoreError
    what = "problem store"

    def _key(self, problem_id: str) -> str:
        return f"{self.prefix}problem:{problem_id}"

    @property
    def _index(self) -> str:
        return f"{self.prefix}problems"

    def get(self, problem_id: str) -> ProblemSpec | None:
        raw = self._call(self.client.get, self._key(problem_id))
        if raw is None:
            return None
        try:
            return ProblemSpec.model_validate_json(raw)
        except ValidationError as exc:
            raise ProblemStoreError(
                f"stored problem {problem_id!r} is unreadable: {exc.error_count()} error(s)"
            ) from exc

    def put(self, problem: ProblemSpec) -> bool:
        return self.put_many([problem]) == 1

    def put_many(self, problems: list[ProblemSpec]) -> int:
        def run() -> int:
            pipe = self.client.pipeline()
            for p in problems:
                pipe.set(self._key(p.id), p.model_dump_json())
                pipe.sadd(self._index, p.id)
            replies = pipe.execute()
            return sum(int(r) for r in replies[1::2])

        return self._call(run)

    def delete(self, problem_id: str) -> bool:
        def run() -> bool:
            pipe = self.client.pipeline()
            pipe.delete(self._key(problem_id))
            pipe.srem(self._index, problem_id)
            return bool(pipe.execute()[0])

        return self._call(run)

    def ids(self) -> list[str]:
        raw = self._call(self.client.smembers, self._index)
        return sorted(i.decode() if isinstance(i, bytes) else i for i in raw)

    def list(self) -> list[ProblemSpec]:
        ids = self.ids()
        if not ids:
            return []
        raws = self._call(self.client.mget, [self._key(i) for i in ids])
        out = []
        for pid, raw in zip(ids, raws):
            if raw is None:
                continue
            try:
                out.append(ProblemSpec.model_validate_json(raw))
            except ValidationError as exc:
                raise ProblemStoreError(f"stored problem {pid!r} is unreadable") from exc
        return out
