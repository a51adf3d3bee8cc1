"""Assembles the FastAPI app: state, routers, error handlers, middlewares. Nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from reward_service.api import errors
from reward_service.api.backends import (
    build_batch_store,
    build_dispatcher,
    build_episode_store,
    build_problem_store,
)
from reward_service.api.batch_store import BatchStore
from reward_service.api.episode_service import EpisodeService
from reward_service.api.episode_store import EpisodeStore
from reward_service.api.finished import FinishedResults
from reward_service.api.middleware import (
    AuthMiddleware,
    BodyLimitMiddleware,
    InternalErrorMiddleware,
    MetricsMiddleware,
)
from reward_service.api.openenv import LazyOpenEnv, build_openenv_app
from reward_service.api.routes import (
    batches,
    episodes,
    health,
    jobs,
    limits,
    openrlhf,
    score,
)
from reward_service.api.routes import (
    problems as problem_routes,
)
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import Dispatcher
from reward_service.problems.store import ProblemStore
from reward_service.sandbox.toolchain import package_version
from reward_service.settings import Settings, get_settings

#: Paths whose bodies may be large (many requests, a whole JSONL): ``max_bulk_body_mb``.
BULK_PATHS = ("/v1/batches", "/v1/problems:load", "/v1/openrlhf/reward")


def create_app(
    dispatcher: Dispatcher | None = None,
    problems: ProblemStore | None = None,
    *,
    settings: Settings | None = None,
    batches_store: BatchStore | None = None,
    episodes_store: EpisodeStore | None = None,
) -> FastAPI:
    """The API. Whatever is not given is built from ``settings`` (default: :func:`get_settings`):
    embedded mode (in-process pool, bubblewrap, in-memory stores) without a broker URL, Celery
    and Redis stores with one. What the app built, it closes at shutdown."""
    settings = settings or get_settings()
    owned: list = []
    if dispatcher is None:
        dispatcher = build_dispatcher(settings)
        owned.append(dispatcher)
    if problems is None:
        problems = build_problem_store(settings)
        owned.append(problems)
    if batches_store is None:
        batches_store = build_batch_store(settings)
        owned.append(batches_store)
    if episodes_store is None:
        episodes_store = build_episode_store(settings)
        owned.append(episodes_store)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.wait_limiter = anyio.CapacityLimiter(settings.max_waiting)
        yield
        for thing in owned:
            thing.close()

    # strict_content_type=False: a JSON body without Content-Type is parsed (curl -d forgets it)
    app = FastAPI(
        title="reward-service",
        version=package_version(),
        lifespan=lifespan,
        strict_content_type=False,
        description="Coverage rewards for LLM-written hardware stimulus. See docs/api.md.",
    )
    app.state.settings = settings
    app.state.dispatcher = dispatcher
    app.state.problems = problems
    app.state.batches = batches_store
    app.state.metrics = Metrics(dispatcher.queue_depth)
    app.state.finished = FinishedResults()
    app.state.episodes = EpisodeService(episodes_store, problems, dispatcher, settings, app.state.metrics)

    errors.install(app)
    episodes_service = app.state.episodes
    app.mount(
        "/openenv",
        LazyOpenEnv(lambda: build_openenv_app(episodes_service, settings.max_waiting, settings.max_wait_s)),
        name="openenv",
    )
    for module in (score, jobs, batches, episodes, limits, problem_routes, openrlhf, health):
        app.include_router(module.router)

    body_max = int(settings.max_body_mb * (1 << 20))
    bulk_max = int(settings.max_bulk_body_mb * (1 << 20))
    # added last = outermost: metrics -> internal errors -> API keys -> body limit -> routes
    app.add_middleware(BodyLimitMiddleware, limit_for=lambda path: bulk_max if path in BULK_PATHS else body_max)
    app.add_middleware(AuthMiddleware, keys=settings.api_keys)
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    return app
