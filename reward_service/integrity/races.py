"""Testbench-DUT races at a clock edge, found on the elaborated design (docs/semantics.md).

IEEE 1800 (4.7) lets a simulator run the processes an event wakes in any order. When a clock
edge wakes both a testbench process (``@(posedge clk); rst = 0;``, after ``repeat (n)
@(posedge clk)``, in a task called from it, an ``always @(posedge clk)`` of the testbench) and a
DUT process triggered by the same edge, what the DUT reads depends on which runs first:

- ``write``: the testbench writes with ``=`` a signal that the DUT process reads (directly or
  through continuous assignments and combinational blocks of the DUT);
- ``read``: the testbench reads a signal that the DUT process writes with ``=`` at that edge
  (nonblocking DUT updates land after every read of the time step: not a race).

Icarus and Verilator decide such races differently, so the same stimulus would get a different
reward per engine. We decide them once, for every engine: **a testbench process resumed by a
clock edge runs after every DUT process that edge wakes**. That order is one the standard allows
(the testbench process is simply run last among the woken ones) and the one a testbench written
with ``<=`` gets from every IEEE simulator. It is enforced in the text the simulators compile: a
``#0`` is inserted right after each event control whose resumed code makes such an access (the
testbench then resumes in the inactive region, after the active one has run the DUT's edge
processes); a ``<=`` write resumed by a DUT edge gets the same ``#0``, which the standard's
schedule does not notice and which makes a Verilator before 5.050 (that turns ``<=`` in
``initial`` code into ``=``) schedule it as the standard does. Line numbers do not move.

The walk is a per-process abstract interpretation over statements: the state is the set of
clock edges (with the event control that resumed the process at each) the process may be at;
an event control on a DUT clock sets it, a delay or ``wait`` clears it (an explicit ``#0`` after
the edge is already ordered), branches and loops join their states, tasks are walked with the
caller's state. A write is any form :mod:`reward_service.integrity.lvalues` names (the
integrity check's own analysis). The testbench is walked first, noting its accesses at a DUT
clock edge; the DUT's code (most of the work) is read only when there is one. A statement
is walked once per state (loops nested in loops would otherwise take 2^depth walks). Not
covered: intra-assignment controls (``x = @(posedge clk) v``: reported, not
rewritten), clocking blocks (their drives are scheduled by the standard), edge controls written
in a macro or in ``always_ff`` code (reported, not rewritten), clocks derived through logic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyslang
from pyslang import ast, parsing

from reward_service.integrity.lvalues import node_writes, written_arguments, written_symbols

_SK = ast.SymbolKind
_EK = ast.ExpressionKind
_ST = ast.StatementKind
_TK = ast.TimingControlKind

#: Edge names as reports write them.
_EDGE_NAMES = {ast.EdgeKind.PosEdge: "posedge", ast.EdgeKind.NegEdge: "negedge", ast.EdgeKind.BothEdges: "edge"}

#: System tasks whose reads only print: a race there changes the log, never the stimulus.
_PRINTING = frozenset(
    {"$display", "$displayb", "$displayh", "$displayo", "$write", "$writeb", "$writeh", "$writeo"}
    | {"$strobe", "$monitor", "$info", "$warning", "$error", "$fatal", "$fdisplay", "$fwrite", "$sformatf"}
)


@dataclass(frozen=True)
class Race:
    """One testbench-DUT race: ``kind`` (``write``/``read``), where the testbench makes the
    access (stimulus ``file``, 1-based ``line``), the testbench-side ``signal`` (hierarchical
    path), the clock ``edge`` (``posedge tb.clk``), the DUT process on the other side
    (``dut_file``/``dut_line``, its instance ``dut_scope``) and whether the stimulus text could be
    made to follow the chosen order (``ordered``: False for a control in a macro, ``always_ff``
    or an intra-assignment control)."""

    kind: str
    file: str
    line: int
    signal: str
    edge: str
    dut_file: str
    dut_line: int
    dut_scope: str
    ordered: bool


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyse` found: the ``races`` (file and line order) and the ``edits`` that
    make the stimulus follow the chosen order: (stimulus file, byte offset) where ``" #0 "`` is
    inserted, sorted."""

    races: tuple[Race, ...]
    edits: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Sites:
    """How the analysis places pyslang objects, given by the elaborating checker:
    ``in_stimulus(location)`` -> (stimulus file, 1-based line) or None; ``dut_body(scope)`` -> the
    outermost DUT instance body a scope lies in, or None; ``offset(location)`` -> (stimulus file,
    byte offset) of a location written in a stimulus file outside any macro, else None;
    ``where(location)`` -> (any given file, 1-based line)."""

    in_stimulus: Callable[[Any], tuple[str, int] | None]
    dut_body: Callable[[Any], Any]
    offset: Callable[[Any], tuple[str, int] | None]
    where: Callable[[Any], tuple[str | None, int]]


