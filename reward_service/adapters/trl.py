"""TRL: a ``reward_funcs`` entry for ``GRPOTrainer`` (and the other TRL trainers that take
custom reward functions).

TRL calls each custom reward function with keyword arguments ``prompts``, ``completions``
(strings, or for conversational datasets lists of ``{"role", "content"}`` messages), the
dataset's other columns (one list entry per completion), and trainer extras such as
``completion_ids`` and ``trainer_state``; it expects one reward per completion, ``None``
meaning "no reward for this sample" (TRL docs, "Using a custom reward function").

```python
from reward_service.adapters.trl import CoverageReward
trainer = GRPOTrainer(model=..., reward_funcs=[CoverageReward("http://127.0.0.1:8000")],
                      train_dataset=dataset)   # dataset columns: "prompt", "problem_id"
```

The problem id comes from the dataset column ``problem_id_column`` (default ``"problem_id"``):
a plain id or a JSON object with ``"problem_id"``. All completions of one call are scored in
one batch, concurrently on the service. With ``diversity_weight`` > 0 the completions of one
prompt (TRL's ``num_generations`` samples) form a group and get the group diversity term.

Infrastructure failures follow TRL's convention: a sample whose scoring ends in
``sandbox_error`` (after ``infra_retries`` resubmissions), or every sample when the service is
unreachable, gets ``None`` and a warning is logged. Mind that TRL sums rewards with
``nansum`` over the reward functions: when this is the only one, such a sample weighs as 0
in its group's advantage; ``on_infra_failure="raise"`` stops the step instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from reward_service.adapters.common import (
    INFRA_RETRIES,
    completion_text,
    find_problem_id,
    group_label,
    infra_failures,
    rewards_of,
    score_request,
    service_url,
    shared_client,
)
from reward_service.client import RewardClient, ServiceUnavailable
from reward_service.client.errors import RequestFailed
from reward_service.episodes import StepAnswer

log = logging.getLogger(__name__)

__all__ = ["CoverageReward", "CoverageEnvironment"]


class CoverageReward:
    """Callable reward function for TRL: ``(prompts, completions, **columns) -> list[float | None]``.

    ``service_url``/``api_key``: the service (default ``$REWARD_SERVICE_URL`` /
    ``$REWARD_SERVICE_API_KEY``). ``problem_id_column``: dataset column carrying the problem id.
    ``diversity_weight``: λ of the group diversity term (0: off). ``on_infra_failure``:
    ``"none"`` (TRL's convention, default) or ``"raise"``. ``timeout``: seconds for one call
    (None: no limit). ``client``: a :class:`RewardClient` to use instead of the shared one.
    ``name``: what TRL logs the reward as (``rewards/<name>``).
    """

    def __init__(
        self,
        service_url: str | None = None,
        *,
        api_key: str | None = None,
        problem_id_column: str = "problem_id",
        diversity_weight: float = 0.0,
        on_infra_failure: Literal["none", "raise"] = "none",
        infra_retries: int = INFRA_RETRIES,
        timeout: float | None = None,
        client: RewardClient | None = None,
        name: str = "coverage_reward",
    ) -> None:
        if on_infra_failure not in ("none", "raise"):
            raise ValueError(f"on_infra_failure must be 'none' or 'raise', got {on_infra_failure!r}")
        if diversity_weight < 0:
            raise ValueError(f"diversity_weight must be >= 0, got {diversity_weight}")
        self.service_url, self.api_key = service_url, api_key
        self.problem_id_column = problem_id_column
        self.diversity_weight = diversity_weight
        self.on_infra_failure = on_infra_failure
        self.infra_retries = infra_retries
        self.timeout = timeout
        self._client = client
        self.__name__ = name  # TRL names the reward after the function

    @property
    def client(self) -> RewardClient:
        return self._client or shared_client(self.service_url, self.api_key)

    def _problem_ids(self, n: int, columns: dict[str, Any]) -> list[str]:
        column = columns.get(self.problem_id_column)
        if column is None:
            raise KeyError(
                f"TRL passed no dataset column {self.problem_id_column!r} (columns given: "
                f"{sorted(columns)}); add the problem id to the dataset or set problem_id_column"
            )
        if isinstance(column, (str, bytes)) or not isinstance(column, Sequence) or len(column) != n:
            raise ValueError(f"column {self.problem_id_column!r} must hold one entry per completion ({n})")
        return [find_problem_id(v, where=f"{self.problem_id_column}[{i}]") for i, v in enumerate(column)]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        if n == 0:
            return []
        pids = self._problem_ids(n, kwargs)
        prompt_list = list(prompts) if prompts is not None else [None] * n
        groups = [group_label(p, prompt) for p, prompt in zip(pids, prompt_list)]
        requests = [score_request(p, completion_text(c)) for p, c in zip(pids, completions)]
        names = [f"completion {i} (problem {p!r})" for i, p in enumerate(pids)]
        try:
            results = self.client.score_batch(
                requests,
                groups=groups,
                timeout=self.timeout,
                sample_ids=names,
                infra_retries=self.infra_retries,
                raise_on_infra=self.on_infra_failure == "raise",
            )
        except ServiceUnavailable as exc:
            if self.on_infra_failure == "raise":
                exc.add_note(f"while scoring {n} TRL completions")
                raise
            log.warning(
                "reward service at %s unreachable: %d completions get reward None (%s)",
                service_url(self.service_url),
                n,
                exc,
            )
            return [None] * n
        failed = infra_failures(results)
        if failed:
            log.warning(
                "%d of %d completions had an infrastructure failure (reward None): %s",
                len(failed),
                n,
                results[failed[0]].message,
            )
        rewards, _ = rewards_of(results, groups, self.diversity_weight)
        return rewards


class CoverageEnvironment:
    """One coverage-closure episode per rollout, for ``GRPOTrainer(environment_factory=...)``
    (TRL: one instance per rollout; ``reset`` gets the dataset row and its answer is appended to
    the prompt; the public methods are the model's tools; ``get_reward`` scores the rollout).

    ```python
    trainer = GRPOTrainer(model=..., train_dataset=dataset,  # columns: "prompt", "problem_id"
                          environment_factory=lambda: CoverageEnvironment("http://127.0.0.1:8000", rounds=2))
    ```

    The dataset's ``prompt`` must be conversational (a list of messages) and the tokenizer's
    chat template one whose tool calls TRL parses (docs/episodes.md, "TRL"; a complete run:
    examples/trainers/trl_environment_tiny.py).

    The tools ``read_file``, ``simulate`` and ``submit`` are the episode's actions
    (docs/episodes.md): ``submit`` scores the testbench as ``/v1/score`` would and answers with its
    coverage report. ``get_reward``: the reward of the last (``reward_of="last"``) or best
    (``"best"``) submitted round, ``failure_value`` when the model submitted nothing. Errors of
    the service (episode over, unknown file) come back to the model as the tool's text.
    """

    def __init__(
        self,
        service_url: str | None = None,
        *,
        api_key: str | None = None,
        problem_id_column: str = "problem_id",
        rounds: int = 3,
        max_simulations: int = 10,
        feedback: Literal["text", "annotated"] = "text",
        reward_of: Literal["last", "best"] = "last",
        failure_value: float = 0.0,
        client: RewardClient | None = None,
    ) -> None:
        self.service_url, self.api_key = service_url, api_key
        self.problem_id_column = problem_id_column
        self.options = {"rounds": rounds, "max_simulations": max_simulations, "feedback": feedback}
        self.reward_of = reward_of
        self.failure_value = failure_value
        self._client = client
        self.episode_id: str | None = None
        self.rewards: list[float] = []
        self._steps = 0

    @property
    def _service(self) -> RewardClient:
        return self._client or shared_client(self.service_url, self.api_key)

    def reset(self, **row: Any) -> str:
        problem_id = find_problem_id(row.get(self.problem_id_column), where=f"column {self.problem_id_column!r}")
        answer = self._service.create_episode({"problem_id": problem_id, "options": self.options})
        obs = answer.observation
        self.episode_id, self.rewards, self._steps = obs.episode_id, [], 0
        ports = ", ".join(
            f"{p.direction} {p.name} [{p.width} bit]" for p in (obs.interface.ports if obs.interface else [])
        )
        module = obs.interface.module if obs.interface else None
        return (
            f"\nThe DUT is module `{module}`; instantiate it as `{obs.instance}`. Its ports: {ports}. "
            f"Coverage target: {obs.target_percent}%. Files you can read: {', '.join(obs.files or [])}. "
            f"You have {obs.rounds} submissions and {obs.simulations_left} simulations."
        )

    def _step(self, action: dict[str, Any]) -> StepAnswer | str:
        if self.episode_id is None:
            return "error: no episode (reset was not called)"
        self._steps += 1
        try:
            return self._service.episode_step(self.episode_id, {"step_id": f"t{self._steps}", "action": action})
        except RequestFailed as exc:
            return f"error {exc.status_code}: {exc.detail}"

    def read_file(self, path: str) -> str:
        """Read one of the problem's files (the DUT's RTL or a specification).

        Args:
            path: The file name, as the task lists it.

        Returns:
            The file's text.
        """
        answer = self._step({"kind": "read_file", "path": path})
        return answer if isinstance(answer, str) else answer.observation.content or ""

    def simulate(self, testbench: str) -> str:
        """Simulate a draft testbench and report its coverage, without using a submission.

        Args:
            testbench: The complete SystemVerilog testbench (or a cocotb test) to simulate.

        Returns:
            The coverage report: overall and per-metric coverage and the uncovered points.
        """
        answer = self._step({"kind": "simulate", "stimulus": {"kind": "completion", "text": testbench}})
        return answer if isinstance(answer, str) else answer.observation.feedback or ""

    def submit(self, testbench: str) -> str:
        """Submit a testbench: it is scored on the DUT's code coverage and uses one submission.

        Args:
            testbench: The complete SystemVerilog testbench (or a cocotb test) to submit.

        Returns:
            The coverage report of the testbench, and whether the episode is over.
        """
        answer = self._step({"kind": "submit", "stimulus": {"kind": "completion", "text": testbench}})
        if isinstance(answer, str):
            return answer
        if answer.reward is not None:
            self.rewards.append(answer.reward)
        report = answer.observation.feedback or ""
        return report + ("\nThe episode is over." if answer.done else "")

    def get_reward(self) -> float:
        """The rollout's reward (see the class docstring)."""
        if not self.rewards:
            return self.failure_value
        return self.rewards[-1] if self.reward_of == "last" else max(self.rewards)
