"""Request and response models of the API that are not the engine's wire schema
(:class:`~reward_service.models.ScoreRequest` and :class:`~reward_service.models.ScoreResult`
are used as they are)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward_service.dispatch.base import JobState
from reward_service.diversity import GroupRewards
from reward_service.models import ScoreRequest, ScoreResult


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: ``detail`` is a human-readable message; ``errors`` lists the
    validation errors (location and message) of a 422."""

    detail: str
    errors: list[dict[str, Any]] | None = None


class JobAccepted(BaseModel):
    """202 of ``POST /v1/score``: the job is queued or running; poll ``Location``."""

    job_id: str
    state: JobState


class JobStatus(BaseModel):
    """``GET /v1/jobs/{id}``: ``result`` is set once ``state`` is ``done``."""

    job_id: str
    state: JobState
    result: ScoreResult | None = None


class StepAccepted(BaseModel):
    """202 of ``POST /v1/episodes/{id}/step``: the step's simulation is queued or running;
    send the same step (same ``step_id``) again to wait for its answer."""

    episode_id: str
    step_id: str
    state: JobState


class BatchItem(ScoreRequest):
    """One request of a batch: a :class:`ScoreRequest` plus an optional ``group`` label (the
    GRPO group: the samples of one prompt)."""

    group: str | None = Field(None, max_length=200, description="group label for group-level rewards")


class BatchCreate(BaseModel):
    """``POST /v1/batches``."""

    model_config = ConfigDict(extra="forbid")

    requests: list[BatchItem] = Field(min_length=1)
    wait: float = Field(
        0.0, ge=0, allow_inf_nan=False, description="seconds to wait for the whole batch before answering 202"
    )
    diversity_weight: float = Field(
        0.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="λ of the group diversity term: group_rewards.rewards = reward + λ·diversity",
    )


class BatchStatus(BaseModel):
    """``GET /v1/batches/{id}``: progress and the results so far, in request order (None for
    samples not done yet)."""

    batch_id: str
    state: JobState
    total: int
    done: int
    job_ids: list[str]
    groups: list[str | None]
    results: list[ScoreResult | None]
    group_rewards: GroupRewards | None = Field(None, description="once the batch is done and has groups")


class ProblemSummary(BaseModel):
    """A registered problem without its files and prompt (``GET /v1/problems``)."""

    id: str
    toplevel: str | None
    dut_instance: str | None
    simulator: str
    metrics: list[str]
    targets: list[dict[str, Any]]
    files: list[str]
    difficulty: str | None = None


class ProblemList(BaseModel):
    problems: list[ProblemSummary]


class ProblemsLoaded(BaseModel):
    """``POST /v1/problems:load``."""

    loaded: int
    new: int
    ids: list[str]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]
