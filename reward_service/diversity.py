"""Group diversity (DESIGN.md "Group diversity"): for sample i of a group, the mean over the
coverage points it covers of 1 / (number of samples of the group covering that point).

Pure functions of :class:`~reward_service.models.ScoreResult` (pydantic only), so the batch API
and the trainer adapters on a client-only install compute the term with the same code.

Results carry their *uncovered* points, not the covered ones; for samples of one group (one
design, one coverage spec) every sample has the same points, so covered = all − uncovered and
a point uncovered by nobody is covered by all n samples. That needs complete uncovered lists:
when a result lists fewer uncovered points than its counts imply (the engine keeps at most
200) or the samples disagree on the number of points, the group's diversity is not computed
and ``notes`` says why.
"""

from __future__ import annotations

import collections

from pydantic import BaseModel, Field

from reward_service.models import ScoreResult, Status

__all__ = ["GroupRewards", "group_diversity", "group_rewards"]


class GroupRewards(BaseModel):
    """Group diversity (DESIGN.md): for sample i of a group, the mean over the coverage points it
    covers of 1 / (samples of its group covering that point). ``diversity[i]`` is None for
    ungrouped samples, samples without coverage (they get 0 when grouped) or when it cannot be
    computed (see ``notes``); ``rewards[i]`` = reward + weight · diversity."""

    weight: float
    diversity: list[float | None]
    rewards: list[float | None]
    notes: dict[str, str] = Field(default_factory=dict, description="group -> why diversity is missing")


def _points(result: ScoreResult) -> tuple[int, int, int]:
    """(total, covered, proved unreachable) points over the measured metrics."""
    total = covered = unreachable = 0
    for m in result.coverage.metrics.values():
        if m.available:
            total += m.total
            covered += m.covered
            unreachable += m.unreachable
    return total, covered, unreachable


def _uncovered_keys(result: ScoreResult) -> set[tuple]:
    seen: collections.Counter = collections.Counter()
    keys = set()
    for p in result.uncovered:
        key = (p.metric, p.file, p.line, p.detail, p.hier)
        keys.add((key, seen[key]))
        seen[key] += 1
    return keys


def group_diversity(results: list[ScoreResult]) -> tuple[list[float] | None, str | None]:
    """Diversity of each sample of one group, in ``[0, 1]``.

    ``results``: the samples of one group (same design and coverage spec). Returns
    ``(values, None)`` with one value per result (0 for samples that are not ``ok`` or have no
    coverage; all zeros when none has), or ``(None, reason)`` when the term cannot be computed
    (different point counts, truncated ``uncovered`` lists, disagreeing unreachable counts)."""
    measured = [i for i, r in enumerate(results) if r.status == Status.ok and r.coverage.overall is not None]
    out = [0.0] * len(results)
    if not measured:
        return out, None
    totals = {_points(results[i])[0] for i in measured}
    if len(totals) != 1:
        return (
            None,
            "the samples of the group have different numbers of coverage points (different designs or metrics?)",
        )
    total = totals.pop()
    uncovered: dict[int, set[tuple]] = {}
    unlisted: set[int] = set()  # proved-unreachable points a result leaves out of its list
    for i in measured:
        t, c, u = _points(results[i])
        keys = _uncovered_keys(results[i])
        # coverage.exclude_unreachable=True leaves the proved points out of `uncovered`; no
        # sample can cover them, so they are points nobody covers, not points all cover
        if len(keys) == t - c:
            unlisted.add(0)
        elif len(keys) == t - c - u:
            unlisted.add(u)
        else:
            return (
                None,
                "a result lists only part of its uncovered points (too many to list), so the points it covers are unknown",
            )
        uncovered[i] = keys
    if len(unlisted) != 1:
        return None, "the samples of the group disagree on which points were proved unreachable"
    total -= unlisted.pop()
    n = len(measured)
    misses: collections.Counter = collections.Counter()
    for keys in uncovered.values():
        misses.update(keys)
    common = total - len(misses)  # covered by all n samples
    for i in measured:
        covered = total - len(uncovered[i])
        if covered <= 0:
            continue
        acc = common / n + sum(1.0 / (n - u) for key, u in misses.items() if key not in uncovered[i])
        out[i] = acc / covered
    return out, None


def group_rewards(results: list[ScoreResult | None], groups: list[str | None], weight: float) -> GroupRewards:
    """Diversity per sample and ``reward + weight * diversity`` (a finished batch).

    ``results[i]`` (None: no result) belongs to group ``groups[i]`` (None: ungrouped); both lists
    have one entry per sample, in order. ``rewards[i]`` is None where the result or its reward
    is (``sandbox_error``); ungrouped samples and groups whose term cannot be computed add 0
    (``notes`` names those groups and says why)."""
    members: dict[str, list[int]] = collections.defaultdict(list)
    for i, g in enumerate(groups):
        if g is not None:
            members[g].append(i)
    diversity: list[float | None] = [None] * len(results)
    notes: dict[str, str] = {}
    for g, idx in members.items():
        group = [r for r in (results[i] for i in idx) if r is not None]
        if len(group) != len(idx):
            notes[g] = "a sample of the group has no result"
            continue
        values, why = group_diversity(group)
        if values is None:
            notes[g] = why or "not computable"
            continue
        for i, v in zip(idx, values):
            diversity[i] = v
    rewards: list[float | None] = []
    for r, d in zip(results, diversity):
        base = r.reward if r is not None else None
        rewards.append(None if base is None else base + weight * (d or 0.0))
    return GroupRewards(weight=weight, diversity=diversity, rewards=rewards, notes=notes)
