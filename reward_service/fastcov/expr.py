"""Verilator's ``expr`` points (``--coverage-expr``) as a fast-path point kind.

Point model (Verilator 5.48 and 5.052, V3Coverage.cpp; details and the checks against real runs in
``docs/fastcov-expr.md``):

- A *root* is a 1-bit ``&&``/``||``/``!``/``->``/``<->`` expression or a 1-bit ``&``/``|``/
  ``^``/``~`` (``~^`` is ``~(a ^ b)``), an OR/AND/XOR reduction (unrolled bit by bit), or the
  condition of a ``?:`` (a multi-bit condition or operand of a logical operator is OR-reduced
  first) -- found anywhere in the expressions of procedures, functions, tasks and continuous
  assignments, but not inside a wider bitwise operator, an arm of a ``?:``, the arguments of a
  non-automatic function, or inside another root.
- Its points are the combinations of terms that make it 1 and those that make it 0
  (:mod:`.expr_model`), located at the root's operator token; the comment is
  ``(a==1 && b==0) => 1`` with each term printed as Verilator prints its widthed AST
  (:mod:`.expr_ir`).
- Verilator counts a point where it appended the check: at the end of the statement list
  that holds the expression -- a procedure, an ``if`` arm, a loop (after a ``for`` loop's
  step), a function or task, and on Verilator 5.052 a ``begin`` block (on 5.48 a ``begin``
  block is no list of its own: :func:`begin_blocks_are_lists`); a ``case`` item is none --
  and for continuous assignments whenever the assignment is evaluated (inputs settled). The
  instrumentation puts the flag-setting ``if`` in the same place: after the last statement of
  that list (before every ``return`` too, for a function; inside a function called from the
  loop condition, for a ``for``/``do-while`` loop's own list), and for a continuous assignment
  in a process that runs at time 0 and after every input change, once the active region has
  settled.
- ``$stop``/``$fatal``/``$error`` turn the points off for the rest of the enclosing arm, item,
  loop or procedure; so do ``verilator coverage_off`` regions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyslang import ast, syntax
from pyslang.parsing import Token

from reward_service.fastcov.blocks import STOP_TASKS, _off_regions, _pragma_before
from reward_service.fastcov.expr_ir import Lowering, VNode, _span_key, const_int_value, symbol_key
from reward_service.fastcov.expr_model import CoverExpr, cover, roots
from reward_service.fastcov.unit import PREFIX, Flag, ModuleUnit, Unsupported, kind_phrase, other_bodies
from reward_service.sandbox.toolchain_probe import verilator_choice

_S = ast.SymbolKind
_T = ast.StatementKind
_E = ast.ExpressionKind

_INC_DEC = {"Preincrement", "Predecrement", "Postincrement", "Postdecrement"}


def begin_blocks_are_lists() -> bool:
    """Whether the Verilator the fast path must equal (the one ``REWARD_SERVICE_VERILATOR``
    selects) counts the expression points of a ``begin`` block at the end of that block.

    Verilator 5.052 (``pinned``) does: its V3Coverage makes every ``AstBegin`` a statement list
    of its own (``visit(AstBegin)`` sets ``m_exprStmtsp``), so ``begin t = ~t; y = t & b; end``
    is checked inside the block, a ``for`` body block before the step, a ``do`` body block
    after every pass (also the last). The 5.48 wheel (``wheel``) does not: the checks go to the
    end of the enclosing procedure, ``if`` arm, loop or function. ValueError for an unknown
    setting (:func:`~reward_service.sandbox.toolchain_probe.verilator_choice`)."""
    return verilator_choice() == "pinned"


def model_variant() -> str:
    """The expression point model in use (:func:`begin_blocks_are_lists`), as a cache-key part
    for everything that keeps instrumented designs or fast-path decisions."""
    return "expr-begin-lists" if begin_blocks_are_lists() else "expr-no-begin-lists"


@dataclass
class _State:
    """V3Coverage's CheckState ``m_on`` for the current arm/item/loop/procedure."""

    on: bool = True


