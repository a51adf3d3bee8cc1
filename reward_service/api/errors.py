"""Error answers. Every error is ``{"detail": "<message>"}`` (plus ``errors`` for a 422); no
traceback or exception text of ours ever reaches a client (it goes to the log)."""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from reward_service.dispatch.base import BatchTooLarge, BrokerUnavailable, QueueFull
from reward_service.errors import RewardServiceError
from reward_service.problems.store import ProblemStoreError

log = logging.getLogger("reward_service.api")


UNAUTHORIZED = "missing or invalid API key: send `Authorization: Bearer <key>`"


class BodyTooLarge(RewardServiceError, StarletteHTTPException):
    """Raised while reading a body past its limit (413). An HTTPException so that FastAPI's
    body parsing passes it through instead of turning it into a 400."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {_size(limit)} (the limit of this endpoint)")


class StoreUnavailable(RewardServiceError, RuntimeError):
    """A backend the API needs (batch store) cannot answer (503)."""


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB"


def error(status: int, detail: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=status, headers=headers)


def _loc(loc: tuple | list) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "body"


def describe_validation(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message and a compact list (location, message; never the input echoed)."""
    compact = []
    for e in errors:
        if e.get("type") == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "invalid JSON")
            pos = e["loc"][1] if len(e.get("loc", ())) > 1 else "?"
            return (
                f"malformed JSON body: {reason} (at character {pos})",
                [{"loc": "body", "msg": f"malformed JSON: {reason}", "type": "json_invalid"}],
            )
        if tuple(e.get("loc", ())) == ("body",) and isinstance(e.get("input"), (bytes, str)):
            return (
                "the body must be a JSON object sent with `Content-Type: application/json` "
                "(curl: -H 'Content-Type: application/json' --data-binary @request.json)",
                [{"loc": "body", "msg": "not a JSON object", "type": "json_type"}],
            )
        msg = str(e.get("msg", "invalid value"))
        msg = msg.removeprefix("Value error, ")
        compact.append({"loc": _loc(e.get("loc", ())), "msg": msg, "type": e.get("type")})
    first = compact[0] if compact else {"loc": "body", "msg": "invalid request"}
    more = f" (and {len(compact) - 1} more error(s))" if len(compact) > 1 else ""
    return f"invalid request: {first['loc']}: {first['msg']}{more}", compact


def install(app: FastAPI) -> None:
    """Register the exception handlers on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, errors = describe_validation(list(exc.errors()))
        return error(422, detail, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI answers a JSON body that is not UTF-8 with its own undocumented 400
            # ("There was an error parsing the body"): it is a malformed body like any other
            at = exc.__cause__.start
            return error(
                422,
                f"malformed JSON body: not UTF-8 text (byte {at})",
                errors=[{"loc": "body", "msg": "malformed JSON: not UTF-8 text", "type": "json_invalid"}],
            )
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return error(exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(QueueFull)
    async def _queue_full(request: Request, exc: QueueFull) -> JSONResponse:
        retry = max(1, math.ceil(exc.retry_after))
        request.app.state.metrics.queue_full.inc()
        return error(429, f"{exc}; retry after {retry} s", headers={"Retry-After": str(retry)})

    @app.exception_handler(BatchTooLarge)
    async def _too_large(request: Request, exc: BatchTooLarge) -> JSONResponse:
        return error(413, str(exc))  # waiting cannot help: no Retry-After, not retried

    @app.exception_handler(ProblemStoreError)
    @app.exception_handler(StoreUnavailable)
    async def _store(request: Request, exc: Exception) -> JSONResponse:
        log.error("store unavailable: %s", exc)
        return error(503, "a backing store is unavailable, retry later", headers={"Retry-After": "5"})

    @app.exception_handler(BrokerUnavailable)
    async def _broker(request: Request, exc: BrokerUnavailable) -> JSONResponse:
        # an outage (the dispatcher translated its broker's errors), not an internal error
        log.error("broker unavailable: %s", exc)
        return error(503, "the job queue is unavailable, retry later", headers={"Retry-After": "5"})


def internal_error(method: str, path: str, exc: BaseException) -> JSONResponse:
    """Log ``exc`` with a reference and answer 500 with only the reference."""
    ref = uuid.uuid4().hex[:12]
    log.error("internal error %s on %s %s", ref, method, path, exc_info=exc)
    return error(500, f"internal error (reference {ref}); the details are in the service log")
