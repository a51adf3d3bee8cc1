"""The score task: a thin, idempotent call into a per-process :class:`Engine`.

- Idempotent by content hash: the job id is the hash of the request
  (:func:`reward_service.dispatch.contract.job_id_for`), and the task first looks for a stored
  result of its own id; a redelivered job whose result exists returns it without simulating.
- Retries only for infrastructure failures (``sandbox_error``), with exponential backoff, at
  most ``Settings.task_max_retries`` times; every other status is an answer about the sample.
  A failed copy of a job that another copy answered meanwhile returns that answer instead.
- A job whose worker died while running it is delivered again (``acks_late`` +
  ``task_reject_on_worker_lost``, or the visibility timeout when the whole worker died); a job
  redelivered more than :data:`MAX_REDELIVERIES` times (a sample that kills its worker each
  time) ends as ``sandbox_error`` instead of looping.
- Leased (:mod:`reward_service.dispatch.leases`): a running job's lease is renewed by a thread
  of its process; when the whole worker dies, a reaper requeues the job within seconds (not at
  the visibility timeout). A delivery of a job another live process runs is dropped (``Ignore``).
- Celery's soft time limit (a backstop above every request's own limits,
  :func:`reward_service.dispatch.contract.time_limits`) is handled here, where Celery raises
  it: the job ends as a ``sandbox_error`` saying so (the service did not finish in its time, the
  sample is not at fault), not retried (another attempt would meet the same limit).

Names, keys and encodings shared with the dispatcher are the job contract's
(:mod:`reward_service.dispatch.contract`).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import redis
from celery import Task
from celery.backends.base import Backend
from celery.exceptions import Ignore, SoftTimeLimitExceeded

from reward_service.dispatch.contract import (
    TASK_NAME,
    JobKeys,
    backend_url,
    encode_result,
    meta_key_of,
    notify_done,
    stored_answer,
    time_limits,
)
from reward_service.dispatch.leases import Heartbeat, Leases
from reward_service.engine import Engine
from reward_service.models import ScoreResult, Status
from reward_service.settings import Settings, get_settings
from workers.celery_app import app

log = logging.getLogger(__name__)

#: Deliveries beyond the first that are not retries (the worker died) before giving up.
MAX_REDELIVERIES = 3
_engine: Engine | None = None
_redis: redis.Redis | None = None
_pid: int | None = None
#: Lease tokens of the jobs this process runs (released in ``after_return``, once stored).
_tokens: dict[str, str] = {}


def engine() -> Engine:
    """The Engine of this worker process, created on first use (after the fork). It lets
    Celery's soft time limit through (``reraise``) instead of reporting it as an internal error
    of its own: the task handles it."""
    global _engine
    if _engine is None:
        _engine = Engine(get_settings(), reraise=(SoftTimeLimitExceeded,))
    return _engine


def store() -> redis.Redis:
    """A Redis client of this worker process (result backend), created after the fork."""
    global _redis, _pid
    if _redis is None or _pid != os.getpid():
        _redis = redis.Redis.from_url(backend_url(get_settings()), socket_timeout=30, socket_connect_timeout=5)
        _pid = os.getpid()
    return _redis


def keys() -> JobKeys:
    """The job keys of this worker's settings (the contract's names)."""
    return JobKeys(get_settings().redis_prefix, meta_key_of(app))


def leases() -> Leases:
    """The job leases of this worker process (on its Redis client)."""
    return Leases(store(), keys(), get_settings().lease_s)


class ScoreTask(Task):
    """Pushes the "result stored" notification once Celery has stored the final state, and
    releases the job's lease after it."""

    def after_return(self, status, retval, task_id, args, kwargs, einfo):
        token = _tokens.pop(task_id, None)
        if token is not None and status in ("SUCCESS", "FAILURE"):
            try:
                leases().release(task_id, token, finished=True)
            except redis.RedisError:  # the lease lapses; the reaper finds the stored result
                log.warning("could not release the lease of job %s", task_id, exc_info=True)
        if status in ("SUCCESS", "FAILURE"):
            try:
                notify_done(store().pipeline(transaction=False), keys(), task_id).execute()
            except redis.RedisError:  # waiters poll the result once a second anyway
                log.warning("could not notify waiters of job %s", task_id, exc_info=True)


@app.task(bind=True, base=ScoreTask, name=TASK_NAME, acks_late=True, reject_on_worker_lost=True)
def score(self: ScoreTask, payload: dict[str, Any], enqueued_at: float | None = None) -> dict[str, Any]:
    """Score one request (``ScoreRequest`` JSON); returns ``ScoreResult`` JSON."""
    settings = get_settings()
    job_id = self.request.id
    assert job_id is not None, "Celery gives every task it runs an id"
    names, r = keys(), store()
    started, started_wall = time.monotonic(), time.time()

    lease = leases()
    try:
        token = lease.claim(job_id)
        if token is None:  # another live process runs this job (it was sent again meanwhile)
            r.hincrby(names.stats, "duplicates_dropped", 1)
            log.info("job %s is running elsewhere; this delivery is dropped", job_id)
            raise Ignore()
        _tokens[job_id] = token
        with Heartbeat(lease, job_id, token):
            return _score(self, job_id, payload, enqueued_at, settings, names, r, lease, token, started, started_wall)
    except redis.RedisError as exc:
        # Our own bookkeeping lost Redis (this worker cut off from it, a Redis restart). Failing
        # the task would store a FAILURE, a sandbox_error, over the result of the copy the lease
        # reaper requeued meanwhile (seen in the chaos suite's network cut). Nothing is stored
        # for this delivery: the job's lapsed lease brings it back if no copy has run.
        log.warning("job %s: Redis unavailable (%s: %s); this delivery stores nothing", job_id, type(exc).__name__, exc)
        _tokens.pop(job_id, None)
        raise Ignore() from exc


