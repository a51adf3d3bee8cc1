"""Group diversity (DESIGN.md "Group diversity"): for sample i of a group, the mean over the
coverage points it covers of 1 / (number of samples of the group covering that point).

Results carry their *uncovered* points, not the covered ones; for samples of one group (one
design, one coverage spec) every sample has the same points, so covered = all − uncovered and
a point uncovered by nobody is covered by all n samples. That needs complete uncovered lists:
when a result lists fewer uncovered points than its counts imply (the engine keeps at most
200) or the samples disagree on the number of points, the group's diversity is not computed
and ``notes`` says why.
"""

from __future__ import annotations

import collections

from reward_service.api.schemas import GroupRewards
from reward_service.models import ScoreResult, Status


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
    """Diversity of each sample of one group (0 for samples without coverage), or None and
    the reason it cannot be computed."""
    measured = [i for i, r in enumerate(results) if r.status == Status.ok and r.coverage.overall is not None]
    out = [0.0] * len(results)
    if not measured:
        return out, None
    totals = {_points(results[i])[0] for i in measured}
    if len(totals) != 1:
        return None, "the samples of the group have different numbers of coverage points (different designs or metrics?)"
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
            return None, "a result lists only part of its uncovered points (too many to list), so the points it covers are unknown"
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
    """Diversity per sample and ``reward + weight * diversity`` (a finished batch)."""
    members: dict[str, list[int]] = collections.defaultdict(list)
    for i, g in enumerate(groups):
        if g is not None:
            members[g].append(i)
    diversity: list[float | None] = [None] * len(results)
    notes: dict[str, str] = {}
    for g, idx in members.items():
        values, why = group_diversity([results[i] for i in idx])  # type: ignore[misc]
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
