"""Coverage with proved-unreachable points left out: the second figure next to the
raw one. Only keys the prover proved (:class:`~reward_service.formal.prover.ProofResult`) are
removed; an undecided point stays in the denominator."""

from __future__ import annotations

from collections.abc import Iterable

from reward_service.coverage.points import CoveragePoint, summarise
from reward_service.formal.model import PointKey
from reward_service.models import CoverageReport


def key_of(point: CoveragePoint) -> PointKey:
    """A coverage point's key as the prover reports it: (file, line, metric, detail)."""
    return (point.file, point.line, point.metric, point.detail)


def reachable(points: Iterable[CoveragePoint], unreachable: Iterable[PointKey]) -> list[CoveragePoint]:
    """The points whose key is not proved unreachable (code points only; functional bins stay)."""
    dead = set(map(tuple, unreachable))
    return [p for p in points if key_of(p) not in dead]


def reachable_report(
    points: list[CoveragePoint], unreachable: Iterable[PointKey], metrics: list[str]
) -> CoverageReport:
    """The coverage report of ``points`` over ``metrics`` with the proved points excluded."""
    report, _ = summarise(reachable(points, unreachable), metrics)
    return report


def annotate(
    report: CoverageReport,
    points: list[CoveragePoint],
    unreachable: Iterable[PointKey],
    metrics: list[str],
    unavailable: dict[str, str],
    weights: dict[str, float] | None,
    max_uncovered: int = 200,
    witnessed: set[PointKey] | None = None,
) -> tuple[CoverageReport, list]:
    """Fill in ``report``'s per-metric ``unreachable`` and ``undecided`` counts and
    ``overall_reachable``; returns the report of the reachable points (what a target is judged
    on when proved points are excluded) and their uncovered points (the proved ones never
    listed). ``witnessed``: keys the design's closure testbench covered (shown reachable);
    a point counts as decided when proved, covered by this sample, or witnessed."""
    dead = set(map(tuple, unreachable))
    alive = [p for p in points if key_of(p) not in dead]
    reach, uncovered = summarise(alive, metrics, unavailable, weights, max_uncovered)
    shown = witnessed or set()
    for metric, entry in report.metrics.items():
        entry.unreachable = sum(1 for p in points if p.metric == metric and key_of(p) in dead)
        entry.undecided = sum(1 for p in alive if p.metric == metric and not p.covered and key_of(p) not in shown)
    report.overall_reachable = reach.overall
    return reach, uncovered
