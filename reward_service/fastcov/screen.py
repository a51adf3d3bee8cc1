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
import posixpath
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pyslang import ast, syntax
from pyslang.parsing import Token, TokenKind

from reward_service import hdl
from reward_service.fastcov.instrument import _tokens, _walk  # the syntax walks the instrumenter uses
from reward_service.fastcov.unit import TOKEN_PLACEHOLDER

#: SV system tasks that read a file (IEEE 1800-2017 21.3 and 21.4).
_SV_READS = re.compile(r"\$(?:fgets|fgetc|ungetc|fscanf|fread|readmemh|readmemb|fseek|frewind|ftell)\b")
#: A string literal (skipped) or the start of a call that opens a file: ``$fopen``, ``$readmemh``, ``$readmemb``.
_SV_OPENS = re.compile(rf"(?P<s>{hdl.STRING_LITERAL.pattern})|(?P<op>\$fopen|\$readmem[hb])\s*\(")
#: Python naming the fast path's own files. Reading files as such is common in cocotb tests
#: (CVDP's harness_library reads its runner's files), so only these names are screened.
#: (/model: a cached cocotb build, whose per-run sim.vvp copy holds the run's token.)
_PY_READS = re.compile(r"/work/src|/work/obj|/model\b|rs_fastcov|sim\.vvp|\bmmap\b")


def reads_files(stimulus: Any, data_files: Collection[str] = ()) -> str | None:
    """Why the fast path must not run ``stimulus`` (an ``SvTestbench`` or ``CocotbStimulus``):
    the file and construct through which it reads files, or None. A file holding
    :data:`~reward_service.fastcov.unit.TOKEN_PLACEHOLDER` is refused too: the fast path
    replaces that text with the run's token wherever it stands in what it compiles.

    An SV file whose every ``$fopen`` for reading and ``$readmemh``/``$readmemb`` names, by a
    string literal, one of ``data_files`` (the request's data files, at their relative paths:
    copied as written into the simulation's cwd, they hold no token) is not refused: it can
    open nothing else to read, and ``$fscanf``/``$fgets``/... read only what it opened."""
    data = {posixpath.normpath(n) for n in data_files}
    # a macro whose body names a file task (`define OPEN $fopen) hides the call from the screen
    hides_file_tasks = any(
        _FILE_TASK_MACRO.search(hdl.strip_comments_only(text))
        for name, text in stimulus.files.items()
        if not name.endswith(".py")
    )
    for name, text in stimulus.files.items():
        if TOKEN_PLACEHOLDER in text:
            return f"{name} holds `{TOKEN_PLACEHOLDER}`, the text the fast path replaces with its coverage token"
        if name.endswith(".py"):
            m = _PY_READS.search(text)
            if m:
                return f"{name} names the fast path's files (`{m.group(0)}`)"
            continue
        code = hdl.strip_comments_only(text)
        if "``" in code:
            return f"{name} pastes tokens in a macro (``` `` ```): the screen cannot see the system tasks it makes"
        opened = list(_files_opened_for_reading(code))
        # The allowance needs an open it can see: with none (`$fopen` behind a macro, or a
        # descriptor written as a number) a `$fgetc` reads what the screen does not know.
        if (
            opened
            and all(target is not None and target in data for _, target in opened)
            and not hides_file_tasks
            and _reads_only_opened(code)
        ):
            continue  # reads only the request's own data files
        m = _SV_READS.search(hdl.strip_comments(text))
        if m:
            return f"{name} reads files (`{m.group(0)}`){_not_data(opened, data)}"
        for what, _ in opened:
            if what.startswith("`$fopen`"):
                return f"{name} opens a file for reading ({what}){_not_data(opened, data)}"
    return None


#: A `` `define `` whose body names a file system task (``$fopen``, ``$fgetc``, ``$readmemh``, ...).
_FILE_TASK_MACRO = re.compile(r"`define\b(?:[^\n]|\\\n)*?\$(?:f\w|readmem|ungetc)")
#: The start of a read call that takes a descriptor (not ``$readmem``, which names its file).
_SV_FD_READS = re.compile(r"\$(?:fgets|fgetc|ungetc|fscanf|fread|fseek|frewind|ftell)\s*\(")


