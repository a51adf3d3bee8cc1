"""Clocking-block output drives lowered to plain code before a Verilator build (docs/semantics.md).

Verilator (5.048 and 5.052; upstream verilator/verilator#7938, open) drops a synchronous drive
``cb.x <= v`` that re-asserts the value the clocking block last drove when ``x`` was written in
between by plain procedural code (``#0 en = 1;`` at time 0, then ``@(cb); cb.en <= 0;``: the
clockvar was 0, so the drive is taken as redundant and the DUT keeps 1). Icarus 11 compiles no
clocking block at all, so every such testbench runs on Verilator. :func:`lower` rewrites the
testbench text so that Verilator executes IEEE 1800-2023 14.16 (synchronous drives) itself:

- the clocking block stays (its event, ``@(cb)``, ``##n`` through ``default clocking``, its
  inputs); its ``output`` items are removed from it;
- per block ``cb`` (names ``rs_cbl_<len(cb)><cb>_...``, written ``rs_cbl_cb_`` here): ``rs_cbl_cb_t`` (the ``$realtime`` of the block's last clocking event),
  ``rs_cbl_cb_f`` (an event has happened), ``rs_cbl_cb_a`` (an application is armed), a process
  ``initial forever begin @<event>; ...`` that records each event and arms the application
  when drives are pending, and a task ``rs_cbl_cb_apply`` that, after ``#0``, writes the pending
  drives to their variables with ``<=`` and clears them; per output ``x``: a pending value
  ``rs_cbl_cb_x_p`` (``x``'s type) and mask ``rs_cbl_cb_x_m`` (1 bit, or ``x``'s type when a
  drive selects bits of ``x``);
- each drive ``cb.x <= v;`` (or ``cb.x[sel] <= v;``) stores ``v`` as pending (a later store of
  the same bits overwrites: the last drive maturing at an event wins, 14.16.2) and, when the
  clocking event of ``cb`` already happened in the current time step, arms the application
  (the drive matures at this event, 14.16); otherwise it matures at the next event, whose
  recording process arms it. The recording process and a testbench process resumed by the same
  event run in either order with the same result: the testbench stores, and whichever of the two
  runs second arms (at most one application is armed at a time; a drive executed after it ran
  arms another, later in the same time step).

Why so, and not ``x <= v`` in the testbench process: Verilator before 5.050 turns ``<=`` in
``initial`` code into ``=`` (verilator#4384), which would write before the DUT samples at that
edge, or block the testbench for the skew (``x = #2 v``); the application's ``#0`` makes it run
after the active region (after every DUT process woken by the edge) on every version, where a
``<=`` and an ``=`` give the same. The recording process is a timed process, not ``always
@(posedge clk)``: Verilator 5.048/5.052 let a testbench process resumed by ``##n`` read the
values such a static process wrote at that edge stale (measured). Skew: the write is ``x <= v``
at the event's time step for none (the standard's drive lands in its Re-NBA region, ours in the
NBA region of the same time step, after the DUT's edge processes either way), a ``fork``ed
``#skew x <= v`` (``v`` taken at the event) for ``#3``, ``#2ns``, ``#1.5`` (the item's or the
block's ``default output``). Two drives of one output maturing at the same event with a skew,
the second executed after the first was applied, land at the same time in the order the two
forked processes resume (first forked first in Icarus and Verilator; the standard leaves the
order of such processes open). Everything is written on the lines of the constructs it replaces
(new declarations after ``endclocking``), so every file:line a result names is the model's.

A block is left as written (today's behaviour; Verilator then runs it with #7938) when its use is
outside what the lowering reproduces exactly: an ``inout`` item or an ``input output`` one, an
output with an expression (``output w = a[1]``), an edge or ``1step`` output skew, an output
whose variable is not declared as a plain integral variable (``logic``/``bit``/``reg``/``int``...,
at most one packed dimension when a drive selects bits, no unpacked one) in the module before the
block, or is declared again in an inner scope; a drive with an intra-assignment cycle delay
(``cb.x <= ##2 v``), one that is not a statement of its own, spans lines, or precedes the block;
any other use of the block's name (``tb.cb.x``, ``cb`` from another module, a ``bind``); a drive
in a function, ``always_ff``/``always_comb``/``always_latch`` or ``final`` (no ``fork`` there);
a select drive with an output skew; a block in an interface or program; a file with macros or
includes (the text the simulator compiles is not the text parsed here) or that pyslang does not
parse cleanly.

The lowered text writes only variables the testbench module declares (the clocking block's own
targets, checked above), so it never writes what the text as written did not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyslang import parsing, syntax

_SX = syntax.SyntaxKind
_TK = parsing.TokenKind

#: Directives that change nothing the lowering reads; any other backtick (a macro, `include,
#: `ifdef) makes the compiled text differ from the parsed one: the file is left as written.
_NEUTRAL_DIRECTIVES = frozenset({"timescale", "default_nettype", "resetall", "celldefine", "endcelldefine"})
_DIRECTIVE = re.compile(r"`(\w+)")

#: Declared types whose variables the lowering can hold a pending drive for (a copy of the type).
_INTEGRAL_TYPES = frozenset(
    {
        _SX.LogicType,
        _SX.RegType,
        _SX.BitType,
        _SX.IntType,
        _SX.IntegerType,
        _SX.ByteType,
        _SX.ShortIntType,
        _SX.LongIntType,
    }
)

#: Prefix of every name the lowering declares; a file already using it is left as written.
PREFIX = "rs_cbl_"


@dataclass
class Lowering:
    """What :func:`lower` did: ``files`` (name -> text; a file it did not change keeps its text),
    ``lowered``: ``file:module.block`` of each block lowered, ``kept``: (``file:module.block``
    or ``file``, reason) of each block or file left as written."""

    files: dict[str, str]
    lowered: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether any file's text differs from the input."""
        return bool(self.lowered)


