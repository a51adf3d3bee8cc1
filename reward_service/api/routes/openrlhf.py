"""``POST /v1/openrlhf/reward``: OpenRLHF's remote reward model (``--remote_rm_url``).

Body ``{"query": [...], "prompts": [...], "labels": [...]}`` -> ``{"rewards", "scores",
"extra_logs"}`` (see :mod:`reward_service.adapters.openrlhf` for the field meanings). The
samples run as one batch through the dispatcher; the batch id is derived from the body, so a
client that times out and POSTs the same body again waits for the same batch instead of
scoring it twice."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from reward_service.adapters.common import INFRA_RETRIES, score_request
from reward_service.adapters.openrlhf import RemoteSample, reply, samples_from
from reward_service.api import service
from reward_service.api.batch_store import BatchRecord
from reward_service.api.deps import (
    Authenticated,
    BatchStoreDep,
    DispatcherDep,
    MetricsDep,
    ProblemStoreDep,
    SettingsDep,
    in_thread,
)
from reward_service.api.schemas import ErrorBody
from reward_service.cache import content_hash
from reward_service.dispatch.base import JobState
from reward_service.models import ScoreRequest, Status

router = APIRouter(prefix="/v1", tags=["openrlhf"], dependencies=[Authenticated])

#: Default wait: OpenRLHF's remote reward call times out after 180 s and POSTs again (the same
#: body finds the same batch), so answering 503 a little before that keeps one waiting thread.
DEFAULT_WAIT_S = 150.0


class OpenRLHFRequest(BaseModel):
    """What OpenRLHF sends: ``query[i]`` = prompt + response text, ``prompts[i]`` the prompt,
    ``labels[i]`` the problem id (plain, or a JSON object with ``"problem_id"``)."""

    model_config = ConfigDict(extra="ignore")  # later OpenRLHF versions may send more

    query: list[str] = Field(default_factory=list)
    prompts: list[str] | None = None
    labels: list[Any] | None = None


class OpenRLHFReply(BaseModel):
    """``rewards`` for the advantages, ``scores`` (overall coverage in [0, 1]) for dynamic
    filtering, ``extra_logs`` (per-sample lists) for the trainer's logs."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


def _score(
    samples: list[RemoteSample],
    body: OpenRLHFRequest,
    weight: float,
    wait: float,
    settings,
    problems,
    dispatcher,
    batches,
    metrics,
) -> dict[str, Any]:
    resolved = []
    for i, s in enumerate(samples):
        req = ScoreRequest.model_validate(score_request(s.problem_id, s.completion))
        service.check_request(req, settings, f"query[{i}]: ")
        resolved.append(service.resolve(req, problems, f"labels[{i}]: "))
    batch_id = "openrlhf-" + content_hash({"body": body.model_dump(mode="json"), "weight": weight})[:32]
    record = batches.get(batch_id)
    if record is None:
        record = BatchRecord(
            id=batch_id,
            job_ids=dispatcher.submit_many(resolved),
            diversity_weight=weight,
            groups=[s.group if weight else None for s in samples],
        )
        metrics.jobs_submitted.inc(len(resolved))
        batches.put(record)
    deadline = time.monotonic() + wait
    for attempt in range(INFRA_RETRIES + 1):
        view = service.batch_view(record, dispatcher, metrics, max(0.0, deadline - time.monotonic()))
        if view.state != JobState.done:
            raise HTTPException(
                503,
                f"still scoring: {view.done} of {view.total} samples done within {wait:g} s "
                f"(batch {record.id}); POST the same body again to keep waiting",
                headers={"Retry-After": "1"},
            )
        results = [r for r in view.results if r is not None]
        assert len(results) == len(view.results), "a done batch has every result"
        failed = [i for i, r in enumerate(results) if r.status == Status.sandbox_error]
        if not failed:
            break
        if attempt == INFRA_RETRIES:
            names = ", ".join(f"query[{i}] (problem {samples[i].problem_id!r})" for i in failed[:10])
            more = f" and {len(failed) - 10} more" if len(failed) > 10 else ""
            raise HTTPException(
                503,
                f"infrastructure failure scoring {names}{more} after {attempt + 1} attempts: "
                f"{results[failed[0]].message}; no reward given (not 0)",
                headers={"Retry-After": "5"},
            )
        job_ids = list(record.job_ids)
        for i, job_id in zip(failed, dispatcher.submit_many([resolved[i] for i in failed])):
            job_ids[i] = job_id
        metrics.jobs_submitted.inc(len(failed))
        record = record.model_copy(update={"job_ids": job_ids})
        batches.put(record)
    grouped = view.group_rewards
    if grouped is not None:
        return reply(results, grouped.rewards, grouped.diversity)
    return reply(results, [r.reward for r in results])


@router.post(
    "/openrlhf/reward",
    response_model=OpenRLHFReply,
    responses={
        401: {"model": ErrorBody},
        404: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody},
        429: {"model": ErrorBody},
        503: {
            "model": ErrorBody,
            "description": "not finished within `wait` (POST again), or an infrastructure failure after retries",
        },
    },
)
async def openrlhf_reward(
    body: OpenRLHFRequest,
    request: Request,
    settings: SettingsDep,
    problems: ProblemStoreDep,
    dispatcher: DispatcherDep,
    batches: BatchStoreDep,
    metrics: MetricsDep,
    diversity_weight: Annotated[
        float, Query(ge=0, le=100, description="λ of the group diversity term (groups: the samples of one prompt)")
    ] = 0.0,
    wait: Annotated[
        float | None,
        Query(
            ge=0, description="seconds to wait for the batch (default: 150, under OpenRLHF's own 180 s request timeout)"
        ),
    ] = None,
) -> dict[str, Any]:
    """Rewards for OpenRLHF (``--remote_rm_url http://HOST:PORT/v1/openrlhf/reward``), in
    request order; empty lists give empty lists. 422 names the bad ``labels[i]``/``query[i]``,
    404 an unregistered problem; 503 when the batch is not done within ``wait`` (POST the same
    body again) or a sample keeps failing for infrastructure reasons (never a reward of 0)."""
    if not math.isfinite(diversity_weight):
        raise HTTPException(422, "diversity_weight must be a finite number")
    if len(body.query) > settings.max_batch:
        raise HTTPException(422, f"at most {settings.max_batch} queries per request, got {len(body.query)}")
    wait_s = service.check_wait(wait, settings, min(DEFAULT_WAIT_S, settings.max_wait_s))
    try:
        samples = samples_from(body.query, body.prompts, body.labels)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    if not samples:
        return {"rewards": [], "scores": [], "extra_logs": {}}
    return await in_thread(
        request, _score, samples, body, diversity_weight, wait_s, settings, problems, dispatcher, batches, metrics
    )