# An edge: (class id of the clock signal, "posedge"/"negedge"/"edge").
_Edge = tuple[int, str]
# What a testbench process may be resumed by: (edge, clock path, edit site or None).
_At = tuple[_Edge, str, tuple[str, int] | None]


@dataclass
class Parts:
    """The symbols of an elaboration the analysis starts from, each list in the pre-order of a
    visit of the root: ``instances``, procedural ``blocks`` and continuous ``assigns``. The
    integrity check collects them on the walk it makes anyway (:func:`collect` is that walk
    alone)."""

    instances: list[Any]
    blocks: list[Any]
    assigns: list[Any]


def collect(root: Any) -> Parts:
    """The :class:`Parts` of ``root`` (a pyslang RootSymbol), by a visit that does not enter
    procedural blocks or continuous assignments."""
    parts = Parts([], [], [])

    def visit(node: Any) -> Any:
        kind = getattr(node, "kind", None)
        if kind == _SK.Instance:
            parts.instances.append(node)
        elif kind == _SK.ProceduralBlock:
            parts.blocks.append(node)
            return ast.VisitAction.Skip
        elif kind == _SK.ContinuousAssign:
            parts.assigns.append(node)
            return ast.VisitAction.Skip
        return ast.VisitAction.Advance

    root.visit(visit)
    return parts


def analyse(root: Any, sites: Sites, parts: Parts | None = None, *, shortcuts: bool = True) -> Analysis:
    """The testbench-DUT races of the elaborated ``root`` (a pyslang RootSymbol of design and
    stimulus) and the ``#0`` insertions that order them (module docstring); ``parts``: its
    :class:`Parts` when the caller has them (else :func:`collect`). ``shortcuts=False`` reads
    the DUT's code even when no testbench access falls at a DUT clock edge and walks a
    statement again from a state it was walked from (the same result, slower: for tests). Never raises for constructs it does not model: they are skipped (no
    race reported for them)."""
    return _Analyser(sites, shortcuts=shortcuts).run(parts if parts is not None else collect(root))


