"""``POST /v1/batches``, ``GET /v1/batches/{batch_id}``: many requests at once (one RL step)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response

from reward_service.api import service
from reward_service.api.batch_store import BatchRecord
from reward_service.api.deps import (
    Authenticated,
    BatchStoreDep,
    DispatcherDep,
    FinishedDep,
    MetricsDep,
    ProblemStoreDep,
    SettingsDep,
    in_thread,
)
from reward_service.api.schemas import BatchCreate, BatchStatus, ErrorBody
from reward_service.dispatch.base import JobState
from reward_service.models import ScoreRequest

router = APIRouter(prefix="/v1", tags=["batches"], dependencies=[Authenticated])


def _create(body: BatchCreate, settings, problems, dispatcher, batches, metrics, finished) -> service.BatchView:
    resolved = []
    for i, item in enumerate(body.requests):
        where = f"requests[{i}]: "
        request = ScoreRequest.model_validate(item.model_dump(exclude={"group"}, exclude_unset=True))
        service.check_request(request, settings, where)
        resolved.append(service.resolve(request, problems, where))
    job_ids = dispatcher.submit_many(resolved)
    metrics.jobs_submitted.inc(len(job_ids))
    record = BatchRecord(
        id=uuid.uuid4().hex,
        job_ids=job_ids,
        groups=[item.group for item in body.requests],
        diversity_weight=body.diversity_weight,
    )
    batches.put(record)
    return service.read_batch(record, dispatcher, metrics, body.wait, finished)


def _answer(view: service.BatchView) -> Response:
    done = view.state == JobState.done
    return Response(
        view.body(),
        media_type="application/json",
        status_code=200 if done else 202,
        headers=None if done else {"Location": f"/v1/batches/{view.record.id}"},
    )


@router.post(
    "/batches",
    response_model=BatchStatus,
    status_code=200,
    responses={
        202: {"model": BatchStatus, "description": "not finished within `wait`; poll Location"},
        401: {"model": ErrorBody},
        404: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody},
        429: {"model": ErrorBody},
    },
)
async def create_batch(
    body: BatchCreate,
    request: Request,
    settings: SettingsDep,
    problems: ProblemStoreDep,
    dispatcher: DispatcherDep,
    batches: BatchStoreDep,
    metrics: MetricsDep,
    finished: FinishedDep,
) -> Response:
    """Queue every request (all or none: 429 when they do not fit the queue now, 413 naming the
    bound when they never could (``GET /v1/limits``: ``batch_limit``); 404/422 naming
    ``requests[i]`` for an unknown problem or a request over the limits). Answers 200 with all
    results when the batch finishes within ``wait`` seconds, else 202 with its progress and
    ``Location: /v1/batches/{id}``."""
    if len(body.requests) > settings.max_batch:
        raise HTTPException(422, f"a batch holds at most {settings.max_batch} requests, got {len(body.requests)}")
    service.check_wait(body.wait, settings, 0.0)
    view = await in_thread(request, _create, body, settings, problems, dispatcher, batches, metrics, finished)
    return _answer(view)


@router.get(
    "/batches/{batch_id}",
    response_model=BatchStatus,
    responses={
        202: {"model": BatchStatus, "description": "not finished yet"},
        401: {"model": ErrorBody},
        404: {"model": ErrorBody},
        422: {"model": ErrorBody},
    },
)
async def get_batch(
    request: Request,
    settings: SettingsDep,
    dispatcher: DispatcherDep,
    batches: BatchStoreDep,
    metrics: MetricsDep,
    finished: FinishedDep,
    batch_id: Annotated[str, Path(max_length=200)],
    wait: Annotated[float, Query(ge=0, description="long-poll: seconds to wait for the batch")] = 0.0,
) -> Response:
    """Progress (``done``/``total``), results in request order (null while not done), group
    labels, and ``group_rewards`` once done. 200 when done, 202 while running."""
    wait_s = service.check_wait(wait, settings, 0.0)
    record = await in_thread(request, batches.get, batch_id)
    if record is None:
        raise HTTPException(404, f"unknown batch id {batch_id!r} (never created, or expired)")
    view = await in_thread(request, service.read_batch, record, dispatcher, metrics, wait_s, finished)
    if view.state != JobState.done or view.has_sandbox_error():
        # Redis restarted without persistence while this view was made: the record read before
        # it is gone now, and its jobs read after it looked "unknown" (sandbox_error results the
        # client would keep). A 404 makes the client resubmit the batch's unfinished samples.
        if await in_thread(request, batches.get, batch_id) is None:
            raise HTTPException(404, f"batch {batch_id!r} was lost while it was read (a store restart): resubmit it")
    return _answer(view)
