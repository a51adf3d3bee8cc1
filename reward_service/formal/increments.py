"""``++``/``--`` in a ``for`` step, lowered for yosys 0.23 (issue 23).

Debian bookworm's yosys 0.23 does not read ``for (...; ...; ++i)`` (MSHR_0003: a syntax error,
so neither proof nor witness). The step is rewritten ``i = i + 1`` (``i = i - 1``) on the same
line, which every simulator reads the same: lines do not move, so the points keep their keys.
"""

from __future__ import annotations

import re

_PRE = re.compile(r"(\bfor\s*\([^;()]*;[^;]*;\s*)(\+\+|--)\s*([A-Za-z_]\w*)(\s*\))")
_POST = re.compile(r"(\bfor\s*\([^;()]*;[^;]*;\s*)([A-Za-z_]\w*)\s*(\+\+|--)(\s*\))")


def lower_increments(text: str) -> str:
    """``text`` with every ``for`` step that is ``++i``, ``i++``, ``--i`` or ``i--`` written
    ``i = i + 1`` (``- 1``)."""
    text = _PRE.sub(lambda m: f"{m.group(1)}{m.group(3)} = {m.group(3)} {m.group(2)[0]} 1{m.group(4)}", text)
    return _POST.sub(lambda m: f"{m.group(1)}{m.group(2)} = {m.group(2)} {m.group(3)[0]} 1{m.group(4)}", text)