@dataclass(frozen=True)
class _Check:
    """Set ``flag`` when every term has its value: ``terms`` are (Icarus source, value)."""

    terms: tuple[tuple[str, bool], ...]
    flag: str
    done: str = ""  # a bit set once the flag is (the check is then skipped), or none

    @property
    def bit(self) -> str:
        """The flag bit ``flag`` sets (``__rs_f3`` of ``__rs_f3 = 1'b1;``)."""
        return self.flag.split(" = ", 1)[0]

    def skipping(self) -> _Check:
        """This check, skipped once its flag is set (``if (!f) if (<terms>) f = 1'b1;``): a set
        flag stays set, and the test of one bit costs less than the terms'."""
        return self if self.done else _Check(self.terms, self.flag, self.bit)

    def text(self, rename: dict[str, str] | None = None) -> str:
        cond = " && ".join(
            (rename or {}).get(src, src) if value else "!" + (rename or {}).get(src, src) for src, value in self.terms
        )
        return f"if (!{self.done}) if ({cond}) {self.flag}" if self.done else f"if ({cond}) {self.flag}"


@dataclass
class _Settle:
    """The checks of a combinational procedure. Verilator runs such a block with its inputs
    settled; Icarus also runs it on intermediate values of simultaneously changing inputs. So
    its checks set pending bits (cleared when the block starts), which a companion process
    commits to the flags once the active region has settled (``#0``): the last run counts."""

    index: int
    item: Any  # the procedure (module item)
    body: Any  # its body statement
    in_generate: bool
    pending: dict[str, tuple[int, str]] = field(default_factory=dict)  # flag -> (pending bit, set)

    def set(self, flag: Flag) -> str:
        bit = self.pending.setdefault(flag.name, (len(self.pending), flag.set))[0]
        return f"{PREFIX}expr_p{self.index}[{bit}] = 1'b1;"

    def done(self, flag: Flag) -> str:
        """The committed bit of ``flag`` (:meth:`set` first): once set, the flag is set for
        good, and the block's check of it is skipped."""
        return f"{PREFIX}expr_k{self.index}[{self.pending[flag.name][0]}]"

    def commit(self, unit: ModuleUnit) -> None:
        """The pending bits are one vector, cleared by one assignment; the companion commits only
        when a bit is pending that no earlier run committed (``c``: the bits committed so far;
        a flag, once set, stays set). Measured: the LFSR of ``cvdp_agentic_lfsr_0018`` (~700
        points in one combinational block) ran N clears and N commit tests per run of the block."""
        pend, done, event = (f"{PREFIX}expr_{x}{self.index}" for x in "pke")
        commits = " ".join(f"if ({pend}[{bit}]) {flag_set}" for bit, flag_set in self.pending.values())
        items = (
            f"bit [{len(self.pending) - 1}:0] {pend}, {done}; event {event}; always @({event}) begin #0; "
            f"if (|({pend} & ~{done})) begin {done} = {done} | {pend}; {commits} end end"
        )
        if self.in_generate:
            unit.insert_before(self.item, items + " ")
        else:
            unit.declare(items)
        unit.prepend(self.body, f"{pend} = '0;")
        unit.append(self.body, f"-> {event};")


@dataclass
class _Target:
    """Where the checks of one statement list go (V3Coverage's ``m_exprStmtsp``).

    ``how``: ``append`` (after ``anchor``, a procedural statement), ``comb`` (processes after
    the continuous assignment ``anchor`` that check once its inputs settle), ``func`` (after the
    last statement of a function and before each of its ``return`` statements) or
    ``for``/``dowhile`` (the own list of loop ``anchor``: after its step / after a passing test).
    """

    how: str
    anchor: Any = None
    depth: int = 0  # begin blocks entered when the list began
    loop: Any = None
    returns: list[Any] = field(default_factory=list)
    checks: list[tuple[tuple, tuple[_Check, ...]]] = field(default_factory=list)  # (guard, checks)
    visible: set = field(default_factory=set)  # begin blocks whose variables the checks can name
    settle_in_generate: bool = False


