"""Verilator's ``line`` and ``branch`` points (its V3Coverage pass, ``--coverage-line``).

Point model (Verilator 5.48, derived from V3Coverage.cpp and checked against real runs by
``tests/test_fastcov_constructs.py``):

- ``block`` (line): the body of each ``initial``/``final``/``always*`` procedure, function and
  task, and loop (``for``/``while``/``repeat``/``forever``/``foreach``); counted when the body
  *completes* (its increment is the last statement; ``return`` and ``continue`` still reach
  it, ``break`` does not). Located at the keyword, for functions/tasks at the name, for
  ``foreach`` at the loop variable. ``do S while (c)`` has two: one at ``c`` (each completed
  body) and one at ``do`` (completed bodies after which ``c`` holds).
- ``if``/``else`` (branch): an ``if`` that is not part of an else-if chain, or the last ``if``
  of a chain that has no final ``else``; the ``else`` point exists without an ``else`` arm too
  and sits one column right of the ``if``.
- ``elsif`` (line): the then-arm of each ``if`` whose else-arm is directly another ``if``
  (``else begin if ... end`` is no chain); ``if``/``else`` (line): the last pair of a chain with
  a final ``else``, and the arms of an ``if`` whose other arm has coverage turned off.
- ``case`` (line): each case item including ``default`` (located at the item's ``:``, for
  ``default`` at the keyword); no point for a missing ``default``.
- ``cond_then``/``cond_else`` (branch): a ``?:`` on the right-hand side of an assignment (also
  continuous), or nested in such a ``?:``'s arms; located at the then-expression's token, the
  ``else`` one column right of it.
- ``$stop``/``$fatal`` turn coverage off for the rest of the enclosing block, arm or item (and a
  ``verilator coverage_block_off`` comment does the same); code between ``verilator
  coverage_off`` and ``coverage_on`` has no points. An ``if`` or ``case`` in such code is not
  looked into at all; a loop starts afresh.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyslang import syntax
from pyslang.parsing import TokenKind

from reward_service.fastcov.unit import ModuleUnit, Unsupported, verilator_token

_K = syntax.SyntaxKind

#: System tasks Verilator parses into an AstStop (``$error`` too: V3LinkResolve adds a stop);
#: V3Coverage turns coverage off after it, so an arm that stops has no point.
STOP_TASKS = {"$stop", "$fatal", "$error"}
PROCEDURES = {_K.InitialBlock, _K.FinalBlock, _K.AlwaysBlock, _K.AlwaysCombBlock, _K.AlwaysFFBlock, _K.AlwaysLatchBlock}
LOOPS = {
    _K.ForLoopStatement: "forKeyword",
    _K.LoopStatement: "repeatOrWhile",
    _K.ForeverStatement: "foreverKeyword",
    _K.DoWhileStatement: "doKeyword",
    _K.ForeachLoopStatement: "keyword",
}
BLOCKS = {_K.SequentialBlockStatement, _K.ParallelBlockStatement}
ASSIGNMENTS = {_K.AssignmentExpression, _K.NonblockingAssignmentExpression}
_PRAGMA = re.compile(r"^(?://|/\*)\s*verilator\s+(coverage_off|coverage_on|coverage_block_off)\b")


@dataclass
class _State:
    """V3Coverage's CheckState: whether the current block still gets points."""

    on: bool = True


class BlocksKind:
    """Point kind for Verilator's ``line`` and ``branch`` points."""

    name = "blocks"
    metrics = ("line", "branch")

    def instrument(self, unit: ModuleUnit) -> None:
        _Blocks(unit).members(unit.syntax)


