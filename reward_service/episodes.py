"""Episodes: multi-round coverage closure as a session (issue 21; docs/episodes.md).

An episode holds one problem (a snapshot taken at reset, so the DUT cannot change under it) and
runs ``rounds`` rounds: each ``submit`` action is one round, scored exactly as ``POST /v1/score``
scores the same stimulus for the problem; ``simulate`` scores a draft without ending a round
(a budget of ``max_simulations``); ``read_file`` returns one of the problem's files. This module
holds the wire models and the pure rules (observations, the reward per step, when an episode is
done); :mod:`reward_service.api.episode_service` runs them on the scoring pipeline and
:mod:`reward_service.api.episode_store` keeps them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from reward_service.feedback import annotated_source, feedback_text, uncovered_by_kind
from reward_service.interface import Interface
from reward_service.models import CocotbStimulus, Completion, ProblemSpec, ScoreResult, Status, SvTestbench

__all__ = [
    "EpisodeOptions",
    "EpisodeCreate",
    "Submit",
    "Simulate",
    "ReadFile",
    "Action",
    "StepRequest",
    "Observation",
    "StepAnswer",
    "StepEntry",
    "RoundRecord",
    "EpisodeRecord",
    "EpisodeState",
    "readable_files",
    "reset_observation",
    "read_file_observation",
    "scored_observation",
    "apply_round",
    "action_digest",
]

#: Steps (of every kind) one episode takes at most: bounds its record in the store.
MAX_STEPS = 500

STEP_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,200}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeOptions(_Strict):
    """Options of an episode (``POST /v1/episodes``: ``options``)."""

    rounds: int = Field(3, ge=1, le=50, description="submit actions (rounds) before the episode is done")
    feedback: Literal["none", "text", "annotated"] = Field(
        "text",
        description="feedback text of a scored step: none, the uncovered points as text "
        "(reward_service.feedback.feedback_text), or that text plus the annotated DUT source",
    )
    feedback_chars: int = Field(1500, ge=200, le=20_000, description="bound of the feedback text")
    reward: Literal["absolute", "improvement"] = Field(
        "absolute",
        description="reward of a submit step: absolute = the /v1/score reward of the round's "
        "testbench; improvement = that reward minus the best earlier round's (the first round: "
        "minus 0); it may be negative",
    )
    seed: int = Field(0, ge=0, lt=2**31, description="simulation seed of every step (ScoreRequest.seed)")
    max_simulations: int = Field(10, ge=0, le=1000, description="simulate tool calls the episode allows")
    max_items: int = Field(50, ge=1, le=200, description="uncovered points listed per kind in eda_result")


class EpisodeCreate(_Strict):
    """``POST /v1/episodes`` (reset): exactly one of ``problem_id`` (a registered problem) and
    ``problem`` (an inline :class:`ProblemSpec`)."""

    problem_id: str | None = Field(None, max_length=200)
    problem: ProblemSpec | None = None
    options: EpisodeOptions = Field(default_factory=EpisodeOptions)

    @model_validator(mode="after")
    def _one_problem(self) -> EpisodeCreate:
        if (self.problem_id is None) == (self.problem is None):
            raise ValueError("give exactly one of `problem_id` or `problem`")
        return self


Stimulus = Annotated[SvTestbench | CocotbStimulus | Completion, Field(discriminator="kind")]


class Submit(_Strict):
    """End the round with this testbench, cocotb test or raw completion: it is scored and
    rewarded."""

    kind: Literal["submit"] = "submit"
    stimulus: Stimulus


class Simulate(_Strict):
    """Score a draft and see its coverage without ending the round (reward None)."""

    kind: Literal["simulate"] = "simulate"
    stimulus: Stimulus


class ReadFile(_Strict):
    """Read one of the problem's files (``Observation.files`` of the reset lists them)."""

    kind: Literal["read_file"] = "read_file"
    path: str = Field(min_length=1, max_length=1000)


Action = Annotated[Submit | Simulate | ReadFile, Field(discriminator="kind")]


class StepRequest(_Strict):
    """``POST /v1/episodes/{id}/step``: ``step_id`` names the step for retries (a step sent
    again with the same id gets the stored answer and is never scored twice)."""

    step_id: str = Field(pattern=STEP_ID_PATTERN, description="client-chosen id of this step (idempotency key)")
    action: Action