class ExprKind:
    """Point kind for Verilator's ``expr`` points (see the module docstring)."""

    name = "expr"
    metrics = ("expr",)

    def instrument(self, unit: ModuleUnit) -> None:
        if unit.body is None:
            raise Unsupported(f"{unit.file}: module {unit.name} could not be elaborated for expression coverage")
        walker = _Walker(unit)
        walker.scope(unit.body, ())
        # Verilator makes a copy of the module per parameter set; the points of each copy
        # must be the ones found here, or one flag would stand for different points
        mine = {key for key, _ in walker.points}
        for body in other_bodies(unit):
            other = _Walker(unit, dry=True)
            other.scope(body, ())
            if {key for key, _ in other.points} != mine:
                raise Unsupported(
                    f"{unit.file}: module {unit.name} has other expression points with other parameter values"
                )
        walker.flush()

    def instrument_formal(self, unit: ModuleUnit, why_not: Callable[[Flag, Any], str | None]) -> dict[str, str]:
        """The formal model's output mode (:mod:`reward_service.formal.model`): the same points
        and the same checks in the same places, without simulation-only constructs. A check
        sets its flag directly (``if (terms) flag = 1'b1;``): in a combinational procedure too
        (no pending bits, no ``#0`` companion: a formal step sees settled values only), and
        for a continuous assignment in an ``always @(*)`` after it. Checks that have no such
        place are left out and their flags named with the reason (never proved): a loop's own
        list (counted after the step, from a function in the loop condition), a flag counted
        in several places (one driver per flag), and whatever ``why_not(flag, anchor)``
        refuses (the model refuses tasks and the functions it does not model; a function's
        checks go where the fast path puts them). Returns flag name -> reason for those."""
        if unit.body is None:
            raise Unsupported(f"{unit.file}: module {unit.name} could not be elaborated for expression coverage")
        walker = _Walker(unit, formal=True)
        walker.scope(unit.body, ())
        for body in other_bodies(unit):
            other = _Walker(unit, dry=True)
            other.scope(body, ())
            if {key for key, _ in other.points} != {key for key, _ in walker.points}:
                raise Unsupported(
                    f"{unit.file}: module {unit.name} has other expression points with other parameter values"
                )
        return walker.flush_formal(why_not)


KIND = ExprKind()


