"""The job contract between the API's dispatcher and the Celery workers, in one place: what both
sides must agree on for a score job to travel API -> Redis -> worker -> Redis -> API.

- **Names**: the queue (:data:`QUEUE`) and the task (:data:`TASK_NAME`).
- **Celery configuration and app factory** (:func:`celery_config`, :func:`make_app`): the worker's
  app (``workers/celery_app.py``) and the dispatcher's client app are both built here; building
  one is the only side effect, and importing this module builds none.
- **Redis keys** (:class:`JobKeys`) and the broker's own layout (kombu's Redis transport:
  :data:`QUEUE_LISTS`, :data:`UNACKED_KEY`).
- **Payload and result encoding** (:func:`wire_payload`, :func:`job_id_for`,
  :func:`encode_result`, :func:`result_from_meta`, :func:`rerunnable`, :func:`stored_answer`).
- **Broker errors** (Redis, kombu) translated into
  :class:`~reward_service.dispatch.base.BrokerUnavailable` (:func:`broker_errors`): the API
  never imports a broker library.

Used by :mod:`reward_service.dispatch.celery` (the API's side), :mod:`reward_service.dispatch.leases`
and ``workers/`` (the worker's side). It imports neither: the server package never imports
``workers``.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import kombu.exceptions
import redis
from celery import Celery
from celery.backends.base import BaseKeyValueStoreBackend
from celery.backends.redis import RedisBackend

from reward_service.cache import content_hash
from reward_service.dispatch.base import BrokerUnavailable
from reward_service.models import Limits, ScoreRequest, ScoreResult, Status
from reward_service.revisions import results_revision
from reward_service.sandbox.cpu import wall_backstop
from reward_service.settings import Settings, get_settings

# -- names ---------------------------------------------------------------------------------------
#: The queue of score jobs (a Redis list of that name on the broker).
QUEUE = "reward-service"
#: The registered name of the score task (stable, independent of the module path).
TASK_NAME = "reward_service.score"
#: Default broker when none is configured (a local Redis).
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"

# -- Celery configuration ------------------------------------------------------------------------
#: Seconds on top of the largest per-request limits before the soft limit fires, and
#: between the soft and the hard limit, and between the hard limit and the visibility timeout.
SOFT_MARGIN_S = 60.0
HARD_MARGIN_S = 30.0
VISIBILITY_MARGIN_S = 300.0


def _largest(field: str) -> float:
    for meta in Limits.model_fields[field].metadata:
        if hasattr(meta, "le"):
            return float(meta.le)
    raise ValueError(f"Limits.{field} has no upper bound")  # pragma: no cover


def time_limits(settings: Settings) -> tuple[float, float, float]:
    """(soft, hard, visibility timeout) in seconds. Defaults derive from the largest limits a
    request may ask for (``Limits.compile_s`` + ``Limits.run_s``, CPU seconds, each step's
    wall-clock backstop :func:`~reward_service.sandbox.cpu.wall_backstop`): the engine enforces
    each request's own limits; these are the backstop. Raises ValueError when the visibility
    timeout does not exceed the hard limit (a running job would be delivered twice)."""
    steps = wall_backstop(_largest("compile_s")) + wall_backstop(_largest("run_s"))
    soft = settings.task_soft_time_limit_s or steps + SOFT_MARGIN_S
    hard = settings.task_time_limit_s or soft + HARD_MARGIN_S
    visibility = settings.visibility_timeout_s or hard + VISIBILITY_MARGIN_S
    if hard <= soft:
        raise ValueError(f"task_time_limit_s ({hard:g}) must exceed task_soft_time_limit_s ({soft:g})")
    if visibility <= hard:
        raise ValueError(
            f"visibility_timeout_s ({visibility:g}) must exceed task_time_limit_s ({hard:g}): "
            "a job still running at the visibility timeout is delivered again"
        )
    return soft, hard, visibility


def broker_url(settings: Settings) -> str:
    """The broker's URL: ``Settings.broker_url``, else :data:`DEFAULT_BROKER`."""
    return settings.broker_url or DEFAULT_BROKER