class Observation(BaseModel):
    """What the agent sees after a reset or a step. Fields a kind does not fill are None.

    * every kind: ``episode_id``, ``kind``, ``round`` (rounds submitted so far), ``rounds``,
      ``simulations_left``;
    * ``reset``: ``prompt``, ``interface`` (the DUT's ports), ``instance`` (the instance name
      the testbench must give the DUT; the coverage scope), ``files`` (readable files),
      ``target_percent``;
    * ``submit`` / ``simulate``: ``status``, ``message``, ``passed``, ``result_reward`` (the
      ``/v1/score`` reward of this stimulus), ``coverage`` (overall and per metric),
      ``eda_result`` (uncovered points by kind, :func:`~reward_service.feedback.uncovered_by_kind`),
      ``feedback`` (text for the next turn);
    * ``read_file``: ``path``, ``content``.
    """

    episode_id: str
    kind: Literal["reset", "submit", "simulate", "read_file"]
    round: int
    rounds: int
    simulations_left: int
    prompt: str | None = None
    interface: Interface | None = None
    instance: str | None = None
    files: list[str] | None = None
    target_percent: float | None = None
    status: str | None = None
    message: str | None = None
    passed: bool | None = None
    result_reward: float | None = None
    coverage: dict[str, Any] | None = None
    eda_result: dict[str, Any] | None = None
    feedback: str | None = None
    path: str | None = None
    content: str | None = None


class StepAnswer(BaseModel):
    """A reset's or step's answer: the observation, the step's reward (None for reset and tool
    calls) and whether the episode is over."""

    observation: Observation
    reward: float | None = None
    done: bool = False


class StepEntry(BaseModel):
    """A step as the episode keeps it: the action's digest (a retry must send the same action),
    its job while it is scoring, then its answer."""

    kind: str
    digest: str
    job_id: str | None = None
    answer: StepAnswer | None = None


class RoundRecord(BaseModel):
    """One submitted round: its step, the reward it got and the ``/v1/score`` reward."""

    round: int
    step_id: str
    reward: float
    result_reward: float | None
    status: str
    overall: float | None
    passed: bool


class EpisodeRecord(BaseModel):
    """An episode in the store (``<prefix>episode:<id>`` in Redis)."""

    id: str
    problem: ProblemSpec
    interface: Interface
    options: EpisodeOptions
    round: int = 0
    simulations: int = 0
    best_reward: float | None = None
    done: bool = False
    history: list[RoundRecord] = Field(default_factory=list)
    steps: dict[str, StepEntry] = Field(default_factory=dict)
    created: float = Field(default_factory=time.time)


class EpisodeState(BaseModel):
    """``GET /v1/episodes/{id}``: the episode without its problem's files or step answers."""

    episode_id: str
    problem_id: str
    options: EpisodeOptions
    round: int
    rounds: int
    simulations_used: int
    done: bool
    best_reward: float | None
    history: list[RoundRecord]
    step_ids: list[str]
    pending_step: str | None
    created: float


def state_of(record: EpisodeRecord) -> EpisodeState:
    pending = next((sid for sid, s in record.steps.items() if s.answer is None), None)
    return EpisodeState(
        episode_id=record.id,
        problem_id=record.problem.id,
        options=record.options,
        round=record.round,
        rounds=record.options.rounds,
        simulations_used=record.simulations,
        done=record.done,
        best_reward=record.best_reward,
        history=record.history,
        step_ids=list(record.steps),
        pending_step=pending,
        created=record.created,
    )


def action_digest(action: Submit | Simulate | ReadFile) -> str:
    """sha256 of the action's JSON: a retried step id must carry the same action."""
    return hashlib.sha256(action.model_dump_json().encode()).hexdigest()


def readable_files(problem: ProblemSpec) -> dict[str, str]:
    """The files ``read_file`` may return: the DUT's RTL and the problem's context (spec
    documents), by name; nothing else (no file system is read)."""
    return {**problem.context, **problem.design.files}


def target_percent(problem: ProblemSpec) -> float | None:
    return next((t.percent for t in problem.targets if t.metric == "overall"), None)