class _Walker:
    def __init__(self, unit: ModuleUnit, dry: bool = False, formal: bool = False) -> None:
        self.u = unit
        self.dry = dry  # only list the points (another parameter set's copy)
        self.begin_lists = begin_blocks_are_lists()
        self.formal = formal  # the formal model's output mode (ExprKind.instrument_formal)
        self.off = _off_regions(unit.source.data)
        self.genvars: dict[Any, int] = {}
        self.low = Lowering(self._text, lambda tok: tok, lambda node: unit.location(node)[0], self.genvars)
        self.flags: dict[tuple, Flag] = {}
        self.targets: list[_Target] = []
        self.settle: _Settle | None = None  # the combinational procedure being walked
        self.settles: list[_Settle] = []
        self._targets: dict[tuple, _Target] = {}
        self.points: list[tuple[tuple[int, int, str], CoverExpr]] = []  # (line, column, comment)
        #: variables declared in the begin blocks being walked: a check placed after such a
        #: block cannot name them (Verilator's hoisted variables can)
        self.hidden: list[tuple[tuple, set]] = []  # (block, its variables)

    # -- text and positions ---------------------------------------------------------------------
    def _text(self, node: Any, replaced: dict | None = None) -> str:
        """Source text of an expression on one line without comments (tokens joined), with the
        subexpressions in ``replaced`` (keyed by ``_span_key``) swapped for their text."""
        return " ".join(_texts(node, replaced or {}))

    def _covered_here(self, token: Any) -> bool:
        sm = self.u.source.sm
        if sm.isMacroLoc(token.location):
            raise Unsupported(f"{self.u.file}: expression coverage of code expanded from a macro")
        offset = self.u.source.offsets(token)[0]
        return not any(a <= offset < b for a, b in self.off)

    # -- module items ---------------------------------------------------------------------------
    def scope(self, scope: Any, guard: tuple) -> None:
        for m in scope:
            k = m.kind
            if k == _S.ContinuousAssign:
                item = _item_of(m.syntax)
                self.expression(m.assignment, _State(), self._target("comb", item), guard)
            elif k == _S.Net and m.initializer is not None:
                self.expression(m.initializer, _State(), self._target("comb", _item_of(m.syntax)), guard)
            elif k == _S.Variable and m.initializer is not None and not _in_procedure(m):
                found: list[VNode] = []
                roots(self.low.build(m.initializer), found)
                if found:
                    raise Unsupported(
                        f"{self.u.file}:{self.u.location(m.syntax)[0]}: a logical expression in a variable initializer"
                    )
            elif k == _S.ProceduralBlock:
                self.procedure(m, guard)
            elif k == _S.Subroutine:
                self.subroutine(m, guard)
            elif k == _S.GenerateBlock:
                if not m.isUninstantiated:
                    self.scope(m, guard)
            elif k == _S.GenerateBlockArray:
                for entry in m.entries:
                    if entry.isUninstantiated:
                        continue
                    genvar = _genvar_of(entry, m)
                    if genvar is None:
                        raise Unsupported(f"{self.u.file}: generate loop without a genvar value")
                    sym, value = genvar
                    self.genvars[symbol_key(sym)] = value
                    self.scope(entry, guard + ((sym.name, value),))
                    del self.genvars[symbol_key(sym)]

    def procedure(self, pb: Any, guard: tuple) -> None:
        body = pb.body
        comb = pb.procedureKind.name in ("AlwaysComb", "AlwaysLatch")
        if body.kind == _T.Timed:  # always @(...) S: the checks go after S
            self.timing(body.timing)
            comb = pb.procedureKind.name == "Always" and _level_sensitive(body.timing)
            body = body.stmt
        self.settle = (
            _Settle(len(self.settles), pb.syntax, body.syntax, _in_generate(pb.syntax))
            if comb and not self.formal
            else None
        )
        self.stmt(body, _State(), self._list_end(body), guard)
        if self.settle is not None and self.settle.pending:
            self.settles.append(self.settle)
        self.settle = None

    def subroutine(self, sub: Any, guard: tuple) -> None:
        body = sub.body
        stmts = _stmt_list(body)
        if not stmts:
            return
        returns = _find_syntax(sub.syntax, syntax.SyntaxKind.ReturnStatement)
        target = self._list_end(stmts[-1], "func")
        target.returns = returns
        state = _State()
        for s in stmts:
            self.stmt(s, state, target, guard)

    # -- statements -----------------------------------------------------------------------------
    def stmt(self, s: Any, state: _State, target: _Target, guard: tuple) -> None:
        k = s.kind
        if s.syntax is not None and _pragma_before(s.syntax, "coverage_block_off"):
            raise Unsupported(f"{self.u.file}: verilator coverage_block_off with expression coverage")
        if k == _T.List:
            for item in s.list:
                self.stmt(item, state, target, guard)
        elif k == _T.Block:
            # on 5.48 a begin-end block is no statement list of its own for V3Coverage (only
            # procedures, if arms, loops and functions are): its checks go where the enclosing
            # ones go; on 5.052 it is one: they go after its last statement. The on/off state
            # ($stop) is not the block's own on either (V3Coverage does not restore m_state there)
            if s.blockKind.name != "Sequential":
                raise Unsupported(f"{self.u.file}:{self.u.location(s.syntax)[0]}: fork/join in the DUT")
            items = _stmt_list(s.body)
            locals_ = {symbol_key(i.symbol) for i in items if i.kind == _T.VariableDeclaration}
            self.hidden.append((_span_key(s.syntax), locals_))
            inner = target
            if self.begin_lists:
                if not any(i.kind != _T.VariableDeclaration for i in items) and any(
                    i.kind == _T.VariableDeclaration and i.symbol.initializer is not None for i in items
                ):
                    raise Unsupported(
                        f"{self.u.file}:{self.u.location(s.syntax)[0]}: a begin block of initialised declarations only"
                    )
                inner = self._list_end(s)
            for item in items:
                self.stmt(item, state, inner, guard)
            self.hidden.pop()
        elif k == _T.ExpressionStatement:
            self.expression_stmt(s, state, target, guard)
        elif k == _T.Conditional:
            conds = list(s.conditions)
            if len(conds) != 1 or conds[0].pattern is not None:
                raise Unsupported(f"{self.u.file}: if with a pattern")
            if state.on:
                self.stmt(s.ifTrue, _State(), self._list_end(s.ifTrue), guard)
                if s.ifFalse is not None:
                    self.stmt(s.ifFalse, _State(), self._list_end(s.ifFalse), guard)
            self.root_checks(self.low.boolean(conds[0].expr), state, target, guard)
        elif k == _T.Case:
            self.expression(s.expr, state, target, guard)
            items = [(it.stmt, it.stmt.syntax.parent) for it in s.items]
            if s.defaultCase is not None:
                items.append((s.defaultCase, s.defaultCase.syntax.parent))
            for body, item_syntax in items:
                # at the item's `:` (where its line point is): its label may be a macro
                if not state.on or not self._covered_here(
                    getattr(item_syntax, "colon", None) or item_syntax.getFirstToken()
                ):
                    continue
                self.stmt(body, _State(), target, guard)  # a case item is no statement list
        elif k in (_T.WhileLoop, _T.ForeverLoop, _T.RepeatLoop, _T.ForeachLoop):
            # foreach: Verilator's lowered loop test compares the index only (no logical
            # operator, no point); the body is a statement list of its own as in the others
            if k == _T.RepeatLoop:
                self.expression(s.count, state, self._target("append", s.syntax), guard)
            loop_target = self._list_end(s.body)
            loop_state = _State()
            if k == _T.WhileLoop:
                self.root_checks(self.low.boolean(s.cond), loop_state, loop_target, guard)
            self.stmt(s.body, loop_state, loop_target, guard)
        elif k in (_T.ForLoop, _T.DoWhileLoop):
            self.counted_loop(s, state, target, guard)
        elif k == _T.Timed:
            self.timing(s.timing)
            self.stmt(s.stmt, state, target, guard)
        elif k == _T.Wait:
            self.root_checks(self.low.boolean(s.cond), state, target, guard)
            self.stmt(s.stmt, state, target, guard)
        elif k == _T.Return:
            if s.expr is not None:
                self.expression(s.expr, state, target, guard)
        elif k == _T.VariableDeclaration:
            init = s.symbol.initializer
            if init is not None:
                self.expression(init, state, target, guard)
        elif k in (_T.Empty, _T.Break, _T.Continue, _T.Disable, _T.EventTrigger):
            pass
        else:
            raise Unsupported(f"{self.u.file}: expression coverage of {kind_phrase(k.name, 'statement')}")

    def expression_stmt(self, s: Any, state: _State, target: _Target, guard: tuple) -> None:
        expr = s.expr
        if expr.kind == _E.Call and expr.isSystemCall:
            name = expr.subroutineName
            for arg in expr.arguments:  # $display(a && b): the arguments are covered too
                if arg.kind not in (_E.StringLiteral, _E.EmptyArgument):
                    self.expression(arg, state, target, guard)
            if name in STOP_TASKS:
                state.on = False
            return
        if expr.kind == _E.Assignment and expr.timingControl is not None:
            raise Unsupported(f"{self.u.file}: intra-assignment timing control")
        self.expression(expr, state, target, guard)

    def counted_loop(self, s: Any, state: _State, target: _Target, guard: tuple) -> None:
        """``for``: initialisers belong to the enclosing list (Verilator wraps the loop in a
        block), condition, step and a body that is no ``begin`` block to the loop's own list;
        ``do-while``: condition and body to the loop's."""
        how = "for" if s.kind == _T.ForLoop else "dowhile"
        loop_target = self._target(how, s.syntax)
        loop_target.loop = s
        loop_target.settle_in_generate = self.settle is not None and self.settle.in_generate
        loop_state = _State()
        if how == "for":
            after = self._target("append", s.syntax)
            for init in s.initializers:
                self.expression(init, state, after, guard)
            for var in s.loopVars:
                if var.initializer is not None:
                    self.expression(var.initializer, state, after, guard)
            if s.stopExpr is None:
                raise Unsupported(f"{self.u.file}:{self.u.location(s.syntax)[0]}: for loop without a condition")
            self.root_checks(self.low.boolean(s.stopExpr), loop_state, loop_target, guard)
            for step in s.steps:
                self.expression(step, loop_state, loop_target, guard)
        else:
            self.root_checks(self.low.boolean(s.cond), loop_state, loop_target, guard)
        self.stmt(s.body, loop_state, loop_target, guard)

    def timing(self, timing: Any) -> None:
        """Event/delay controls: a logical expression in one would be covered; not supported."""
        syn = getattr(timing, "syntax", None)
        if syn is not None and any(t in ("&&", "||", "!", "&", "|", "^", "~", "?") for t in _texts(syn, {})):
            raise Unsupported(f"{self.u.file}:{self.u.location(syn)[0]}: logical operator in an event control")

    # -- expressions ----------------------------------------------------------------------------
    def expression(self, e: Any, state: _State, target: _Target, guard: tuple) -> None:
        if e.kind == _E.UnaryOp and e.op.name in _INC_DEC:  # i++ is i = i + 1
            self.expression(e.operand, state, target, guard)
            return
        if e.kind == _E.Call and not e.isSystemCall and e.type.isVoid:  # a task / void function call
            for arg in e.arguments:
                self.expression(arg, state, target, guard)
            return
        if e.kind in (_E.EmptyArgument, _E.LValueReference):
            return
        if e.kind == _E.Assignment:
            if e.isLValueArg:  # an output argument: only its lvalue's expressions
                self.root_checks(self.low.build(e.left), state, target, guard)
                return
            if e.isCompound:
                raise Unsupported(f"{self.u.file}: compound assignment with expression coverage")
            self.root_checks(self.low.build(e.right), state, target, guard)
            self.root_checks(self.low.build(e.left), state, target, guard)
            return
        self.root_checks(self.low.build(e), state, target, guard)

    def root_checks(self, n: VNode, state: _State, target: _Target, guard: tuple) -> None:
        found: list[VNode] = []
        roots(n, found)
        for root in found:
            self.cover_root(root, state, target, guard)

    def cover_root(self, root: VNode, state: _State, target: _Target, guard: tuple) -> None:
        if not state.on:
            return
        token = root.loc
        if token is None:
            raise Unsupported(f"{self.u.file}: expression without a source location")
        if not self._covered_here(token):
            return
        points = cover(root)
        if not points:
            return
        if target.how != "comb" and any(t.node.kind in ("call", "sys") for ce in points for t in ce.terms):
            # Verilator evaluates such a term once, where the expression is (a hoisted temporary)
            raise Unsupported(
                f"{self.u.file}:{self.u.location(token)[0]}: a function call as an expression term in procedural code"
            )
        hidden = [names for block, names in self.hidden[target.depth :] if block not in target.visible]
        if hidden:
            used = {sub.ident[1] for ce in points for t in ce.terms for sub in t.node.walk() if sub.ident}
            if used & set().union(*hidden):
                raise Unsupported(
                    f"{self.u.file}:{self.u.location(token)[0]}: expression term names a "
                    "variable of a begin block; Verilator counts it after the block"
                )
        line, column = self.u.location(token)
        if self.dry:
            self.points.extend(((line, column, ce.comment), ce) for ce in points)
            return
        checks = []
        for ce in points:
            key = (line, column, ce.comment)
            flag = self.flags.get(key)
            if flag is None:
                flag = self.u.add_point("expr", line, column, ce.comment, target.anchor)
                self.flags[key] = flag
                self.points.append(((line, column, ce.comment), ce))
            checks.append(
                _Check(_terms(ce, self.u.file), self.settle.set(flag), self.settle.done(flag))
                if self.settle
                else _Check(_terms(ce, self.u.file), flag.set)
            )
        target.checks.append((guard, tuple(checks)))

    # -- insertions -----------------------------------------------------------------------------
    def _list_end(self, stmt: Any, how: str = "append") -> _Target:
        """The target that appends after statement ``stmt``, the last of its list: placed
        inside ``stmt`` when it is a ``begin`` block (after its own last statement, and so on
        down), where the same moment keeps the blocks' variables in scope."""
        visible = set()
        while stmt.kind == _T.Block and stmt.blockKind.name == "Sequential":
            items = [i for i in _stmt_list(stmt.body) if i.kind != _T.VariableDeclaration]
            if not items:
                break
            visible.add(_span_key(stmt.syntax))
            stmt = items[-1]
        target = self._target(how, stmt.syntax)
        target.visible |= visible
        return target

    def _target(self, how: str, anchor: Any = None) -> _Target:
        """The target of a statement list; one per list, shared by the iterations of a generate
        loop (their checks are then told apart by genvar guards)."""
        key = (how, _span_key(anchor)) if anchor is not None else None
        t = self._targets.get(key) if key is not None else None
        if t is None:
            t = _Target(how, anchor)
            self.targets.append(t)
            if key is not None:
                self._targets[key] = t
        t.depth = len(self.hidden)
        return t

    def flush(self) -> None:
        for index, t in enumerate(self.targets):
            if not t.checks:
                continue
            if t.how in ("for", "dowhile"):
                self.loop_checks(t)
                continue
            text = _guarded(t.checks)
            if t.how == "append":
                skipping = [(guard, tuple(c.skipping() for c in group)) for guard, group in t.checks]
                self.u.append(t.anchor, _guarded(skipping))
            elif t.how == "comb":
                # Verilator evaluates a continuous assignment with its inputs settled (no
                # glitches of simultaneous input changes): check after the active region (#0),
                # once at time 0 and after every change
                watcher = _comb_watcher(t, f"{PREFIX}expr_n{index}")
                self.u.insert_after(t.anchor, f" initial begin #0; #0; {text} end {watcher}")
            elif t.how == "func":
                self.u.append(t.anchor, text)
                for ret in t.returns:
                    self.u.prepend(ret, text)
        for settle in self.settles:
            settle.commit(self.u)

    def flush_formal(self, why_not: Callable[[Flag, Any], str | None]) -> dict[str, str]:
        """:meth:`flush` for the formal model (see :meth:`ExprKind.instrument_formal`)."""
        placed: dict[str, list[_Target]] = {}
        for t in self.targets:
            for _, group in t.checks:
                for c in group:
                    placed.setdefault(c.flag, []).append(t)
        reasons: dict[str, str] = {}
        for flag in self.flags.values():
            targets = list({id(t): t for t in placed.get(flag.set, [])}.values())
            why = None
            if len(targets) != 1:
                why = "counted in several places" if targets else "never counted"
            elif targets[0].how in ("for", "dowhile"):
                why = "in a loop's own statement list (counted after its step)"
            why = why or why_not(flag, targets[0].anchor)  # a function or task: the model decides
            if why:
                reasons[flag.name] = why
        skip = {self.flags[k].set for k in self.flags if self.flags[k].name in reasons}
        for t in self.targets:
            kept = [(g, tuple(c for c in group if c.flag not in skip)) for g, group in t.checks]
            kept = [(g, group) for g, group in kept if group]
            if not kept:
                continue
            text = _guarded(kept)
            if t.how == "append":
                self.u.append(t.anchor, text)
            elif t.how == "comb":
                self.u.insert_after(t.anchor, f" always @(*) begin {text} end")
            elif t.how == "func":
                self.u.append(t.anchor, text)
                for ret in t.returns:
                    self.u.prepend(ret, text)
        return reasons

    def loop_checks(self, t: _Target) -> None:
        """A ``for``/``do-while`` loop's own checks. Verilator runs them after the step (every
        test but the first sees that state) / after each passing test, so they go into a
        function called from the loop condition with the terms' values:
        ``for (i = 0; __rs_expr_cN(en, t0, ...) || (cond); step)``, ``en`` set once the body
        has started; ``do ... while ((cond) ? __rs_expr_cN(1'b1, t0, ...) : 1'b0)``."""
        loop = t.loop
        if t.settle_in_generate:
            raise Unsupported(
                f"{self.u.file}:{self.u.location(loop.syntax)[0]}: a loop's expression checks "
                "in a combinational always inside a generate block"
            )
        index = len(self.u.declarations)
        fn, en = f"{PREFIX}expr_c{index}", f"{PREFIX}expr_l{index}"
        guards = list(dict.fromkeys(g for g, _ in t.checks))
        srcs = list(dict.fromkeys(src for _, checks in t.checks for c in checks for src, _ in c.terms))
        rename = {src: f"t{i}" for i, src in enumerate(srcs)}
        body = []
        for gi, guard in enumerate(guards):
            texts = " ".join(c.text(rename) for g, checks in t.checks if g == guard for c in checks)
            body.append(f"if (g{gi}) begin {texts} end")
        ports = [f"input bit g{i}" for i in range(len(guards))] + [f"input bit t{i}" for i in range(len(srcs))]
        result = "1'b0" if t.how == "for" else "1'b1"
        self.u.declare(
            f"function automatic bit {fn}({', '.join(ports)}); {' '.join(body)} return {result}; endfunction"
        )
        gates = [" && ".join(f"({n} == {v})" for n, v in g) or "1'b1" for g in guards]
        if t.how == "for":
            self.u.declare(f"bit {en};")
            gates = [f"{en} && {g}" for g in gates]
        call = f"{fn}({', '.join([*gates, *srcs])})"
        cond = loop.stopExpr.syntax if t.how == "for" else loop.cond.syntax
        if t.how == "for":
            self.u.prepend(loop.syntax, f"{en} = 1'b0;")
            self.u.prepend(loop.body.syntax, f"{en} = 1'b1;")
            self.u.insert_before(cond, f"{call} || (")
            self.u.insert_after(cond, ")")
        else:  # ?: and not &&: Icarus evaluates both operands of && (no short-circuit)
            self.u.insert_before(cond, "((")
            self.u.insert_after(cond, f") ? {call} : 1'b0)")