class _Blocks:
    def __init__(self, unit: ModuleUnit) -> None:
        self.u = unit
        self.off = _off_regions(unit.source.data)

    # -- helpers ----------------------------------------------------------------------------
    def covered_here(self, token: Any) -> bool:
        """Whether ``token`` lies outside every ``coverage_off`` region."""
        offset = self.u.source.offsets(token)[0]
        return not any(a <= offset < b for a, b in self.off)  # byte offsets, as _off_regions'

    def point(self, metric: str, token: Any, comment: str, anchor: Any, column_offset: int = 0):
        line, column = self.u.location(token)
        return self.u.add_point(metric, line, column + column_offset, comment, anchor)

    # -- module items -----------------------------------------------------------------------
    def members(self, node: Any) -> None:
        for child in node:
            if not isinstance(child, syntax.SyntaxNode):
                continue
            k = child.kind
            if k in PROCEDURES:
                self.procedure(child)
            elif k in (_K.FunctionDeclaration, _K.TaskDeclaration):
                self.subroutine(child)
            elif isinstance(child, syntax.ContinuousAssignSyntax):
                for assignment in child.assignments:
                    if isinstance(assignment, syntax.BinaryExpressionSyntax):  # `lhs = rhs`
                        self.continuous_conds(child, assignment.right)
            elif k == _K.DataDeclaration:
                self.initializers(child)
            elif isinstance(child, syntax.NetDeclarationSyntax):
                for decl in child.declarators:
                    if isinstance(decl, syntax.DeclaratorSyntax) and decl.initializer is not None:
                        self.continuous_conds(child, decl.initializer.expr)
            elif k in (
                _K.ClassDeclaration,
                _K.InterfaceDeclaration,
                _K.ProgramDeclaration,
                _K.ModuleDeclaration,
                _K.CovergroupDeclaration,
            ):
                raise Unsupported(f"{self.u.file}: a {k.name} inside module {self.u.name}")
            elif k in (
                _K.GenerateRegion,
                _K.GenerateBlock,
                _K.IfGenerate,
                _K.LoopGenerate,
                _K.CaseGenerate,
                _K.ElseClause,
                _K.StandardCaseItem,
                _K.DefaultCaseItem,
            ):
                self.members(child)

    def procedure(self, node: Any) -> None:
        state = _State()
        self.stmt(node.statement, state)
        if state.on and self.covered_here(node.keyword):
            flag = self.point("line", node.keyword, "block", node)
            body = node.statement
            # `always_ff @(...) S`: the event control must stay first; S's end is the same place
            if body.kind == _K.TimingControlStatement:
                body = body.statement
            self.u.append(body, flag.set)

    def initializers(self, node: Any) -> None:
        """A line ``block`` point for each initialised variable of a module or generate block
        (``reg seen = 1'b0;``), at the initial value (Verilator 5.48 and 5.052 make the
        initialiser an initial statement with its own point; a net's initialiser, ``wire w =
        a;``, is a continuous assignment and has none, nor have a procedure's or a
        subroutine's variables). The initialiser runs at time 0: the flag is set by an
        ``initial`` after the declaration."""
        for decl in node.declarators:
            if not isinstance(decl, syntax.DeclaratorSyntax) or decl.initializer is None:
                continue
            token = decl.initializer.expr.getFirstToken()
            if self.covered_here(token):
                flag = self.point("line", token, "block", node)
                # (begin-end: the prover strips the flag's statement, leaving valid code)
                self.u.insert_after(node, f" initial begin {flag.set} end")

    def subroutine(self, node: Any) -> None:
        proto = node.prototype
        if proto.name.kind != _K.IdentifierName:
            raise Unsupported(f"{self.u.file}: out-of-block method {proto.name} is not supported")
        state = _State()
        for item in node.items:
            if isinstance(item, syntax.StatementSyntax):
                self.stmt(item, state)
        name_token = proto.name.getFirstToken()
        if state.on and self.covered_here(name_token):
            flag = self.point("line", name_token, "block", node)
            self.u.insert_before(node.end, f" {flag.set} ")
            for ret in _find(node, {_K.ReturnStatement}, stop=set()):
                self.u.prepend(ret, flag.set)

    # -- statements -------------------------------------------------------------------------
    def stmt(self, node: Any, state: _State) -> None:
        k = node.kind
        if _pragma_before(node, "coverage_block_off"):
            state.on = False
        if k == _K.ConditionalStatement:
            self.if_(node, state)
        elif k == _K.CaseStatement:
            self.case(node, state)
        elif k in LOOPS:
            self.loop(node, state)
        elif k in BLOCKS:
            for item in node.items:
                if isinstance(item, syntax.StatementSyntax):
                    self.stmt(item, state)
            if _pragma_in(node.end, "coverage_block_off"):
                state.on = False
        elif k == _K.ExpressionStatement:
            self.expression_stmt(node, state)
        elif k in (_K.TimingControlStatement, _K.WaitStatement):
            self.stmt(node.statement, state)
        elif k in (_K.ImmediateAssertStatement, _K.ImmediateAssumeStatement, _K.ImmediateCoverStatement):
            raise Unsupported(f"{self.u.file}:{self.u.location(node)[0]}: immediate assertions in the DUT")
        else:
            for child in node:
                if isinstance(child, syntax.StatementSyntax):
                    self.stmt(child, state)

    def expression_stmt(self, node: Any, state: _State) -> None:
        expr = node.expr
        name = _system_name(expr)
        if name in STOP_TASKS:
            state.on = False
            return
        if expr.kind in ASSIGNMENTS and state.on:
            text = self.cond_checks(expr.right)
            if text:
                self.u.prepend(node, text)

    def if_(self, node: Any, state: _State, chained: bool = False) -> None:
        if not state.on:
            return
        then_stmt = node.statement
        else_stmt = node.elseClause.clause if node.elseClause is not None else None
        has_then = then_stmt.kind != _K.EmptyStatement
        has_else = else_stmt is not None and else_stmt.kind != _K.EmptyStatement
        elsif = has_then and has_else and else_stmt is not None and else_stmt.kind == _K.ConditionalStatement
        first_elsif = not chained and elsif
        cont_elsif = chained and elsif
        final_elsif = chained and not elsif and has_else

        then_state = _State()
        self.stmt(then_stmt, then_state)
        else_state = _State()
        if else_stmt is not None:
            if elsif:
                self.if_(else_stmt, else_state, chained=True)
            else:
                self.stmt(else_stmt, else_state)
        here = self.covered_here(node.ifKeyword)
        then_on, else_on = then_state.on and here, else_state.on and here
        if not (first_elsif or cont_elsif or final_elsif) and then_on and else_on:
            self._arm(node, then_stmt, "branch", "if", 0)
            self._arm(node, else_stmt, "branch", "else", 1)
        elif first_elsif or cont_elsif:
            if then_on:
                self._arm(node, then_stmt, "line", "elsif", 0)
        else:
            if then_on:
                self._arm(node, then_stmt, "line", "if", 0)
            if else_on:
                self._arm(node, else_stmt, "line", "else", 1)

    def _arm(self, if_node: Any, arm: Any, metric: str, comment: str, column_offset: int) -> None:
        flag = self.point(metric, if_node.ifKeyword, comment, if_node, column_offset)
        if arm is None:
            self.u.add_else(if_node, flag.set)
        else:
            self.u.append(arm, flag.set)

    def case(self, node: Any, state: _State) -> None:
        for item in node.items:
            if not isinstance(item, syntax.SyntaxNode):
                continue
            if isinstance(item, syntax.DefaultCaseItemSyntax):
                token = item.defaultKeyword
            elif isinstance(item, syntax.StandardCaseItemSyntax):
                token = item.colon
            else:
                raise Unsupported(f"{self.u.file}:{self.u.location(item)[0]}: {item.kind.name} case items")
            if not (state.on and self.covered_here(token)):
                continue
            item_state = _State()
            self.stmt(item.clause, item_state)
            if item_state.on:
                flag = self.point("line", token, "case", item)
                self.u.append(item.clause, flag.set)

    def loop(self, node: Any, state: _State) -> None:
        keyword = getattr(node, LOOPS[node.kind])
        if node.kind == _K.ForeachLoopStatement:
            variables = [v for v in node.loopList.loopVariables if isinstance(v, syntax.SyntaxNode)]
            if len(variables) != 1:
                raise Unsupported(
                    f"{self.u.file}:{self.u.location(node)[0]}: foreach over several "
                    "dimensions (Verilator counts each level's body)"
                )
            keyword = variables[0].getFirstToken()  # Verilator's point sits at the loop variable
        if node.kind == _K.ForLoopStatement:
            for part in (*node.initializers, *node.steps):
                if isinstance(part, syntax.SyntaxNode) and _find(part, {_K.ConditionalExpression}):
                    raise Unsupported(f"{self.u.file}:{self.u.location(part)[0]}: ?: in a for-loop header")
        loop_state = _State()
        self.stmt(node.statement, loop_state)
        if loop_state.on and self.covered_here(keyword):
            flag = self.point("line", keyword, "block", node)
            if node.kind == _K.DoWhileStatement:
                # Verilator lowers `do S while (c)` to a loop `S; if (!c) break;`: one point at
                # the test (each completed body) and the loop's own (only when c holds)
                test = self.point("line", node.expr.getFirstToken(), "block", node)
                self.u.append(node.statement, f"{test.set} if ({self.u.source.slice(node.expr)}) {flag.set}")
            else:
                self.u.append(node.statement, flag.set)
            for jump in _find(node.statement, {_K.JumpStatement}, stop=set(LOOPS)):
                if jump.breakOrContinue.kind == TokenKind.ContinueKeyword:
                    self.u.prepend(jump, flag.set)

    # -- ?: ----------------------------------------------------------------------------------
    def cond_checks(self, rhs: Any) -> str:
        """Statement text that sets the ``cond_then``/``cond_else`` flags of the ``?:`` of an
        assignment's right-hand side the way evaluating it would ('' when it has none)."""
        rhs = _unparen(rhs)
        while rhs.kind in (_K.ElementSelectExpression,):  # (c ? a : b)[i] is still counted
            rhs = _unparen(rhs.left)
        if rhs.kind != _K.ConditionalExpression:
            return ""
        if not self.covered_here(rhs.question):
            return ""
        then_flag = self.point("branch", verilator_token(rhs.left), "cond_then", rhs)
        else_flag = self.point("branch", verilator_token(rhs.left), "cond_else", rhs, 1)
        pred = self.u.source.slice(rhs.predicate)
        inner_then, inner_else = self.cond_checks(rhs.left), self.cond_checks(rhs.right)
        return f"if ({pred}) begin {then_flag.set} {inner_then} end else begin {else_flag.set} {inner_else} end"

    def continuous_conds(self, item: Any, rhs: Any) -> None:
        text = self.cond_checks(rhs)
        if text:
            self.u.insert_after(item, f" always_comb begin {text} end")


