"""``Annotated`` dependencies of the routers: settings, dispatcher, stores, metrics, finished
results, API keys,
and :func:`in_thread` for the blocking dispatcher/store calls."""

from __future__ import annotations

import functools
import hmac
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from reward_service.api.batch_store import BatchStore
from reward_service.api.episode_service import EpisodeService
from reward_service.api.errors import UNAUTHORIZED
from reward_service.api.finished import FinishedResults
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import Dispatcher
from reward_service.problems.store import ProblemStore
from reward_service.settings import Settings

T = TypeVar("T")


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _dispatcher(request: Request) -> Dispatcher:
    return request.app.state.dispatcher


def _problems(request: Request) -> ProblemStore:
    return request.app.state.problems


def _batches(request: Request) -> BatchStore:
    return request.app.state.batches


def _episodes(request: Request) -> EpisodeService:
    return request.app.state.episodes


def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


def _finished(request: Request) -> FinishedResults:
    return request.app.state.finished


SettingsDep = Annotated[Settings, Depends(_settings)]
DispatcherDep = Annotated[Dispatcher, Depends(_dispatcher)]
ProblemStoreDep = Annotated[ProblemStore, Depends(_problems)]
BatchStoreDep = Annotated[BatchStore, Depends(_batches)]
EpisodeServiceDep = Annotated[EpisodeService, Depends(_episodes)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
FinishedDep = Annotated[FinishedResults, Depends(_finished)]

_bearer = HTTPBearer(auto_error=False, description="API key (only when the service is configured with keys)")


def require_api_key(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless ``Authorization: Bearer <key>`` names a configured key (no keys: open)."""
    if not settings.api_keys:
        return
    given = credentials.credentials.encode() if credentials is not None else b""
    if not any(hmac.compare_digest(given, key.encode()) for key in settings.api_keys):
        raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})


Authenticated = Depends(require_api_key)


async def in_thread(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (dispatcher, Redis) in a worker thread. Waiting requests get their
    own limiter (``max_waiting`` threads) so that they do not starve the default pool."""
    state = request.app.state
    limiter = getattr(state, "wait_limiter", None)
    if limiter is None:
        limiter = state.wait_limiter = anyio.CapacityLimiter(state.settings.max_waiting)
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=limiter)
