"""Testbench clocks that cannot carry a zero-width pulse (the fast path's edge guards, issue 20).

:func:`~reward_service.fastcov.emulate.edge_processes` guards every edge wait against a
zero-width pulse (a variable written twice in one time step: Icarus wakes the waiter, Verilator
does not). The guard costs a helper process per waited term and a test per wake: on a long
clocked simulation about a quarter of vvp's instructions (IIR_filter_0016 best: 326 M against
277 M with the testbench's own waits unguarded, 201 M bare). A testbench clock written only by
one free-running generator changes once per write, at most once a time step, so its waits need
no guard. :func:`steady_clocks` finds such variables, conservatively: anything it does not
recognise as a read or as the generator leaves the variable guarded.

A variable ``V`` is steady when, over every testbench file:

- it is declared once, as a module-level variable (not a port, not a net), with no initial value
  or a zero literal;
- it is written by exactly one generator, ``always #D V = ~V;`` (or ``!V``; the statement alone,
  or alone in a ``begin``-``end``) or ``forever #D V = ~V;`` as the last statement of an
  ``initial`` block whose earlier statements are assignments (none waits), ``D`` an integer
  literal of at least 1 (a delay of at least one time unit never rounds to 0), its first write at
  time ``D``;
- its other writes are ``V = <zero literal>`` among the leading assignments of an ``initial``
  block (time 0, no change from the 2-state initial 0: the clock edge written at time 0 is an
  open difference of the engines, docs/semantics.md, so a time-0 write of 1 keeps the guard);
- every other use reads it: an event control, a condition, the right side of an assignment, a
  port connection (Icarus refuses a variable with both a port's drive and procedural writes), a
  display-like system task's argument. A task or function argument (it may be ``output`` or
  ``ref``), ``++``, another system task, or any construct not listed keeps the guard.
"""

from __future__ import annotations

import re
from typing import Any

from pyslang import syntax

from reward_service.fastcov.unit import SourceFile

_K = syntax.SyntaxKind

#: A zero literal: ``0``, ``'0``, ``1'b0``, ``4'h0``, ``'d0`` (underscores allowed).
_ZERO = re.compile(r"(?:0[0_]*|'0|\d*\s*'[sS]?[bBoOdDhH]\s*0[0_]*)")
#: System tasks and functions whose arguments are only read.
_READERS = frozenset(
    f"${name}"
    for base in ("display", "write", "strobe", "monitor", "fdisplay", "fwrite", "fstrobe", "fmonitor")
    for name in (base, f"{base}b", f"{base}h", f"{base}o")
) | frozenset(
    {
        "$info",
        "$warning",
        "$error",
        "$fatal",
        "$sformatf",
        "$dumpvars",
        "$sampled",
        "$rose",
        "$fell",
        "$stable",
        "$past",
        "$countones",
        "$onehot",
        "$onehot0",
        "$isunknown",
        "$bits",
        "$signed",
        "$unsigned",
    }
)
#: Where climbing from a use through expressions ends in a read.
_READ_AT = frozenset(
    {
        _K.EventControlWithExpression,
        _K.EventControl,
        _K.RepeatedEventControl,
        _K.ConditionalPredicate,
        _K.NamedPortConnection,
        _K.OrderedPortConnection,
        _K.WaitStatement,
        _K.ImmediateAssertStatement,
        _K.ImmediateAssumeStatement,
        _K.ImmediateCoverStatement,
        _K.CaseStatement,
        _K.LoopStatement,
        _K.DoWhileStatement,
        _K.EqualsValueClause,
        _K.ReturnStatement,
    }
)
#: Expression plumbing a use climbs through.
_THROUGH = frozenset(
    {
        _K.OrderedArgument,
        _K.NamedArgument,
        _K.ArgumentList,
        _K.ElementSelect,
        _K.BitSelect,
        _K.SimpleRangeSelect,
        _K.AscendingRangeSelect,
        _K.DescendingRangeSelect,
        _K.ConditionalPattern,
        _K.ExpressionOrDist,
        _K.ScopedName,  # `tb.clk`: a write through it is the left side of its assignment
    }
)
_STEPS = frozenset(
    {
        _K.PostincrementExpression,
        _K.UnaryPreincrementExpression,
        _K.PostdecrementExpression,
        _K.UnaryPredecrementExpression,
    }
)


def steady_clocks(sources: list[SourceFile]) -> frozenset[str]:
    """The names of the testbench variables in ``sources`` (every file of the testbench, parsed)
    that no zero-width pulse can reach (see the module docstring): their edge waits need no
    guard. Empty when in doubt."""
    declared: dict[str, list[Any]] = {}
    for source in sources:
        for node in source.of_kind(_K.Declarator):
            declared.setdefault(node.name.valueText, []).append(node)
    candidates = {name: decls[0] for name, decls in declared.items() if len(decls) == 1 and _module_variable(decls[0])}
    if not candidates:
        return frozenset()
    home = {name: _module_of(decl) for name, decl in candidates.items()}
    generators: dict[str, int] = {}
    tainted: set[str] = set()
    for source in sources:
        for node in source.of_kind(_K.IdentifierName, _K.IdentifierSelectName):
            name = node.identifier.valueText
            if name not in candidates or name in tainted:
                continue
            # a use in another module names something else (an implicit net of that module,
            # or the variable through a hierarchical name): the edge rewrite goes by name
            use = _use(node) if _module_of(node) == home[name] else "other"
            if use == "generator" and node.kind == _K.IdentifierName:
                generators[name] = generators.get(name, 0) + 1
            elif use == "zero" and node.kind == _K.IdentifierName:
                continue
            elif use != "read":
                tainted.add(name)
    return frozenset(
        name
        for name, decl in candidates.items()
        if name not in tainted and generators.get(name) == 1 and _zero_or_none(decl.initializer)
    )