def _reads_only_opened(code: str) -> bool:
    """Whether every descriptor-taking read call in ``code`` reads a plain variable that the
    file assigns only ``= $fopen(...)`` (whose names :func:`_files_opened_for_reading` checks):
    not a number (``$fgetc(32'h8000_0000)``), an expression, or a variable set otherwise
    (``fd = `OPEN(...)``). ``$fgets``/``$fread`` take the descriptor second, ``$ungetc`` too."""
    plain = hdl.STRING_LITERAL.sub(lambda m: '""', code)
    for call in _SV_FD_READS.finditer(plain):
        task = call.group(0)
        args = plain[call.end() :]
        second = task.startswith(("$fgets", "$fread", "$ungetc"))
        m = re.match(r"\s*(?:[^,()]*,\s*)?([A-Za-z_]\w*)\s*[,)]" if second else r"\s*([A-Za-z_]\w*)\s*[,)]", args)
        if m is None:
            return False
        fd = m.group(1)
        sets = list(re.finditer(rf"(?<![\w$.]){fd}\s*(?:<=|=(?!=)|\+\+|--|[-+*/|&^]=)", plain))
        if not sets or any(not re.match(r"\s*\$fopen\s*\(", plain[s.end() :]) for s in sets):
            return False
    return True


def _not_data(opened: list[tuple[str, str | None]], data: set[str]) -> str:
    """The first file read that is not a data file of the request, as a message's tail."""
    for what, target in opened:
        if target is None:
            return f", {what} of a name that is not a plain string literal of a relative path"
        if target not in data:
            return f", {what} of {target!r}, not a data file of the request"
    return ""


def _files_opened_for_reading(code: str):
    """``(construct, file name or None)`` for each ``$fopen`` for reading and each
    ``$readmemh``/``$readmemb`` in ``code`` (comments stripped): the name when it is a plain
    string literal (normalised; None for anything else: an expression, an escape sequence, an
    absolute path or one leaving the cwd)."""
    for call in _SV_OPENS.finditer(code):
        if call.group("s"):
            continue  # "$fopen(" inside a string literal
        end = code.find(";", call.end())
        args = code[call.end() : end if end >= 0 else len(code)]
        if call.group("op") == "$fopen":
            mode = _fopen_mode(args)
            if mode is None or not ("r" in mode or "+" in mode or mode == "?"):
                continue  # write-only
            what = f"`$fopen` mode {mode if mode != '?' else 'not a literal'}"
        else:
            what = f"`{call.group('op')}`"
        yield what, _literal_name(args)


def _literal_name(args: str) -> str | None:
    """The file name of a call from the text after its ``(`` when its first argument is a plain
    string literal naming a relative path inside the cwd, else None."""
    m = re.match(rf"\s*({hdl.STRING_LITERAL.pattern})\s*[,)]", args)
    if m is None:
        return None
    name = m.group(1)[1:-1]
    if not name or "\\" in name or name.startswith("/"):
        return None
    name = posixpath.normpath(name)
    return None if name.startswith("..") else name


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
    (read and written: ``+=``, ``++``), ``nb`` (the base of a nonblocking target) or ``read``.
    A call of one of the module's tasks or functions adds the subroutine's names at the call:
    it runs in the caller's process."""

    node: Any
    uses: list[tuple[str, str, Any]]

    @property
    def edge_triggered(self) -> bool:
        return edge_triggered(self.node)


def edge_triggered(node: Any) -> bool:
    """Whether ``node`` is an ``always``/``always_ff``/``initial`` procedure with an event
    control naming an edge anywhere in it (a clocked procedure: its writes after that control
    happen at the edge), whether it heads the body or not (``always begin @(posedge clk);
    ...``)."""
    if node.kind not in (_K.AlwaysBlock, _K.AlwaysFFBlock, _K.InitialBlock):
        return False
    return any(t.kind in _EDGES for t in _tokens(node.statement))


def edge_control(control: Any) -> bool:
    """Whether the event control ``control`` names an edge."""
    return any(t.kind in _EDGES for t in _tokens(control))


_EDGES = {TokenKind.PosEdgeKeyword, TokenKind.NegEdgeKeyword, TokenKind.EdgeKeyword}
_SUBROUTINES = (_K.FunctionDeclaration, _K.TaskDeclaration)