class _Classes:
    """Signals joined by port connections: one class per electrical net (union-find on paths)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.ids: dict[str, int] = {}

    def find(self, path: str) -> str:
        parent = self.parent.setdefault(path, path)
        if parent != path:
            parent = self.parent[path] = self.find(parent)
        return parent

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def id(self, symbol: Any) -> int:
        root = self.find(str(symbol.hierarchicalPath))
        return self.ids.setdefault(root, len(self.ids))


@dataclass
class _DutProcess:
    edges: list[_Edge]
    reads: set[int]
    blocking_writes: set[int]
    file: str
    line: int
    scope: str


class _Analyser:
    def __init__(self, sites: Sites, *, shortcuts: bool = True) -> None:
        self.sites = sites
        self.shortcuts = shortcuts
        self.classes = _Classes()
        self.dut: list[_DutProcess] = []
        self.comb: list[tuple[set[int], set[int]]] = []  # (written classes, read classes) of DUT comb logic
        self.tb_blocks: list[Any] = []
        self.races: dict[tuple[str, int, str, str, str], Race] = {}
        self.edits: set[tuple[str, int]] = set()
        self.task_memo: dict[tuple[str, frozenset[_At]], frozenset[_At]] = {}
        # the statement objects are the elaboration's own (pyslang hands out one wrapper each)
        self.walk_memo: dict[tuple[Any, frozenset[_At], bool], frozenset[_At]] = {}
        self.reads_at: dict[_Edge, dict[int, _DutProcess]] = {}
        self.blocking_at: dict[_Edge, dict[int, _DutProcess]] = {}
        self.clocks: dict[_Edge, None] = {}  # an ordered set: the order of the DUT's blocks
        # testbench accesses at a DUT clock edge: (write, symbol, node, state, blocking)
        self.pending: list[tuple[bool, Any, Any, frozenset[_At], bool]] = []
        self.no_edit = False  # inside an always_ff of the testbench

    # -- driver --------------------------------------------------------------------------------
    def run(self, parts: Parts) -> Analysis:
        for inst in parts.instances:  # nets first: every class must be final before ids are taken
            self._join_ports(inst)
        dut_blocks: list[tuple[Any, list[_Edge], Any]] = []
        for block in parts.blocks:
            if self.sites.dut_body(block.parentScope) is not None:
                edges, inner = self._dut_timing(block)
                dut_blocks.append((block, edges, inner))
                self.clocks.update(dict.fromkeys(edges))
            elif self.sites.in_stimulus(block.location) is not None:
                self.tb_blocks.append(block)
        # The testbench first: its walk needs only the DUT's clocks and notes each access made
        # at one of their edges. Without any, no DUT process can meet the testbench at an edge
        # and the DUT's code (most of the work) is not read.
        for block in self.tb_blocks:
            self._tb_block(block)
        if self.pending or not self.shortcuts:
            for inst in parts.instances:
                self._port_logic(inst)
            for assign in parts.assigns:
                if self.sites.dut_body(assign.parentScope) is not None and assign.assignment.kind == _EK.Assignment:
                    self.comb.append(
                        (self._ids(written_symbols(assign.assignment.left)), self._ids(_reads(assign.assignment.right)))
                    )
            for block, edges, inner in dut_blocks:
                self._dut_block(block, edges, inner)
            self._close()
            for write, symbol, node, state, blocking in self.pending:
                if write:
                    self._meet_write(symbol, node, state, blocking=blocking)
                else:
                    self._meet_read(symbol, node, state)
        races = sorted(self.races.values(), key=lambda r: (r.file, r.line, r.signal, r.edge, r.kind))
        return Analysis(races=tuple(races), edits=tuple(sorted(self.edits)))

    # -- nets and the DUT ------------------------------------------------------------------------
    def _ids(self, symbols: Iterable[Any]) -> set[int]:
        return {self.classes.id(s) for s in symbols}

    def _join_ports(self, inst: Any) -> None:
        for conn in inst.portConnections:
            internal = getattr(conn.port, "internalSymbol", None)
            expr = conn.expression
            if internal is None or expr is None:
                continue
            outer = expr.left if expr.kind == _EK.Assignment else expr
            if outer.kind in (_EK.NamedValue, _EK.HierarchicalValue):
                self.classes.union(str(internal.hierarchicalPath), str(outer.symbol.hierarchicalPath))

    def _port_logic(self, inst: Any) -> None:
        """A port connected to an expression (``.a(x & y)``, ``.q(v[3])``) is combinational logic
        between the two sides."""
        for conn in inst.portConnections:
            internal = getattr(conn.port, "internalSymbol", None)
            expr = conn.expression
            if internal is None or expr is None:
                continue
            if expr.kind == _EK.Assignment:  # an output: the outer side is written
                outer = expr.left
                if outer.kind not in (_EK.NamedValue, _EK.HierarchicalValue):
                    self.comb.append((self._ids(written_symbols(outer)), self._ids([internal])))
            elif expr.kind not in (_EK.NamedValue, _EK.HierarchicalValue):
                self.comb.append((self._ids([internal]), self._ids(_reads(expr))))

    def _dut_timing(self, block: Any) -> tuple[list[_Edge], Any]:
        """The clock edges a DUT procedural block waits on (none: not an edge process) and the
        statement they resume."""
        body = block.body
        if block.procedureKind in (ast.ProceduralBlockKind.Always, ast.ProceduralBlockKind.AlwaysFF):
            if body.kind == _ST.Timed:
                return [e for e, _ in self._edges(body.timing)], body.stmt
        return [], body

    def _dut_block(self, block: Any, edges: list[_Edge], inner: Any) -> None:
        kind = block.procedureKind
        comb = kind in (ast.ProceduralBlockKind.AlwaysComb, ast.ProceduralBlockKind.AlwaysLatch) or (
            kind == ast.ProceduralBlockKind.Always and block.body.kind == _ST.Timed
        )
        if not edges and not comb:  # initial, final, a level-less always: meets no edge
            return
        # everything the process references (its own targets too: only the testbench's writes can meet them)
        reads, blocking, nonblocking = _accesses(inner)
        if edges:
            where = self.sites.where(block.location)
            scope = str(self.sites.dut_body(block.parentScope).parentInstance.hierarchicalPath)
            self.dut.append(_DutProcess(edges, self._ids(reads), self._ids(blocking), where[0] or "?", where[1], scope))
        else:
            self.comb.append((self._ids(blocking + nonblocking), self._ids(reads)))

    def _edges(self, timing: Any, *, any_change: bool = False) -> list[tuple[_Edge, str]]:
        """The clock edges of an event control (``@(posedge clk or negedge rst_n)``) with the
        clock's path; level events (``@(a or b)``, ``@*``) give none, unless ``any_change`` (a
        testbench waiting on ``@(clk)``: both edges)."""
        if timing.kind == _TK.EventList:
            return [e for event in timing.events for e in self._edges(event, any_change=any_change)]
        if timing.kind != _TK.SignalEvent:
            return []
        name = _EDGE_NAMES.get(timing.edge, "edge" if any_change else None)
        if name is None:
            return []
        roots = written_symbols(timing.expr)
        if len(roots) != 1:
            return []
        symbol = roots[0]
        return [((self.classes.id(symbol), name), str(symbol.hierarchicalPath))]

    def _close(self) -> None:
        """What each DUT edge reads (back through combinational logic) and what it writes with
        ``=`` (forward through it)."""
        feeds: dict[int, set[int]] = defaultdict(set)  # written class -> read classes
        drives: dict[int, set[int]] = defaultdict(set)  # read class -> written classes
        for written, read in self.comb:
            for w in written:
                feeds[w] |= read
                for r in read:
                    drives[r].add(w)
        for proc in self.dut:
            for edge in proc.edges:
                reads = self.reads_at.setdefault(edge, {})
                for c in _closure(proc.reads, feeds):
                    reads.setdefault(c, proc)
                writes = self.blocking_at.setdefault(edge, {})
                for c in _closure(proc.blocking_writes, drives):
                    writes.setdefault(c, proc)

    # -- the testbench -----------------------------------------------------------------------
    def _tb_block(self, block: Any) -> None:
        kind = block.procedureKind
        if kind in (ast.ProceduralBlockKind.Final, ast.ProceduralBlockKind.AlwaysComb):
            return
        self.no_edit = kind == ast.ProceduralBlockKind.AlwaysFF
        state = self._walk(block.body, frozenset())
        if kind != ast.ProceduralBlockKind.Initial:  # always: the body runs again from its end
            self._walk(block.body, state)
        self.no_edit = False

    def _resume(self, timing: Any, state: frozenset[_At], control: Any = None) -> frozenset[_At]:
        """The state after a statement's timing control (``control``: its syntax, where a
        ``#0`` may go after it; None: nowhere)."""
        if timing.kind in (_TK.SignalEvent, _TK.EventList):
            site = None if self.no_edit or control is None else self.sites.offset(control.sourceRange.end)
            return frozenset(
                (edge, clock, site)
                for edge, clock in self._edges(timing, any_change=True)
                if self._matches(edge) is not None
            )
        return frozenset()  # a delay (#0 included: the DUT's edge processes have run), a cycle delay

    def _matches(self, edge: _Edge) -> list[_Edge] | None:
        """The DUT edges woken together with a testbench control on ``edge`` (None: none)."""
        clock, name = edge
        found = [e for e in self.clocks if e[0] == clock and (name == "edge" or e[1] in (name, "edge"))]
        return found or None

    def _walk(self, stmt: Any, state: frozenset[_At]) -> frozenset[_At]:
        """The state after ``stmt`` run from ``state``, its accesses noted. A statement walked
        again from the same state (a loop's second pass, loops nested in loops: 2^depth walks)
        notes the same accesses again: its first answer stands."""
        if not self.shortcuts:
            return self._walk_once(stmt, state)
        key = (stmt, state, self.no_edit)
        after = self.walk_memo.get(key)
        if after is None:
            after = self.walk_memo[key] = self._walk_once(stmt, state)
        return after

    def _walk_once(self, stmt: Any, state: frozenset[_At]) -> frozenset[_At]:
        kind = stmt.kind
        if kind == _ST.List:
            for s in stmt.list:
                state = self._walk(s, state)
            return state
        if kind == _ST.Block:
            if stmt.blockKind == ast.StatementBlockKind.Sequential:
                return self._walk(stmt.body, state)
            body = stmt.body
            branches = list(body.list) if body.kind == _ST.List else [body]
            out = set(state)
            for branch in branches:
                out |= self._walk(branch, state)
            return frozenset(out)
        if kind == _ST.Timed:
            control = getattr(stmt.syntax, "timingControl", None) if stmt.syntax is not None else None
            return self._walk(stmt.stmt, self._resume(stmt.timing, state, control))
        if kind == _ST.ExpressionStatement:
            return self._expression(stmt.expr, state)
        if kind == _ST.Conditional:
            for cond in stmt.conditions:
                state = self._expression(cond.expr, state)
            taken = self._walk(stmt.ifTrue, state)
            return taken | (self._walk(stmt.ifFalse, state) if stmt.ifFalse is not None else state)
        if kind == _ST.Case:
            state = self._expression(stmt.expr, state)
            out = set()
            for item in stmt.items:
                out |= self._walk(item.stmt, state)
            out |= self._walk(stmt.defaultCase, state) if stmt.defaultCase is not None else state
            return frozenset(out)
        if kind in (_ST.ForLoop, _ST.RepeatLoop, _ST.WhileLoop, _ST.DoWhileLoop, _ST.ForeverLoop, _ST.ForeachLoop):
            return self._loop(stmt, state)
        if kind == _ST.Wait:
            self._expression(stmt.cond, frozenset())
            return self._walk(stmt.stmt, frozenset())
        if kind == _ST.VariableDeclaration:
            return state
        return state  # return, break, disable, assertions, ...: no access the analysis tracks

    def _loop(self, stmt: Any, state: frozenset[_At]) -> frozenset[_At]:
        kind = stmt.kind
        if kind == _ST.ForLoop:
            for init in stmt.initializers:
                state = self._expression(init, state)
        seen = set(state)
        current = state
        for _ in range(2):  # twice: the second pass starts from where the first one ended
            if kind == _ST.ForLoop and stmt.stopExpr is not None:
                current = self._expression(stmt.stopExpr, current)
            elif kind in (_ST.WhileLoop,):
                current = self._expression(stmt.cond, current)
            elif kind == _ST.RepeatLoop:
                current = self._expression(stmt.count, current)
            current = self._walk(stmt.body, current)
            if kind == _ST.ForLoop:
                for step in stmt.steps:
                    current = self._expression(step, current)
            elif kind == _ST.DoWhileLoop:
                current = self._expression(stmt.cond, current)
            current = frozenset(current | seen)
            seen |= current
        return frozenset(seen)

    def _expression(self, expr: Any, state: frozenset[_At]) -> frozenset[_At]:
        """Check the accesses of an expression (assignments, reads, task calls) at ``state``;
        the state after it (a task may wait)."""
        if expr is None:
            return state
        kind = expr.kind
        if kind == _EK.Assignment:
            timing = expr.timingControl
            at = state
            if timing is not None:  # `x = @(posedge clk) v`: not rewritable
                at = frozenset((e, c, None) for e, c, _ in self._resume(timing, state))
            self._reads(expr.right, state)
            selectors: list[Any] = []
            written = written_symbols(expr.left, selectors)
            for symbol in written:
                self._write(symbol, expr, at, blocking=not expr.isNonBlocking)
            if state:
                for symbol in _reads_all(selectors) + (written if expr.isCompound else []):
                    self._read(symbol, expr, state)
            return at if timing is not None else state
        if kind == _EK.Call and not expr.isSystemCall:
            sub = expr.subroutine
            for arg in expr.arguments:
                self._reads(arg, state)
            after = state
            if sub is not None and getattr(sub, "subroutineKind", None) == ast.SubroutineKind.Task:
                key = (str(sub.hierarchicalPath), state)
                if key not in self.task_memo:
                    self.task_memo[key] = state  # a recursive call sees the caller's state
                    self.task_memo[key] = self._walk(sub.body, state)
                after = self.task_memo[key]
            for lhs, direction in written_arguments(expr):
                # output/inout: copied out on return; ref: written whenever the body writes it
                at = after if direction != ast.ArgumentDirection.Ref else state | after
                for symbol in written_symbols(lhs):
                    self._write(symbol, expr, at, blocking=True)
            return after
        if kind == _EK.Call and expr.subroutineName in _PRINTING:
            return state
        if state:  # reads, and the writes inside: `x++`, `$sscanf(s, "%d", x)`, `y = (x = v)`
            reads, blocking, nonblocking = _accesses(expr)
            for symbol in reads:
                self._read(symbol, expr, state)
            for symbol in blocking:
                self._write(symbol, expr, state, blocking=True)
            for symbol in nonblocking:
                self._write(symbol, expr, state, blocking=False)
        return state

    def _reads(self, expr: Any, state: frozenset[_At]) -> None:
        if not state or expr is None:
            return
        for symbol in _reads(expr):
            self._read(symbol, expr, state)

    def _read(self, symbol: Any, node: Any, state: frozenset[_At]) -> None:
        if state:
            self.pending.append((False, symbol, node, state, False))

    def _write(self, symbol: Any, node: Any, state: frozenset[_At], *, blocking: bool) -> None:
        if state:
            self.pending.append((True, symbol, node, state, blocking))

    def _meet_read(self, symbol: Any, node: Any, state: frozenset[_At]) -> None:
        c = self.classes.id(symbol)
        for edge, clock, site in state:
            for dut_edge in self._matches(edge) or ():
                proc = self.blocking_at.get(dut_edge, {}).get(c)
                if proc is not None:
                    self._race("read", symbol, node, edge, clock, site, proc)

    def _meet_write(self, symbol: Any, node: Any, state: frozenset[_At], *, blocking: bool) -> None:
        c = self.classes.id(symbol)
        for edge, clock, site in state:
            for dut_edge in self._matches(edge) or ():
                proc = self.reads_at.get(dut_edge, {}).get(c)
                if proc is None:
                    continue
                if blocking:
                    self._race("write", symbol, node, edge, clock, site, proc)
                elif site is not None:  # scheduled by the standard; the #0 keeps Verilator < 5.050 to it
                    self.edits.add(site)

    def _race(self, kind: str, symbol: Any, node: Any, edge: _Edge, clock: str, site: Any, proc: _DutProcess) -> None:
        where = self.sites.in_stimulus(node.sourceRange.start)
        if where is None:
            return
        if site is not None:
            self.edits.add(site)
        signal = str(symbol.hierarchicalPath)
        edge_text = f"{edge[1]} {clock}"
        key = (where[0], where[1], signal, edge_text, kind)
        old = self.races.get(key)
        ordered = site is not None and (old is None or old.ordered)
        self.races[key] = Race(
            kind, where[0], where[1], signal, edge_text, proc.file, proc.line, proc.scope, ordered=ordered
        )


