"""OpenRLHF: the remote reward model (``--remote_rm_url``).

OpenRLHF POSTs ``{"query": [...], "prompts": [...], "labels": [...]}`` to the remote reward URL
-- ``query[i]`` is prompt + response as decoded text, ``prompts[i]`` the prompt, ``labels[i]``
the dataset's ``--label_key`` column -- and reads ``{"rewards": [...], "scores": [...],
"extra_logs": {...}}``: ``rewards`` for the advantages, ``scores`` (in [0, 1]) for dynamic
filtering, ``extra_logs`` logged (OpenRLHF README, "Reinforced Fine-tuning"). With several
URLs it splits a batch between them, so a request may hold any number of samples, none included.

The service answers that at ``POST /v1/openrlhf/reward`` (:mod:`reward_service.api.routes.openrlhf`):

```bash
--remote_rm_url http://127.0.0.1:8000/v1/openrlhf/reward --label_key problem_id
--remote_rm_url 'http://127.0.0.1:8000/v1/openrlhf/reward?diversity_weight=0.1'   # + diversity term
```

OpenRLHF can also load a Python file as the reward function (``--remote_rm_url
/path/to/reward_service/adapters/openrlhf.py``): :func:`reward_func` here does the same through
the client (``REWARD_SERVICE_URL``, ``REWARD_SERVICE_DIVERSITY_WEIGHT``).

The label carries the problem id (plain, or a JSON object with ``"problem_id"``). The response
is ``query[i]`` without its leading ``prompts[i]``. Outputs: ``rewards`` = the shaped reward
(plus λ·diversity within the samples of one prompt when asked), ``scores`` = overall coverage
in [0, 1] (0 without coverage), ``extra_logs`` = ``coverage``, ``passed``, ``no_coverage``
(and ``diversity``) per sample.

Infrastructure failures: OpenRLHF needs a number for every sample. The endpoint resubmits a
sample that ended in ``sandbox_error`` twice, then answers 503 naming the samples (OpenRLHF's
client retries, then raises); :func:`reward_func` raises
:class:`~reward_service.client.InfrastructureFailure`. Never a reward of 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from reward_service.adapters.common import (
    INFRA_RETRIES,
    coverage_of,
    find_problem_id,
    group_label,
    rewards_of,
    score_request,
    shared_client,
)
from reward_service.client import RewardServiceError
from reward_service.models import ScoreResult, Status

__all__ = ["RemoteSample", "completion_from_query", "samples_from", "reply", "reward_func"]


class RemoteSample(NamedTuple):
    """One sample of an OpenRLHF request: its problem, the model's text, its group label.

    A NamedTuple, not a dataclass: OpenRLHF runs this file with ``exec_module`` without
    registering it in ``sys.modules``, where a dataclass with string annotations fails."""

    problem_id: str
    completion: str
    group: str


def completion_from_query(query: str, prompt: str | None) -> str:
    """The response part of ``query`` (prompt + response): ``query`` without its leading
    ``prompt``; the whole query when it does not start with the prompt."""
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    return query


def samples_from(
    query: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any] | None
) -> list[RemoteSample]:
    """The samples of an OpenRLHF body. Raises ``ValueError`` naming the offending field and
    index (lengths differ, a label without a problem id)."""
    n = len(query)
    if prompts is not None and len(prompts) != n:
        raise ValueError(f"prompts has {len(prompts)} entries for {n} queries (one per query)")
    if n and labels is None:
        raise ValueError("labels are missing: each label carries the sample's problem id (OpenRLHF --label_key)")
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels has {len(labels)} entries for {n} queries (one per query)")
    out = []
    for i, label in enumerate(labels if labels is not None else ()):  # n labels (checked above), or none when n == 0
        prompt = prompts[i] if prompts is not None else None
        pid = find_problem_id(label, where=f"labels[{i}]")
        out.append(RemoteSample(pid, completion_from_query(query[i], prompt), group_label(pid, prompt)))
    return out


def reply(
    results: Sequence[ScoreResult], rewards: Sequence[float | None], diversity: Sequence[float | None] | None = None
) -> dict[str, Any]:
    """The OpenRLHF answer for finished ``results`` (none ``sandbox_error``) and their rewards."""
    scores = [coverage_of(r) for r in results]
    logs: dict[str, list[float]] = {
        "coverage": scores,
        "passed": [float(r.passed) for r in results],
        "no_coverage": [float(r.status != Status.ok or r.coverage.overall is None) for r in results],
    }
    if diversity is not None:
        logs["diversity"] = [d or 0.0 for d in diversity]
    return {"rewards": list(rewards), "scores": scores, "extra_logs": logs}


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's Python reward-function form (``--remote_rm_url path/to/this/file.py``):
    scores through the client, returns ``rewards``/``scores`` as torch tensors (lists without
    torch) and ``extra_logs``. Raises ``InfrastructureFailure`` / ``ServiceUnavailable``."""
    samples = samples_from(queries, prompts, labels)
    weight = float(kwargs.get("diversity_weight") or os.environ.get("REWARD_SERVICE_DIVERSITY_WEIGHT") or 0.0)
    groups = [s.group for s in samples]
    try:
        results = shared_client(kwargs.get("service_url"), kwargs.get("api_key")).score_batch(
            [score_request(s.problem_id, s.completion) for s in samples],
            groups=groups,
            raise_on_infra=True,
            sample_ids=[f"query {i} (problem {s.problem_id!r})" for i, s in enumerate(samples)],
            infra_retries=INFRA_RETRIES,
        )
    except RewardServiceError as exc:
        exc.add_note(f"while scoring {len(samples)} OpenRLHF samples")
        raise
    rewards, diversity = rewards_of(results, groups, weight)
    out = reply(results, rewards, diversity)
    try:
        import torch
    except ImportError:
        return out
    return {
        "rewards": torch.tensor(out["rewards"], dtype=torch.float32),
        "scores": torch.tensor(out["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in out["extra_logs"].items()},
    }
