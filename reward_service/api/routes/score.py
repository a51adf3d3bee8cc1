"""``POST /v1/score``: score one request, waiting up to ``wait`` seconds."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from reward_service.api import service
from reward_service.api.deps import (
    Authenticated,
    DispatcherDep,
    MetricsDep,
    ProblemStoreDep,
    SettingsDep,
    in_thread,
)
from reward_service.api.schemas import ErrorBody, JobAccepted
from reward_service.dispatch.base import JobState
from reward_service.models import ScoreRequest, ScoreResult

router = APIRouter(prefix="/v1", tags=["score"], dependencies=[Authenticated])

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    404: {"model": ErrorBody},
    413: {"model": ErrorBody},
    422: {"model": ErrorBody},
    429: {"model": ErrorBody},
}


@router.post(
    "/score",
    response_model=ScoreResult,
    responses={202: {"model": JobAccepted, "description": "not done within `wait`; poll Location"}, **ERRORS},
)
async def score(
    body: ScoreRequest,
    request: Request,
    settings: SettingsDep,
    dispatcher: DispatcherDep,
    problems: ProblemStoreDep,
    metrics: MetricsDep,
    wait: Annotated[
        float | None,
        Query(ge=0, description="seconds to wait for the result (default 60, at most 600); 0 = answer 202 at once"),
    ] = None,
) -> JSONResponse:
    """Score one sample. 200 with the :class:`ScoreResult` (the CLI's ``--json``) when it finishes
    within ``wait`` seconds, else 202 with the job id and ``Location: /v1/jobs/{id}``.
    A ``problem_id`` is resolved here (404 when unknown); fields given in the request override
    the problem's."""
    wait_s = service.check_wait(wait, settings, settings.default_wait_s)
    service.check_request(body, settings)
    view = await in_thread(request, service.submit_and_wait, body, problems, dispatcher, metrics, wait_s)
    if view.state == JobState.done and view.result is not None:
        # the job stays readable there a while: its lcov / HTML reports (docs/reports.md)
        return JSONResponse(view.result.model_dump(mode="json"), headers={"Content-Location": f"/v1/jobs/{view.id}"})
    return JSONResponse(
        JobAccepted(job_id=view.id, state=view.state).model_dump(mode="json"),
        status_code=202,
        headers={"Location": f"/v1/jobs/{view.id}"},
    )