def scheduled_files(files: Mapping[str, str], edits: Iterable[tuple[str, int]]) -> dict[str, str]:
    """``files`` (name -> text) with ``" #0 "`` inserted at each edit (file, byte offset of the
    UTF-8 text, as :func:`analyse` gives them); lines and every other byte stay as they are.
    The spaces on both sides keep the ``0`` a token of its own: ``@(posedge clk)_x`` must not
    become ``#0_x`` (a number absorbing the identifier's ``_``, then a write to ``x``)."""
    by_file: dict[str, list[int]] = defaultdict(list)
    for name, offset in edits:
        by_file[name].append(offset)
    out = dict(files)
    for name, offsets in by_file.items():
        data = out[name].encode("utf-8")
        for offset in sorted(set(offsets), reverse=True):
            data = data[:offset] + b" #0 " + data[offset:]
        out[name] = data.decode("utf-8")
    return out


def only_delays_added(files: Mapping[str, str], edits: Iterable[tuple[str, int]]) -> bool:
    """Whether :func:`scheduled_files` of ``files`` and ``edits`` differs from ``files``, token
    for token (pyslang's lexer, before preprocessing), only by a ``#`` ``0`` pair at each edit.
    Then the scheduled text writes what the text as written writes (an integrity check of it
    finds nothing new); False (check it) when an insertion joined a neighbouring token, as
    ``#0`` glued to ``_x`` would make the number ``0_`` and the name ``x``."""
    scheduled = scheduled_files(files, edits)
    by_file: dict[str, set[int]] = defaultdict(set)
    for name, offset in edits:
        by_file[name].add(offset)
    for name, offsets in by_file.items():
        expected: list[tuple[Any, str]] = []
        pending = sorted(offsets)
        for kind, text, offset in _tokens(files[name]):
            while pending and pending[0] <= offset:
                expected += [(_TOK.Hash, "#"), (_TOK.IntegerLiteral, "0")]
                pending.pop(0)
            expected.append((kind, text))
        if pending or [(k, t) for k, t, _ in _tokens(scheduled[name])] != expected:
            return False
    return True


