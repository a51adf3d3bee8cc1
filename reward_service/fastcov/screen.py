"""What the fast path does not run: testbenches that read files, and designs with a race.

The fast path's DUT writes its coverage flags with a per-run token, and the DUT and the
testbench are one vvp process: the token is in the instrumented source and in the compiled
vvp, both readable in the step's work dir, so a testbench that reads files can find it and
forge the flag file (a testbench doing so turned toggle 5/18 into 18/18). The step cannot hide
a file from the process that must load it, so such stimulus goes to Verilator instead, whose
coverage record is written by our ``main()`` with a secret the model cannot read
(docs/sandbox.md, "Coverage integrity"). A screen on the text, like the cocotb tamper screen
in :mod:`reward_service.scoring`: it catches what a model writes, not an obfuscated attack.

A design whose clocked procedure assigns a variable with ``=`` that another process reads has
a race at the clock edge (:func:`clocked_blocking_race`): Icarus and Verilator may order the
two procedures differently and count different points, and Verilator is the reference. The
formal model (:mod:`reward_service.formal.model`) refuses the same designs with this detector.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from pyslang import ast, syntax
from pyslang.parsing import Token, TokenKind

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


# -- a race in the DUT: a variable assigned with `=` at a clock edge, read elsewhere -------

#: Procedures and other readers of module signals, as pyslang syntax kinds.
_K = syntax.SyntaxKind
PROCESSES = {
    _K.AlwaysBlock,
    _K.AlwaysFFBlock,
    _K.AlwaysCombBlock,
    _K.AlwaysLatchBlock,
    _K.InitialBlock,
    _K.FinalBlock,
    _K.ContinuousAssign,
    _K.NetDeclaration,  # `wire w = <expr>;` is a continuous assignment
    _K.HierarchyInstantiation,  # a port connection is read by the instance's logic
    _K.FunctionDeclaration,  # a subroutine reads the module's signals for its caller
    _K.TaskDeclaration,
}
_BLOCKING = {
    _K.AssignmentExpression,
    _K.AddAssignmentExpression,
    _K.SubtractAssignmentExpression,
    _K.MultiplyAssignmentExpression,
    _K.DivideAssignmentExpression,
    _K.ModAssignmentExpression,
    _K.AndAssignmentExpression,
    _K.OrAssignmentExpression,
    _K.XorAssignmentExpression,
    _K.LogicalLeftShiftAssignmentExpression,
    _K.LogicalRightShiftAssignmentExpression,
    _K.ArithmeticLeftShiftAssignmentExpression,
    _K.ArithmeticRightShiftAssignmentExpression,
}
_STEPS = {
    _K.PostincrementExpression,
    _K.PostdecrementExpression,
    _K.UnaryPreincrementExpression,
    _K.UnaryPredecrementExpression,
}
#: Symbol kinds a name may resolve to and still be a signal (a name the body does not know,
#: such as a block's own variable, counts too: the screen errs towards reporting).
_NOT_SIGNALS = {
    ast.SymbolKind.Parameter,
    ast.SymbolKind.EnumValue,
    ast.SymbolKind.TypeAlias,
    ast.SymbolKind.Subroutine,
    ast.SymbolKind.Instance,
    ast.SymbolKind.Genvar,
    ast.SymbolKind.Specparam,
}


@dataclass
class Process:
    """One reader/writer of module signals: ``node`` (a procedure, continuous assignment, net
    initialiser, instantiation or subroutine) and its signal names in text order, each
    ``(name, role, token)``: ``write`` (the base of a blocking assignment's target), ``step``
    (read and written: ``+=``, ``++``), ``nb`` (the base of a nonblocking target) or ``read``."""

    node: Any
    uses: list[tuple[str, str, Any]]

    @property
    def edge_triggered(self) -> bool:
        return edge_triggered(self.node)

    def first_use(self, name: str) -> str | None:
        return next((role for n, role, _ in self.uses if n == name), None)


def edge_triggered(node: Any) -> bool:
    """Whether ``node`` is an ``always``/``always_ff`` procedure whose event control names an
    edge (a clocked procedure)."""
    if node.kind not in (_K.AlwaysBlock, _K.AlwaysFFBlock) or node.statement.kind != _K.TimingControlStatement:
        return False
    return any(t.kind in _EDGES for t in _tokens(node.statement.timingControl))


_EDGES = {TokenKind.PosEdgeKeyword, TokenKind.NegEdgeKeyword, TokenKind.EdgeKeyword}


def processes(module: Any, body: Any) -> list[Process]:
    """The processes of a module declaration (syntax; generate blocks included) with their
    signal names; ``body``: its elaborated instance body (names that resolve to anything but a
    net or variable there are left out)."""
    found: list[Process] = []

    def visit(node: Any) -> None:
        for child in node:
            if isinstance(child, syntax.SyntaxNode):
                if child.kind in PROCESSES:
                    found.append(Process(child, signal_uses(child, body)))
                else:
                    visit(child)

    visit(module)
    return found


def signal_uses(node: Any, body: Any) -> list[tuple[str, str, Any]]:
    """The signal names under ``node`` in text order as :class:`Process` lists them."""
    roles: dict[Any, str] = {}  # location of a target's base identifier -> role

    def mark(target: Any, role: str) -> None:
        for tok in _bases(target):
            roles[tok.location] = role

    for n in _walk(node):
        if n.kind in _BLOCKING:
            mark(n.left, "write" if n.kind == _K.AssignmentExpression else "step")
        elif n.kind == _K.NonblockingAssignmentExpression:
            mark(n.left, "nb")
        elif n.kind in _STEPS:
            mark(n.operand, "step")
    # a name declared inside the process (a block's or loop's own variable) is not the module's
    local = {n.name.valueText for n in _walk(node) if n.kind == _K.Declarator}
    uses = []
    for tok in _names(node):
        name = tok.valueText
        if name in local:
            continue
        sym = body.find(name) if body is not None else None
        if sym is not None and sym.kind in _NOT_SIGNALS:
            continue
        uses.append((name, roles.get(tok.location, "read"), tok))
    return uses


def _bases(target: Any) -> list[Any]:
    """The identifier tokens an assignment target writes (selects' indices are reads)."""
    k = target.kind
    if k == _K.IdentifierName:
        return [target.identifier]
    if k == _K.IdentifierSelectName:
        return [target.identifier]
    if k in (_K.ElementSelectExpression, _K.MemberAccessExpression):
        return _bases(target.left)
    if k == _K.ParenthesizedExpression:
        return _bases(target.expression)
    if k == _K.ConcatenationExpression:
        return [tok for e in target.expressions if isinstance(e, syntax.SyntaxNode) for tok in _bases(e)]
    return []


def _names(node: Any):
    """The identifier tokens of signal uses under ``node``, in text order: not a member's,
    named port's or parameter's own name, nor an instantiated module's or a declaration's, nor
    a package-scoped name; of a dotted name only its first part."""
    k = node.kind
    parts: list[Any]
    if k in (_K.MemberAccessExpression, _K.ScopedName):
        parts = [node.left] if k == _K.MemberAccessExpression or node.separator.kind == TokenKind.Dot else []
    elif k in (_K.NamedPortConnection, _K.NamedParamAssignment):
        parts = [node.expr]
    elif k == _K.HierarchyInstantiation:
        parts = [node.parameters, node.instances]
    elif k == _K.HierarchicalInstance:
        parts = [node.connections]
    elif k == _K.Declarator:  # the declared name is no use; its initial value reads signals
        parts = [node.initializer]
    else:
        parts = list(node)
    for child in [c for part in parts for c in (part if isinstance(part, list) else [part])]:
        if isinstance(child, Token):
            if child.kind == TokenKind.Identifier:
                yield child
        elif isinstance(child, syntax.SyntaxNode):
            yield from _names(child)


def _tokens(node: Any):
    for child in node:
        if isinstance(child, Token):
            yield child
        elif isinstance(child, syntax.SyntaxNode):
            yield from _tokens(child)


def _walk(node: Any):
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            yield child
            yield from _walk(child)


def clocked_blocking_race(module: Any, body: Any, line_of: Any = None) -> str | None:
    """Why the module has a race (None: it has none found): a variable assigned with ``=`` in
    a clocked procedure and read by another process that does not assign it with ``=`` before
    any use of its own (a loop index set by the loop first reads its own value). At the edge,
    simulators may run the reader before or after the writer, so it reads the old or the new
    value; Icarus and Verilator need not agree, and a model that reads the old value misses
    what one of them counts. ``line_of``: token -> line number, for the message."""
    procs = processes(module, body)
    for writer in procs:
        if not writer.edge_triggered:
            continue
        for name, role, tok in writer.uses:
            if role not in ("write", "step"):
                continue
            for reader in procs:
                if reader is writer:
                    continue
                first = reader.first_use(name)
                if first is None or first == "write":
                    continue
                at = f" (line {line_of(tok)})" if line_of else ""
                return (
                    f"`{name}` is assigned with `=` in a clocked procedure{at} and read by another process "
                    "of the same module: which one runs first at the edge is a race"
                )
    return None


def design_race(files: dict[str, str]) -> str | None:
    """:func:`clocked_blocking_race` over every module of the DUT files ``files`` (name -> text)
    that the design instantiates: the first one found, with its file. Cached per design (the
    samples of a problem share it)."""
    return _design_race(json.dumps({n: t for n, t in files.items() if hdl.is_hdl_source(n)}, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _design_race(files_json: str) -> str | None:
    from reward_service.fastcov.instrument import _instance_bodies, modules_of, parse

    sources, compilation = parse(json.loads(files_json))
    bodies = _instance_bodies(compilation)
    for source in sources:
        for module in modules_of(source):
            body = bodies.get(module.header.name.valueText)
            if body is None:
                continue
            why = clocked_blocking_race(module, body, lambda tok, s=source: s.line_col(tok.location)[0])
            if why:
                return f"{source.name}: {why}"
    return None