def backend_url(settings: Settings) -> str:
    """The result backend's URL: ``Settings.result_backend``, else the broker's."""
    return settings.result_backend or broker_url(settings)


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for ``settings`` (docs/workers.md lists what each entry is for).
    Raises ValueError for inconsistent time limits (:func:`time_limits`)."""
    soft, hard, visibility = time_limits(settings)
    return {
        "broker_url": broker_url(settings),
        "result_backend": backend_spec(settings),
        "broker_connection_retry_on_startup": True,
        # Redis has no acknowledgements: a delivered, unacknowledged job goes back to the queue
        # after the visibility timeout. Sweep for such jobs often enough for the timeout to matter.
        "broker_transport_options": {
            "visibility_timeout": visibility,
            "unacked_restore_interval": max(1, min(10, int(visibility // 5))),
            "unacked_restore_throttle": 1,
        },
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_default_queue": QUEUE,
        # Delivery: acknowledge after the task ran, one job at a time per process, requeue the
        # job when the process running it dies, cancel running jobs when the broker is lost
        # (they will be redelivered; their results are idempotent).
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_soft_time_limit": soft,
        "task_time_limit": hard,
        "result_expires": settings.result_expires_s,
        "task_track_started": False,  # the job marker says "running" (JobKeys.marker)
        "worker_send_task_events": False,
        "task_send_sent_event": False,
    }


#: KEYS: a result's meta key; ARGV: the encoded meta, its TTL in s (0: none). Stores the meta and
#: publishes it (what Celery's RedisBackend._set does) unless the key holds a SUCCESS: 1 when
#: stored, 0 when the SUCCESS was kept.
_SET_UNLESS_SUCCESS = """
local current = redis.call('GET', KEYS[1])
if current then
  local ok, meta = pcall(cjson.decode, current)
  if ok and type(meta) == 'table' and meta['status'] == 'SUCCESS' then return 0 end
