"""Coverage points and their summary into per-metric ratios, ``overall`` and uncovered points."""

from __future__ import annotations

from dataclasses import dataclass, field

from reward_service.models import CoverageReport, MetricCoverage, UncoveredPoint


@dataclass(frozen=True)
class CoveragePoint:
    """One coverage point: a ``coverage.dat`` record, or one bin of a functional coverpoint.

    ``count`` is the hit count; the point is covered when ``count >= at_least`` (1 for code
    coverage, as in ``../shared/cases/README.md``; the coverpoint's ``at_least`` for bins).
    ``identity`` is the point's key without its hierarchy (for code points read per instance:
    Verilator's record key minus ``h``, or the fast path's equivalent); points of several
    instances with one identity are one point once merged
    (:func:`~reward_service.coverage.instances.merge_instances`). It takes no part in equality.
    """

    metric: str
    file: str
    line: int
    detail: str
    hier: str
    count: int
    at_least: int = 1
    identity: tuple = field(default=(), compare=False, repr=False)

    @property
    def covered(self) -> bool:
        return self.count >= self.at_least


#: Which uncovered points a capped list keeps first (lower first); others after these.
UNCOVERED_PRIORITY = {"line": 0, "branch": 1, "expr": 2, "fsm_state": 3, "fsm_arc": 4, "toggle": 5}


def summarise(
    points: list[CoveragePoint],
    metrics: list[str],
    unavailable: dict[str, str] | None = None,
    weights: dict[str, float] | None = None,
    max_uncovered: int = 200,
) -> tuple[CoverageReport, list[UncoveredPoint]]:
    """Summarise points into a :class:`CoverageReport` for the requested ``metrics``.

    ``overall`` is the (by default unweighted) mean of the ratios of the requested metrics that
    have points, as the commercial "Overall Average" is built; metrics in ``unavailable``
    (metric -> reason) are reported with ``available=False`` and left out of ``overall``.
    Returns the report and up to ``max_uncovered`` uncovered points, in file/line order. When
    there are more, the points of code never run or decided (line, branch, expr) are kept before
    toggle bits and other metrics (:data:`UNCOVERED_PRIORITY`): a capped list of a design with
    wide ports would otherwise hold only toggle bits of the port declarations.
    """
    unavailable = unavailable or {}
    report = CoverageReport()
    weighted: list[tuple[float, float]] = []
    for metric in metrics:
        if metric in unavailable:
            report.metrics[metric] = MetricCoverage(available=False, reason=unavailable[metric])
            continue
        mine = [p for p in points if p.metric == metric]
        covered = sum(p.covered for p in mine)
        ratio = covered / len(mine) if mine else None
        report.metrics[metric] = MetricCoverage(covered=covered, total=len(mine), ratio=ratio)
        if ratio is not None:
            weighted.append((ratio, (weights or {}).get(metric, 1.0)))
    total_weight = sum(w for _, w in weighted)
    if weighted and total_weight > 0:
        report.overall = sum(r * w for r, w in weighted) / total_weight
    missed = [p for p in points if p.metric in report.metrics and not p.covered]
    if len(missed) > max_uncovered:
        missed = sorted(
            missed, key=lambda p: (UNCOVERED_PRIORITY.get(p.metric, len(UNCOVERED_PRIORITY)), p.file, p.line, p.detail)
        )[:max_uncovered]
    missed.sort(key=lambda p: (p.file, p.line, p.metric, p.detail))
    return report, [
        UncoveredPoint(file=p.file, line=p.line, metric=p.metric, detail=p.detail, hier=p.hier) for p in missed
    ]
