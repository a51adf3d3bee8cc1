"""``GET /v1/limits``: the bounds a client must size its calls by (batch size, queue, bodies)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from reward_service.api.deps import Authenticated, DispatcherDep, SettingsDep, in_thread
from reward_service.api.schemas import ErrorBody

router = APIRouter(prefix="/v1", tags=["limits"], dependencies=[Authenticated])


class ServiceLimits(BaseModel):
    """The service's bounds. ``batch_limit`` is the largest ``POST /v1/batches`` that can ever
    be accepted (the smaller of ``max_batch`` and ``queue_bound``); a larger one is refused
    with 413 (or 422 over ``max_batch``), never 429. ``queue_depth`` is the number of jobs
    queued or running now: a batch over ``queue_bound - queue_depth`` new jobs gets 429
    (retry later) until the queue drains."""

    batch_limit: int = Field(description="largest batch that can be accepted (requests)")
    max_batch: int = Field(description="requests per batch (422 beyond)")
    queue_bound: int = Field(description="queued + running jobs before 429 (413 for one batch beyond it)")
    queue_depth: int = Field(description="jobs queued or running now")
    max_body_mb: float = Field(description="largest body of POST /v1/score (413 beyond)")
    max_bulk_body_mb: float = Field(description="largest body of POST /v1/batches and /v1/problems:load")
    max_files: int = Field(description="design + stimulus files of one request (422 beyond)")
    max_file_kb: int = Field(description="largest file of a request (422 beyond)")
    max_wait_s: float = Field(description="largest accepted `wait`")


def _limits(settings, dispatcher) -> ServiceLimits:
    bound = dispatcher.max_queue
    return ServiceLimits(
        batch_limit=min(settings.max_batch, bound),
        max_batch=settings.max_batch,
        queue_bound=bound,
        queue_depth=dispatcher.queue_depth(),
        max_body_mb=settings.max_body_mb,
        max_bulk_body_mb=settings.max_bulk_body_mb,
        max_files=settings.max_files,
        max_file_kb=settings.max_file_kb,
        max_wait_s=settings.max_wait_s,
    )


@router.get("/limits", response_model=ServiceLimits, responses={401: {"model": ErrorBody}})
async def get_limits(request: Request, settings: SettingsDep, dispatcher: DispatcherDep) -> ServiceLimits:
    """The bounds of this service (the Python client sizes its batches from them)."""
    return await in_thread(request, _limits, settings, dispatcher)