# -- helpers ------------------------------------------------------------------------------------


def _terms(ce: CoverExpr, file: str) -> tuple[tuple[str, bool], ...]:
    out = []
    for t in ce.terms:
        if t.node.src is None:
            raise Unsupported(f"{file}: no source text for expression term {t.text}")
        out.append((t.node.src, t.objective))
    return tuple(out)


def _comb_watcher(t: _Target, event: str) -> str:
    """The process that checks a continuous assignment's points after each change of its
    inputs (``always @* begin #0; <checks> end``), where a check whose flag is set is
    skipped and the process parks on an event nothing triggers once every flag of its list
    is set (a flag, once set, stays set: nothing is left to see). Checks told apart by
    genvar guards (the iterations of a generate loop) get one such process per guard under
    a generate ``if`` of it, so an iteration elaborates its own checks alone instead of
    testing every iteration's guard at each change. Measured (callgrind, vvp):
    bcd_adder_0006's model testbench spent 179 M of its 300 M instructions in these
    processes, most of them after every point was set. ``event``: a name for the event it
    parks on, unique in the module."""
    guards = list(dict.fromkeys(guard for guard, _ in t.checks))
    if guards == [()]:
        return _parking([c for _, group in t.checks for c in group], event)
    if () in guards:
        return f"always @* begin #0; {_guarded(t.checks)} end"
    blocks = []
    for i, guard in enumerate(guards):
        cond = " && ".join(f"({name} == {value})" for name, value in guard)
        checks = [c for g, group in t.checks if g == guard for c in group]
        # named: an unnamed block would take a genblk<n> name, which may be a user block's
        blocks.append(f"if ({cond}) begin : {event}_{i} {_parking(checks, event)} end")
    return " ".join(blocks)


