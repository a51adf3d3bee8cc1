"""HTML coverage report of a scored sample: a summary table, the uncovered points linked to
their source lines, and the DUT source annotated per line with each metric's points.

Made from the result's :class:`~reward_service.models.CoverageDetail` (``report.points``) with
the Jinja2 template ``templates/score.html.j2`` (autoescaped: DUT sources and point details are
user text). One self-contained page (inline CSS, no script, no network): it opens from disk,
from ``GET /v1/jobs/{id}/report.html`` and in a headless browser alike.

Per source line, each metric's cell shows covered/total points on that line; a line with an
uncovered point is marked, and below it the uncovered points are listed: branch arms
(``if``/``else``, case items), toggle bits grouped per signal (``data: [3] 0->1, [5] 1->0``) and
expression terms.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from reward_service.errors import RewardServiceError
from reward_service.models import PointRecord, ScoreResult, Status
from reward_service.reports.verdict import KIND_TEXT, verdict_text

__all__ = ["render", "write", "HtmlUnavailable"]

#: Metric columns in source order of the report (others follow in name order).
_COLUMNS = ("line", "branch", "expr", "toggle", "user", "fsm_state", "fsm_arc")
_TOGGLE = re.compile(r"^(?P<signal>[^\[:]+)(?P<bit>\[[^\]]*\])?(?::(?P<edge>.*))?$")

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reward_service.reports", "templates"),
    autoescape=jinja2.select_autoescape(("html", "j2")),
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


def template(name: str) -> jinja2.Template:
    """A template of ``reward_service/reports/templates`` (autoescaped, strict undefined)."""
    return _ENV.get_template(name)


class HtmlUnavailable(RewardServiceError, ValueError):
    """The result holds no points to annotate (scored without ``report.points``)."""


@dataclass
class _Cell:
    covered: int = 0
    total: int = 0
    proved: int = 0  # uncovered points proved unreachable (never a miss of the stimulus)

    @property
    def state(self) -> str:
        if self.covered + self.proved == self.total:
            return "dead" if self.proved else "hit"
        return "part" if self.covered else "miss"


@dataclass
class _Line:
    number: int
    text: str
    anchor: str
    cells: dict[str, _Cell] = field(default_factory=dict)
    missed: list[str] = field(default_factory=list)  # uncovered points, one line of text each
    proved: list[str] = field(default_factory=list)  # points proved unreachable, with the proof's kind

    @property
    def state(self) -> str:
        if not self.cells:
            return ""
        return "miss" if self.missed else ("dead" if self.proved else "hit")


def _anchor(file_index: int, line: int) -> str:
    return f"f{file_index}-L{line}"


def _missed_text(metric: str, points: list) -> list[str]:
    """The uncovered points (PointRecord or UncoveredPoint) of one metric on one line, as
    readable lines (toggle bits grouped per signal)."""
    if metric != "toggle":
        return [f"{metric}: {p.detail}" for p in points]
    per_signal: dict[str, list[str]] = defaultdict(list)
    for p in sorted(points, key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.detail)]):
        m = _TOGGLE.match(p.detail)
        if m is None:
            per_signal[p.detail].append("")
            continue
        per_signal[m["signal"]].append(" ".join(filter(None, [m["bit"], m["edge"]])))
    return [f"toggle {sig}: {', '.join(b for b in bits if b) or 'not toggled'}" for sig, bits in per_signal.items()]


def _proved_text(points: list[PointRecord]) -> list[str]:
    """The points of one line proved unreachable, per metric and proof kind:
    ``branch if: invariant (no state the design can reach gets there)``."""
    groups: dict[tuple[str, str], list[PointRecord]] = defaultdict(list)
    for p in points:
        groups[(p.metric, p.unreachable or "proved")].append(p)
    out = []
    for (metric, kind), group in groups.items():
        what = "; ".join(_missed_text(metric, group))
        out.append(f"{what} — {kind} ({KIND_TEXT.get(kind, 'proved unreachable')})")
    return out


def _context(result: ScoreResult, title: str, target_name: str = "target") -> dict:
    detail = result.detail
    if detail is None:
        raise HtmlUnavailable(
            "the result holds no coverage points: score with report.points "
            '(CLI --html sets it; API: "report": {"points": true})'
        )
    by_file: dict[str, list[PointRecord]] = defaultdict(list)
    for p in detail.points:
        by_file[p.file].append(p)
    metrics_seen = {p.metric for p in detail.points if p.file in detail.sources}
    columns = [m for m in _COLUMNS if m in metrics_seen] + sorted(metrics_seen - set(_COLUMNS))
    files, index = [], {}
    for i, name in enumerate(sorted(detail.sources)):
        index[name] = i
        lines = [_Line(n, text, _anchor(i, n)) for n, text in enumerate(detail.sources[name].splitlines(), 1)]
        grouped: dict[tuple[int, str], list[PointRecord]] = defaultdict(list)
        for p in by_file.get(name, []):
            grouped[(p.line, p.metric)].append(p)
        orphans = []  # points on a line past the file's end (not expected; shown, never dropped)
        for (number, metric), points in sorted(grouped.items()):
            if not 1 <= number <= len(lines):
                orphans += points
                continue
            row = lines[number - 1]
            dead = [p for p in points if not p.covered and p.unreachable]
            row.cells[metric] = _Cell(sum(p.covered for p in points), len(points), len(dead))
            row.missed += _missed_text(metric, [p for p in points if not p.covered and not p.unreachable])
            row.proved += _proved_text(dead)
        totals = {
            m: _Cell(
                sum(p.covered for p in by_file.get(name, []) if p.metric == m),
                sum(1 for p in by_file.get(name, []) if p.metric == m),
            )
            for m in columns
        }
        files.append({"name": name, "index": i, "lines": lines, "totals": totals, "orphans": orphans})
    # one entry per file, line and metric (a 32-bit port's 64 toggle bits are one entry); a
    # point proved unreachable is listed apart (the result lists it as uncovered when the
    # targets were judged on the raw figure)
    unreachable = {(p.file, p.line, p.metric, p.detail): p for p in detail.points if p.unreachable and not p.covered}
    grouped_uncovered: dict[tuple[str, int, str], list] = {}
    for u in result.uncovered:
        if (u.file, u.line, u.metric, u.detail) not in unreachable:
            grouped_uncovered.setdefault((u.file, u.line, u.metric), []).append(u)
    grouped_dead: dict[tuple[str, int], list[PointRecord]] = {}
    for p in unreachable.values():
        grouped_dead.setdefault((p.file, p.line), []).append(p)
    proved = [
        {
            "file": f,
            "line": n,
            "text": "; ".join(_proved_text(points)),
            "href": f"#{_anchor(index[f], n)}" if f in index and n > 0 else None,
        }
        for (f, n), points in grouped_dead.items()
    ]
    uncovered = [
        {
            "file": f,
            "line": n,
            "text": "; ".join(_missed_text(metric, points)),
            "href": f"#{_anchor(index[f], n)}" if f in index and n > 0 else None,
        }
        for (f, n, metric), points in grouped_uncovered.items()
    ]
    others = [p for p in detail.points if p.file not in detail.sources]  # functional bins
    summary = []
    for name, m in result.coverage.metrics.items():
        summary.append(
            {
                "metric": name,
                "available": m.available,
                "reason": m.reason,
                "covered": m.covered,
                "total": m.total,
                "percent": None if m.ratio is None else 100 * m.ratio,
                "unreachable": m.unreachable,
            }
        )
    listed = sum(len(v) for v in grouped_uncovered.values())
    reachable = result.coverage.overall_reachable
    return {
        "title": title,
        "result": result,
        "summary": summary,
        "columns": columns,
        "files": files,
        "uncovered": uncovered,
        "uncovered_points": listed,
        "uncovered_missing": sum(1 for p in detail.points if not p.covered and not p.unreachable) - listed,
        "proved": proved,
        "proved_points": len(unreachable),
        "proved_column": any(m.unreachable for m in result.coverage.metrics.values()),
        "kinds": {k: KIND_TEXT[k] for k in KIND_TEXT if any(p.unreachable == k for p in unreachable.values())},
        # a sample that is not ok has no judged targets: it failed, whatever the request asked
        "verdict": verdict_text(result, bool(result.targets) or result.status != Status.ok, target_name),
        "others": others,
        "overall": None if result.coverage.overall is None else 100 * result.coverage.overall,
        "overall_reachable": None if reachable is None else 100 * reachable,
    }


def render(result: ScoreResult, title: str = "Coverage report", target_name: str = "target") -> str:
    """The report page of ``result`` as HTML text (its ``detail`` must be set: request
    ``report.points``; raises :class:`HtmlUnavailable` otherwise). ``target_name`` names the
    thresholds in the verdict line (``TARGET`` for a CVDP problem)."""
    return template("score.html.j2").render(**_context(result, title, target_name))


def write(result: ScoreResult, directory: Path, title: str = "Coverage report", target_name: str = "target") -> Path:
    """Write the report page as ``directory/index.html`` (directory created); returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "index.html"
    path.write_text(render(result, title, target_name), encoding="utf-8")
    return path
