"""Prometheus metrics of one app (its own registry, so several apps can live in one process).

Results are observed once per job, when the API first hands a finished job's result out
(``POST /v1/score``, ``GET /v1/jobs/{id}``, ``GET /v1/batches/{id}``)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reward_service.models import ScoreResult

#: Stage latencies (seconds): from sub-millisecond cache hits to multi-minute builds.
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)


class Metrics:
    def __init__(self, queue_depth: Callable[[], int], keep_seen: int = 200_000) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "reward_service_http_requests",
            "HTTP requests by route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "reward_service_http_request_duration_seconds",
            "HTTP request latency by route template",
            ["route"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "reward_service_queue_depth", "jobs submitted and not finished", registry=self.registry
        )
        self.queue_depth.set_function(lambda: _safe(queue_depth))
        self.jobs_submitted = Counter("reward_service_jobs_submitted", "score jobs submitted", registry=self.registry)
        self.queue_full = Counter("reward_service_queue_full", "submissions refused with 429", registry=self.registry)
        self.stage_seconds = Histogram(
            "reward_service_job_stage_seconds",
            "job latency by stage (ScoreResult.timings)",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.outcomes = Counter("reward_service_results", "results by status", ["status"], registry=self.registry)
        self.cache_hits = Counter(
            "reward_service_cache_hits", "results answered by a cache, by cache", ["cache"], registry=self.registry
        )
        self.engines = Counter(
            "reward_service_engine_results",
            "results by coverage engine (verilator, icarus, fast) and whether a requested fast/auto engine fell back",
            ["engine", "fallback"],
            registry=self.registry,
        )
        self.shadow_checks = Counter(
            "reward_service_fastcov_shadow_checks",
            "fast-path samples re-scored on Verilator (shadow check), by outcome",
            ["agreed"],
            registry=self.registry,
        )
        self.shadow_points = Counter(
            "reward_service_fastcov_shadow_disagreeing_points",
            "points that differed between the fast path and Verilator in shadow checks",
            registry=self.registry,
        )
        self.refusals = Counter(
            "reward_service_integrity_refusals",
            "samples refused by their stimulus policy (docs/integrity.md), by kind of write; a "
            "sample with several kinds counts once under each",
            ["kind"],
            registry=self.registry,
        )
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._keep = keep_seen
        self._lock = threading.Lock()

    def observe_result(self, job_id: str, result: ScoreResult) -> None:
        """Count a finished job's outcome, stage timings, cache hits and integrity refusals
        (once per job id)."""
        with self._lock:
            if job_id in self._seen:
                return
            self._seen[job_id] = None
            while len(self._seen) > self._keep:
                self._seen.popitem(last=False)
        self.outcomes.labels(status=result.status.value).inc()
        for stage, ms in result.timings.items():
            self.stage_seconds.labels(stage=stage).observe(max(0.0, ms) / 1000.0)
        if result.cache.result:
            self.cache_hits.labels(cache="result").inc()
        if result.cache.build:
            self.cache_hits.labels(cache="build").inc()
        if result.engine:
            self.engines.labels(engine=result.engine, fallback=str(result.fallback is not None).lower()).inc()
        for kind in sorted({v.kind for v in result.violations}):
            self.refusals.labels(kind=kind).inc()
        if result.shadow is not None:
            self.shadow_checks.labels(agreed=str(result.shadow.agreed).lower()).inc()
            self.shadow_points.inc(result.shadow.differences)


def _safe(fn: Callable[[], int]) -> float:
    try:
        return float(fn())
    except Exception:
        return float("nan")
