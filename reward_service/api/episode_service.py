"""Episodes on the scoring pipeline: reset, step and state (blocking calls; the routes run
them through :func:`~reward_service.api.deps.in_thread`, the OpenEnv and MCP front ends call
them as they are).

A scored step (``submit`` or ``simulate``) is the request ``POST /v1/score`` would get for the
same stimulus (``{"problem_id", "stimulus", "seed"}`` resolved against the episode's problem by
the one resolution rule), checked against the same limits and queued on the same dispatcher —
same engines, integrity rules and caches — so its result, and with ``reward: absolute`` its
reward, is ``/v1/score``'s. Steps are idempotent by their ``step_id``: the step's job id is
stored before anyone waits for it, so a retry waits for the same job and then gets the stored
answer; nothing is scored twice. A ``sandbox_error`` or a lost job is not a step: the entry is
dropped and the answer is a 503 (send the step again), never a reward."""

from __future__ import annotations

import secrets

from fastapi import HTTPException

from reward_service.api import service
from reward_service.api.episode_store import EpisodeStore
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import Dispatcher, JobState
from reward_service.episodes import (
    MAX_STEPS,
    EpisodeCreate,
    EpisodeRecord,
    EpisodeState,
    ReadFile,
    Simulate,
    StepAnswer,
    StepEntry,
    StepRequest,
    Submit,
    action_digest,
    apply_round,
    read_file_observation,
    readable_files,
    reset_observation,
    scored_observation,
    state_of,
)
from reward_service.errors import RewardServiceError
from reward_service.interface import dut_interface
from reward_service.models import ScoreRequest, ScoreResult, Status
from reward_service.problems.store import ProblemStore
from reward_service.settings import Settings


class StepPending(RewardServiceError):
    """The step's simulation did not finish within the wait: send the same step again."""

    def __init__(self, episode_id: str, step_id: str, state: JobState) -> None:
        super().__init__(f"step {step_id!r} of episode {episode_id} is still {state.value}")
        self.episode_id = episode_id
        self.step_id = step_id
        self.state = state


def _unknown(episode_id: str) -> HTTPException:
    return HTTPException(404, f"unknown episode id {episode_id!r} (never created, or expired)")