def _score(
    self: ScoreTask,
    job_id: str,
    payload: dict[str, Any],
    enqueued_at: float | None,
    settings: Settings,
    keys: JobKeys,
    r: redis.Redis,
    lease: Leases,
    token: str,
    started: float,
    started_wall: float,
) -> dict[str, Any]:
    retries = self.request.retries or 0
    existing, deliveries = _begin(r, keys, job_id, self.backend)
    if existing is not None:
        r.hincrby(keys.stats, "idempotent_hits", 1)
        log.info("job %s already has its result; not simulated again", job_id)
        return existing
    redelivered = deliveries - 1 - retries
    if redelivered > 0:
        r.hincrby(keys.stats, "redelivered", 1)
    if redelivered > MAX_REDELIVERIES:
        r.hincrby(keys.stats, "gave_up", 1)
        return encode_result(
            ScoreResult.infrastructure_failure(
                f"the job was delivered {deliveries} times and its worker died each time; giving up",
                timings=_queue_timing(enqueued_at, started_wall),
            )
        )

    soft, _, _ = time_limits(settings)
    cut_off = False
    try:
        result = engine().score(payload)  # never raises for bad input or sandbox failures
    except SoftTimeLimitExceeded:  # raised by Celery in this process, wherever the job was
        cut_off = True
        result = ScoreResult.infrastructure_failure("")  # the message is the soft limit's, below
    except Exception as exc:
        log.exception("job %s: engine unavailable", job_id)
        result = ScoreResult.infrastructure_failure(f"engine unavailable: {type(exc).__name__}: {exc}")
    elapsed = time.monotonic() - started
    if not result.cache.result and result.status != Status.sandbox_error:
        pipe = r.pipeline(transaction=False)
        pipe.incr(keys.sims(job_id))
        pipe.expire(keys.sims(job_id), settings.result_expires_s)
        pipe.hincrby(keys.stats, "simulations", 1)
        pipe.execute()
    result.timings.update(_queue_timing(enqueued_at, started_wall))

    if result.status == Status.sandbox_error:
        # Another copy of this job (sent again when this one's lease lapsed) may have stored a
        # real result meanwhile: that is the job's answer; retrying would simulate it again.
        stored = _stored_answer(r, keys, job_id, self.backend)
        if stored is not None:
            r.hincrby(keys.stats, "idempotent_hits", 1)
            log.info("job %s: %s; another copy stored its result, not retried", job_id, result.message)
            return stored
        # A sandbox_error at the soft limit was cut off there, not failed (a layer under the
        # engine may have turned the limit into its own error): another attempt would meet it too.
        cut_off = cut_off or elapsed >= soft - min(1.0, 0.05 * soft)
        if retries < settings.task_max_retries and not cut_off:
            r.hincrby(keys.stats, "retries", 1)
            log.warning("job %s: %s; retry %d of %d", job_id, result.message, retries + 1, settings.task_max_retries)
            countdown = settings.task_retry_backoff_s * 2**retries
            lease.park(job_id, token, countdown)  # the retry's delivery takes it over
            _tokens.pop(job_id, None)
            raise self.retry(countdown=countdown, max_retries=settings.task_max_retries)
        r.hincrby(keys.stats, "gave_up", 1)
        if cut_off:
            log.warning("job %s: stopped at the soft time limit (%g s) after %.1f s", job_id, soft, elapsed)
            result.message = soft_limit_message(soft, result.message)
        result.message = f"{result.message} (after {retries + 1} attempt{'s' if retries else ''})"
    return encode_result(result)


def _queue_timing(enqueued_at: float | None, started_wall: float) -> dict[str, float]:
    """``{"queue": ms}`` the job waited between its sending and this delivery's start (none when
    the message does not say when it was sent)."""
    return {} if enqueued_at is None else {"queue": max(0.0, (started_wall - enqueued_at) * 1000)}


def soft_limit_message(soft_s: float, reported: str = "") -> str:
    """The message of a job stopped at the worker's soft time limit (``soft_s`` seconds) and
    ``reported``, what the engine said about it, if anything."""
    message = (
        f"the job reached the worker's soft time limit ({soft_s:g} s) and was stopped: a limit of the "
        "service, above the request's own limits, so not an answer about the sample; not retried"
    )
    return f"{message} ({reported})" if reported else message


def _stored_answer(r: redis.Redis, keys: JobKeys, job_id: str, backend: Backend) -> dict[str, Any] | None:
    """The job's stored final result, if any and not to be replaced (:func:`stored_answer`)."""
    raw = r.get(keys.meta_key(job_id))
    if raw is None:
        return None
    return stored_answer(backend.decode(raw if isinstance(raw, bytes) else raw.encode()))


def _begin(r: redis.Redis, keys: JobKeys, job_id: str, backend: Backend) -> tuple[dict[str, Any] | None, int]:
    """Count this delivery, mark the job running and read its stored result (one round trip;
    ``backend`` decodes it). Returns (the stored final result, if any and not to be replaced;
    deliveries so far)."""
    ttl = get_settings().result_expires_s
    pipe = r.pipeline(transaction=False)
    pipe.incr(keys.deliveries(job_id))
    pipe.expire(keys.deliveries(job_id), ttl)
    pipe.get(keys.meta_key(job_id))
    pipe.set(keys.marker(job_id), f"running {socket.gethostname()} {os.getpid()}", ex=ttl)
    deliveries, _, raw, _ = pipe.execute()
    answer = stored_answer(backend.decode(raw)) if raw is not None else None
    return answer, int(deliveries)
