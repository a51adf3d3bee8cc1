"""``GET /v1/jobs/{job_id}``: state and result of one job; ``/coverage.info`` and
``/report.html``: its lcov tracefile and HTML report (jobs submitted with ``report.points``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse

from reward_service.api import service
from reward_service.api.deps import Authenticated, DispatcherDep, MetricsDep, SettingsDep, in_thread
from reward_service.api.schemas import ErrorBody, JobStatus
from reward_service.dispatch.base import JobState
from reward_service.models import ScoreResult

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=[Authenticated])


@router.get(
    "/jobs/{job_id}",
    response_model=JobStatus,
    responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def get_job(
    request: Request,
    settings: SettingsDep,
    dispatcher: DispatcherDep,
    metrics: MetricsDep,
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


# Spelled out, not {"model": ErrorBody}: FastAPI files a model's schema under the route's own
# media type (text/plain, text/html), but error bodies are JSON (errors.py).
_REPORT_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for code, text in ((401, "Unauthorized"), (404, "Not Found"), (409, "Conflict"), (422, "Unprocessable Entity"))
}
#: The report page has no script and loads nothing: a DUT source is user text (escaped anyway).
_HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'"


async def _finished_with_points(request: Request, dispatcher, metrics, job_id: str) -> ScoreResult:
    """The job's result when it is done and carries its points; 404 unknown id, 409 not done
    yet or scored without ``report.points``."""
    view = await in_thread(request, service.job_view, job_id, dispatcher, metrics, 0.0)
    if view is None:
        raise HTTPException(404, f"unknown job id {job_id!r} (never submitted, or its result expired)")
    if view.state != JobState.done or view.result is None:
        raise HTTPException(
            409,
            f"job {job_id!r} is {view.state.value}: the report exists once it is done "
            f"(GET /v1/jobs/{job_id}?wait=60 waits for it)",
        )
    if view.result.detail is None:
        raise HTTPException(
            409,
            f"job {job_id!r} was scored without its coverage points: submit the request "
            'with "report": {"points": true} to get lcov and HTML reports',
        )
    return view.result


@router.get("/jobs/{job_id}/coverage.info", response_class=PlainTextResponse, responses=_REPORT_ERRORS)
async def get_job_lcov(
    request: Request, dispatcher: DispatcherDep, metrics: MetricsDep, job_id: Annotated[str, Path(max_length=200)]
) -> PlainTextResponse:
    """The job's lcov tracefile (``DA`` lines, ``BRDA`` branches per DUT file; docs/reports.md),
    for ``genhtml``. The job must have been submitted with ``report.points``."""
    from reward_service.reports.lcov import tracefile

    result = await _finished_with_points(request, dispatcher, metrics, job_id)
    return PlainTextResponse(tracefile(result, test_name=job_id))


@router.get("/jobs/{job_id}/report.html", response_class=HTMLResponse, responses=_REPORT_ERRORS)
async def get_job_html(
    request: Request, dispatcher: DispatcherDep, metrics: MetricsDep, job_id: Annotated[str, Path(max_length=200)]
) -> HTMLResponse:
    """The job's HTML coverage report: summary table, uncovered points linked to the DUT source
    annotated per line and metric. The job must have been submitted with ``report.points``."""
    from reward_service.reports.html import render

    result = await _finished_with_points(request, dispatcher, metrics, job_id)
    return HTMLResponse(
        render(result, title=f"Coverage report of job {job_id}"), headers={"Content-Security-Policy": _HTML_CSP}
    )
