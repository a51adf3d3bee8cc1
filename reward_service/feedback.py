"""Agentic feedback: what a testbench left uncovered, as text for the model's next turn.

:func:`feedback_text` renders a :class:`~reward_service.models.ScoreResult` as a short report a
trainer can put in the next prompt: the coverage per metric, then the uncovered points grouped
per file and line, most useful first —

1. code never executed or branches never taken (``line``, ``branch``): the stimulus never drove
   the DUT there;
2. conditions never seen (``expr``), ``cover`` statements and FSM states/arcs never hit;
3. functional bins never hit;
4. signals that never toggled, one line per signal with the bits compressed into ranges
   (``cpu_addr bits 5-31 never toggled``) — usually the longest and least specific list.

:func:`annotated_source` shows the DUT source with the uncovered lines marked (``>>``) and what
is missing there, with a few lines of context.

Both are bounded (``max_chars``/``max_lines``) and say what they left out. They only read what
the result carries: ``uncovered`` (file, 1-based line, metric, Verilator's detail) — at most the
first 200 points in file/line order (``coverage.points.summarise``), so a design with many
uncovered toggle points early in a file may have later points cut; the text then says how many
points the result did not list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reward_service.models import ScoreResult, Status, UncoveredPoint

__all__ = ["feedback_text", "annotated_source", "compress_bits", "uncovered_by_kind"]

#: Rank of a metric in the feedback (lower first).
_RANK = {"line": 0, "branch": 0, "expr": 1, "user": 1, "fsm_state": 1, "fsm_arc": 1, "functional": 2, "toggle": 3}
_TOGGLE = re.compile(r"^(?P<sig>.+?)(?:\[(?P<bit>\d+)\])?:(?P<dir>0->1|1->0)$")
_SOURCE_CHARS = 70


def compress_bits(bits: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    ordered = sorted(set(bits))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass
class _Line:
    """The uncovered points of one (file, line)."""

    file: str
    line: int
    code: dict[str, list[str]] = field(default_factory=dict)  # metric -> details (non-toggle)
    toggles: dict[str, dict[str, set[int | None]]] = field(default_factory=dict)  # signal -> dir -> bits
    other_toggles: list[str] = field(default_factory=list)  # details not in Verilator's usual form

    @property
    def rank(self) -> int:
        ranks = [_RANK.get(m, 1) for m in self.code]
        return min(ranks) if ranks else _RANK["toggle"]

    def add(self, point: UncoveredPoint) -> None:
        if point.metric == "toggle":
            m = _TOGGLE.match(point.detail)
            if m:
                bit = int(m.group("bit")) if m.group("bit") is not None else None
                self.toggles.setdefault(m.group("sig"), {}).setdefault(m.group("dir"), set()).add(bit)
            else:
                self.other_toggles.append(point.detail)
            return
        details = self.code.setdefault(point.metric, [])
        if point.detail not in details:
            details.append(point.detail)

    def describe(self) -> list[str]:
        """Phrases for what is missing here, most useful first."""
        out = []
        if "line" in self.code:
            out.append(f"never executed ({', '.join(self.code['line'])})")
        if "branch" in self.code:
            out.append(f"branch never taken ({', '.join(self.code['branch'])})")
        for metric, label in (
            ("expr", "condition never seen"),
            ("user", "cover never hit"),
            ("fsm_state", "FSM state never reached"),
            ("fsm_arc", "FSM transition never taken"),
            ("functional", "bin never hit"),
        ):
            if metric in self.code:
                out.append(f"{label}: {'; '.join(self.code[metric])}")
        for metric in sorted(set(self.code) - {"line", "branch", "expr", "user", "fsm_state", "fsm_arc", "functional"}):
            out.append(f"{metric}: {'; '.join(self.code[metric])}")
        out += [_toggle_phrase(sig, dirs) for sig, dirs in self.toggles.items()]
        if self.other_toggles:
            out.append(f"never toggled: {', '.join(self.other_toggles)}")
        return out


def _toggle_phrase(signal: str, dirs: Mapping[str, set[int | None]]) -> str:
    rise, fall = dirs.get("0->1", set()), dirs.get("1->0", set())

    def bits(which: set[int | None]) -> str:
        numbered = [b for b in which if b is not None]
        if not numbered:
            return ""
        return f" bit{'s' if len(numbered) > 1 else ''} {compress_bits(numbered)}"

    parts = []
    both = rise & fall
    if both:
        parts.append(f"`{signal}`{bits(both)} never toggled")
    if rise - both:
        parts.append(f"`{signal}`{bits(rise - both)} never rose (0->1)")
    if fall - both:
        parts.append(f"`{signal}`{bits(fall - both)} never fell (1->0)")
    return "; ".join(parts)


def _group(points: Iterable[UncoveredPoint]) -> list[_Line]:
    lines: dict[tuple[str, int], _Line] = {}
    for p in points:
        lines.setdefault((p.file, p.line), _Line(p.file, p.line)).add(p)
    return sorted(lines.values(), key=lambda ln: (ln.rank, ln.file, ln.line))


def _source_line(sources: Mapping[str, str] | None, file: str, line: int) -> str | None:
    if not sources or file not in sources or line < 1:
        return None
    text = sources[file].splitlines()
    if line > len(text):
        return None
    code = " ".join(text[line - 1].split("//")[0].split()) or " ".join(text[line - 1].split())
    return code if len(code) <= _SOURCE_CHARS else code[: _SOURCE_CHARS - 3] + "..."


def _pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{100 * ratio:.1f}%"


#: Races a feedback names before it says how many more there are.
FEEDBACK_RACES = 3


def _races_text(result: ScoreResult) -> str:
    """The testbench-DUT races of ``result`` as lint lines (first :data:`FEEDBACK_RACES`), each
    on its own line after the header; empty without races."""
    if not result.races:
        return ""
    lines = [race.lint() for race in result.races[:FEEDBACK_RACES]]
    more = len(result.races) - FEEDBACK_RACES
    if more > 0:
        lines.append(f"(and {more} more races)")
    return "\n" + "\n".join(lines)


def feedback_text(
    result: ScoreResult,
    *,
    sources: Mapping[str, str] | None = None,
    max_chars: int = 1500,
    target_percent: float | None = None,
) -> str:
    """Concise next-turn feedback for ``result`` (at most ``max_chars`` characters).

    ``sources`` (DUT file name -> text, e.g. ``problem.design.files``) adds the source text of
    each uncovered line; ``target_percent`` (e.g. ``problem.target_percent``) is named in the
    header. A result that yielded no coverage (compile error, timeout, no code, ...) gets its
    status and message instead, since there are no uncovered points to list.
    """
    if result.status != Status.ok:
        reason = result.message.strip() or result.status.value
        text = f"The testbench was not scored on coverage ({result.status.value}): {reason}"
        if result.status == Status.sandbox_error:
            text = f"The scoring service failed (infrastructure error, not the testbench's fault): {reason}"
        return text[:max_chars]
    cov = result.coverage
    metrics = ", ".join(
        f"{name} {m.covered}/{m.total}" if m.available else f"{name} unavailable" for name, m in cov.metrics.items()
    )
    scope = f" (instance `{cov.scope}`)" if cov.scope else ""
    proved = sum(m.unreachable for m in cov.metrics.values() if m.available)
    overall = f"{_pct(cov.overall)} overall"
    if proved and cov.overall_reachable is not None:  # the agent must not chase points no stimulus reaches
        overall += f" ({_pct(cov.overall_reachable)} of the reachable points; {proved} proved unreachable)"
    header = f"Coverage of the DUT{scope}: {overall} — {metrics}."
    if target_percent is not None:
        judged = " on the reachable points" if any(t.figure == "reachable" for t in result.targets) else ""
        header += f" Target {target_percent:g}%{judged}: {'met' if result.passed else 'not met'}."
    races = _races_text(result)
    missing = sum(m.total - m.covered for m in cov.metrics.values() if m.available)
    if not result.uncovered:
        if missing == 0:
            return (header + " Every point is covered." + races)[:max_chars]
        return (header + (" Every reachable point is covered." if missing == proved else "") + races)[:max_chars]
    out = [header + races, "Uncovered, most useful first:"]
    used = sum(len(s) + 1 for s in out)
    groups = _group(result.uncovered)
    shown = 0
    for group in groups:
        code = _source_line(sources, group.file, group.line)
        where = f"{group.file}:{group.line}" if group.line else group.file
        item = f"- {where}" + (f" `{code}`" if code else "") + ": " + "; ".join(group.describe())
        if used + len(item) + 1 > max_chars - 60:  # keep room for the closing note
            break
        out.append(item)
        used += len(item) + 1
        shown += 1
    notes = []
    if shown < len(groups):
        notes.append(f"{len(groups) - shown} more uncovered lines not shown")
    if missing > len(result.uncovered):
        notes.append(f"the result lists {len(result.uncovered)} of {missing} uncovered points")
    if notes:
        out.append(f"({'; '.join(notes)}.)")
    return "\n".join(out)[:max_chars]


#: The kinds of the EDA-result turn (LLM4Cov): metric -> the list its points go in.
EDA_KINDS = {
    "line": "blocks",
    "branch": "branches",
    "expr": "expressions",
    "fsm_state": "fsm_states",
    "fsm_arc": "fsm_arcs",
    "user": "cover_points",
    "functional": "functional_bins",
    "toggle": "toggles",
}


def uncovered_by_kind(
    uncovered: Sequence[UncoveredPoint], *, sources: Mapping[str, str] | None = None, max_items: int = 50
) -> dict[str, list[dict[str, object]]]:
    """The uncovered points grouped by kind, as LLM4Cov's "EDA result" lists them: ``blocks``
    (lines never executed), ``branches``, ``expressions``, ``fsm_states``, ``fsm_arcs``,
    ``cover_points``, ``functional_bins`` — each item ``{"file", "line", "code", "detail"}``
    (``code``: the source line's text when ``sources`` holds the file, else None) — and
    ``toggles``, one item per signal and direction with its bits compressed into ranges:
    ``{"file", "line", "signal", "bits": "0-2,5" or None for a 1-bit signal, "never":
    "toggled" | "rose" | "fell"}``. Kinds without points are left out; each list holds at
    most ``max_items`` items, in :func:`feedback_text`'s order (most useful first)."""
    out: dict[str, list[dict[str, object]]] = {}

    def add(kind: str, item: dict[str, object]) -> None:
        items = out.setdefault(kind, [])
        if len(items) < max_items:
            items.append(item)

    for group in _group(uncovered):
        code = _source_line(sources, group.file, group.line)
        for metric, details in group.code.items():
            for detail in details:
                add(
                    EDA_KINDS.get(metric, metric),
                    {"file": group.file, "line": group.line, "code": code, "detail": detail},
                )
        for signal, dirs in group.toggles.items():
            rise, fall = dirs.get("0->1", set()), dirs.get("1->0", set())
            for never, bits in (("toggled", rise & fall), ("rose", rise - fall), ("fell", fall - rise)):
                if bits:
                    numbered = [b for b in bits if b is not None]
                    add(
                        "toggles",
                        {
                            "file": group.file,
                            "line": group.line,
                            "signal": signal,
                            "bits": compress_bits(numbered) if numbered else None,
                            "never": never,
                        },
                    )
        for detail in group.other_toggles:
            add("toggles", {"file": group.file, "line": group.line, "signal": detail, "bits": None, "never": "toggled"})
    return out


def annotated_source(
    sources: Mapping[str, str], uncovered: Sequence[UncoveredPoint], *, context: int = 1, max_lines: int = 120
) -> str:
    """The DUT source with uncovered lines marked: ``>>`` before the line number and what is
    missing after the code (``// uncovered: ...``), ``context`` lines around each, ``...`` for
    skipped stretches, at most ``max_lines`` lines in all. Files are taken in ``sources``
    order; points of files not in ``sources`` (e.g. functional coverage exports) are left out.
    """
    by_file: dict[str, dict[int, _Line]] = {}
    for group in _group(uncovered):
        by_file.setdefault(group.file, {})[group.line] = group
    out: list[str] = []
    truncated = False
    for name, text in sources.items():
        marks = by_file.get(name)
        if not marks:
            continue
        lines = text.splitlines()
        width = len(str(len(lines)))
        keep = sorted(
            {
                n
                for m in marks
                if 1 <= m <= len(lines)
                for n in range(max(1, m - context), min(len(lines), m + context) + 1)
            }
        )
        if not keep:
            continue
        out.append(f"== {name} ==")
        previous = 0
        for n in keep:
            if len(out) >= max_lines:
                truncated = True
                break
            if previous and n > previous + 1:
                out.append("   " + " " * width + " ...")
            code = lines[n - 1].rstrip()
            if n in marks:
                out.append(f">> {n:>{width}} | {code}  // uncovered: {' | '.join(marks[n].describe())}")
            else:
                out.append(f"   {n:>{width}} | {code}")
            previous = n
        if truncated:
            break
    if truncated:
        out.append("... (annotated view truncated)")
    return "\n".join(out)