end
if tonumber(ARGV[2]) > 0 then
  redis.call('SETEX', KEYS[1], ARGV[2], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
"""


class ResultBackend(RedisBackend):
    """The service's result backend: Celery's Redis backend whose writes never replace a stored
    SUCCESS.

    Celery already means to keep a SUCCESS: ``BaseKeyValueStoreBackend._store_result`` reads the
    stored state and stores nothing over a SUCCESS (so that "a lost task" does not "overwrite
    the last successful result", its comment says). The read and the write are two commands:
    a copy of a job whose lease lapsed (a stalled worker, which the reaper requeued) reads
    "no result" at its hard time limit, and its FAILURE lands after the requeued copy stored its
    SUCCESS, replacing it. Here the check and the write are one Lua call. A stored result is
    replaced only after the dispatcher deleted it (a ``sandbox_error`` re-run: ``_RERUN_CLAIM``
    in :mod:`reward_service.dispatch.celery`).

    The apps' ``result_backend`` names it in front of the Redis URL (:func:`backend_spec`):
    Celery reads a backend setting as ``<backend>+<url>`` (the form its configuration guide
    gives the database backend, ``db+postgresql://...``,
    https://docs.celeryq.dev/en/stable/userguide/configuration.html#database-url-examples), and
    ``<backend>`` may be a class's name (the app reference, ``backend``: "the result store
    backend class, or the name of the backend class to use",
    https://docs.celeryq.dev/en/stable/reference/celery.html#celery.Celery)."""

    #: Seconds a result is kept (``result_expires``), set by Celery's ``Backend.__init__``;
    #: declared for the type checker (celery-types leaves it out).
    expires: int | None

    def _set(self, key: str | bytes, value: str | bytes, expires: int | None = None) -> None:
        ttl = self.expires if expires is None else expires
        script = self.client.register_script(_SET_UNLESS_SUCCESS)
        script(keys=[key], args=[value, int(ttl or 0)])


def backend_spec(settings: Settings, backend: type[ResultBackend] = ResultBackend) -> str:
    """The ``result_backend`` of the apps: the URL (:func:`backend_url`) with ``backend``'s
    class named in front (``module:Class+redis://...``), so Celery builds that class."""
    url = backend_url(settings)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"the result backend must be Redis (redis://, rediss://, unix://), not {url!r}")
    return f"{backend.__module__}:{backend.__qualname__}+{url}"


def make_app(
    settings: Settings | None = None,
    main: str = "reward_service",
    include: tuple[str, ...] | list[str] = (),
    **kwargs: Any,
) -> Celery:
    """A Celery app configured from ``settings`` (default: :func:`get_settings`, read on first
    use, not here). ``include``: the modules a worker imports at start (its tasks and hooks; the
    worker's app names them, a client app sends tasks by name and needs none). ``kwargs`` go to
    :class:`celery.Celery` (e.g. ``set_as_current=False``)."""
    app = Celery(main, include=list(include), **kwargs)
    app.add_defaults(lambda: celery_config(settings or get_settings()))
    return app


# -- the broker's layout (kombu's Redis transport) -----------------------------------------------
#: The unacknowledged-messages hash of kombu's Redis transport (delivered, not yet acked).
UNACKED_KEY = "unacked"
#: kombu's Redis transport emulates priorities with one list per step (``<queue>\x06\x16<step>``,
#: steps 0, 3, 6, 9; 0 = the queue itself) and pops them in step order: step 0 first.
PRIORITY_SEP, PRIORITY_STEPS = "\x06\x16", (0, 3, 6, 9)
QUEUE_LISTS = tuple(QUEUE if step == 0 else f"{QUEUE}{PRIORITY_SEP}{step}" for step in PRIORITY_STEPS)
#: Priority of scoring jobs (first) and of background jobs such as warm-up builds (last).
SCORE_PRIORITY, BACKGROUND_PRIORITY = 0, 9


def message_id(raw: bytes | str) -> str:
    """The task id of a kombu message as stored in a queue list (JSON; Celery protocol 2);
    "" when ``raw`` is not such a message."""
    try:
        return str(json.loads(raw).get("headers", {}).get("id", ""))
    except (ValueError, AttributeError):
        return ""


# -- Redis keys ----------------------------------------------------------------------------------
#: How long the "result stored" notification stays for late waiters (they read the result first).
NOTIFY_TTL_S = 300


class JobKeys:
    """Names of the Redis keys the dispatcher and the workers share (``prefix`` is
    ``Settings.redis_prefix``; ``meta_key`` is the result backend's ``get_key_for_task``, the
    key of Celery's own ``celery-task-meta-<id>`` result: :func:`meta_key_of`):

    - :meth:`marker` ``<prefix>job:<id>`` — ``queued`` or ``running <host> <pid>`` while the job
      is not done;
    - :meth:`deliveries` / :meth:`sims` — how often a worker started the task and how often it
      really simulated (not answered from a stored result);
    - :meth:`done` — a one-element list pushed when the result is stored (:func:`notify_done`);
      waiters block on it (``BLMOVE`` onto itself, so every waiter wakes);
    - :meth:`request` — a copy of the request while the job is not done (a job whose worker
      died is sent again from it);
    - :meth:`lease`, :attr:`running` (the set of leased jobs), :meth:`requeues` — the job
      leases (:mod:`reward_service.dispatch.leases`);
    - :attr:`stats` ``<prefix>workers:stats`` — counters (simulations, idempotent hits, ...);
    - :meth:`reconcile` — the lock of the one caller that reconciles the queue after a Redis
      restart.
    """

    def __init__(self, prefix: str, meta_key: Callable[[str], Any]) -> None:
        self.prefix = prefix
        self.meta_key = meta_key
        self.jobs = f"{prefix}job:"
        self.stats = f"{prefix}workers:stats"
        self.running = f"{prefix}leases"

    def marker(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}"

    def deliveries(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:deliveries"

    def sims(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:sims"

    def done(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:done"

    def request(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:request"

    def lease(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:lease"

    def requeues(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}:requeues"

    def reconcile(self, run_id: str) -> str:
        return f"{self.prefix}reconcile:{run_id}"


def meta_key_of(app: Celery) -> Callable[[str], Any]:
    """The ``meta_key`` of :class:`JobKeys` for ``app``: its result backend's
    ``get_key_for_task`` (a job id -> the key of its ``celery-task-meta-<id>``, as bytes). Raises
    TypeError when the result backend is not a key-value store (the service's is Redis)."""
    backend = app.backend
    if not isinstance(backend, BaseKeyValueStoreBackend):
        raise TypeError(f"the result backend must be a key-value store (Redis), not {type(backend).__name__}")
    return backend.get_key_for_task


def reply_bytes(reply: bytes | str) -> bytes:
    """A Redis reply as bytes. The service's clients leave replies undecoded (bytes); redis-py
    types them ``bytes | str`` because a client may decode them."""
    return reply.encode() if isinstance(reply, str) else reply


def reply_text(reply: bytes | str) -> str:
    """A Redis reply as text (UTF-8; see :func:`reply_bytes`)."""
    return reply.decode() if isinstance(reply, bytes) else reply


def notify_done(pipe: Any, keys: JobKeys, job_id: str) -> Any:
    """Queue on ``pipe`` (a redis pipeline) the "result stored" notification of ``job_id``:
    one element on :meth:`JobKeys.done`, kept :data:`NOTIFY_TTL_S`. Returns ``pipe``."""
    done = keys.done(job_id)
    return pipe.delete(done).lpush(done, 1).expire(done, NOTIFY_TTL_S)


# -- payloads and results ------------------------------------------------------------------------
#: Celery states after which a job is done (its result is final). Not REVOKED: nothing here
#: revokes jobs; Celery stores it for a job it cancelled when the broker connection was lost
#: (``worker_cancel_long_running_tasks_on_connection_loss``, e.g. a Redis restart), and such a
#: job runs again (its lease lapses and it is requeued, or its message is redelivered). Nor
#: RETRY: a job between attempts.
READY_STATES = ("SUCCESS", "FAILURE")


def wire_payload(request: ScoreRequest) -> dict[str, Any]:
    """The request as the task receives it (JSON). Unset fields are left out so that a
    ``problem_id`` request keeps its "which fields were given" meaning; the stimulus ``kind``
    (the union's discriminator) is always kept."""
    payload = request.model_dump(mode="json", exclude_unset=True)
    payload.setdefault("stimulus", {})["kind"] = request.stimulus.kind
    return payload


def job_id_for(request: ScoreRequest) -> str:
    """Content hash of everything the result depends on as sent: the full request (all
    defaults filled in) or, for a ``problem_id`` request, the wire payload (64 hex digits)."""
    body = wire_payload(request) if request.problem_id is not None else request.model_dump(mode="json")
    # the revisions too: the id names the stored result, which a bump must not serve again
    return content_hash({"rev": results_revision(), "request": body})


def encode_result(result: ScoreResult) -> dict[str, Any]:
    """The task's return value for ``result`` (JSON; :func:`result_from_meta` reads it back)."""
    return result.model_dump(mode="json")


def result_from_meta(meta: dict[str, Any] | None) -> ScoreResult | None:
    """The final :class:`ScoreResult` in a Celery result meta, or None while the job is not
    done. A failed task (hard time limit, worker bug) is a ``sandbox_error``: it is
    never the model's fault."""
    if not meta or meta.get("status") not in READY_STATES:
        return None
    status, value = meta["status"], meta.get("result")
    if status == "SUCCESS":
        try:
            return ScoreResult.model_validate(value)
        except Exception as exc:
            return ScoreResult.infrastructure_failure(f"worker returned an unreadable result: {type(exc).__name__}")
    if isinstance(value, dict) and "exc_type" in value:
        text = _exception_text(value.get("exc_message"))
        what = f"{value.get('exc_type')}: {text}" if text else str(value.get("exc_type"))
    else:
        what = str(value)
    return ScoreResult.infrastructure_failure(f"the worker task failed: {what[:300]}")


def _exception_text(args: Any) -> str:
    """The text of a failed task's exception from the ``exc_message`` Celery stores for it (the
    exception's ``args``, a JSON list under the json serializer): one argument is itself,
    several are their tuple, none is empty."""
    if not isinstance(args, list | tuple):
        return str(args)
    if len(args) == 1:
        return str(args[0])
    return str(tuple(args)) if args else ""


def rerunnable(meta: dict[str, Any] | None) -> bool:
    """Whether a stored outcome may be replaced by a new run: a failed task, or a
    ``sandbox_error`` result (an infrastructure failure, not an answer about the sample)."""
    if not meta:
        return False
    if meta.get("status") in ("FAILURE", "REVOKED"):
        return True
    value = meta.get("result")
    return meta.get("status") == "SUCCESS" and isinstance(value, dict) and value.get("status") == Status.sandbox_error


def stored_answer(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored result (task return value) a redelivered job answers with instead of
    simulating again; None when there is none or it is to be replaced (:func:`rerunnable`)."""
    if meta and meta.get("status") == "SUCCESS" and not rerunnable(meta):
        result = meta.get("result")
        return result if isinstance(result, dict) else None
    return None


# -- broker errors -------------------------------------------------------------------------------
#: What the broker libraries raise when Redis cannot answer: redis-py's errors (the dispatcher's
#: own reads) and kombu's (Celery's producer, after its connection retries).
BROKER_ERRORS: tuple[type[Exception], ...] = (
    redis.RedisError,
    kombu.exceptions.OperationalError,
    kombu.exceptions.ConnectionError,
)


@contextlib.contextmanager
def broker_errors() -> Iterator[None]:
    """Raise the broker libraries' errors (:data:`BROKER_ERRORS`) met inside the block as
    :class:`~reward_service.dispatch.base.BrokerUnavailable` (chained: ``from exc``)."""
    try:
        yield
    except BROKER_ERRORS as exc:
        raise BrokerUnavailable(f"the job queue (Redis) is unavailable: {type(exc).__name__}: {exc}") from exc


_P = ParamSpec("_P")
_R = TypeVar("_R")


def translating_broker_errors(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator form of :func:`broker_errors` (for the dispatcher's public methods)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with broker_errors():
            return fn(*args, **kwargs)

    return wrapper