def _parking(checks: list[_Check], event: str) -> str:
    """``event`` and the process of :func:`_comb_watcher` for ``checks`` (unguarded)."""
    flags = list(dict.fromkeys(c.bit for c in checks))
    text = " ".join(dict.fromkeys(c.skipping().text() for c in checks))
    return f"event {event}; always @* begin #0; {text} if (&{{{', '.join(flags)}}}) @({event}); end"


def _guarded(checks: list[tuple[tuple, tuple[_Check, ...]]]) -> str:
    """The checks of a target as one statement text; checks made in generate-loop iterations
    run only in their iteration (``if (g == 1) ...``) unless every iteration made the same."""
    by_text: dict[str, list[tuple]] = {}
    for guard, group in checks:
        by_text.setdefault(" ".join(c.text() for c in group), []).append(guard)
    guards_seen = {g for g, _ in checks}
    out = []
    for text, guards in by_text.items():
        if set(guards) == guards_seen or all(not g for g in guards):
            out.append(text)
        else:
            for g in dict.fromkeys(guards):
                cond = " && ".join(f"({name} == {value})" for name, value in g)
                out.append(f"if ({cond}) begin {text} end")
    return " ".join(out)


def _texts(node: Any, replaced: dict):
    if not isinstance(node, Token) and replaced:
        key = _span_key(node)
        if key in replaced:
            yield replaced[key]
            return
    for child in node:
        if child is None:
            continue
        if isinstance(child, Token):
            if child.rawText:
                yield child.rawText
        else:
            yield from _texts(child, replaced)