def _module_of(node: Any) -> tuple[int, int] | None:
    """The span of the module ``node`` is in (None outside any module)."""
    while node is not None and node.kind != _K.ModuleDeclaration:
        node = node.parent
    return _span(node) if node is not None else None


def _module_variable(decl: Any) -> bool:
    """A declarator of a variable declared as an item of a module."""
    parent = decl.parent
    return (
        parent is not None
        and parent.kind == _K.DataDeclaration
        and parent.parent is not None
        and parent.parent.kind == _K.ModuleDeclaration
    )


def _zero_or_none(initializer: Any) -> bool:
    return initializer is None or _is_zero(initializer.expr)


def _is_zero(expr: Any) -> bool:
    return bool(_ZERO.fullmatch(str(expr).strip()))


def _span(node: Any) -> tuple[int, int]:
    r = node.sourceRange
    return r.start.offset, r.end.offset


def _use(node: Any) -> str:
    """``read``, ``generator`` (the toggle of a recognised generator), ``zero`` (a time-0 write
    of 0) or ``other`` for the use ``node`` (an identifier) of a candidate variable."""
    while True:
        parent = node.parent
        if parent is None:
            return "other"
        kind = parent.kind
        if kind.name.endswith("AssignmentExpression"):
            if _span(node) != _span(parent.left):
                return "read"
            return _write(node, parent)
        if kind in _STEPS:
            return "other"
        if kind == _K.InvocationExpression:
            callee = parent.left
            if callee.kind == _K.SystemName and callee.systemIdentifier.valueText in _READERS:
                return "read"
            return "other"
        if kind in _READ_AT:
            return "read"
        if kind in _THROUGH or kind.name.endswith(("Expression", "Expr")):
            node = parent
            continue
        return "other"


def _write(target: Any, assignment: Any) -> str:
    """``generator``, ``zero`` or ``other`` for the assignment ``assignment`` to ``target``."""
    if target.kind != _K.IdentifierName:
        return "other"
    statement = assignment.parent
    if statement is None or statement.kind != _K.ExpressionStatement:
        return "other"
    rhs = assignment.right
    if assignment.kind in (_K.AssignmentExpression, _K.NonblockingAssignmentExpression) and _is_zero(rhs):
        return "zero" if _after_assignments(statement, last=False) else "other"
    if assignment.kind != _K.AssignmentExpression:
        return "other"
    if rhs.kind not in (_K.UnaryBitwiseNotExpression, _K.UnaryLogicalNotExpression):
        return "other"
    operand = rhs.operand
    if operand.kind != _K.IdentifierName or operand.identifier.valueText != target.identifier.valueText:
        return "other"
    delayed = _lift(statement).parent
    if delayed is None or delayed.kind != _K.TimingControlStatement or not _unit_delay(delayed.timingControl):
        return "other"
    holder = _lift(delayed).parent
    if holder is not None and holder.kind == _K.AlwaysBlock and _module_item(holder):
        return "generator"
    if holder is not None and holder.kind == _K.ForeverStatement and _after_assignments(holder, last=True):
        initial = holder.parent if holder.parent.kind == _K.InitialBlock else holder.parent.parent
        return "generator" if _module_item(initial) else "other"
    return "other"


def _module_item(process: Any) -> bool:
    """``process`` is an item of a module itself: one process, where a generate loop around it
    would make one per iteration (two toggles of one time step: a pulse)."""
    return process.parent is not None and process.parent.kind == _K.ModuleDeclaration


def _lift(node: Any) -> Any:
    """``node``, or the ``begin``-``end`` block it is the only statement of (repeatedly)."""
    while True:
        parent = node.parent
        if (
            parent is not None
            and parent.kind == _K.SequentialBlockStatement
            and len(parent.items) == 1
            and parent.blockName is None
        ):
            node = parent
        else:
            return node


def _unit_delay(control: Any) -> bool:
    """``#N`` or ``#(N)`` with ``N`` an integer literal of at least 1."""
    if control.kind != _K.DelayControl:
        return False
    expr = control.delayValue
    while expr.kind == _K.ParenthesizedExpression:
        expr = expr.expression
    if expr.kind != _K.IntegerLiteralExpression:
        return False
    text = str(expr).strip().replace("_", "")
    return text.isdigit() and int(text) >= 1


def _after_assignments(node: Any, last: bool) -> bool:
    """``node`` is an ``initial`` block's statement, or a statement of its top-level
    ``begin``-``end`` (the last one when ``last``) after assignments only, none of which waits
    (``x = #5 y;`` does)."""
    block = node.parent
    if block is not None and block.kind == _K.InitialBlock:
        return True
    if block is None or block.kind != _K.SequentialBlockStatement:
        return False
    if block.parent is None or block.parent.kind != _K.InitialBlock:
        return False
    items = list(block.items)
    if last and _span(items[-1]) != _span(node):
        return False
    for item in items:
        if _span(item) == _span(node):
            return True
        if item.kind != _K.ExpressionStatement or item.expr.kind not in (
            _K.AssignmentExpression,
            _K.NonblockingAssignmentExpression,
        ):
            return False
        if item.expr.right.kind == _K.TimingControlExpression:
            return False
    return False