class _Keep(Exception):
    """This block is left as written (the message says why)."""


def lower(files: Mapping[str, str]) -> Lowering:
    """Lower the clocking-block output drives of the testbench ``files`` (name -> SystemVerilog
    text: every stimulus file of one build, so a use of a block from another file is seen) as
    the module docstring says. Files without the word ``clocking`` are returned as given;
    never raises on a text it cannot handle (it is kept, with the reason in ``kept``)."""
    out = Lowering(dict(files))
    parsed: dict[str, Any] = {}
    for name, text in files.items():
        if not re.search(r"\bclocking\b", text):
            continue
        directives = {d for d in _DIRECTIVE.findall(text)} - _NEUTRAL_DIRECTIVES
        if directives:
            out.kept.append((name, f"macros or directives in the file ({', '.join(sorted(directives))})"))
            continue
        tree = syntax.SyntaxTree.fromText(text)
        if any(d.isError() for d in tree.diagnostics):
            out.kept.append((name, "pyslang does not parse the file cleanly"))
            continue
        parsed[name] = tree
    if not parsed:
        return out
    for name, tree in parsed.items():
        edits: list[tuple[int, int, str]] = []
        data = files[name].encode("utf-8")
        if PREFIX in files[name]:
            out.kept.append((name, f"the file already uses names starting with {PREFIX}"))
            continue
        for module in _modules(tree.root):
            for block in module.members:
                if block.kind != _SX.ClockingDeclaration or not _name(block.blockName):
                    continue
                where = f"{name}:{_name(module.header.name)}.{_name(block.blockName)}"
                try:
                    block_edits = _plan(module, block, data, files, parsed, name)
                except _Keep as keep:
                    out.kept.append((where, str(keep)))
                    continue
                if block_edits:
                    edits += block_edits
                    out.lowered.append(where)
        if edits:
            out.files[name] = _apply(data, edits)
    return out


# -- one block ---------------------------------------------------------------------------------


@dataclass
class _Output:
    name: str
    skew: str  # "" or "#<literal>"
    decl_type: str = ""
    packed_dims: int = 0
    selects: bool = False