def _base(record: EpisodeRecord, kind: str) -> dict[str, Any]:
    return {
        "episode_id": record.id,
        "kind": kind,
        "round": record.round,
        "rounds": record.options.rounds,
        "simulations_left": max(0, record.options.max_simulations - record.simulations),
    }


def default_prompt(problem: ProblemSpec, interface: Interface) -> str:
    """The task when the problem brings no prompt of its own."""
    target = target_percent(problem)
    module = interface.module or problem.toplevel or "the DUT"
    text = f"Write a testbench (stimulus) for the `{module}` module that maximises its code coverage."
    if problem.dut_instance:
        text += f" Instantiate it as `{problem.dut_instance}`."
    if target is not None:
        text += f" The target is {target:g}% overall coverage."
    return text


def reset_observation(record: EpisodeRecord) -> Observation:
    """The first observation: the task, the DUT's interface, the instance name, the files."""
    problem = record.problem
    return Observation(
        **_base(record, "reset"),
        prompt=problem.prompt or default_prompt(problem, record.interface),
        interface=record.interface,
        instance=problem.dut_instance,
        files=sorted(readable_files(problem)),
        target_percent=target_percent(problem),
    )


def read_file_observation(record: EpisodeRecord, path: str) -> Observation | None:
    """The file at ``path`` among :func:`readable_files`, or None when it is not one of them."""
    text = readable_files(record.problem).get(path)
    if text is None:
        return None
    return Observation(**_base(record, "read_file"), path=path, content=text)


def scored_observation(record: EpisodeRecord, kind: str, result: ScoreResult) -> Observation:
    """The observation of a scored step (``submit`` or ``simulate``): status, coverage, the
    uncovered points by kind (LLM4Cov's EDA result) and the feedback text."""
    problem, options = record.problem, record.options
    sources = problem.design.files
    feedback: str | None = None
    if options.feedback != "none":
        feedback = feedback_text(
            result, sources=sources, max_chars=options.feedback_chars, target_percent=target_percent(problem)
        )
        if options.feedback == "annotated" and result.uncovered:
            feedback += "\n\n" + annotated_source(sources, result.uncovered)
    coverage = None
    eda = None
    if result.status == Status.ok:
        cov = result.coverage
        coverage = {
            "overall": cov.overall,
            "scope": cov.scope,
            "metrics": {
                name: {"covered": m.covered, "total": m.total, "ratio": m.ratio, "available": m.available}
                for name, m in cov.metrics.items()
            },
        }
        missing = sum(m.total - m.covered for m in cov.metrics.values() if m.available)
        eda = {
            "overall": cov.overall,
            "uncovered": uncovered_by_kind(result.uncovered, sources=sources, max_items=options.max_items),
            "uncovered_points": missing,
            "listed_points": len(result.uncovered),
        }
    return Observation(
        **_base(record, kind),
        status=result.status.value,
        message=result.message,
        passed=result.passed,
        result_reward=result.reward,
        coverage=coverage,
        eda_result=eda,
        feedback=feedback,
    )


def apply_round(record: EpisodeRecord, step_id: str, result: ScoreResult) -> float:
    """Count a submitted round on ``record`` (in place) and return the step's reward: the
    result's reward (``absolute``) or its gain over the best earlier round (``improvement``).
    The episode is done when the result meets the problem's targets (a problem without targets:
    when its overall coverage is 100%) or ``rounds`` are spent.
    ``result.reward`` must not be None (a ``sandbox_error`` is never a round)."""
    assert result.reward is not None
    best = record.best_reward
    reward = result.reward if record.options.reward == "absolute" else result.reward - (best or 0.0)
    record.round += 1
    record.best_reward = result.reward if best is None else max(best, result.reward)
    if record.problem.targets:
        met = result.passed
    else:
        met = result.status == Status.ok and result.coverage.overall == 1.0
    record.done = met or record.round >= record.options.rounds
    record.history.append(
        RoundRecord(
            round=record.round,
            step_id=step_id,
            reward=reward,
            result_reward=result.reward,
            status=result.status.value,
            overall=result.coverage.overall,
            passed=result.passed,
        )
    )
    return reward
