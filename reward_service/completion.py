"""Extract the stimulus (testbench or cocotb test) from a raw LLM completion.

A :class:`reward_service.models.Completion` carries the model's answer as free text: prose,
reasoning and one or more Markdown code blocks. :func:`extract_stimulus` turns that text into
the stimulus the engine runs:

* :class:`~reward_service.models.SvTestbench` ``files={"tb.sv": code}`` for a SystemVerilog /
  Verilog testbench (code holding ``module ... endmodule``);
* :class:`~reward_service.models.CocotbStimulus` ``files={"test_stimulus.py": code}``,
  ``test_module="test_stimulus"`` for a cocotb test (code holding an ``@cocotb.test`` decorator).

Rules, in order:

1. ``<think>...</think>`` reasoning sections are removed first (reasoning models emit them; a
   ``</think>`` without an opening tag drops everything before it; an unclosed ``<think>`` drops
   everything after it, i.e. a completion cut off while reasoning has no answer).
2. Fenced code blocks (CommonMark fences of three or more backticks or tildes) tagged
   ``systemverilog``/``verilog``/``sv``/``v``/``svh``, ``python``/``py``/``python3``, or with no
   tag are candidates (blocks in other languages, e.g. ``bash``, are ignored). The LAST *complete*
   candidate (its closing fence exists) holding a Verilog module or a cocotb test wins: a
   completion that first sketches parts and then gives the whole testbench is scored on the
   whole testbench, and a final block cut off by the token limit falls back to an earlier
   complete block. A Verilog block is only searched for a module, a Python block only for a
   cocotb test, an untagged block for either.
3. Without any fence, bare code is accepted: Verilog from the first ``module`` line (together
   with directly preceding `` `timescale``/`` `include``/`` `define`` lines) to the end of the
   line of the last ``endmodule``; otherwise, if ``@cocotb.test`` occurs, the whole text is the
   Python test.
4. VHDL (a ``vhdl``/``vhd`` fence, or ``entity X is`` / ``architecture A of X`` text) is
   rejected: only Verilog/SystemVerilog testbenches and cocotb tests are supported.

Every failure raises :class:`ExtractionError` (a ``ValueError``) whose message says why no
stimulus could be extracted; the engine reports it as status ``invalid_input``.

The extracted code is the block content as written (lines of an indented fence lose that
indentation, as in CommonMark), without leading blank lines, with trailing whitespace removed
and exactly one final newline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reward_service.models import CocotbStimulus, SvTestbench

__all__ = [
    "ExtractionError",
    "extract_stimulus",
    "SV_FILE_NAME",
    "COCOTB_FILE_NAME",
    "COCOTB_TEST_MODULE",
]

#: File name of an extracted SystemVerilog testbench.
SV_FILE_NAME = "tb.sv"
#: Python module (and file) name of an extracted cocotb test.
COCOTB_TEST_MODULE = "test_stimulus"
COCOTB_FILE_NAME = f"{COCOTB_TEST_MODULE}.py"

_VERILOG_LANGS = frozenset({"systemverilog", "verilog", "sv", "v", "svh", "vh", "system-verilog"})
_PYTHON_LANGS = frozenset({"python", "py", "python3", "py3"})
_VHDL_LANGS = frozenset({"vhdl", "vhd"})

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)

_FENCE_OPEN = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")

#: A module header at the start of a line: ``module tb;``, ``module tb (``, ``module tb #(``.
_MODULE_HEADER = re.compile(
    r"^[ \t]*(?:macro)?module\s+(?:(?:automatic|static)\s+)?[A-Za-z_][\w$]*\s*(?:#|\(|;|import\b)",
    re.MULTILINE,
)
_ENDMODULE = re.compile(r"\bendmodule\b")
_DIRECTIVE_LINE = re.compile(r"^[ \t]*`(?:timescale|include|define|default_nettype)\b")
_COCOTB_TEST = re.compile(r"^[ \t]*@cocotb\.test\b", re.MULTILINE)
_VHDL_TEXT = re.compile(
    r"^[ \t]*(?:entity\s+\w+\s+is\b|architecture\s+\w+\s+of\s+\w+\s+is\b)",
    re.IGNORECASE | re.MULTILINE,
)
_VHDL_MESSAGE = (
    "VHDL is not supported: the stimulus must be a SystemVerilog/Verilog testbench "
    "(module ... endmodule) or a cocotb test (@cocotb.test)"
)


class ExtractionError(ValueError):
    """No stimulus could be extracted from a completion; the message says why."""


@dataclass
class _Block:
    lang: str
    code: str
    closed: bool


def _strip_think(text: str) -> str:
    text = _THINK_BLOCK.sub("", text)
    close = list(_THINK_CLOSE.finditer(text))
    if close:  # "</think>" whose "<think>" was part of the prompt template
        text = text[close[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:  # reasoning cut off: no answer after it
        text = text[:opened.start()]
    return text


def _fenced_blocks(text: str) -> list[_Block]:
    """Split Markdown text into fenced code blocks (CommonMark rules, simplified)."""
    blocks: list[_Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        info = m.group("info").strip()
        lang = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        closing = re.compile(rf"^[ ]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            if closing.match(lines[i]):
                closed = True
                i += 1
                break
            line = lines[i]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:])
            i += 1
        blocks.append(_Block(lang=lang, code="\n".join(body), closed=closed))
    return blocks


def _normalize(code: str) -> str:
    lines = code.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def _has_module(code: str) -> bool:
    m = _MODULE_HEADER.search(code)
    return bool(m) and _ENDMODULE.search(code, m.end()) is not None


def _has_cocotb_test(code: str) -> bool:
    return _COCOTB_TEST.search(code) is not None


def _classify(block: _Block) -> str | None:
    """``"verilog"``, ``"cocotb"``, ``"vhdl"`` or None (not a stimulus candidate)."""
    if block.lang in _VHDL_LANGS:
        return "vhdl"
    if block.lang in _VERILOG_LANGS:
        return "verilog" if _has_module(block.code) else None
    if block.lang in _PYTHON_LANGS:
        return "cocotb" if _has_cocotb_test(block.code) else None
    if block.lang == "":
        if _has_module(block.code):
            return "verilog"
        if _has_cocotb_test(block.code):
            return "cocotb"
        if _VHDL_TEXT.search(block.code):
            return "vhdl"
    return None


def _bare_verilog(text: str) -> str | None:
    m = _MODULE_HEADER.search(text)
    if not m:
        return None
    ends = list(_ENDMODULE.finditer(text, m.end()))
    if not ends:
        return None
    lines = text.splitlines(keepends=True)
    # line index of the module header and of the last endmodule
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    first = max(i for i, off in enumerate(offsets) if off <= m.start())
    last = max(i for i, off in enumerate(offsets) if off <= ends[-1].start())
    start = first
    j = first - 1
    while j >= 0 and (not lines[j].strip() or _DIRECTIVE_LINE.match(lines[j])):
        if lines[j].strip():
            start = j
        j -= 1
    return "".join(lines[start:last + 1])


def _result(kind: str, code: str, toplevel: str | None) -> SvTestbench | CocotbStimulus:
    if kind == "vhdl":
        raise ExtractionError(_VHDL_MESSAGE)
    code = _normalize(code)
    if kind == "verilog":
        return SvTestbench(files={SV_FILE_NAME: code})
    return CocotbStimulus(files={COCOTB_FILE_NAME: code}, test_module=COCOTB_TEST_MODULE,
                          toplevel=toplevel)


def extract_stimulus(text: str, *, toplevel: str | None = None) -> SvTestbench | CocotbStimulus:
    """Extract the stimulus from a completion's text (see the module docstring for the rules).

    :param text: the raw completion.
    :param toplevel: HDL toplevel (the DUT module) for a cocotb result; ignored for Verilog.
    :returns: ``SvTestbench(files={"tb.sv": code})`` or ``CocotbStimulus(files=
        {"test_stimulus.py": code}, test_module="test_stimulus", toplevel=toplevel)``.
    :raises ExtractionError: empty text, only reasoning, VHDL, only an unclosed code block, or no
        Verilog module / cocotb test anywhere.
    """
    if not isinstance(text, str):
        raise ExtractionError(f"completion text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ExtractionError("completion is empty: there is no code to extract a stimulus from")
    had_think = bool(_THINK_OPEN.search(text) or _THINK_CLOSE.search(text))
    body = _strip_think(text)
    if not body.strip():
        raise ExtractionError("completion holds only a <think> reasoning section and no answer after it")

    blocks = _fenced_blocks(body)
    if blocks:
        for block in reversed(blocks):
            if not block.closed:
                continue
            kind = _classify(block)
            if kind is not None:
                return _result(kind, block.code, toplevel)
        if any(not b.closed and b.lang not in _VHDL_LANGS for b in blocks):
            raise ExtractionError(
                "the last code block is not closed (completion truncated?) and no complete code "
                "block holds a Verilog module (module ... endmodule) or a cocotb test (@cocotb.test)")
        if any(b.lang in _VHDL_LANGS or _VHDL_TEXT.search(b.code) for b in blocks):
            raise ExtractionError(_VHDL_MESSAGE)
        raise ExtractionError(
            f"none of the {len(blocks)} code block(s) holds a Verilog module (module ... endmodule) "
            "or a cocotb test (@cocotb.test)")

    code = _bare_verilog(body)
    if code is not None:
        return _result("verilog", code, toplevel)
    if _has_cocotb_test(body):
        return _result("cocotb", body, toplevel)
    if _VHDL_TEXT.search(body):
        raise ExtractionError(_VHDL_MESSAGE)
    where = " after the <think> section" if had_think else ""
    raise ExtractionError(
        f"no code found{where}: the completion has no fenced code block and no bare Verilog module "
        "(module ... endmodule) or cocotb test (@cocotb.test)")
