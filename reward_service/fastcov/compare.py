"""Point-by-point comparison of two coverage runs (the fast path against Verilator).

Points are matched by their key as :class:`~reward_service.coverage.points.CoveragePoint`
keeps it (metric, file, line, comment, hierarchy); points with the same key (two ``if`` on
one line) are matched as a multiset of covered states. Used by the shadow check, the
per-design self-check and the agreement tests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from reward_service.coverage.points import CoveragePoint

Key = tuple[str, str, int, str, str]


@dataclass
class PointDiff:
    """Points only one side has (by key and covered state), per metric."""

    only_fast: list[tuple[Key, bool]] = field(default_factory=list)
    only_reference: list[tuple[Key, bool]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.only_fast and not self.only_reference

    def per_metric(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for key, _covered in self.only_fast + self.only_reference:
            counts[key[0]] += 1
        return dict(counts)

    def describe(self, limit: int = 5) -> str:
        """A short human-readable account (for logs and result messages)."""
        parts = [f"fast only: {k[1]}:{k[2]} {k[0]} {k[3]!r} @{k[4]} covered={c}" for k, c in self.only_fast[:limit]]
        parts += [
            f"reference only: {k[1]}:{k[2]} {k[0]} {k[3]!r} @{k[4]} covered={c}" for k, c in self.only_reference[:limit]
        ]
        return "; ".join(parts)


def _multiset(points: list[CoveragePoint], metrics: set[str]) -> Counter:
    return Counter(((p.metric, p.file, p.line, p.detail, p.hier), p.covered) for p in points if p.metric in metrics)


def diff_points(fast: list[CoveragePoint], reference: list[CoveragePoint], metrics: set[str]) -> PointDiff:
    """Compare the points of ``metrics`` of two runs, key by key and covered state by state."""
    a, b = _multiset(fast, metrics), _multiset(reference, metrics)
    return PointDiff(only_fast=sorted((a - b).elements()), only_reference=sorted((b - a).elements()))


def ratio_gap(fast: list[CoveragePoint], reference: list[CoveragePoint], metric: str) -> float:
    """|covered ratio difference| of one metric, in percentage points (0 when neither has points)."""

    def ratio(points: list[CoveragePoint]) -> float:
        mine = [p for p in points if p.metric == metric]
        return 100.0 * sum(p.covered for p in mine) / len(mine) if mine else 0.0

    return abs(ratio(fast) - ratio(reference))
