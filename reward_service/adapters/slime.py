"""slime: custom reward functions (``--custom-rm-path``).

slime awaits ``reward_func(args, sample, **kwargs) -> float`` for each rollout sample, or with
``--group-rm`` ``batched_reward_func(args, samples, **kwargs) -> list[float]`` once per group
(the ``n_samples_per_prompt`` samples of one prompt) (slime docs, "Customization Guide",
``--custom-rm-path``). A sample is slime's ``Sample``: the model's text is ``sample.response``;
the problem id is ``sample.label`` (dataset ``--label-key``; a plain id or a JSON object with
``"problem_id"``), else ``sample.metadata["problem_id"]`` (``--metadata-key``).

```bash
--custom-rm-path reward_service.adapters.slime.reward_func
--custom-rm-path reward_service.adapters.slime.batched_reward_func --group-rm   # + diversity term
```

Settings, first found wins: keyword arguments, attributes of ``args``
(``reward_service_url``, ``reward_service_api_key``, ``reward_service_diversity_weight``), the
environment (``REWARD_SERVICE_URL``, ``REWARD_SERVICE_API_KEY``,
``REWARD_SERVICE_DIVERSITY_WEIGHT``). The diversity term needs the batched form (the samples of
one group are scored together; samples with different ``group_index`` are separate groups).

Infrastructure failures: slime needs a number for every sample, so a sample whose scoring ends
in ``sandbox_error`` is resubmitted twice, then raises
:class:`~reward_service.client.InfrastructureFailure` naming it (``index``, ``group_index``,
problem id); an unreachable service raises :class:`~reward_service.client.ServiceUnavailable`
after the client's retries. Neither becomes a reward of 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from reward_service.adapters.common import (
    INFRA_RETRIES,
    completion_text,
    find_problem_id,
    group_label,
    known_reward,
    known_rewards,
    rewards_of,
    score_request,
    shared_async_client,
)
from reward_service.client import RewardServiceError

__all__ = ["reward_func", "batched_reward_func"]


def _setting(name: str, args: Any, given: Any) -> Any:
    if given is not None:
        return given
    value = getattr(args, f"reward_service_{name}", None)
    return value if value is not None else os.environ.get(f"REWARD_SERVICE_{name.upper()}")


def _problem_id(sample: Any) -> str:
    metadata = getattr(sample, "metadata", None)
    extra = metadata.get("problem_id") if isinstance(metadata, dict) else None
    return find_problem_id(getattr(sample, "label", None), extra, where=f"slime {_describe(sample)}: label/metadata")


def _describe(sample: Any, problem_id: str | None = None) -> str:
    parts = [f"index={getattr(sample, 'index', None)}", f"group_index={getattr(sample, 'group_index', None)}"]
    if problem_id is not None:
        parts.append(f"problem_id={problem_id!r}")
    return f"sample ({', '.join(parts)})"


async def reward_func(
    args: Any, sample: Any, *, service_url: str | None = None, api_key: str | None = None, **kwargs: Any
) -> float:
    """The shaped reward of one slime ``Sample`` (see the module docstring)."""
    pid = _problem_id(sample)
    what = _describe(sample, pid)
    client = shared_async_client(_setting("url", args, service_url), _setting("api_key", args, api_key))
    try:
        result = await client.score(
            score_request(pid, completion_text(sample.response)),
            raise_on_infra=True,
            sample_id=what,
            infra_retries=INFRA_RETRIES,
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring the slime {what}")
        raise
    return known_reward(result)


async def batched_reward_func(
    args: Any,
    samples: Sequence[Any],
    *,
    service_url: str | None = None,
    api_key: str | None = None,
    diversity_weight: float | None = None,
    **kwargs: Any,
) -> list[float]:
    """Rewards of one group of slime samples (``--group-rm``), in order; with a diversity
    weight > 0 each is ``reward + weight × diversity`` within its group."""
    if not samples:
        return []
    weight = float(_setting("diversity_weight", args, diversity_weight) or 0.0)
    pids = [_problem_id(s) for s in samples]
    groups = [group_label(p, getattr(s, "group_index", None)) for p, s in zip(pids, samples)]
    names = [_describe(s, p) for s, p in zip(samples, pids)]
    client = shared_async_client(_setting("url", args, service_url), _setting("api_key", args, api_key))
    try:
        results = await client.score_batch(
            [score_request(p, completion_text(s.response)) for p, s in zip(pids, samples)],
            groups=groups,
            raise_on_infra=True,
            sample_ids=names,
            infra_retries=INFRA_RETRIES,
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring a slime group of {len(samples)} samples")
        raise
    rewards, _ = rewards_of(results, groups, weight)
    return known_rewards(rewards)
