"""lcov tracefile (``coverage.info``) of a scored sample, for ``genhtml``, IDE coverage gutters
and coverage services that read lcov.

Made from the result's :class:`~reward_service.models.CoverageDetail` (``report.points``), one
record (``SF:`` ... ``end_of_record``) per DUT source file that has line or branch points:

* ``DA:<line>,<count>``: each Verilator line point (a statement block, reported at its first
  line). When several blocks start on one source line, the line is one ``DA`` whose count is
  the smallest of theirs (hit only when all are: ``verilator_coverage --write-info``'s rule), so
  ``LF``/``LH`` then count source lines and are below the result's ``line`` total/covered;
  otherwise ``LF``/``LH`` equal the result's ``line`` total/covered.
* ``BRDA:<line>,<block>,<branch>,<count>``: each branch point (``if``/``else``, a case item); the
  points of one line are block 0, branches numbered in the points' order. ``BRF``/``BRH``
  equal the result's ``branch`` total/covered.
* No ``FN`` records: Verilator counts no function or task entries (their bodies' blocks are
  ``DA`` lines). Toggle and expression points have no lcov record; the HTML report shows them.

lcov's format: ``man geninfo`` ("TRACEFILE FORMAT").
"""

from __future__ import annotations

from collections import defaultdict

from reward_service.errors import RewardServiceError
from reward_service.models import CoverageDetail, ScoreResult

__all__ = ["tracefile", "LcovUnavailable"]


class LcovUnavailable(RewardServiceError, ValueError):
    """The result holds no points to write (it was scored without ``report.points``)."""


def tracefile(result: ScoreResult, test_name: str = "reward_service") -> str:
    """The lcov tracefile text of ``result`` (its ``detail`` must be set: request
    ``report.points``; raises :class:`LcovUnavailable` otherwise). ``test_name`` is the ``TN:``
    line (letters, digits and ``_``; other characters become ``_``). Files appear in name order."""
    detail: CoverageDetail | None = result.detail
    if detail is None:
        raise LcovUnavailable(
            "the result holds no coverage points: score with report.points "
            '(CLI --lcov/--html set it; API: "report": {"points": true})'
        )
    tn = "".join(c if c.isalnum() or c == "_" else "_" for c in test_name) or "reward_service"
    lines: dict[str, dict[int, int]] = defaultdict(dict)
    branches: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for p in detail.points:
        if p.metric == "line":
            seen = lines[p.file].get(p.line)
            lines[p.file][p.line] = p.count if seen is None else min(seen, p.count)
        elif p.metric == "branch":
            branches[p.file][p.line].append(p.count)
    out: list[str] = []
    for name in sorted(set(lines) | set(branches)):
        out += [f"TN:{tn}", f"SF:{name}"]
        file_branches = branches.get(name, {})
        for line in sorted(file_branches):
            out += [f"BRDA:{line},0,{i},{count}" for i, count in enumerate(file_branches[line])]
        counts = [c for per_line in file_branches.values() for c in per_line]
        out += [f"BRF:{len(counts)}", f"BRH:{sum(c > 0 for c in counts)}"]
        file_lines = lines.get(name, {})
        out += [f"DA:{line},{file_lines[line]}" for line in sorted(file_lines)]
        out += [f"LF:{len(file_lines)}", f"LH:{sum(c > 0 for c in file_lines.values())}", "end_of_record"]
    return "\n".join(out) + ("\n" if out else "")
