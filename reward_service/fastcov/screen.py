"""Stimulus the fast path does not run: testbenches that read files.

The fast path's DUT writes its coverage flags with a per-run token, and the DUT and the
testbench are one vvp process: the token is in the instrumented source and in the compiled
vvp, both readable in the step's work dir, so a testbench that reads files can find it and
forge the flag file (a testbench doing so turned toggle 5/18 into 18/18). The step cannot hide
a file from the process that must load it, so such stimulus goes to Verilator instead, whose
coverage record is written by our ``main()`` with a secret the model cannot read
(docs/sandbox.md, "Coverage integrity"). A screen on the text, like the cocotb tamper screen
in :mod:`reward_service.scoring`: it catches what a model writes, not an obfuscated attack.
"""

from __future__ import annotations

import re
from typing import Any

from reward_service import hdl

#: SV system tasks that read a file (IEEE 1800-2017 21.3 and 21.4).
_SV_READS = re.compile(r"\$(?:fgets|fgetc|ungetc|fscanf|fread|readmemh|readmemb|fseek|frewind|ftell)\b")
#: A string literal (skipped) or the start of a ``$fopen`` call.
_SV_FOPEN = re.compile(rf"(?P<s>{hdl.STRING_LITERAL.pattern})|\$fopen\s*\(")
#: Python naming the fast path's own files. Reading files as such is common in cocotb tests
#: (CVDP's harness_library reads its runner's files), so only these names are screened.
_PY_READS = re.compile(r"/work/src|/work/obj|rs_fastcov|sim\.vvp|\bmmap\b")


def reads_files(stimulus: Any) -> str | None:
    """Why the fast path must not run ``stimulus`` (an ``SvTestbench`` or ``CocotbStimulus``):
    the file and construct through which it reads files, or None."""
    for name, text in stimulus.files.items():
        if name.endswith(".py"):
            m = _PY_READS.search(text)
            if m:
                return f"{name} names the fast path's files (`{m.group(0)}`)"
            continue
        m = _SV_READS.search(hdl.strip_comments(text))
        if m:
            return f"{name} reads files (`{m.group(0)}`)"
        code = hdl.strip_comments_only(text)
        for call in _SV_FOPEN.finditer(code):
            if call.group("s"):
                continue  # "$fopen(" inside a string literal
            end = code.find(";", call.end())
            mode = _fopen_mode(code[call.end() : end if end >= 0 else len(code)])
            if mode is not None and ("r" in mode or "+" in mode or mode == "?"):
                return f"{name} opens a file for reading (`$fopen` mode {mode if mode != '?' else 'not a literal'})"
    return None


def _fopen_mode(args: str) -> str | None:
    """The mode of a ``$fopen`` call from the text after its ``(``: None without one (a
    multichannel descriptor, write-only), ``"?"`` when it is not a string literal."""
    plain = hdl.STRING_LITERAL.sub(lambda m: "S" * len(m.group(0)), args)
    depth, comma = 0, -1
    for i, ch in enumerate(plain):
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                plain, args = plain[:i], args[:i]
                break
            depth -= 1
        elif ch == "," and depth == 0:
            comma = i
    if comma < 0:
        return None
    mode = args[comma + 1 :].strip()
    literal = hdl.STRING_LITERAL.fullmatch(mode)
    return mode[1:-1] if literal else "?"