def _plan(
    module: Any, block: Any, data: bytes, files: Mapping[str, str], parsed: Mapping[str, Any], file: str
) -> list[tuple[int, int, str]]:
    """The edits (byte start, byte end, replacement) lowering ``block`` of ``module``; [] when it
    has no output item. Raises :class:`_Keep`."""
    if module.kind != _SX.ModuleDeclaration:
        raise _Keep("clocking block in an interface or program")
    cb = _name(block.blockName)
    default_skew = ""
    outputs: dict[str, _Output] = {}
    inputs: set[str] = set()
    removed: list[Any] = []
    for item in block.items:
        if item.kind == _SX.DefaultSkewItem:
            if _present(item.direction.output):
                default_skew = _skew(item.direction.outputSkew)
            continue
        if item.kind != _SX.ClockingItem:
            raise _Keep(f"clocking item {item.kind.name}")
        direction = item.direction
        has_in, has_out = _present(direction.input), _present(direction.output)
        if has_in and direction.input.kind == _TK.InOutKeyword:
            raise _Keep("inout clocking item")
        if has_in and has_out:
            raise _Keep("input output clocking item")
        decls = _list(item.decls)
        names = [_name(d.name) for d in decls]
        if not has_out:
            inputs.update(names)
            continue
        skew = _skew(direction.outputSkew) if direction.outputSkew is not None else None
        for d in decls:
            if d.value is not None:
                raise _Keep(f"output {_name(d.name)} has an expression")
        for n in names:
            outputs[n] = _Output(n, skew if skew is not None else "\0default")
        removed.append(item)
    if not outputs:
        return []
    for o in outputs.values():
        if o.skew == "\0default":
            o.skew = default_skew
    block_start = _start(block)
    _declarations(module, outputs, block_start)
    drives = _uses(module, block, cb, outputs, inputs)
    _foreign_uses(cb, module, file, files, parsed)
    for stmt, _, _, _ in drives:
        if _start(stmt) < block_start:
            raise _Keep("a drive precedes the clocking block")
        _check_context(stmt)
    for o in outputs.values():
        if o.selects and o.skew:
            raise _Keep(f"{cb}.{o.name} is driven through a select with an output skew")
    edits = [(_start(item), _end(item), _blank(data[_start(item) : _end(item)])) for item in removed]
    edits.append((_end(block), _end(block), " " + _state(cb, _flat(block.event), outputs)))
    for stmt, out, sel, rhs in drives:
        start, end = _start(stmt.expr), _end(stmt)
        if b"\n" in data[start:end]:
            raise _Keep("a drive spans lines")
        edits.append((start, end, _drive(cb, outputs[out], sel, rhs)))
    return edits


def _declarations(module: Any, outputs: dict[str, _Output], before: int) -> None:
    """Fill each output's declared type from its one declaration in ``module`` (a data
    declaration of an integral type among the module's members, before byte ``before``)."""
    seen: dict[str, int] = {}
    for node in _nodes(module):
        if node.kind == _SX.Declarator and _name(node.name) in outputs:
            seen[_name(node.name)] = seen.get(_name(node.name), 0) + 1
    for member in module.members:
        if member.kind != _SX.DataDeclaration:
            continue
        for d in _list(member.declarators):
            o = outputs.get(_name(d.name))
            if o is None:
                continue
            if member.type.kind not in _INTEGRAL_TYPES:
                raise _Keep(f"{o.name} is not a plain integral variable")
            if any(_text(m) == "const" for m in member.modifiers) or len(d.dimensions):
                raise _Keep(f"{o.name} is const or has unpacked dimensions")
            if _start(member) > before:
                raise _Keep(f"{o.name} is declared after the clocking block")
            o.decl_type = _flat(member.type)
            o.packed_dims = len(getattr(member.type, "dimensions", ()))
    for o in outputs.values():
        if not o.decl_type:
            raise _Keep(f"{o.name} is not declared as a variable in the module body")
        if seen.get(o.name, 0) != 1:
            raise _Keep(f"{o.name} is declared more than once in the module")


