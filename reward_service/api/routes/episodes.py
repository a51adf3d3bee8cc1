"""``POST /v1/episodes`` (reset), ``POST /v1/episodes/{id}/step``, ``GET /v1/episodes/{id}``:
multi-round coverage closure (docs/episodes.md), on the scoring pipeline
(:mod:`reward_service.api.episode_service`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from reward_service.api import service
from reward_service.api.deps import Authenticated, EpisodeServiceDep, SettingsDep, in_thread
from reward_service.api.episode_service import StepPending
from reward_service.api.schemas import ErrorBody, StepAccepted
from reward_service.episodes import EpisodeCreate, EpisodeState, StepAnswer, StepRequest

router = APIRouter(prefix="/v1", tags=["episodes"], dependencies=[Authenticated])

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    404: {"model": ErrorBody},
    409: {"model": ErrorBody},
    413: {"model": ErrorBody},
    422: {"model": ErrorBody},
    429: {"model": ErrorBody},
    503: {"model": ErrorBody},
}
EpisodeId = Annotated[str, Path(max_length=200)]


@router.post("/episodes", response_model=StepAnswer, status_code=201, responses=ERRORS)
async def create_episode(body: EpisodeCreate, request: Request, episodes: EpisodeServiceDep) -> JSONResponse:
    """Reset: a new episode on a registered (``problem_id``) or inline (``problem``) problem.
    201 with the first observation (task prompt, the DUT's interface, the instance name, the
    readable files) and ``Location: /v1/episodes/{id}``."""
    answer = await in_thread(request, episodes.reset, body)
    episode_id = answer.observation.episode_id
    return JSONResponse(
        answer.model_dump(mode="json"), status_code=201, headers={"Location": f"/v1/episodes/{episode_id}"}
    )


@router.post(
    "/episodes/{episode_id}/step",
    response_model=StepAnswer,
    responses={202: {"model": StepAccepted, "description": "still scoring: send the same step again"}, **ERRORS},
)
async def step_episode(
    body: StepRequest,
    request: Request,
    settings: SettingsDep,
    episodes: EpisodeServiceDep,
    episode_id: EpisodeId,
    wait: Annotated[
        float | None,
        Query(ge=0, description="seconds to wait for a scored step (default 60, at most 600)"),
    ] = None,
) -> JSONResponse:
    """One action: ``submit`` (a round, scored as ``/v1/score`` scores it), ``simulate`` (a
    draft's coverage, no round) or ``read_file``. 200 with ``{observation, reward, done}``;
    the same ``step_id`` sent again gets the same answer without scoring again. 202 when the
    simulation is not done within ``wait``: send the same step again."""
    wait_s = service.check_wait(wait, settings, settings.default_wait_s)
    try:
        answer = await in_thread(request, episodes.step, episode_id, body, wait_s)
    except StepPending as pending:
        accepted = StepAccepted(episode_id=episode_id, step_id=body.step_id, state=pending.state)
        return JSONResponse(accepted.model_dump(mode="json"), status_code=202)
    return JSONResponse(answer.model_dump(mode="json"))


@router.get("/episodes/{episode_id}", response_model=EpisodeState, responses=ERRORS)
async def get_episode(request: Request, episodes: EpisodeServiceDep, episode_id: EpisodeId) -> EpisodeState:
    """The episode's progress: rounds, rewards per round, steps taken, whether it is done."""
    return await in_thread(request, episodes.state, episode_id)