_TOK = parsing.TokenKind


def _tokens(text: str) -> list[tuple[Any, str, int]]:
    """(kind, raw text, byte offset) of each token of ``text``, end of file included."""
    sm = pyslang.SourceManager()
    lexer = parsing.Lexer(sm.assignText("/rs/lex.sv", text), pyslang.BumpAllocator(), pyslang.Diagnostics(), sm)
    out = []
    while True:
        token = lexer.lex()
        out.append((token.kind, token.rawText, token.location.offset))
        if token.kind == _TOK.EndOfFile:
            return out


def _closure(start: set[int], graph: dict[int, set[int]]) -> set[int]:
    seen = set(start)
    stack = list(start)
    while stack:
        for n in graph.get(stack.pop(), ()):
            if n not in seen:
                seen.add(n)
                stack.append(n)
    return seen


def _reads(expr: Any) -> list[Any]:
    """Every variable or net an expression reads (named and hierarchical references)."""
    return _accesses(expr, writes=False)[0] if expr is not None else []


def _reads_all(exprs: Iterable[Any]) -> list[Any]:
    return [symbol for e in exprs for symbol in _reads(e)]


# tuples, not sets: `in` on a tuple compares by identity first, a set calls the Python-level
# Enum.__hash__ of pyslang's kinds (visible in a profile of the visit)
_NAMED = (_EK.NamedValue, _EK.HierarchicalValue)
_SIGNALS = (_SK.Variable, _SK.Net)
_WRITING = (_EK.Assignment, _EK.UnaryOp, _EK.Call)  # the kinds lvalues.node_writes answers


def _accesses(node: Any, *, writes: bool = True) -> tuple[list[Any], list[Any], list[Any]]:
    """What a statement or expression accesses, in one visit: (the variables and nets it
    references, the symbols it writes blocking, those it writes nonblocking; both empty unless
    ``writes``)."""
    reads: list[Any] = []
    blocking: list[Any] = []
    nonblocking: list[Any] = []

    def visit(n: Any) -> Any:
        kind = getattr(n, "kind", None)
        if kind in _NAMED:
            if n.symbol.kind in _SIGNALS:
                reads.append(n.symbol)
        elif writes and kind in _WRITING:
            for lhs, is_nonblocking in node_writes(n):
                (nonblocking if is_nonblocking else blocking).extend(written_symbols(lhs))
        return ast.VisitAction.Advance

    node.visit(visit)
    return reads, blocking, nonblocking