def processes(module: Any, body: Any) -> list[Process]:
    """The processes of a module declaration (syntax; generate blocks included) with their
    signal names; ``body``: its elaborated instance body (names that resolve to anything but a
    net or variable there are left out)."""
    nodes: list[Any] = []

    def visit(node: Any) -> None:
        for child in node:
            if isinstance(child, syntax.SyntaxNode):
                if child.kind in PROCESSES:
                    nodes.append(child)
                else:
                    visit(child)

    visit(module)
    calls: dict[str, list[Any]] = {}
    for node in nodes:
        if node.kind in _SUBROUTINES:
            calls.setdefault(_subroutine_name(node), []).append(node)
    return [Process(node, signal_uses(node, body, calls)) for node in nodes]


def _subroutine_name(node: Any) -> str:
    name = node.prototype.name
    last = name.right if name.kind == _K.ScopedName else name  # `function C::f` (an out-of-block method)
    return last.identifier.valueText if hasattr(last, "identifier") else str(last).strip()


def signal_uses(
    node: Any, body: Any, calls: dict[str, list[Any]] | None = None, _open: tuple[Any, ...] = ()
) -> list[tuple[str, str, Any]]:
    """The signal names under ``node`` in text order as :class:`Process` lists them; ``calls``:
    the module's subroutines by name, whose names a call adds in its place."""
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
        if calls and name in calls:
            for decl in calls[name]:
                if decl is not node and decl not in _open:  # a recursive call adds nothing new
                    uses += signal_uses(decl, body, calls, (*_open, node))
            continue
        sym = body.find(name) if body is not None else None
        if sym is not None and sym.kind in _NOT_SIGNALS:
            continue
        uses.append((name, roles.get(tok.location, "read"), tok))
    return uses


def written_first(node: Any) -> set[str]:
    """The names the process ``node`` assigns whole with ``=`` before any use of them on every
    path: in a statement of its top-level sequence (not under a condition, loop or call; a
    ``for`` loop's initialisation counts), with no earlier use (its own right-hand side
    included). Such a process reads only its own value."""
    seen: set[str] = set()
    first: set[str] = set()

    def use(n: Any) -> None:
        seen.update(tok.valueText for tok in _names(n))

    def assign(expr: Any) -> None:
        use(expr.right)
        left = expr.left
        parts = list(left.expressions) if left.kind == _K.ConcatenationExpression else [left]
        whole: list[Any] = [p for p in parts if isinstance(p, syntax.SyntaxNode) and p.kind == _K.IdentifierName]
        if len(whole) != len([p for p in parts if isinstance(p, syntax.SyntaxNode)]):
            use(left)  # a select or member writes part of a variable: the rest is read
            return
        for p in whole:
            name = p.identifier.valueText
            if name not in seen:
                first.add(name)
            seen.add(name)

    def statement(s: Any) -> None:
        if s.kind == _K.SequentialBlockStatement:
            for item in s.items:
                statement(item)
        elif s.kind == _K.TimingControlStatement:
            use(s.timingControl)
            statement(s.statement)
        elif s.kind == _K.ExpressionStatement and s.expr.kind == _K.AssignmentExpression:
            assign(s.expr)
        elif s.kind == _K.ForLoopStatement:
            for init in s.initializers:
                if isinstance(init, syntax.SyntaxNode) and init.kind == _K.AssignmentExpression:
                    assign(init)
                elif isinstance(init, syntax.SyntaxNode):
                    use(init)
            use(s)
        else:
            use(s)

    if node.kind in _SUBROUTINES:
        for item in node.items:
            statement(item)
    elif node.kind in (_K.AlwaysBlock, _K.AlwaysFFBlock, _K.AlwaysCombBlock, _K.AlwaysLatchBlock, _K.InitialBlock):
        statement(node.statement)
    return first


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


