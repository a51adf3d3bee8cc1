"""Embedded dispatcher: a thread pool in this process around one Engine (no broker).

Threads suffice: the engine spends its time waiting on sandboxed subprocesses. Results are
kept in memory for ``result_ttl_s`` (like the Redis result expiry of service mode) and at most
``keep_results`` of them (a result holds up to ``limits.output_kb`` of log: 10k results of
256 KiB logs are 2.5 GiB at worst); the oldest finished ones go first."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import uuid
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

from reward_service.dispatch.base import BatchTooLarge, Dispatcher, JobState, JobView, QueueFull
from reward_service.engine import Engine
from reward_service.models import ScoreRequest, ScoreResult

log = logging.getLogger(__name__)


class LocalDispatcher(Dispatcher):
    """``workers`` parallel scorings (default: one per core), at most ``max_queue`` pending."""

    def __init__(
        self,
        engine: Engine,
        workers: int | None = None,
        max_queue: int = 8192,
        keep_results: int = 10_000,
        result_ttl_s: float = 24 * 3600,
    ) -> None:
        self.engine = engine
        self.pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1, thread_name_prefix="score")
        # Background work (warm-up builds) gets one thread of its own: it never takes a
        # scoring thread, however many problems are registered at once.
        self.background_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background")
        self.max_queue = max_queue
        self._jobs: collections.OrderedDict[str, Future] = collections.OrderedDict()
        self._running: set[str] = set()
        self._pending = 0  # submitted, not finished (a counter: /metrics must not scan the jobs)
        self._lock = threading.Lock()
        self._keep = keep_results
        self._ttl = result_ttl_s
        self._finished: dict[str, float] = {}  # job id -> monotonic time it finished

    def _run(self, job_id: str, request: ScoreRequest) -> ScoreResult:
        with self._lock:
            self._running.add(job_id)
        try:
            return self.engine.score(request)
        except Exception:
            log.exception("engine raised for job %s", job_id)  # must still be readable
            return ScoreResult.infrastructure_failure("internal error while scoring")
        finally:
            with self._lock:
                self._running.discard(job_id)
                self._pending -= 1
                self._finished[job_id] = time.monotonic()

    def submit_many(self, requests: list[ScoreRequest]) -> list[str]:
        return self._submit(requests, self.pool, self.max_queue)

    def submit_background(self, request: ScoreRequest) -> str:
        return self._submit([request], self.background_pool, self.max_queue // 2)[0]

    def _submit(self, requests: list[ScoreRequest], pool: ThreadPoolExecutor, bound: int) -> list[str]:
        if len(requests) > bound:
            raise BatchTooLarge(len(requests), bound)
        with self._lock:
            if self.queue_depth_locked() + len(requests) > bound:
                raise QueueFull(f"queue full ({bound} pending jobs)", retry_after=2.0)
            ids = []
            for request in requests:
                job_id = uuid.uuid4().hex
                self._pending += 1
                self._jobs[job_id] = pool.submit(self._run, job_id, request)
                ids.append(job_id)
            self._prune_locked()
            return ids

    def _prune_locked(self) -> None:
        """Drop finished jobs in the order they finished while over the count bound or past
        the TTL; pending jobs (a long background warm-up among them) never block this."""
        expired = time.monotonic() - self._ttl
        while self._finished:
            oldest, finished = next(iter(self._finished.items()))
            if len(self._jobs) <= self._keep and finished > expired:
                break
            del self._finished[oldest]
            self._jobs.pop(oldest, None)

    def submit(self, request: ScoreRequest) -> str:
        return self.submit_many([request])[0]

    def _view(self, job_id: str, fut: Future) -> JobView:
        if fut.cancelled():  # shut down before it ran
            return JobView(
                job_id,
                JobState.done,
                ScoreResult.infrastructure_failure("the service shut down before the job ran"),
            )
        if fut.done():
            return JobView(job_id, JobState.done, fut.result())
        with self._lock:
            running = job_id in self._running
        return JobView(job_id, JobState.running if running else JobState.queued)

    def get(self, job_id: str) -> JobView | None:
        fut = self._jobs.get(job_id)
        return None if fut is None else self._view(job_id, fut)

    def wait(self, job_id: str, timeout: float) -> JobView | None:
        fut = self._jobs.get(job_id)
        if fut is None:
            return None
        try:
            fut.result(timeout=max(0.0, timeout))
        except (TimeoutError, CancelledError):
            pass
        return self._view(job_id, fut)

    def queue_depth_locked(self) -> int:
        return self._pending

    def queue_depth(self) -> int:
        with self._lock:
            return self.queue_depth_locked()

    def ready(self) -> dict[str, str]:
        try:
            self.engine.sandbox.check()
            return {"sandbox": "ok", "workers": "ok"}
        except Exception:
            log.exception("sandbox check failed")
            return {"sandbox": "sandbox unavailable (see the service log)"}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.background_pool.shutdown(wait=False, cancel_futures=True)