def _uses(module: Any, block: Any, cb: str, outputs: dict[str, _Output], inputs: set[str]) -> list[tuple]:
    """The drives of ``cb`` in ``module`` as (expression statement, output, select text, rhs
    text); raises :class:`_Keep` when ``cb`` is used any other way than ``@(cb)``, ``@cb``,
    ``default clocking cb;``, a read of an input ``cb.i`` or such a drive."""
    drives = []
    classified = 0
    for node in _nodes(module):
        if node.kind not in (_SX.IdentifierName, _SX.IdentifierSelectName) or _name(node.identifier) != cb:
            continue
        parent = node.parent
        if node.kind == _SX.IdentifierSelectName:
            raise _Keep(f"{cb} used with a select")
        if parent.kind in (_SX.SignalEventExpression, _SX.EventControl):
            classified += 1
            continue
        if parent.kind != _SX.ScopedName or parent.left is not node or _text(parent.separator) != ".":
            raise _Keep(f"{cb} used as {parent.kind.name}")
        right = parent.right
        member = _name(right.identifier) if right.kind in (_SX.IdentifierName, _SX.IdentifierSelectName) else ""
        if member in inputs and right.kind == _SX.IdentifierName:
            classified += 1
            continue
        if member not in outputs:
            raise _Keep(f"{cb}.{member or _text(right)} is not a clocking output or input read")
        nba, stmt = parent.parent, parent.parent.parent if parent.parent is not None else None
        if (
            nba is None
            or nba.kind != _SX.NonblockingAssignmentExpression
            or nba.left is not parent
            or stmt is None
            or stmt.kind != _SX.ExpressionStatement
        ):
            raise _Keep(f"{cb}.{member} is used other than as a drive statement")
        if nba.right.kind == _SX.TimingControlExpression:
            raise _Keep(f"{cb}.{member} is driven with an intra-assignment cycle delay")
        sel = ""
        if right.kind == _SX.IdentifierSelectName:
            if len(_list(right.selectors)) != 1 or outputs[member].packed_dims > 1:
                raise _Keep(f"{cb}.{member} is driven through a select this lowering does not keep exact")
            sel = _flat(_list(right.selectors)[0])
            outputs[member].selects = True
        classified += 1
        drives.append((stmt, member, sel, _flat(nba.right)))
    tokens = sum(1 for t in _tokens(module) if t.kind == _TK.Identifier and t.valueText == cb)
    own = 1 + (1 if block.endBlockName is not None and _name(block.endBlockName.name) == cb else 0)
    defaults = sum(1 for m in module.members if m.kind == _SX.DefaultClockingReference and _text(m.name) == cb)
    if tokens != classified + own + defaults:
        raise _Keep(f"{cb} is named where this lowering does not look")
    return drives


#: Code a drive may not sit in: the lowered drive forks the applying task (no ``fork`` in a
#: function, ``always_ff``/``always_comb``/``always_latch`` or ``final``).
_NO_FORK = frozenset(
    {
        _SX.FunctionDeclaration,
        _SX.AlwaysFFBlock,
        _SX.AlwaysCombBlock,
        _SX.AlwaysLatchBlock,
        _SX.FinalBlock,
    }
)


def _check_context(stmt: Any) -> None:
    """Raise :class:`_Keep` when the drive statement ``stmt`` lies where a ``fork`` may not."""
    node = stmt.parent
    while node is not None:
        if node.kind in _NO_FORK:
            raise _Keep(f"a drive in {node.kind.name}")
        node = node.parent


def _foreign_uses(cb: str, module: Any, file: str, files: Mapping[str, str], parsed: Mapping[str, Any]) -> None:
    """Raise :class:`_Keep` when a stimulus file names ``cb`` outside ``module``, unless in
    another module that declares its own block ``cb`` and names it only as a first path part."""
    for name, text in files.items():
        if not re.search(rf"\b{re.escape(cb)}\b", text):
            continue
        tree = parsed.get(name)
        if tree is None:
            raise _Keep(f"{name} names {cb} and is not parsed")
        outside = sum(1 for t in _tokens(tree.root) if t.kind == _TK.Identifier and t.valueText == cb)
        for other in _modules(tree.root):
            count = sum(1 for t in _tokens(other) if t.kind == _TK.Identifier and t.valueText == cb)
            outside -= count
            if other is module or not count:
                continue
            own = any(m.kind == _SX.ClockingDeclaration and _name(m.blockName) == cb for m in other.members)
            dotted = any(
                n.kind == _SX.ScopedName and n.right.kind == _SX.IdentifierName and _name(n.right.identifier) == cb
                for n in _nodes(other)
            )
            if not own or dotted:
                raise _Keep(f"{cb} is named in module {_name(other.header.name)}")
        if outside:
            raise _Keep(f"{cb} is named outside any module in {name}")


# -- text ----------------------------------------------------------------------------------------


def _prefix(cb: str) -> str:
    """The prefix of block ``cb``'s generated names: ``rs_cbl_<length of cb><cb>_``. The length
    makes it one block's alone (blocks ``a`` with output ``b_x`` and ``a_b`` with output ``x``
    would otherwise both declare ``rs_cbl_a_b_x_p``); an identifier does not start with a digit."""
    return f"{PREFIX}{len(cb)}{cb}_"