def clocked_blocking_race(
    module: Any, body: Any, line_of: Any = None, ports: frozenset[str] = frozenset()
) -> str | None:
    """Why the module has a race (None: it has none found): a variable assigned with ``=`` in
    a clocked procedure (or a subroutine it calls) and read by another process that does not
    assign it whole with ``=`` before any use on every path (:func:`written_first`; a loop
    index set by the loop first reads its own value), or that is one of ``ports`` (the
    module's output ports when another module of the design instantiates it: its processes
    read them). At the edge, simulators may run the reader before or after the writer, so it
    reads the old or the new value; Icarus and Verilator need not agree, and a model that
    reads the old value misses what one of them counts. ``line_of``: token -> line number, for
    the message."""
    procs = processes(module, body)
    first: dict[int, set[str]] = {}
    for writer in procs:
        if not writer.edge_triggered:
            continue
        for name, role, tok in writer.uses:
            if role not in ("write", "step"):
                continue
            at = f" (line {line_of(tok)})" if line_of else ""
            if name in ports:
                return (
                    f"`{name}` is assigned with `=` in a clocked procedure{at} and is an output port of a module "
                    "another module instantiates and reads: which one runs first at the edge is a race"
                )
            for reader in procs:
                # Only a read races with the write: a nonblocking write of the same variable
                # lands after every blocking one at that edge, and two blocking writers are
                # two drivers (the prover's netlist check refuses them).
                if reader is writer or not any(n == name and r in ("read", "step") for n, r, _ in reader.uses):
                    continue
                exempt = first.setdefault(id(reader), written_first(reader.node))
                if name in exempt:
                    continue
                return (
                    f"`{name}` is assigned with `=` in a clocked procedure{at} and read by another process "
                    "of the same module: which one runs first at the edge is a race"
                )
    return None


#: Symbol kinds the first part of a dotted name may resolve to in a hierarchical reference.
_SCOPES = {
    ast.SymbolKind.Instance,
    ast.SymbolKind.InstanceArray,
    ast.SymbolKind.GenerateBlock,
    ast.SymbolKind.GenerateBlockArray,
    ast.SymbolKind.InterfacePort,
    ast.SymbolKind.Modport,
}


def _hierarchical(module: Any, body: Any):
    """The dotted names of ``module`` that may reach into another scope: ``(last name,
    node)`` where the first part is an instance, a generate block or a name the body does not
    know (a module name, ``$root``); a struct's or an object's member is not one."""
    n: Any
    for n in _walk(module):
        if n.kind not in (_K.ScopedName, _K.MemberAccessExpression) or _inner_part(n, n.kind):
            continue  # the longest dotted name only
        if not _reaches_out(n, body):
            continue
        last = n.right if n.kind == _K.ScopedName else n.name
        tok = last if isinstance(last, Token) else getattr(last, "identifier", None)
        if tok is not None:
            yield tok.valueText, n


def _inner_part(n: Any, kind: Any) -> bool:
    """Whether ``n`` is the left part of a longer dotted name of ``kind``."""
    p = n.parent
    return p is not None and p.kind == kind and p.left.sourceRange == n.sourceRange


def _reaches_out(name: Any, body: Any, local: frozenset[str] = frozenset()) -> bool:
    """Whether the expression ``name`` is a dotted name that may reach into another scope:
    its first part is an instance, a generate block or a name the body does not know (a
    module name, ``$root``), not a variable (a struct's member)."""
    if name.kind == _K.ScopedName:
        if name.separator.kind != TokenKind.Dot:
            return False
    elif name.kind != _K.MemberAccessExpression:
        return False
    head = next(iter(_all_names(name)), None)
    if head is None or head.valueText in local:
        return False
    sym = body.find(head.valueText) if body is not None else None
    return sym is None or sym.kind in _SCOPES


def _all_names(node: Any):
    for tok in _tokens(node):
        if tok.kind in (TokenKind.Identifier, TokenKind.SystemIdentifier, TokenKind.RootSystemName):
            yield tok