def _unparen(expr: Any) -> Any:
    while expr.kind == _K.ParenthesizedExpression:
        expr = expr.expression
    return expr


def _system_name(expr: Any) -> str | None:
    if expr.kind == _K.InvocationExpression:
        expr = expr.left
    if expr.kind == _K.SystemName:
        return expr.systemIdentifier.valueText
    return None


def _find(node: Any, kinds: set, stop: set | None = None) -> list[Any]:
    """Descendants of ``node`` of the given kinds, not looking into nodes of kinds ``stop``."""
    found = []
    for child in node:
        if not isinstance(child, syntax.SyntaxNode):
            continue
        if child.kind in kinds:
            found.append(child)
        if stop is None or child.kind not in stop:
            found.extend(_find(child, kinds, stop))
    return found


def _pragma_in(token: Any, which: str) -> bool:
    return token is not None and any(
        (m := _PRAGMA.match(t.getRawText())) and m.group(1) == which
        for t in token.trivia
        if t.kind.name in ("LineComment", "BlockComment")
    )


def _pragma_before(node: Any, which: str) -> bool:
    return _pragma_in(node.getFirstToken(), which)


def _off_regions(data: bytes) -> list[tuple[int, int]]:
    """Byte offset ranges between ``verilator coverage_off`` and the next ``coverage_on``."""
    regions, start = [], None
    for m in re.finditer(rb"(?://|/\*)\s*verilator\s+(coverage_off|coverage_on)\b", data):
        if m.group(1) == b"coverage_off" and start is None:
            start = m.start()
        elif m.group(1) == b"coverage_on" and start is not None:
            regions.append((start, m.start()))
            start = None
    if start is not None:
        regions.append((start, len(data)))
    return regions
