"""Celery dispatcher: score requests run on Celery workers (``workers/``) over Redis.

Jobs are content-addressed: the job id is the SHA-256 of the request as sent (plus the engine
revision), so submitting an identical request again (a trainer retrying after a timeout, the
same completion twice in a GRPO group) returns the same id and queues nothing while that job is
queued, running or done. A job whose result is a ``sandbox_error`` (or whose task failed) is
run again when it is submitted again.

What the dispatcher and the workers share (names, configuration, Redis keys, payload and result
encoding) is :mod:`reward_service.dispatch.contract`; this module does not import the workers.
Redis and kombu errors leave every public method as
:class:`~reward_service.dispatch.base.BrokerUnavailable`.

Waiting reads Redis directly with redis-py (thread-safe connection pool) instead of
``AsyncResult.get``, whose shared result-consumer pub/sub has a history of thread-safety bugs
(celery#3761, #4480, #6335); the API waits from many threads.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any

import redis

from reward_service.dispatch.base import BatchTooLarge, Dispatcher, JobState, JobView, QueueFull
from reward_service.dispatch.contract import (
    BACKGROUND_PRIORITY,
    QUEUE,
    QUEUE_LISTS,
    READY_STATES,
    SCORE_PRIORITY,
    TASK_NAME,
    UNACKED_KEY,
    JobKeys,
    ResultBackend,
    backend_spec,
    backend_url,
    broker_url,
    encode_result,
    job_id_for,
    make_app,
    message_id,
    meta_key_of,
    notify_done,
    reply_bytes,
    reply_text,
    rerunnable,
    result_from_meta,
    translating_broker_errors,
    wire_payload,
)
from reward_service.dispatch.leases import Leases, Reaper
from reward_service.models import ScoreRequest, ScoreResult
from reward_service.settings import Settings, get_settings

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"^[0-9a-f]{64}$")
#: Longest single block on the notification list; then the result key is read again
#: (covers results stored by a worker's main process, e.g. after a hard time limit).
_POLL_S = 1.0

#: Jobs read per pipelined round trip by ``get_many`` (two GETs each).
_GET_MANY_CHUNK = 512


class ClientRedisBackend(ResultBackend):
    """The service's result backend (it never replaces a stored SUCCESS either: the reaper's
    :meth:`CeleryDispatcher.finish` stores with it) minus the pub/sub subscription Celery's Redis
    backend opens for every sent task (``on_task_call``): the dispatcher reads results itself
    (see the module doc)."""

    def on_task_call(self, producer, task_id):
        return None


class CeleryDispatcher(Dispatcher):
    """Submits score requests to the Celery workers and reads their results from Redis.

    ``max_queue`` (default ``Settings.celery_max_queue``) bounds queued + running jobs
    (:class:`QueueFull` beyond). ``reaper``: run a lease reaper thread in this process
    (:mod:`reward_service.dispatch.leases`; every API process and worker runs one). Safe to
    call from many threads."""

    def __init__(self, settings: Settings | None = None, max_queue: int | None = None, reaper: bool = True) -> None:
        self.settings = settings or get_settings()
        self.app = make_app(
            self.settings,
            main="reward_service-client",
            set_as_current=False,
            backend=backend_spec(self.settings, ClientRedisBackend),
        )
        # the backend's pure helpers only (key names, decoding): safe across threads
        self._meta_key = meta_key_of(self.app)
        self._decode = self.app.backend.decode
        # The run_id of the Redis this process last saw (INFO server): a change is a restart
        # (reconcile_after_restart). Recorded before this process first sends a message too, so
        # a restart that happens before the first reaper round is still one.
        self._run_id: str | None = None
        self._run_id_lock = threading.Lock()
        self.keys = JobKeys(self.settings.redis_prefix, self._meta_key)
        self.max_queue = max_queue or self.settings.celery_max_queue
        self.ttl = self.settings.result_expires_s
        opts = {"socket_timeout": 30, "socket_connect_timeout": 5, "health_check_interval": 30}
        self.results = redis.Redis.from_url(backend_url(self.settings), **opts)
        same = broker_url(self.settings) == backend_url(self.settings)
        self.broker = self.results if same else redis.Redis.from_url(broker_url(self.settings), **opts)
        self._submit_lock = threading.Lock()
        self._rerun_claim = self.results.register_script(_RERUN_CLAIM)
        self.leases = Leases(self.results, self.keys, self.settings.lease_s)
        self._reaper = Reaper(self._maintain).start() if reaper else None

    # -- submitting -------------------------------------------------------------------------
    @translating_broker_errors
    def submit(self, request: ScoreRequest) -> str:
        return self.submit_many([request])[0]

    @translating_broker_errors
    def submit_background(self, request: ScoreRequest) -> str:
        """Queue at the lowest priority (workers take it only when no scoring job waits), and
        only while the queue is under half its bound: the other half stays for scoring."""
        return self._submit([request], BACKGROUND_PRIORITY, self.max_queue // 2)[0]

    @translating_broker_errors
    def submit_many(self, requests: list[ScoreRequest]) -> list[str]:
        return self._submit(requests, SCORE_PRIORITY, self.max_queue)

    def _submit(self, requests: list[ScoreRequest], priority: int, bound: int) -> list[str]:
        payloads = [wire_payload(r) for r in requests]
        ids = [job_id_for(r) for r in requests]
        first: dict[str, dict[str, Any]] = {}
        for job_id, payload in zip(ids, payloads):
            first.setdefault(job_id, payload)
        unique = list(first)
        # One lock per dispatcher: the depth check and the sends of a batch are not interleaved
        # with another thread's (other API processes may still race; the bound is then soft).
        with self._submit_lock:
            raws = self.results.mget([self._meta_key(i) for i in unique]) if unique else []
            metas = [self._meta(r) for r in raws]
            markers = self.results.mget([self.keys.marker(i) for i in unique]) if unique else []
            seen = {i: raw for i, raw in zip(unique, raws) if raw is not None}
            rerun = [i for i, meta in zip(unique, metas) if rerunnable(meta)]
            # Fresh: no marker, and nothing stored or only a state on the way: Celery's RETRY of
            # an attempt that met a Redis restart without persistence, stored in the empty
            # Redis after the marker and request copy were lost (the job's view was then
            # "unknown to the dispatcher", a sandbox_error: CI, test_redis_restart). It is sent
            # again; if the retry's own message survived, leases and stored results absorb it.
            fresh = [
                i
                for i, meta, marker in zip(unique, metas, markers)
                if marker is None
                and (meta is None or (meta.get("status") not in READY_STATES and not rerunnable(meta)))
            ]
            new = rerun + fresh
            if len(new) > bound:
                raise BatchTooLarge(len(new), bound)
            if new:
                depth = self.queue_depth()
                if depth + len(new) > bound:
                    raise QueueFull(
                        f"queue full: {depth} jobs queued or running, {len(new)} more would "
                        f"exceed the bound of {bound}",
                        retry_after=_retry_after(depth),
                    )
            to_send = self._claim(rerun, fresh, seen, first)
            if to_send:
                self._send([(i, first[i]) for i in to_send], priority)
        return ids

    def _claim(
        self, rerun: list[str], fresh: list[str], seen: dict[str, bytes | str], payloads: dict[str, dict[str, Any]]
    ) -> list[str]:
        """Mark jobs queued and return the ids to send. A fresh job is claimed only if no other
        submitter claimed it meanwhile (SET NX); a job to re-run only if its stored result is
        still the one this submitter saw (compare-and-delete in one Lua call), so two API
        processes re-submitting the same failed job send it once (``seen``: the stored result
        of each job to re-run). A copy of each request is kept while the job is not done (a
        lapsed lease or a lost job is sent again from it)."""
        pipe = self.results.pipeline(transaction=False)
        for job_id in rerun + fresh:
            pipe.set(self.keys.request(job_id), json.dumps(payloads[job_id]), ex=self.ttl)
        for job_id in rerun:
            self._rerun_claim(
                keys=[
                    self._meta_key(job_id),
                    self.keys.marker(job_id),
                    self.keys.deliveries(job_id),
                    self.keys.sims(job_id),
                    self.keys.done(job_id),
                ],
                args=[seen[job_id], self.ttl],
                client=pipe,
            )
        for job_id in fresh:
            pipe.set(self.keys.marker(job_id), "queued", ex=self.ttl, nx=True)
        claimed = pipe.execute()[len(rerun) + len(fresh) :]
        return [i for i, ok in zip(rerun + fresh, claimed) if ok]

    def _send(self, jobs: list[tuple[str, dict[str, Any]]], priority: int) -> None:
        self._note_run_id()
        sent = 0
        try:
            with self.app.producer_or_acquire() as producer:
                for job_id, payload in jobs:
                    self.app.send_task(
                        TASK_NAME,
                        args=[payload],
                        kwargs={"enqueued_at": time.time()},
                        task_id=job_id,
                        queue=QUEUE,
                        producer=producer,
                        priority=priority,
                    )
                    sent += 1
        except BaseException:
            # Jobs not sent must not look queued forever.
            unsent = [job_id for job_id, _ in jobs[sent:]]
            if unsent:
                self.results.delete(*[self.keys.marker(i) for i in unsent])
            raise

    def _note_run_id(self) -> None:
        """Record the broker's run_id if this process has none yet: read before a message is
        sent, so a restart that loses the message changes the run_id from the recorded one even
        when no reaper round ran before it. Best effort: a failed read leaves it to the send
        (which then fails too) and the next reaper round."""
        if self._run_id is not None:
            return
        with self._run_id_lock:
            if self._run_id is None:
                try:
                    self._run_id = self.broker.info("server").get("run_id")
                except redis.RedisError as exc:
                    log.debug("could not read the Redis run_id before sending: %s", exc)

    # -- leases ------------------------------------------------------------------------------
    @translating_broker_errors
    def reconcile_after_restart(self) -> list[str]:
        """When Redis restarted since this process last saw it (its ``run_id`` changed since the
        last call or since this process first sent a message), resend the jobs marked queued
        whose message the restart lost (the last second of an append-only file), from their
        request copies; one caller per restart (a lock key). Returns the ids resent."""
        with self._run_id_lock:  # read and swapped together: a sender's read is never lost
            run_id = self.broker.info("server").get("run_id")
            previous, self._run_id = self._run_id, run_id
        if run_id is None or previous is None or previous == run_id:
            return []
        if not self.results.set(self.keys.reconcile(run_id), 1, nx=True, ex=300):
            return []
        present: set[str] = set()
        for name in QUEUE_LISTS:
            for raw in self.broker.lrange(name, 0, -1):
                present.add(message_id(raw))
        for raw in self.broker.hvals(UNACKED_KEY):
            try:
                present.add(message_id(json.dumps(json.loads(raw)[0])))
            except (ValueError, IndexError, TypeError):
                continue
        resent = []
        prefix = self.keys.jobs
        for key in self.results.scan_iter(match=f"{prefix}*", count=1000):
            job_id = reply_text(key)[len(prefix) :]
            if not _JOB_ID.match(job_id) or job_id in present or self.results.get(key) != b"queued":
                continue
            if self.results.delete(key) and self.resend(job_id):
                resent.append(job_id)
        if resent:
            log.warning("Redis restarted and lost the messages of %d queued job(s); resent them", len(resent))
        return resent

    def _maintain(self) -> None:
        """One reaper round: lapsed leases, then (after a Redis restart) lost messages."""
        self.reap_lapsed()
        self.reconcile_after_restart()

    @translating_broker_errors
    def reap_lapsed(self) -> list[str]:
        """Requeue the jobs whose lease lapsed (their worker died), each by exactly one reaper;
        a job requeued more than ``Settings.lease_max_requeues`` times (or whose request copy
        is gone) ends as a ``sandbox_error`` naming the reason. Returns the ids handled."""
        handled = []
        cap = self.settings.lease_max_requeues
        for lapsed in self.leases.reap(self.ttl):
            job_id = lapsed.job_id
            handled.append(job_id)
            if lapsed.requeues > cap or lapsed.request is None:
                why = (
                    f"the worker running the job died {lapsed.requeues} times (its lease of "
                    f"{self.settings.lease_s:g} s lapsed each time; at most {cap} requeues); giving up"
                    if lapsed.request is not None
                    else "the worker running the job died and the copy of its request was lost; giving up"
                )
                log.error("job %s: %s", job_id, why)
                self.finish(job_id, ScoreResult.infrastructure_failure(why))
                self.results.hincrby(self.keys.stats, "gave_up", 1)
                continue
            log.warning("job %s: its worker's lease lapsed; requeued (%d of at most %d)", job_id, lapsed.requeues, cap)
            self.results.set(self.keys.marker(job_id), "queued", ex=self.ttl)
            self._send([(job_id, lapsed.request)], SCORE_PRIORITY)
            self.results.hincrby(self.keys.stats, "lease_requeues", 1)
        return handled

    @translating_broker_errors
    def resend(self, job_id: str) -> bool:
        """Send a job again from its request copy when Redis lost both its marker and its
        result (a restart that lost the last writes); claimed with SET NX on the marker, so
        concurrent callers send it once. True when the job is (now) queued."""
        if not _JOB_ID.match(job_id or ""):
            return False
        raw = self.results.get(self.keys.request(job_id))
        if raw is None:
            return False
        if self.results.set(self.keys.marker(job_id), "queued", ex=self.ttl, nx=True):
            log.warning("job %s was lost by Redis (no marker, no result); resent from its request copy", job_id)
            self._send([(job_id, json.loads(raw))], SCORE_PRIORITY)
            self.results.hincrby(self.keys.stats, "resent_lost", 1)
        return True

    @translating_broker_errors
    def finish(self, job_id: str, result: ScoreResult) -> None:
        """Store ``result`` as the job's final result (as a worker would) and wake its waiters."""
        self.app.backend.store_result(job_id, encode_result(result), "SUCCESS")
        notify_done(self.results.pipeline(transaction=False), self.keys, job_id).delete(
            self.keys.marker(job_id), self.keys.request(job_id)
        ).execute()

    # -- looking up -------------------------------------------------------------------------
    def _meta(self, raw: bytes | str | None) -> dict[str, Any] | None:
        """A Celery result meta as stored in Redis, decoded; None for no stored result."""
        return None if raw is None else self._decode(reply_bytes(raw))

    @translating_broker_errors
    def get(self, job_id: str) -> JobView | None:
        if not _JOB_ID.match(job_id or ""):
            return None
        pipe = self.results.pipeline(transaction=False)
        pipe.get(self._meta_key(job_id))
        pipe.get(self.keys.marker(job_id))
        raw, marker = pipe.execute()
        return self._view(job_id, raw, marker)

    @translating_broker_errors
    def get_many(self, job_ids: list[str]) -> list[JobView | None]:
        """:meth:`get` of every id in one pipelined round trip per ``_GET_MANY_CHUNK`` ids."""
        views: list[JobView | None] = []
        for start in range(0, len(job_ids), _GET_MANY_CHUNK):
            chunk = job_ids[start : start + _GET_MANY_CHUNK]
            valid = [j for j in chunk if _JOB_ID.match(j or "")]
            pipe = self.results.pipeline(transaction=False)
            for job_id in valid:
                pipe.get(self._meta_key(job_id))
                pipe.get(self.keys.marker(job_id))
            replies = iter(pipe.execute() if valid else [])
            for job_id in chunk:
                if not _JOB_ID.match(job_id or ""):
                    views.append(None)
                    continue
                raw, marker = next(replies), next(replies)
                views.append(self._view(job_id, raw, marker))
        return views

    def _view(self, job_id: str, raw: bytes | None, marker: bytes | None) -> JobView | None:
        """A job's view from its stored result meta and its queue marker (both as read)."""
        result = result_from_meta(self._meta(raw))
        if result is not None:
            return JobView(job_id, JobState.done, result)
        if marker is None:
            return None
        running = marker.startswith(b"running")
        return JobView(job_id, JobState.running if running else JobState.queued)

    @translating_broker_errors
    def wait(self, job_id: str, timeout: float) -> JobView | None:
        deadline = time.monotonic() + max(0.0, timeout)
        done_key = self.keys.done(job_id)
        while True:
            view = self.get(job_id)
            remaining = deadline - time.monotonic()
            if view is None or view.state == JobState.done or remaining <= 0:
                return view
            # Rotate the notification element onto the same list: every waiter wakes, the
            # element stays for the next. A leftover element with no result yet (a result
            # being replaced by a re-run) must not turn this into a busy loop.
            # BLMOVE's timeout is a double (Redis >= 6); redis-py annotates it int but passes it as
            # given, and an int would round sub-second waits to 0 (block forever)
            woke = self.results.blmove(
                done_key,
                done_key,
                min(remaining, _POLL_S),  # type: ignore[arg-type]
                "RIGHT",
                "LEFT",
            )
            if woke is not None:
                view = self.get(job_id)
                if view is None or view.state == JobState.done:
                    return view
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    @translating_broker_errors
    def queue_depth(self) -> int:
        """Jobs waiting in the queue plus jobs delivered to a worker and not yet acknowledged
        (running, or reserved for a retry)."""
        pipe = self.broker.pipeline(transaction=False)
        for name in QUEUE_LISTS:
            pipe.llen(name)
        pipe.hlen(UNACKED_KEY)
        counts = pipe.execute()
        return sum(int(c) for c in counts)

    def ready(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            self.broker.ping()
            if self.results is not self.broker:
                self.results.ping()
            checks["redis"] = "ok"
        except redis.RedisError as exc:
            checks["redis"] = f"unreachable: {exc}"
            checks["workers"] = "unknown (Redis unreachable)"
            return checks
        try:
            # A ping that also asks the worker about its sandbox (workers/control.py); the first
            # answer is enough.
            replies = self.app.control.broadcast("sandbox_check", reply=True, timeout=1.0, limit=1)
        except Exception as exc:
            checks["workers"] = f"ping failed: {type(exc).__name__}: {exc}"
            return checks
        if not replies:
            checks["workers"] = "no worker answered within 1 s"
            return checks
        checks["workers"] = "ok"
        ((node, answer),) = replies[0].items()
        answer = answer if isinstance(answer, dict) else {"error": str(answer)}
        checks["sandbox"] = "ok" if "ok" in answer else f"{node}: {answer.get('error', answer)}"
        return checks

    # -- bookkeeping ------------------------------------------------------------------------
    @translating_broker_errors
    def job_stats(self, job_id: str) -> dict[str, int]:
        """How often the job was delivered to a worker and how often it was really simulated."""
        deliveries, sims = self.results.mget([self.keys.deliveries(job_id), self.keys.sims(job_id)])
        return {"deliveries": int(deliveries or 0), "simulations": int(sims or 0)}

    @translating_broker_errors
    def worker_stats(self) -> dict[str, int]:
        """Counters the workers keep: simulations, idempotent_hits, retries, gave_up, redelivered."""
        return {reply_text(k): int(v) for k, v in self.results.hgetall(self.keys.stats).items()}

    def close(self) -> None:
        if self._reaper is not None:
            self._reaper.stop()
        try:
            self.app.close()
        finally:
            self.results.close()
            if self.broker is not self.results:
                self.broker.close()


#: KEYS: result meta, marker, deliveries, sims, done; ARGV: the meta the submitter saw, marker TTL.
_RERUN_CLAIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], 'queued', 'EX', ARGV[2])
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5])
return 1
"""


def _retry_after(depth: int) -> float:
    return float(min(60, max(1, depth // 100)))