class EpisodeService:
    """Reset, step and state of episodes kept in ``store``, scored through ``dispatcher``."""

    def __init__(
        self,
        store: EpisodeStore,
        problems: ProblemStore,
        dispatcher: Dispatcher,
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.problems = problems
        self.dispatcher = dispatcher
        self.settings = settings
        self.metrics = metrics

    def reset(self, body: EpisodeCreate) -> StepAnswer:
        """A new episode on ``body``'s problem (a snapshot of it): its first observation.
        404 for an unknown ``problem_id``; 422 for an inline problem over the file limits."""
        if body.problem is not None:
            problem = body.problem
            service.check_design(problem.design, self.settings)
        else:
            assert body.problem_id is not None
            found = self.problems.get(body.problem_id)
            if found is None:
                raise HTTPException(
                    404,
                    f"unknown problem_id {body.problem_id!r}: register it with POST /v1/problems or "
                    "POST /v1/problems:load, or send the problem inline as `problem`",
                )
            problem = found
        record = EpisodeRecord(
            id=secrets.token_urlsafe(24),  # unguessable: the id is the capability to the episode
            problem=problem,
            interface=dut_interface(problem.design.files, problem.toplevel),
            options=body.options,
        )
        self.store.put(record)
        return StepAnswer(observation=reset_observation(record), reward=None, done=False)

    def state(self, episode_id: str) -> EpisodeState:
        """The episode's progress (404 when unknown or expired)."""
        record = self.store.get(episode_id)
        if record is None:
            raise _unknown(episode_id)
        return state_of(record)

    def step(self, episode_id: str, body: StepRequest, wait: float) -> StepAnswer:
        """Apply ``body``'s action, waiting up to ``wait`` seconds for its simulation.
        Raises :class:`StepPending` when it is not done by then, and HTTPException: 404
        (episode or file unknown), 409 (episode over, another step still scoring, step id reused
        for another action, budget spent), 422 (stimulus over the limits), 503 (the scoring
        infrastructure failed: send the step again)."""
        action = body.action
        digest = action_digest(action)
        with self.store.lock(episode_id):
            record = self.store.get(episode_id)
            if record is None:
                raise _unknown(episode_id)
            entry = record.steps.get(body.step_id)
            if entry is not None:
                if entry.digest != digest:
                    raise HTTPException(
                        409, f"step id {body.step_id!r} was already used for another action: use a new step id"
                    )
                if entry.answer is not None:
                    return entry.answer
                job_id = entry.job_id
            else:
                job_id = self._start(record, body.step_id, action, digest)
                if job_id is None:  # answered at once (read_file)
                    return record.steps[body.step_id].answer  # type: ignore[return-value]
        assert job_id is not None
        view = service.job_view(job_id, self.dispatcher, self.metrics, wait)
        if view is None and self.dispatcher.resend(job_id):
            raise StepPending(episode_id, body.step_id, JobState.queued)
        if view is None or (view.state == JobState.done and view.result is None):
            self._drop(episode_id, body.step_id, job_id)
            raise HTTPException(
                503,
                f"the simulation of step {body.step_id!r} was lost (its result expired or a store "
                "restarted): send the step again",
                headers={"Retry-After": "1"},
            )
        if view.state != JobState.done:
            raise StepPending(episode_id, body.step_id, view.state)
        assert view.result is not None
        if view.result.status == Status.sandbox_error or view.result.reward is None:
            self._drop(episode_id, body.step_id, job_id)
            raise HTTPException(
                503,
                f"the scoring infrastructure failed on step {body.step_id!r} ({view.result.message.strip()[:300]}); "
                "it is not counted: send the step again",
                headers={"Retry-After": "5"},
            )
        return self._finish(episode_id, body.step_id, job_id, view.result)

    def _start(
        self, record: EpisodeRecord, step_id: str, action: Submit | Simulate | ReadFile, digest: str
    ) -> str | None:
        """Check ``action`` against the episode, answer a ``read_file`` at once (None) or queue
        the simulation and store the pending step (its job id). Runs under the episode's lock."""
        if len(record.steps) >= MAX_STEPS:
            raise HTTPException(409, f"episode {record.id} took its {MAX_STEPS} steps")
        pending = next((sid for sid, s in record.steps.items() if s.answer is None), None)
        if pending is not None:
            raise HTTPException(409, f"step {pending!r} is still scoring: send it again to wait for its answer first")
        if isinstance(action, ReadFile):
            observation = read_file_observation(record, action.path)
            if observation is None:
                raise HTTPException(
                    404, f"no file {action.path!r} in this problem; readable: {sorted(readable_files(record.problem))}"
                )
            record.steps[step_id] = StepEntry(
                kind=action.kind, digest=digest, answer=StepAnswer(observation=observation, done=record.done)
            )
            self.store.put(record)
            return None
        if record.done:
            raise HTTPException(409, f"episode {record.id} is over ({record.round} of {record.options.rounds} rounds)")
        if isinstance(action, Simulate) and record.simulations >= record.options.max_simulations:
            raise HTTPException(
                409, f"the episode's {record.options.max_simulations} simulate calls are spent: submit a round"
            )
        fields: dict = {"problem_id": record.problem.id, "stimulus": action.stimulus}
        if record.options.seed:
            fields["seed"] = record.options.seed
        request = ScoreRequest(**fields)
        service.check_request(request, self.settings)
        resolved = service.resolve_with(request, record.problem)
        job_id = self.dispatcher.submit(resolved)
        self.metrics.jobs_submitted.inc()
        record.steps[step_id] = StepEntry(kind=action.kind, digest=digest, job_id=job_id)
        self.store.put(record)
        return job_id

    def _drop(self, episode_id: str, step_id: str, job_id: str) -> None:
        """Forget a pending step whose simulation failed or was lost, so that it can be sent
        again."""
        with self.store.lock(episode_id):
            record = self.store.get(episode_id)
            if record is None:
                return
            entry = record.steps.get(step_id)
            if entry is not None and entry.answer is None and entry.job_id == job_id:
                del record.steps[step_id]
                self.store.put(record)

    def _finish(self, episode_id: str, step_id: str, job_id: str, result: ScoreResult) -> StepAnswer:
        """Apply a finished simulation to the episode once (a concurrent retry finds the stored
        answer) and return the step's answer."""
        with self.store.lock(episode_id):
            record = self.store.get(episode_id)
            if record is None:
                raise _unknown(episode_id)
            entry = record.steps.get(step_id)
            if entry is None or entry.job_id != job_id:
                raise HTTPException(409, f"step {step_id!r} was dropped while it was read: send it again")
            if entry.answer is not None:
                return entry.answer
            reward: float | None = None
            if entry.kind == "submit":
                reward = apply_round(record, step_id, result)
            else:
                record.simulations += 1
            answer = StepAnswer(
                observation=scored_observation(record, entry.kind, result), reward=reward, done=record.done
            )
            entry.answer = answer
            self.store.put(record)
            return answer
