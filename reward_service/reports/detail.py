"""The :class:`~reward_service.models.CoverageDetail` of a scored sample: its coverage points
(the engine's :class:`~reward_service.coverage.points.CoveragePoint` s after the DUT instance's
merge) as wire records, and the DUT's HDL sources."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reward_service import hdl
from reward_service.coverage.points import CoveragePoint
from reward_service.models import CoverageDetail, PointRecord


def coverage_detail(
    points: Iterable[CoveragePoint],
    design_files: Mapping[str, str],
    metrics: Iterable[str],
    unreachable: Mapping[tuple[str, int, str, str], str] | None = None,
) -> CoverageDetail:
    """Records of the ``points`` of the requested ``metrics`` (the ones ``coverage`` counts), in
    file/line order, each marked with how it was proved unreachable when its key (file, line,
    metric, detail) is in ``unreachable`` (the proof's kind); and the design's HDL files (data
    files such as ROM images left out)."""
    wanted = set(metrics)
    proved = unreachable or {}
    records = [
        PointRecord(
            metric=p.metric,
            file=p.file,
            line=p.line,
            detail=p.detail,
            count=p.count,
            covered=p.covered,
            unreachable=proved.get((p.file, p.line, p.metric, p.detail)),
        )
        for p in points
        if p.metric in wanted
    ]
    records.sort(key=lambda r: (r.file, r.line, r.metric, r.detail))
    sources = {name: text for name, text in design_files.items() if name.lower().endswith(hdl.HDL_SUFFIXES)}
    return CoverageDetail(points=records, sources=sources)
