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
   tag are candidates (blocks in other languages, e.g. ``bash``, are ignored). Only *complete*
   candidates (their closing fence exists) holding a Verilog module or a cocotb test count, and
   each gets a role:

   * **testbench**: a cocotb test, or Verilog declaring a module of its own that instantiates a
     design module (the DUT); without the design's module names, any Verilog module with a body;
   * **DUT restatement**: Verilog whose modules are all design modules, or all empty stubs
     (``module dut(input clk, ...); endmodule``: the interface echoed back);
   * **other**: any other Verilog module (e.g. a helper module that instantiates nothing).

   The block with the best role wins (testbench over other over DUT restatement) and, among
   blocks of the same role, the LAST one: a completion that first sketches parts and then gives
   the whole testbench is scored on the whole testbench, a testbench followed (or preceded) by an
   echoed DUT stub is scored on the testbench, of two testbenches the later one (the revised
   answer) is scored, and a final block cut off by the token limit falls back to an earlier
   complete block. When every candidate only restates the design's own modules there is no
   stimulus (:class:`ExtractionError`). A testbench that also declares a design module again
   (the DUT pasted beside it) has that copy left out: the design's own module is simulated
   (Icarus rejects a second declaration; Verilator would keep one of them). A Verilog block is only searched for a module, a Python
   block only for a cocotb test, an untagged block for either.
   Blocks that together form the stimulus are scored together (:func:`_companions`): with a
   Verilog testbench, the other complete blocks declaring a package, interface, class, program
   or non-design module it names (transitively), as files ``tb_block<N>.sv`` before
   ``tb.sv``; with a cocotb test, the Python blocks it imports, as ``<module>.py`` (the name
   from a ``# helpers.py`` first-line comment or the file named on the line above the fence,
   or the one block defining every name of a ``from M import ...``). A block that declares a
   name of the testbench again (an earlier draft) or a design module is not used.
3. Without any fence, bare code is accepted: Verilog from the first ``module`` line (together
   with directly preceding `` `timescale``/`` `include``/`` `define`` lines) to the end of the
   line of the last ``endmodule`` (with the design's module names: of the first and last module
   that is not a design module, so a DUT restated before or after the testbench stays out); otherwise, if ``@cocotb.test`` occurs, the whole text is the
   Python test.
4. VHDL (a ``vhdl``/``vhd`` fence, or ``entity X is`` / ``architecture A of X`` text) is
   rejected: only Verilog/SystemVerilog testbenches and cocotb tests are supported.

Every failure raises :class:`ExtractionError` (a ``ValueError``) whose message says why no
stimulus could be extracted; the engine reports it as status ``invalid_input``.
:func:`extract` also says which part of the text was used (:attr:`Extraction.description`,
e.g. ``code block 2 of 3 (```systemverilog, 45 lines): the testbench``); the engine puts it in
the result's ``stimulus_block``.

The extracted code is the block content as written (lines of an indented fence lose that
indentation, as in CommonMark), without leading blank lines, with trailing whitespace removed
and exactly one final newline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from reward_service import hdl
from reward_service.errors import RewardServiceError
from reward_service.models import CocotbStimulus, SvTestbench