def _state(cb: str, event: str, outputs: dict[str, _Output]) -> str:
    """The declarations, the recording process and the applying task of ``cb`` (clocking
    ``event``, as written after ``@``), on one line."""
    p = _prefix(cb)
    parts = [f"realtime {p}t = 0.0; bit {p}f = 1'b0; bit {p}a = 1'b0;"]
    apply = []
    pending = []
    for o in outputs.values():
        mask_type = o.decl_type if o.selects else "bit"
        parts.append(f"{o.decl_type} {p}{o.name}_p; {mask_type} {p}{o.name}_m = '0;")
        pending.append(f"{p}{o.name}_m != '0")
        if o.selects:  # a select needs no skew (_plan keeps such a block as written otherwise)
            write = (
                f"for (int {p}k = $low({o.name}); {p}k <= $high({o.name}); {p}k++) "
                f"if ({p}{o.name}_m[{p}k]) {o.name}[{p}k] <= {p}{o.name}_p[{p}k];"
            )
        elif o.skew:
            write = f"fork begin automatic {o.decl_type} {p}v = {p}{o.name}_p; {o.skew} {o.name} <= {p}v; end join_none"
        else:
            write = f"{o.name} <= {p}{o.name}_p;"
        apply.append(f"if ({p}{o.name}_m != '0) begin {write} {p}{o.name}_m = '0; end")
    parts.append(f"task automatic {p}apply(); #0; {p}a = 1'b0; {' '.join(apply)} endtask")
    parts.append(
        f"initial forever begin @{event}; {p}t = $realtime; {p}f = 1'b1; "
        f"if (({' || '.join(pending)}) && !{p}a) begin {p}a = 1'b1; fork {p}apply(); join_none end end"
    )
    return " ".join(parts)


def _drive(cb: str, o: _Output, sel: str, rhs: str) -> str:
    """The statement replacing ``cb.<o>[sel] <= rhs;``."""
    p = _prefix(cb)
    mark = "'1" if o.selects else "1'b1"
    return (
        f"begin {p}{o.name}_p{sel} = {rhs}; {p}{o.name}_m{sel} = {mark}; "
        f"if ({p}f && {p}t == $realtime && !{p}a) begin {p}a = 1'b1; fork {p}apply(); join_none end end"
    )


def _skew(skew: Any) -> str:
    """``"#<literal>"`` of an output skew (a plain delay; "" for none); raises :class:`_Keep`
    for an edge or ``1step`` skew or a delay that is not a literal."""
    if skew is None:
        return ""
    if _present(skew.edge):
        raise _Keep("edge output skew")
    delay = skew.delay
    if delay is None:
        return ""
    if delay.kind != _SX.DelayControl:
        raise _Keep(f"output skew {_text(delay)}")
    value = delay.delayValue
    if value.kind not in (_SX.IntegerLiteralExpression, _SX.RealLiteralExpression, _SX.TimeLiteralExpression):
        raise _Keep(f"output skew {_text(delay)} is not a literal")
    literal = _text(value)
    return "" if re.fullmatch(r"0+", literal) else f"#{literal}"


def _blank(text: bytes) -> str:
    """Spaces for ``text``, keeping its newlines (lines do not move)."""
    return "".join("\n" if c == "\n" else " " for c in text.decode("utf-8"))


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    out = data
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + text.encode("utf-8") + out[end:]
    return out.decode("utf-8")


# -- pyslang helpers -----------------------------------------------------------------------------


def _modules(root: Any) -> Iterator[Any]:
    kinds = (_SX.ModuleDeclaration, _SX.InterfaceDeclaration, _SX.ProgramDeclaration)
    for node in _nodes(root):
        if node.kind in kinds:
            yield node


def _nodes(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(c for c in n if isinstance(c, syntax.SyntaxNode))


def _tokens(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        for c in n:
            if isinstance(c, parsing.Token):
                yield c
            elif c is not None:
                stack.append(c)


def _list(seq: Any) -> list[Any]:
    """The nodes of a pyslang (separated) list, without its separator tokens."""
    return [n for n in seq if isinstance(n, syntax.SyntaxNode)]


def _present(token: Any) -> bool:
    return token is not None and token.kind != _TK.Unknown and bool(token.rawText)


def _name(node: Any) -> str:
    if node is None:
        return ""
    if isinstance(node, parsing.Token):
        return node.valueText
    return _text(node)


def _text(node: Any) -> str:
    return str(node).strip()


def _flat(node: Any) -> str:
    """``node``'s text for copying onto one line; raises :class:`_Keep` when it holds a line
    break or a line comment."""
    text = _text(node)
    if "\n" in text or "//" in text:
        raise _Keep(f"{text!r} spans lines")
    return text


def _start(node: Any) -> int:
    return int(node.getFirstToken().location.offset)


def _end(node: Any) -> int:
    return int(node.sourceRange.end.offset)
