"""One HTTP call with retries, shared by the sync and async clients.

A *flow* (see :mod:`._flows`) yields :class:`Call` s and receives their ``httpx.Response``; the
client's driver performs each call through tenacity:

- retried: connection errors and timeouts (``httpx.TransportError``), 429, 502, 503, 504, with
  exponential backoff and jitter (``backoff_s`` doubling, at most ``MAX_BACKOFF_S``), or exactly
  the server's ``Retry-After`` (seconds or an HTTP date, at most ``MAX_RETRY_AFTER_S``);
- not retried: any other status outside ``Call.ok`` -> :class:`RequestFailed` with the server's
  ``detail``.

After ``max_retries`` retries the last failure becomes :class:`ServiceUnavailable`.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from reward_service.client.errors import RequestFailed, RewardServiceError, ServiceUnavailable

log = logging.getLogger("reward_service.client")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 120.0


@dataclass(frozen=True)
class Call:
    """One HTTP request of a flow. ``hold`` is how long the server may hold it (its ``wait``
    long-poll), added to the client's read timeout; ``ok`` are the statuses handed back to
    the flow; ``retry=False`` makes a single attempt (health probes)."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] | None = None
    hold: float = 0.0
    ok: tuple[int, ...] = (200,)
    retry: bool = True


@dataclass
class _Retryable(Exception):
    """A failure worth retrying; ``retry_after`` is the server's hint in seconds."""

    reason: str
    retry_after: float | None = field(default=None)

    def __str__(self) -> str:
        return self.reason


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500].strip() or response.reason_phrase
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return body["detail"]
    return str(body)[:500]


def check(call: Call, response: httpx.Response) -> httpx.Response:
    """``response`` when its status is in ``call.ok``; raises :class:`_Retryable` for a
    retryable status, :class:`RequestFailed` otherwise."""
    if response.status_code in call.ok:
        return response
    detail = _detail(response)
    if response.status_code in RETRY_STATUSES:
        raise _Retryable(f"{response.status_code} {detail}", retry_after_seconds(response.headers.get("retry-after")))
    raise RequestFailed(call.method, call.path, response.status_code, detail)


def transport_failure(exc: httpx.TransportError) -> _Retryable:
    return _Retryable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


class RetryPolicy:
    """tenacity settings of a client: ``max_retries`` retries after the first attempt."""

    def __init__(self, base_url: str, max_retries: int, backoff_s: float) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, got {backoff_s}")
        self.base_url = base_url
        self.max_retries = max_retries
        # backoff_s * 2**(retry - 1), at most MAX_BACKOFF_S, plus up to backoff_s of jitter
        self._backoff = wait_exponential(multiplier=backoff_s, max=MAX_BACKOFF_S) + wait_random(0, backoff_s)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER_S)
        return self._backoff(state)

    @staticmethod
    def _log(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        sleep = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("reward service call failed (%s); retry %d in %.2f s", exc, state.attempt_number, sleep)

    def kwargs(self, call: Call) -> dict[str, Any]:
        return dict(
            stop=stop_after_attempt(self.max_retries + 1 if call.retry else 1),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            before_sleep=self._log,
            reraise=False,
        )

    def unavailable(self, error: RetryError) -> ServiceUnavailable:
        exc = error.last_attempt.exception()
        return ServiceUnavailable(self.base_url, error.last_attempt.attempt_number, str(exc))

    def sync(self, call: Call) -> Retrying:
        return Retrying(**self.kwargs(call))

    def asynchronous(self, call: Call) -> AsyncRetrying:
        return AsyncRetrying(**self.kwargs(call))


def timeout_for(call: Call, timeout: float) -> httpx.Timeout:
    """Connect within ``timeout`` (at most 10 s); read for ``timeout`` plus the server's hold."""
    return httpx.Timeout(timeout + call.hold, connect=min(timeout, 10.0))


def parse_json(call: Call, response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise RewardServiceError(
            f"{call.method} {call.path}: the service answered {response.status_code} "
            f"with a body that is not JSON: {response.text[:200]!r}"
        ) from exc


def http_options(base_url: str, api_key: str | None, max_connections: int, transport: Any) -> dict[str, Any]:
    """Keyword arguments of the ``httpx.Client``/``AsyncClient`` of a client."""
    return dict(
        base_url=base_url,
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        transport=transport,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
    )


def request_options(call: Call, timeout: float) -> dict[str, Any]:
    """Keyword arguments of ``client.request`` for ``call``."""
    return dict(
        method=call.method,
        url=call.path,
        params=call.params,
        json=call.json,
        content=call.content,
        headers=call.headers,
        timeout=timeout_for(call, timeout),
    )


def check_base_url(base_url: str) -> str:
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    return base_url.rstrip("/")


class ClientBase:
    """Construction shared by the sync and async clients (``http_class``: their httpx client)."""

    http_class: type

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_connections: int = 64,
        transport: Any = None,
    ) -> None:
        self.base_url = check_base_url(base_url)
        self.timeout = timeout
        self._policy = RetryPolicy(self.base_url, max_retries, backoff_s)
        self._http = self.http_class(**http_options(self.base_url, api_key, max_connections, transport))
