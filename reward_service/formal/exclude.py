"""Coverage with proved-unreachable points left out (issue 14): the second figure next to the
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


def reachable_report(points: list[CoveragePoint], unreachable: Iterable[PointKey],
                     metrics: list[str]) -> CoverageReport:
    """The coverage report of ``points`` over ``metrics`` with the proved points excluded."""
    report, _ = summarise(reachable(points, unreachable), metrics)
    return report
