"""LLM4Cov rounds for GRPO trainers without an episode server (issue 21, docs/episodes.md).

LLM4Cov and CHORUS train K rounds per prompt, each round its own GRPO group: round k+1's prompt
is round k's prompt, one sample's testbench (its ``<think>`` reasoning stripped) as the
assistant turn, and an "EDA result" user turn — the coverage of that testbench and what it left
uncovered, most useful first (:func:`reward_service.feedback.feedback_text`, the text an
episode's observation carries). :func:`next_round` builds that prompt from one scored group (the
completions of a prompt and their :class:`~reward_service.models.ScoreResult`\\ s, e.g. from
``RewardClient.score_batch``); :func:`next_rounds` does it for every group of a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reward_service.adapters.common import completion_text
from reward_service.completion import strip_think
from reward_service.feedback import feedback_text
from reward_service.models import ScoreResult, Status

__all__ = ["RoundPrompt", "next_round", "next_rounds", "EDA_INSTRUCTION"]

#: What the EDA-result turn asks for after the report.
EDA_INSTRUCTION = (
    "Improve the testbench so that it also covers these points. Keep the DUT instance name. "
    "Answer with the complete testbench in one code block."
)

Pick = Literal["best", "worst"]


@dataclass
class RoundPrompt:
    """Round k+1's prompt of one group: ``messages`` (chat format: the prompt's messages, the
    chosen testbench as the assistant turn, the EDA result as the user turn), the index of the
    chosen sample in the group, and its reward."""

    messages: list[dict[str, str]]
    chosen: int
    reward: float


def _messages(prompt: str | Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


def next_round(
    prompt: str | Sequence[Mapping[str, Any]],
    completions: Sequence[Any],
    results: Sequence[ScoreResult],
    *,
    pick: Pick = "best",
    sources: Mapping[str, str] | None = None,
    target_percent: float | None = None,
    max_chars: int = 1500,
    instruction: str = EDA_INSTRUCTION,
) -> RoundPrompt:
    """The next round's prompt of one group.

    ``prompt``: this round's prompt (text, or chat messages ``{"role", "content"}``);
    ``completions[i]``: sample i (text, or TRL's conversational list) and ``results[i]`` its
    result. ``pick``: the sample with the highest (``best``) or lowest (``worst``) reward; ties go
    to the first. Samples without a reward (``sandbox_error``) are never picked. ``sources``
    (the DUT's files, e.g. ``problem.design.files``) and ``target_percent`` enrich the report as
    in :func:`~reward_service.feedback.feedback_text` (at most ``max_chars``).

    Raises ValueError when the lengths differ or no sample has a reward."""
    if len(completions) != len(results):
        raise ValueError(f"{len(completions)} completions but {len(results)} results")
    scored = [(r.reward, i) for i, r in enumerate(results) if r.reward is not None and r.status != Status.sandbox_error]
    if not scored:
        raise ValueError("no sample of the group has a reward (all sandbox_error): score the group again")
    if pick == "best":
        reward, chosen = max(scored, key=lambda t: (t[0], -t[1]))
    else:
        reward, chosen = min(scored, key=lambda t: (t[0], t[1]))
    answer = strip_think(completion_text(completions[chosen])).strip()
    report = feedback_text(results[chosen], sources=sources, max_chars=max_chars, target_percent=target_percent)
    messages = [
        *_messages(prompt),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": f"EDA result:\n{report}\n\n{instruction}"},
    ]
    return RoundPrompt(messages=messages, chosen=chosen, reward=reward)


def next_rounds(
    prompts: Sequence[str | Sequence[Mapping[str, Any]]],
    completions: Sequence[Any],
    results: Sequence[ScoreResult],
    groups: Sequence[str],
    **options: Any,
) -> dict[str, RoundPrompt]:
    """:func:`next_round` for every group of one RL step: ``completions[i]``, ``results[i]``
    and ``groups[i]`` (its group label, e.g. :func:`~reward_service.adapters.common.group_label`)
    of sample i, ``prompts[i]`` its prompt (the same for every sample of a group). Returns the
    group label -> its next prompt; ``options`` are :func:`next_round`'s (``sources`` then holds
    the files of every group's DUT alike, so leave it out when groups have different DUTs)."""
    if not len(prompts) == len(completions) == len(results) == len(groups):
        raise ValueError("prompts, completions, results and groups must have one entry per sample")
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    out = {}
    for group, idx in members.items():
        chosen = next_round(prompts[idx[0]], [completions[i] for i in idx], [results[i] for i in idx], **options)
        out[group] = RoundPrompt(messages=chosen.messages, chosen=idx[chosen.chosen], reward=chosen.reward)
    return out