def races(sources: list[Any], bodies: dict[str, Any]) -> str | None:
    """Why the design (parsed ``sources``, elaborated instance ``bodies`` by module name) has
    a race at a clock edge, with its file (None: none found): :func:`clocked_blocking_race` in
    any module it instantiates, an output port of a module another one instantiates driven so,
    a variable assigned so (anywhere in the design) read by a dotted name, or a clocked
    procedure that assigns a dotted name with ``=``."""
    from reward_service.fastcov.instrument import modules_of

    modules = [
        (source, module, bodies[module.header.name.valueText])
        for source in sources
        for module in modules_of(source)
        if module.header.name.valueText in bodies
    ]
    inner = {n.type.valueText for _, module, _ in modules for n in _walk(module) if n.kind == _K.HierarchyInstantiation}
    clocked: set[str] = set()
    for source, module, body in modules:

        def line_of(tok: Any, s: Any = source) -> int:
            return s.line_col(tok.location)[0]

        outputs: frozenset[str] = frozenset()
        if module.header.name.valueText in inner:
            outputs = frozenset(
                p.name
                for p in body.portList
                if getattr(p, "direction", None)
                in (ast.ArgumentDirection.Out, ast.ArgumentDirection.InOut, ast.ArgumentDirection.Ref)
            )
        why = clocked_blocking_race(module, body, line_of, outputs)
        if why:
            return f"{source.name}: {why}"
        for proc in processes(module, body):
            if proc.edge_triggered:
                clocked.update(n for n, role, _ in proc.uses if role in ("write", "step"))
                local = frozenset(d.name.valueText for d in _walk(proc.node) if d.kind == _K.Declarator)
                for n in _walk(proc.node):
                    if n.kind in _BLOCKING and _reaches_out(n.left, body, local):
                        return (
                            f"{source.name}: a clocked procedure assigns `{str(n.left).strip()}` with `=` "
                            f"(line {line_of(n.getFirstToken())}): another scope's processes read it at the edge, a race"
                        )
    for source, module, body in modules:
        for name, node in _hierarchical(module, body):
            if name in clocked:
                return (
                    f"{source.name}: `{str(node).strip()}` (line {source.line_col(node.getFirstToken().location)[0]}) "
                    f"reads `{name}` by a hierarchical name, and `{name}` is assigned with `=` in a clocked procedure: "
                    "which one runs first at the edge is a race"
                )
    return None


def design_race(files: dict[str, str], defines: Mapping[str, str | None] | None = None) -> str | None:
    """:func:`races` of the DUT files ``files`` (name -> text) built with ``defines``. Cached
    per design (the samples of a problem share it)."""
    return _design_race(*_design_json(files, defines))


def _design_json(files: dict[str, str], defines: Mapping[str, str | None] | None) -> tuple[str, str]:
    """The HDL files and the macros of a design as JSON texts (the keys of the caches below)."""
    return (
        json.dumps({n: t for n, t in files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)}, sort_keys=True),
        json.dumps(dict(defines or {}), sort_keys=True),
    )


def _parse_design(files_json: str, defines_json: str) -> tuple[list[Any], Any]:
    """The parsed sources and the compilation of :func:`_design_json`'s texts."""
    from reward_service.fastcov.instrument import headers_of, parse

    files = json.loads(files_json)
    return parse(
        {n: t for n, t in files.items() if hdl.is_hdl_source(n)},
        defines=json.loads(defines_json),
        headers=headers_of(files),
    )


@functools.lru_cache(maxsize=256)
def _design_race(files_json: str, defines_json: str) -> str | None:
    from reward_service.fastcov.instrument import _instance_bodies

    sources, compilation = _parse_design(files_json, defines_json)
    return races(sources, _instance_bodies(compilation))


def design_unguarded_waits(files: dict[str, str], defines: Mapping[str, str | None] | None = None) -> str | None:
    """Why the DUT files ``files`` (name -> text) built with ``defines`` must not be scored on
    the fast path with an SV testbench: the event controls of their processes that
    :func:`~reward_service.fastcov.emulate.edge_processes` leaves as written
    (:func:`~reward_service.fastcov.emulate.unguarded_waits`: a zero-width pulse written by
    the testbench wakes them on Icarus only), or None. Cached per design."""
    return _design_unguarded_waits(*_design_json(files, defines))


@functools.lru_cache(maxsize=256)
def _design_unguarded_waits(files_json: str, defines_json: str) -> str | None:
    from reward_service.fastcov.emulate import unguarded_waits

    sources, _ = _parse_design(files_json, defines_json)
    found = [w for source in sources for w in unguarded_waits(source)]
    if not found:
        return None
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"the design waits on events the fast path does not guard against zero-width pulses "
        f"({shown}): Icarus would run them on a pulse Verilator does not see"
    )