def _stmt_list(s: Any) -> list[Any]:
    if s is None:
        return []
    if s.kind == _T.List:
        out = []
        for item in s.list:
            out.extend(_stmt_list(item) if item.kind == _T.List else [item])
        return out
    return [s]


def _item_of(node: Any) -> Any:
    """The module item (``assign ...;`` / net declaration) holding a syntax node."""
    while node is not None and node.kind not in (syntax.SyntaxKind.ContinuousAssign, syntax.SyntaxKind.NetDeclaration):
        node = node.parent
    if node is None:
        raise Unsupported("continuous assignment without its item")
    return node


def _level_sensitive(timing: Any) -> bool:
    """``@*`` or an event list without edges: Verilator makes such an always combinational."""
    k = timing.kind.name
    if k == "ImplicitEvent":
        return True
    if k == "SignalEvent":
        return timing.edge.name == "None_"
    if k == "EventList":
        return all(_level_sensitive(ev) for ev in timing.events)
    return False


def _in_generate(node: Any) -> bool:
    node = node.parent
    while node is not None:
        if node.kind in (
            syntax.SyntaxKind.GenerateBlock,
            syntax.SyntaxKind.LoopGenerate,
            syntax.SyntaxKind.IfGenerate,
            syntax.SyntaxKind.CaseGenerate,
        ):
            return True
        node = node.parent
    return False


def _in_procedure(sym: Any) -> bool:
    node = sym.syntax
    while node is not None:
        if isinstance(node, syntax.StatementSyntax) or node.kind in (
            syntax.SyntaxKind.FunctionDeclaration,
            syntax.SyntaxKind.TaskDeclaration,
        ):
            return True
        node = node.parent
    return False


def _genvar_of(entry: Any, array: Any) -> tuple[Any, int] | None:
    name = array.loopVariable.name if array.loopVariable is not None else None
    for m in entry:
        if m.kind == _S.Parameter and m.name == name:
            return m, const_int_value(m.value)
    return None


def _find_syntax(node: Any, kind: Any) -> list[Any]:
    found = []
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            if child.kind == kind:
                found.append(child)
            found.extend(_find_syntax(child, kind))
    return found
