"""verl: custom reward functions (``custom_reward_function.path`` / ``.name``).

verl calls a custom reward function with the decoded response and the row's ``reward_model.ground_truth``
and ``extra_info`` (verl docs, "Implement Reward Function for Dataset"). Three forms, all here:

- :func:`compute_score` ``(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float``:
  the per-sample form of the ``naive`` / ``prime`` / ``dapo`` reward managers (one HTTP call
  per sample; the managers call it one sample at a time, so prefer one of the two below);
- :func:`compute_score_async`: the same, ``async`` (the reward loop detects coroutine
  functions and runs many samples concurrently);
- :func:`compute_score_batch` ``(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)
  -> list[float]``: the ``batch`` reward manager's form; one ``POST /v1/batches`` per step, and
  the only form that can add the group diversity term (``diversity_weight`` > 0; a group is the
  samples with the same problem id and ``extra_info["index"]`` -- verl's data preprocessing puts
  the row index there -- or ``extra_info["group"]`` when given).

The problem id is ``ground_truth`` (a plain id, or a JSON object with ``"problem_id"``), else
``extra_info["problem_id"]``. Keyword arguments (verl's ``custom_reward_function.reward_kwargs``):
``service_url`` (default ``$REWARD_SERVICE_URL`` or http://127.0.0.1:8000), ``api_key``,
``infra_retries`` (default 2), ``return_dict`` (per-sample forms: ``{"score", "coverage",
"passed"}`` instead of the float), ``diversity_weight`` (batch form); verl's own extra keyword
arguments (``reward_router_address``, ...) are ignored.

Infrastructure failures: verl needs a number for every sample, so a sample whose scoring ends
in ``sandbox_error`` is resubmitted ``infra_retries`` times and then raises
:class:`~reward_service.client.InfrastructureFailure` naming it (data source, problem id,
index); an unreachable service raises :class:`~reward_service.client.ServiceUnavailable` after
the client's retries. Neither becomes a reward of 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reward_service.adapters.common import (
    INFRA_RETRIES,
    coverage_of,
    find_problem_id,
    group_label,
    known_reward,
    known_rewards,
    rewards_of,
    score_request,
    shared_async_client,
    shared_client,
)
from reward_service.client import RewardServiceError, ScoreResult

__all__ = ["compute_score", "compute_score_async", "compute_score_batch"]


def _problem_id(ground_truth: Any, extra_info: Any, where: str) -> str:
    extra = extra_info.get("problem_id") if isinstance(extra_info, dict) else None
    return find_problem_id(ground_truth, extra, where=where)


def _describe(data_source: Any, problem_id: str, index: int | None = None) -> str:
    at = f"sample {index}, " if index is not None else ""
    return f"{at}data_source={data_source!r}, problem_id={problem_id!r}"


def _answer(result: ScoreResult, return_dict: bool) -> float | dict[str, float]:
    reward = known_reward(result)  # scored with raise_on_infra
    if return_dict:
        return {"score": reward, "coverage": coverage_of(result), "passed": float(result.passed)}
    return reward


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    *,
    service_url: str | None = None,
    api_key: str | None = None,
    infra_retries: int = INFRA_RETRIES,
    return_dict: bool = False,
    **kwargs: Any,
) -> float | dict[str, float]:
    """The shaped reward of one response (see the module docstring). Raises
    ``ValueError`` when no problem id is found, :class:`InfrastructureFailure`,
    :class:`ServiceUnavailable`, :class:`RequestFailed` (e.g. 404: the problem is not registered)."""
    pid = _problem_id(ground_truth, extra_info, "verl ground_truth/extra_info")
    what = _describe(data_source, pid)
    try:
        result = shared_client(service_url, api_key).score(
            score_request(pid, solution_str), raise_on_infra=True, sample_id=what, infra_retries=infra_retries
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring the verl sample {what}")
        raise
    return _answer(result, return_dict)


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    *,
    service_url: str | None = None,
    api_key: str | None = None,
    infra_retries: int = INFRA_RETRIES,
    return_dict: bool = False,
    **kwargs: Any,
) -> float | dict[str, float]:
    """``async`` :func:`compute_score` (verl's reward loop awaits it, many samples at once)."""
    pid = _problem_id(ground_truth, extra_info, "verl ground_truth/extra_info")
    what = _describe(data_source, pid)
    try:
        result = await shared_async_client(service_url, api_key).score(
            score_request(pid, solution_str), raise_on_infra=True, sample_id=what, infra_retries=infra_retries
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring the verl sample {what}")
        raise
    return _answer(result, return_dict)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict | None] | None = None,
    *,
    service_url: str | None = None,
    api_key: str | None = None,
    infra_retries: int = INFRA_RETRIES,
    diversity_weight: float = 0.0,
    **kwargs: Any,
) -> list[float]:
    """Rewards of a whole step, in order (verl's ``batch`` reward manager). With
    ``diversity_weight`` > 0 each reward is ``reward + diversity_weight × diversity`` within its group."""
    n = len(solution_strs)
    if not (len(data_sources) == len(ground_truths) == n) or (extra_infos is not None and len(extra_infos) != n):
        raise ValueError("data_sources, solution_strs, ground_truths and extra_infos must have one entry per sample")
    extras = list(extra_infos) if extra_infos is not None else [None] * n
    pids = [
        _problem_id(g, e, f"verl sample {i}: ground_truth/extra_info")
        for i, (g, e) in enumerate(zip(ground_truths, extras))
    ]
    groups = [
        group_label(p, *((e.get("group", e.get("index")),) if isinstance(e, dict) else ()))
        for p, e in zip(pids, extras)
    ]
    names = [_describe(d, p, i) for i, (d, p) in enumerate(zip(data_sources, pids))]
    try:
        results = shared_client(service_url, api_key).score_batch(
            [score_request(p, s) for p, s in zip(pids, solution_strs)],
            groups=groups,
            raise_on_infra=True,
            sample_ids=names,
            infra_retries=infra_retries,
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring a verl batch of {n} samples")
        raise
    rewards, _ = rewards_of(results, groups, diversity_weight)
    return known_rewards(rewards)
