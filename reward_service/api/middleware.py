"""Pure ASGI middlewares: request metrics (outermost) and the request body size limit."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.api.errors import UNAUTHORIZED, BodyTooLarge, error, internal_error
from reward_service.api.telemetry import Metrics


class MetricsMiddleware:
    """Counts requests by method, route template (``/v1/jobs/{job_id}``) and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(method=scope["method"], route=template, status=str(status)).inc()
            self.metrics.request_seconds.labels(route=template).observe(time.perf_counter() - start)


class InternalErrorMiddleware:
    """Turns an unhandled exception into a 500 with a reference (the traceback goes to the log)
    without letting it reach the server, which would drop the client's kept-alive connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            if started:
                raise
            response = internal_error(scope["method"], scope["path"], exc)
            await response(scope, receive, send_wrapper)


#: Paths behind the API keys: the API and its OpenEnv front end (HTTP and WebSocket).
PROTECTED = ("/v1/", "/openenv/")


class AuthMiddleware:
    """401 for ``/v1/...`` and ``/openenv/...`` without ``Authorization: Bearer <key>`` naming
    one of ``keys``, before the body is read or validated (the routes also declare the scheme
    for OpenAPI); a WebSocket handshake without it is closed with code 1008 (policy)."""

    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self.keys = [k.encode() for k in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"].startswith(PROTECTED) and self.keys:
            given = b""
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    scheme, _, token = value.partition(b" ")
                    if scheme.lower() == b"bearer":
                        given = token.strip()
            if not any(hmac.compare_digest(given, key) for key in self.keys):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": "missing or invalid API key"})
                    return
                response = error(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Refuses bodies over ``limit_for(path)`` bytes with 413: at once from Content-Length,
    or while reading a chunked body."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > limit
                except ValueError:
                    too_big = False
                if too_big:
                    await _reject(scope, receive, send, limit)
                    return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    if message.get("more_body", False):
                        await _drain(receive)
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited, send)


#: Bytes of a refused body still read (and discarded) so that the client, still sending,
#: sees the 413 instead of a reset connection; past it the connection is just closed.
DRAIN_MAX = 256 << 20


async def _drain(receive: Receive) -> None:
    drained = 0
    while drained < DRAIN_MAX:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _reject(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    await _drain(receive)
    exc = BodyTooLarge(limit)
    response = error(413, exc.detail, headers={"Connection": "close"})
    await response(scope, receive, send)