__all__ = [
    "ExtractionError",
    "Extraction",
    "extract",
    "extract_stimulus",
    "strip_think",
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


class ExtractionError(RewardServiceError, ValueError):
    """No stimulus could be extracted from a completion; the message says why."""


@dataclass(frozen=True)
class Extraction:
    """The stimulus extracted from a completion and where it came from.

    ``block`` names the part of the text used: ``code block 2 of 3 (```systemverilog, 45
    lines)`` (counting every fenced block of the answer, 1-based, any language) or ``bare code
    (30 lines)``; ``role`` is why it was chosen (``the testbench``, ``a cocotb test``,
    ``Verilog module(s) tb`` ...); ``skipped`` describes the other candidate blocks that were not
    used, e.g. ``block 3 restates the DUT (module dut)``.
    """

    stimulus: SvTestbench | CocotbStimulus
    block: str
    role: str
    skipped: tuple[str, ...] = ()
    #: design modules the chosen block declared again and that were left out of the stimulus
    dropped: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        """One line for a result: ``code block 1 of 2 (```sv, 40 lines): the testbench; not
        used: block 2 restates the DUT (module dut)``."""
        text = f"{self.block}: {self.role}"
        if self.dropped:
            text += (
                f"; its copy of the design's module {', '.join(self.dropped)} is left out "
                "(the design's own is simulated)"
            )
        if self.skipped:
            text += "; not used: " + ", ".join(self.skipped)
        return text

    @property
    def notable(self) -> bool:
        """Whether the choice is worth a word in a result's message: another candidate was
        passed over or a design module copy was left out."""
        return bool(self.skipped or self.dropped)


@dataclass
class _Block:
    lang: str
    code: str
    closed: bool
    index: int = 0  # 1-based among all fenced blocks of the answer
    before: str = ""  # the last non-blank line of text above the fence (it often names the file)


def strip_think(text: str) -> str:
    """``text`` without its ``<think>`` reasoning (rule 1 above): closed sections removed, the
    text before a lone ``</think>`` dropped, the text after an unclosed ``<think>`` dropped."""
    text = _THINK_BLOCK.sub("", text)
    close = list(_THINK_CLOSE.finditer(text))
    if close:  # "</think>" whose "<think>" was part of the prompt template
        text = text[close[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:  # reasoning cut off: no answer after it
        text = text[: opened.start()]
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
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
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
        blocks.append(_Block(lang=lang, code="\n".join(body), closed=closed, index=len(blocks) + 1, before=before))
    return blocks


def _normalize(code: str) -> str:
    lines = code.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def _has_module(code: str) -> bool:
    m = _MODULE_HEADER.search(code)
    return m is not None and _ENDMODULE.search(code, m.end()) is not None


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


#: Roles of a candidate block, best first (see the module docstring).
_TESTBENCH, _OTHER, _RESTATES_DUT = 2, 1, 0
#: A declaration statement of a module's ports/parameters/nets (nothing that runs).
_DECLARATION = re.compile(
    r"^(?:input|output|inout|ref|parameter|localparam|wire|reg|logic|bit|integer|int|tri|var|"
    r"signed|unsigned|typedef|timeunit|timeprecision)\b"
)
_MODULE_BODY = re.compile(r"\b(?:macro)?module\s+([A-Za-z_][\w$]*)(.*?)\bendmodule\b", re.S)


def _is_stub(body: str) -> bool:
    """Whether a module body (header included) declares only ports and parameters: the
    interface echoed back, no behaviour and no instances."""
    depth, i = 0, 0
    while i < len(body):  # skip the header: up to the ';' that closes it (outside parentheses)
        ch = body[i]
        depth += ch == "("
        depth -= ch == ")"
        if ch == ";" and depth <= 0:
            break
        i += 1
    statements = [s.strip() for s in body[i + 1 :].split(";")]
    return all(not s or _DECLARATION.match(s) for s in statements)


def _verilog_role(code: str, design_modules: frozenset[str] | None) -> tuple[int, str]:
    """Role of a Verilog candidate and its description (see the module docstring)."""
    clean = hdl.strip_comments(code)
    modules = {m.group(1): _is_stub(m.group(2)) for m in _MODULE_BODY.finditer(clean)}
    names = ", ".join(modules) or "?"
    if design_modules:
        own = [m for m in modules if m not in design_modules]
        duts = sorted({d for d in design_modules if hdl.instance_names(clean, d)})
        if own and duts:
            return _TESTBENCH, f"the testbench (module {', '.join(own)}; instantiates {', '.join(duts)})"
        if not own:
            return _RESTATES_DUT, f"restates the DUT (module {names})"
    if modules and all(modules.values()):
        return _RESTATES_DUT, f"an empty module stub (module {names})"
    if design_modules:
        return _OTHER, f"Verilog module(s) {names}, none instantiating the DUT"
    return _TESTBENCH, f"the testbench (module {names})"


_COMMENT_OR_STRING = re.compile(rf"//[^\n]*|/\*.*?\*/|{hdl.STRING_LITERAL.pattern}", re.S)


def _drop_design_copies(code: str, design_modules: frozenset[str] | None) -> tuple[str, tuple[str, ...]]:
    """``code`` without the modules it declares under a design module's name, when it also
    declares modules of its own (a testbench pasted together with a copy of the DUT: Icarus
    rejects the second declaration, Verilator keeps one of them). Each left-out module becomes
    a one-line comment and blank lines, so line numbers in compiler messages stay those of the
    block. Returns the code and the names left out."""
    if not design_modules:
        return code, ()
    # comments and strings blanked at the same offsets: a "module x" inside them is no module
    masked = _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    spans = [(m.start(), m.end(), m.group(1)) for m in _MODULE_BODY.finditer(masked)]
    if all(name in design_modules for _, _, name in spans):
        return code, ()
    out, pos, dropped = [], 0, []
    for start, end, name in spans:
        if name not in design_modules:
            continue
        line_start = code.rfind("\n", 0, start) + 1
        if code[line_start:start].strip():  # something else on the module's line: leave it
            continue
        line_end = code.find("\n", end)
        line_end = len(code) if line_end < 0 else line_end
        removed = code[line_start:line_end]
        out.append(code[pos:line_start])
        out.append(f"// module {name}: left out, the design's own is simulated" + "\n" * removed.count("\n"))
        pos = line_end
        dropped.append(name)
    out.append(code[pos:])
    return "".join(out), tuple(dict.fromkeys(dropped))


def _block_label(block: _Block, count: int) -> str:
    lines = len(_normalize(block.code).splitlines())
    return f"code block {block.index} of {count} (```{block.lang or 'untagged'}, {lines} lines)"


_HEADER_NAME = re.compile(r"module\s+(?:(?:automatic|static)\s+)?([A-Za-z_][\w$]*)")


def _bare_verilog(text: str, design_modules: frozenset[str] | None = None) -> str | None:
    """Bare Verilog of ``text``: from the first module header (and the directives right above
    it) to the last ``endmodule``. With the design's module names, the span runs from the first
    to the last module of the stimulus's own, so a DUT restated before or after the testbench
    (with prose around it) stays out."""
    headers = list(_MODULE_HEADER.finditer(text))
    if design_modules:
        own = [h for h in headers if (n := _HEADER_NAME.search(h.group(0))) and n.group(1) not in design_modules]
        if own:
            end = _ENDMODULE.search(text, own[-1].end())
            if end is not None:
                headers = [h for h in headers if own[0].start() <= h.start() <= own[-1].start()]
                text = text[: end.end()] + text[end.end() :].split("\n", 1)[0]
    if not headers:
        return None
    m = headers[0]
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
    return "".join(lines[start : last + 1])


#: SystemVerilog declarations a testbench may take from a block of its own: ``package X``,
#: ``interface X``, ``class X`` (``virtual``), ``program X`` and modules.
_SV_DECLARATION = re.compile(
    r"^[ \t]*(?:(?:virtual|interface)\s+)?(package|interface|class|program|(?:macro)?module)\s+"
    r"(?:(?:automatic|static)\s+)?([A-Za-z_][\w$]*)",
    re.M,
)
_PY_FILE_NAME = re.compile(r"\b([A-Za-z_]\w*(?:/[A-Za-z_]\w*)*)\.py\b")
_PY_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([\w.]+))", re.M)
_PY_TOP_NAME = re.compile(r"^(?:def|class|async[ \t]+def)[ \t]+(\w+)|^(\w+)[ \t]*(?::[^=\n]*)?=", re.M)


def _names(code: str, name: str) -> bool:
    """Whether ``code`` uses the identifier ``name`` (a package, class, interface: ``pk::``,
    ``import pk::*``, ``item t;``)."""
    return re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", code) is not None


def _sv_declared(code: str) -> dict[str, str]:
    """Name -> kind (``package``, ``class`` ...) of what a Verilog block declares."""
    clean = hdl.strip_comments(code)
    return {m.group(2): m.group(1).removeprefix("macro") for m in _SV_DECLARATION.finditer(clean)}


def _py_module_name(block: _Block) -> str | None:
    """The module name a Python block was written as: a ``# helpers.py`` / ``# File:
    tb/helpers.py`` comment on its first line, or the file named in the text right above it."""
    first = next((line for line in block.code.splitlines() if line.strip()), "")
    for where in (first if first.lstrip().startswith("#") else "", block.before):
        m = _PY_FILE_NAME.search(where)
        if m:
            return m.group(1).replace("/", ".")
    return None


def _companions(
    chosen: _Block, kind: str, blocks: list[_Block], design_modules: frozenset[str] | None
) -> tuple[list[tuple[_Block, tuple[str, str]]], tuple[str, ...]]:
    """The other complete blocks the chosen one needs: for a Verilog testbench, blocks
    declaring a package, interface, class, program or (non-design) module that it (or another
    needed block) names; for a cocotb test, Python blocks written as a module it imports (their
    file name from a comment or the line above the fence; or, without a name, the one block
    defining every name of a ``from M import ...`` of the test). Returns the needed blocks in
    answer order with ``(name, what)`` each, and why other candidate companions were left out."""
    others = [b for b in blocks if b.closed and b is not chosen]
    used: dict[int, tuple[_Block, tuple[str, str]]] = {}
    left_out: list[str] = []
    if kind == "verilog":
        pool = [b for b in others if b.lang in _VERILOG_LANGS or (b.lang == "" and _SV_DECLARATION.search(b.code))]
        own = _sv_declared(chosen.code)
        wanted = hdl.strip_comments(chosen.code)
        grew = True
        while grew:
            grew = False
            for b in pool:
                if b.index in used:
                    continue
                declared = _sv_declared(b.code)
                named = [
                    n
                    for n, k in declared.items()
                    if (hdl.instance_names(wanted, n) if k == "module" else _names(wanted, n))
                ]
                if not named:
                    continue
                if (design_modules and set(declared) <= design_modules) or (
                    _has_module(b.code) and _verilog_role(b.code, design_modules)[0] == _RESTATES_DUT
                ):
                    continue  # the DUT restated or stubbed: named among the skipped candidates already
                clash = sorted((set(declared) & set(own)) | (set(declared) & (design_modules or frozenset())))
                if clash:
                    note = f"block {b.index} declares {', '.join(clash)} again (not used)"
                    if note not in left_out:
                        left_out.append(note)
                    continue
                what = ", ".join(f"{declared[n]} {n}" for n in declared)
                used[b.index] = (b, (f"tb_block{b.index}.sv", what))
                own.update(declared)
                wanted += "\n" + hdl.strip_comments(b.code)
                grew = True
    else:
        imports = {a or c for a, c in _PY_IMPORT.findall(chosen.code)}
        from_names = {
            m.group(1): {n.strip().split(" as ")[0] for n in m.group(2).strip("()").split(",") if n.strip()}
            for m in re.finditer(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)", chosen.code, re.M)
        }
        for b in others:
            if b.lang not in _PYTHON_LANGS and not (b.lang == "" and not _has_module(b.code)):
                continue
            if _has_cocotb_test(b.code):
                continue  # another test (a draft): the chosen one is the answer
            name = _py_module_name(b)
            if name is None:
                defined = {x or y for x, y in _PY_TOP_NAME.findall(b.code)}
                fits = [m for m, names in from_names.items() if names and names <= defined]
                name = fits[0] if len(fits) == 1 else None
            if name is None or name not in imports or name == COCOTB_TEST_MODULE:
                if name is not None or b.lang in _PYTHON_LANGS:
                    left_out.append(f"block {b.index} (Python the test does not import)")
                continue
            used[b.index] = (b, (name.replace(".", "/") + ".py", f"module {name}"))
    return [used[i] for i in sorted(used)], tuple(left_out)


def _with_companions(
    stimulus: SvTestbench | CocotbStimulus, used: list[tuple[_Block, tuple[str, str]]]
) -> SvTestbench | CocotbStimulus:
    """``stimulus`` with the companion blocks as files of their own, before its own file (a
    package is compiled before the testbench that imports it), in answer order."""
    files = {name: _normalize(b.code) for b, (name, _) in used}
    files.update(stimulus.files)
    return stimulus.model_copy(update={"files": files})


def _result(kind: str, code: str, toplevel: str | None) -> SvTestbench | CocotbStimulus:
    if kind == "vhdl":
        raise ExtractionError(_VHDL_MESSAGE)
    code = _normalize(code)
    if kind == "verilog":
        return SvTestbench(files={SV_FILE_NAME: code})
    return CocotbStimulus(files={COCOTB_FILE_NAME: code}, test_module=COCOTB_TEST_MODULE, toplevel=toplevel)


def extract(text: str, *, toplevel: str | None = None, design_modules: Iterable[str] | None = None) -> Extraction:
    """Extract the stimulus from a completion's text and say which part was used (see the
    module docstring for the rules).

    :param text: the raw completion.
    :param toplevel: HDL toplevel (the DUT module) for a cocotb result; ignored for Verilog.
    :param design_modules: module names declared by the design (the DUT and its submodules): a
        Verilog block is a testbench when it instantiates one of them, and a block declaring
        only these restates the DUT. Without them, a block of empty module stubs restates the DUT.
    :returns: an :class:`Extraction` whose ``stimulus`` is ``SvTestbench(files={"tb.sv":
        code})`` or ``CocotbStimulus(files={"test_stimulus.py": code}, test_module=
        "test_stimulus", toplevel=toplevel)``.
    :raises ExtractionError: empty text, only reasoning, VHDL, only an unclosed code block, no
        Verilog module / cocotb test anywhere, or only blocks that restate the design's modules.
    """
    if not isinstance(text, str):
        raise ExtractionError(f"completion text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ExtractionError("completion is empty: there is no code to extract a stimulus from")
    had_think = bool(_THINK_OPEN.search(text) or _THINK_CLOSE.search(text))
    body = strip_think(text)
    if not body.strip():
        raise ExtractionError("completion holds only a <think> reasoning section and no answer after it")
    known = frozenset(design_modules) if design_modules is not None else None

    blocks = _fenced_blocks(body)
    if blocks:
        candidates: list[tuple[int, str, _Block, str]] = []  # (role, description, block, kind)
        for block in blocks:
            kind = _classify(block) if block.closed else None
            if kind == "verilog":
                candidates.append((*_verilog_role(block.code, known), block, kind))
            elif kind == "cocotb":
                candidates.append((_TESTBENCH, "a cocotb test", block, kind))
        if candidates:
            # best role; among equals the last block (max keeps the first of equal keys)
            role, why, chosen, kind = max(reversed(candidates), key=lambda c: c[0])
            label = _block_label(chosen, len(blocks))
            if role == _RESTATES_DUT and known and why.startswith("restates"):
                raise ExtractionError(
                    f"no code block holds a testbench: {label} {why}, and no block declares a module "
                    "of its own that instantiates the DUT (or a cocotb test)"
                )
            skipped = tuple(
                f"block {b.index} {w}" if w.startswith(("restates", "an empty")) else f"block {b.index} ({w})"
                for r, w, b, _ in candidates
                if b is not chosen
            )
            code, dropped = _drop_design_copies(chosen.code, known) if kind == "verilog" else (chosen.code, ())
            used, left_out = _companions(chosen, kind, blocks, known)
            if not used:
                return Extraction(_result(kind, code, toplevel), label, why, skipped[:5], dropped)
            skipped = tuple(w for w in skipped if int(w.split()[1]) not in {b.index for b, _ in used}) + left_out
            stimulus = _with_companions(_result(kind, code, toplevel), used)
            why += (
                ", scored together with "
                + ", ".join(f"block {b.index} ({what}, as {name})" for b, (name, what) in used)
                + (" that it imports" if kind == "cocotb" else " that it uses")
            )
            return Extraction(stimulus, label, why, skipped[:5], dropped)
        if any(b.lang in _VHDL_LANGS or _VHDL_TEXT.search(b.code) for b in blocks if b.closed):
            raise ExtractionError(_VHDL_MESSAGE)
        if any(not b.closed and b.lang not in _VHDL_LANGS for b in blocks):
            raise ExtractionError(
                "the last code block is not closed (completion truncated?) and no complete code "
                "block holds a Verilog module (module ... endmodule) or a cocotb test (@cocotb.test)"
            )
        if any(b.lang in _VHDL_LANGS or _VHDL_TEXT.search(b.code) for b in blocks):
            raise ExtractionError(_VHDL_MESSAGE)
        raise ExtractionError(
            f"none of the {len(blocks)} code block(s) holds a Verilog module (module ... endmodule) "
            "or a cocotb test (@cocotb.test)"
        )

    bare = _bare_verilog(body, known)
    if bare is not None:
        bare_role = _verilog_role(bare, known)[1]
        bare, dropped = _drop_design_copies(bare, known)
        stimulus = _result("verilog", bare, toplevel)
        lines = len(next(iter(stimulus.files.values())).splitlines())
        return Extraction(stimulus, f"bare code ({lines} lines, no code fence)", bare_role, dropped=dropped)
    if _has_cocotb_test(body):
        stimulus = _result("cocotb", body, toplevel)
        lines = len(next(iter(stimulus.files.values())).splitlines())
        return Extraction(stimulus, f"bare code ({lines} lines, no code fence)", "a cocotb test")
    if _VHDL_TEXT.search(body):
        raise ExtractionError(_VHDL_MESSAGE)
    where = " after the <think> section" if had_think else ""
    raise ExtractionError(
        f"no code found{where}: the completion has no fenced code block and no bare Verilog module "
        "(module ... endmodule) or cocotb test (@cocotb.test)"
    )


def extract_stimulus(
    text: str, *, toplevel: str | None = None, design_modules: Iterable[str] | None = None
) -> SvTestbench | CocotbStimulus:
    """The stimulus of :func:`extract` (same parameters and errors), without its origin."""
    return extract(text, toplevel=toplevel, design_modules=design_modules).stimulus
