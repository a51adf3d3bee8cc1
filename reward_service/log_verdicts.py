"""The testbench's own verdict lines in a simulation log: what it printed about pass/fail
(``Mismatches: 3``, ``ERROR: ...``, ``TEST PASSED``, ``Your Design Passed``, ``$error``
messages as Icarus and Verilator print them, cocotb's PASS/FAIL summary).

The coverage reward does not read them (a failing testbench still scores its coverage,
docs/coverage.md), but a user looking at a result wants to see them next to the numbers: the CLI's
human output lists them (:func:`verdict_lines`).
"""

from __future__ import annotations

import re

__all__ = ["verdict_lines"]

#: A line that states a verdict. Upper-case PASS/FAIL words count as they are (models and
#: engineers print ``PASS``/``FAIL``/``TEST PASSED``); other words only in verdict phrases, so a
#: ``passes=3`` or ``error_count`` counter is not one.
_VERDICT = re.compile(
    r"%Error|%Fatal"  # Verilator: $error, $fatal, assertions
    r"|^\s*(?:\[\d+\]\s*)?(?:ERROR|FATAL)\b"  # Icarus: $error/$fatal; tb's own ERROR lines
    r"|\b(?:PASS(?:ED)?|FAIL(?:ED|URE|S)?)\b"
    r"|(?i:\bmismatch(?:es)?\b|\berror:|\berrors?\s*[:=]\s*\d|\b\d+\s+(?:errors?|failures?)\b"
    r"|\b(?:tests?|design|simulation|checks?|testbench)\s+(?:has\s+|have\s+)?(?:passed|failed)\b"
    r"|\bassertion\s+failed\b|\bassert(?:ion)?\s+error\b)",
    re.M,
)
#: Simulator notes that look like verdicts but only say how the run ended.
_NOT_VERDICT = re.compile(r"Verilog \$stop|Verilog \$finish|^\s*Aborting\.\.\.")
_NUMBER = re.compile(r"\d+")
MAX_LINE = 300


def verdict_lines(log: str, limit: int = 10) -> tuple[list[str], int]:
    """The testbench's verdict lines in ``log``, in order of first appearance.

    Lines that differ only in their numbers (``ERROR at 100 ns``, ``ERROR at 200 ns``) are one
    entry, shown as the first of them with `` (×N)`` appended when repeated. Each line is
    stripped and cut to :data:`MAX_LINE` characters.

    :param log: a simulation log (the result's bounded ``log``).
    :param limit: at most this many entries are returned.
    :returns: ``(lines, more)``: up to ``limit`` entries and how many further distinct entries
        were left out.
    """
    firsts: dict[str, str] = {}
    counts: dict[str, int] = {}
    for raw in log.splitlines():
        if not _VERDICT.search(raw) or _NOT_VERDICT.search(raw):
            continue
        line = raw.strip()[:MAX_LINE]
        key = _NUMBER.sub("#", line)
        firsts.setdefault(key, line)
        counts[key] = counts.get(key, 0) + 1
    entries = [firsts[k] + (f" (×{counts[k]})" if counts[k] > 1 else "") for k in firsts]
    return entries[:limit], max(0, len(entries) - limit)
