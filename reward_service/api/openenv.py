"""Episodes in OpenEnv's wire protocol (``openenv-core``), mounted under ``/openenv``:
``POST /openenv/reset``, ``POST /openenv/step``, ``GET /openenv/state``, ``GET /openenv/schema``,
``GET /openenv/health``, ``GET /openenv/metadata`` and the WebSocket session ``/openenv/ws``
that OpenEnv's ``EnvClient`` speaks — served by openenv-core's own ``HTTPEnvServer`` around
:class:`CoverageEnvironment`, whose reset and step are :class:`EpisodeService`'s (the same
episodes as ``/v1/episodes``; docs/episodes.md).

OpenEnv's HTTP ``/reset`` and ``/step`` make a new environment per request: over plain HTTP a
step names its episode in ``action.episode_id``; a WebSocket session remembers the episode its
reset made. openenv-core imports gradio (15-30 s on a busy machine), so the front end is built
on the first request to ``/openenv`` (:class:`LazyOpenEnv`), never when the API starts."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

import anyio
from fastapi import HTTPException
from pydantic import Field, ValidationError, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from reward_service.api.episode_service import EpisodeService, StepPending
from reward_service.api.errors import describe_validation, error
from reward_service.episodes import (
    STEP_ID_PATTERN,
    EpisodeCreate,
    EpisodeOptions,
    ReadFile,
    Simulate,
    StepAnswer,
    StepRequest,
    Stimulus,
    Submit,
)
from reward_service.episodes import Observation as EpisodeObservation
from reward_service.models import Completion, ProblemSpec

__all__ = ["LazyOpenEnv", "build_openenv_app"]


def build_openenv_app(episodes: EpisodeService, max_sessions: int, wait_s: float) -> ASGIApp:
    """A FastAPI app with openenv-core's routes around :class:`CoverageEnvironment` (imports
    openenv-core: call it lazily). ``max_sessions``: concurrent WebSocket sessions; ``wait_s``:
    how long a step waits for its simulation (then it waits again for the same step)."""
    from fastapi import FastAPI
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

    class CoverageAction(Action):
        """One step: ``submit`` (a round) or ``simulate`` (a draft) a ``stimulus`` (or a raw
        completion as ``text``), or ``read_file`` a ``path``. ``step_id`` makes a retry safe
        (default: a new id per call); ``episode_id`` names the episode over stateless HTTP
        (a WebSocket session uses the one its reset made)."""

        kind: Literal["submit", "simulate", "read_file"]
        stimulus: Stimulus | None = None
        text: str | None = Field(None, description="a raw completion (its code block is scored)")
        path: str | None = None
        step_id: str | None = Field(None, pattern=STEP_ID_PATTERN)
        episode_id: str | None = Field(None, max_length=200)

        @model_validator(mode="after")
        def _complete(self) -> CoverageAction:
            if self.kind == "read_file" and not self.path:
                raise ValueError("read_file needs `path`")
            if self.kind != "read_file" and (self.stimulus is None) == (self.text is None):
                raise ValueError(f"{self.kind} needs exactly one of `stimulus` or `text`")
            return self

        def episode_action(self) -> Submit | Simulate | ReadFile:
            if self.kind == "read_file":
                assert self.path is not None
                return ReadFile(path=self.path)
            stimulus = self.stimulus if self.stimulus is not None else Completion(text=self.text or "")
            return Submit(stimulus=stimulus) if self.kind == "submit" else Simulate(stimulus=stimulus)

    class CoverageObservation(EpisodeObservation, Observation):
        """The episode's observation (docs/episodes.md) with OpenEnv's ``done``, ``reward``
        and ``metadata``."""

    class CoverageState(State):
        """OpenEnv's state (``episode_id``, ``step_count``) plus the episode's progress
        (``GET /v1/episodes/{id}``'s fields) once a reset made one."""

    def observation(answer: StepAnswer) -> CoverageObservation:
        return CoverageObservation(
            **answer.observation.model_dump(), reward=answer.reward, done=answer.done, metadata={}
        )

    class CoverageEnvironment(Environment[CoverageAction, CoverageObservation, CoverageState]):
        """Coverage closure on a CVDP-style problem: reset with ``problem_id`` (registered) or
        ``problem`` (inline) and ``options`` (docs/episodes.md), then submit testbenches."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._episode_id: str | None = None
            self._steps = 0

        def reset(
            self,
            seed: int | None = None,
            episode_id: str | None = None,
            problem_id: str | None = None,
            problem: dict[str, Any] | None = None,
            options: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> CoverageObservation:
            # episode_id (OpenEnv's "custom identifier") is not taken: ids are the server's, unguessable
            opts = EpisodeOptions.model_validate({**(options or {}), **({"seed": seed} if seed is not None else {})})
            body = EpisodeCreate(
                problem_id=problem_id,
                problem=ProblemSpec.model_validate(problem) if problem is not None else None,
                options=opts,
            )
            answer = _unwrap(lambda: episodes.reset(body))
            self._episode_id = answer.observation.episode_id
            self._steps = 0
            return observation(answer)

        def step(self, action: CoverageAction, timeout_s: float | None = None, **kwargs: Any) -> CoverageObservation:
            episode_id = action.episode_id or self._episode_id
            if episode_id is None:
                raise _EpisodeError(409, "no episode: reset first, or name one in action.episode_id")
            request = StepRequest(step_id=action.step_id or uuid.uuid4().hex, action=action.episode_action())
            deadline = time.monotonic() + (timeout_s or wait_s)
            while True:
                try:
                    answer = _unwrap(lambda: episodes.step(episode_id, request, min(wait_s, 60.0)))
                    break
                except StepPending:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"step {request.step_id} is still scoring: send the same step_id again"
                        ) from None
            self._steps += 1
            return observation(answer)

        @property
        def state(self) -> CoverageState:
            if self._episode_id is None:
                return CoverageState(episode_id=None, step_count=0)
            progress = _unwrap(lambda: episodes.state(self._episode_id or "")).model_dump(mode="json")
            progress.pop("episode_id")
            return CoverageState(episode_id=self._episode_id, step_count=self._steps, **progress)

        def get_metadata(self) -> EnvironmentMetadata:
            return EnvironmentMetadata(
                name="reward-service coverage closure",
                description="Write testbench stimulus for a DUT over several rounds; each round is scored "
                "on code coverage (open-source simulators) and answered with the uncovered points.",
                documentation_url="docs/episodes.md",
            )

    app = FastAPI(title="reward-service OpenEnv", docs_url=None, redoc_url=None)
    server = HTTPEnvServer(
        env=CoverageEnvironment,
        action_cls=CoverageAction,
        observation_cls=CoverageObservation,
        max_concurrent_envs=max_sessions,
    )
    server.register_routes(app)

    async def episode_error(request: Any, exc: Exception) -> Any:
        assert isinstance(exc, _EpisodeError)
        return error(exc.status, exc.detail)

    async def invalid(request: Any, exc: Exception) -> Any:
        assert isinstance(exc, ValidationError)
        detail, errors = describe_validation([dict(e) for e in exc.errors()])
        return error(422, detail, errors=errors)

    async def http_error(request: Any, exc: Exception) -> Any:
        # openenv-core answers a bad action with HTTPException(422, detail=pydantic's errors),
        # whose ctx may hold the validator's exception (not JSON): our {"detail", "errors"} instead
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.detail, list):
            detail, errors = describe_validation([dict(e) for e in exc.detail])
            return error(exc.status_code, detail, errors=errors)
        return error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(_EpisodeError, episode_error)
    app.add_exception_handler(ValidationError, invalid)  # reset's problem or options
    return app


class _EpisodeError(RuntimeError):
    """An HTTP error of the episode service as OpenEnv reports it: the WebSocket session sends
    its message (``"404: unknown episode id ..."``); over HTTP it is answered with its status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


def _unwrap(call: Callable[[], Any]) -> Any:
    """``call()``; an HTTPException becomes a plain error naming its status and detail (OpenEnv's
    WebSocket session sends ``str(exc)`` to the client)."""
    try:
        return call()
    except HTTPException as exc:
        raise _EpisodeError(exc.status_code, str(exc.detail)) from exc


class LazyOpenEnv:
    """An ASGI app that builds the OpenEnv front end (:func:`build_openenv_app`) on its first
    request, so that the API starts without importing openenv-core. Answers 501 (HTTP) or
    closes the WebSocket (code 1011) when openenv-core is not installed."""

    def __init__(self, build: Callable[[], ASGIApp]) -> None:
        self._build = build
        self._app: ASGIApp | None = None
        self._failed: str | None = None
        self._lock = threading.Lock()

    def _get(self) -> ASGIApp | None:
        with self._lock:
            if self._app is None and self._failed is None:
                try:
                    self._app = self._build()
                except ImportError as exc:
                    self._failed = f"the OpenEnv front end needs openenv-core (pip install openenv-core): {exc}"
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        app = self._app or await anyio.to_thread.run_sync(self._get)
        if app is not None:
            try:
                await app(scope, receive, send)
            except WebSocketDisconnect:
                pass  # openenv-core closes a session the client already closed: nothing is lost
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1011, "reason": (self._failed or "")[:120]})
        else:
            await error(501, self._failed or "OpenEnv front end unavailable")(scope, receive, send)
