"""``GET /v1/jobs/{job_id}``: state and result of one job."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request

from reward_service.api import service
from reward_service.api.deps import Authenticated, DispatcherDep, MetricsDep, SettingsDep, in_thread
from reward_service.api.schemas import ErrorBody, JobStatus

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=[Authenticated])


@router.get("/jobs/{job_id}", response_model=JobStatus,
            responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}})
async def get_job(
    request: Request, settings: SettingsDep, dispatcher: DispatcherDep, metrics: MetricsDep,
    job_id: Annotated[str, Path(max_length=200)],
    wait: Annotated[float, Query(ge=0, description="long-poll: seconds to wait for the job to finish")] = 0.0,
) -> JobStatus:
    """``state`` is queued, running or done; ``result`` (the ScoreResult) once done.
    404 for an unknown (or expired) id."""
    wait_s = service.check_wait(wait, settings, 0.0)
    view = await in_thread(request, service.job_view, job_id, dispatcher, metrics, wait_s)
    if view is None:
        raise HTTPException(404, f"unknown job id {job_id!r} (never submitted, or its result expired)")
    return JobStatus(job_id=view.id, state=view.state, result=view.result)
