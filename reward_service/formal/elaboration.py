"""Branch arms that elaboration rules out: an ``if`` whose condition is a constant (parameters,
genvars, literals) in every elaborated instance of it never takes the other arm.

The one-edge model gives no property to points in a generate block, of a module with several
parameter sets, or in code it does not model (docs/formal.md); this proof needs none of it:
pyslang folds the condition of each instance of the statement (each generate-loop iteration,
each instance of a parameterised module), and an arm whose condition is the other constant in
every one is unreachable on every engine, whatever the stimulus (the proof kind ``constant``:
the arm's condition is false for every input and state). Conditions with an unknown bit, pattern
conditions and statements with no elaborated instance (an unselected generate branch, a module
nobody instantiates) decide nothing; a key shared by two points (two ``if`` on one line) needs
both."""

from __future__ import annotations

from typing import Any

from pyslang import ast, syntax

#: Where an ``if`` keyword is: (buffer id, offset in the buffer).
IfSite = tuple[int, int]


def if_site(if_syntax: Any) -> IfSite:
    """The site of a ``ConditionalStatementSyntax`` (its ``if`` keyword)."""
    loc = if_syntax.ifKeyword.location
    return (loc.buffer.id, loc.offset)


def constant_conditions(compilation: Any) -> dict[IfSite, list[bool | None]]:
    """Per ``if`` site of the elaborated design (every instance of every module, generate blocks
    included), the value of its condition in each instance: True/False for a constant with no
    unknown bit, None otherwise (not constant, a pattern, several conditions)."""
    found: dict[IfSite, list[bool | None]] = {}

    def visit(node: Any) -> Any:
        if getattr(node, "isUninstantiated", False):  # an unselected generate branch, checked only
            return ast.VisitAction.Skip
        if isinstance(node, ast.ConditionalStatement) and isinstance(node.syntax, syntax.ConditionalStatementSyntax):
            value: bool | None = None
            conditions = list(node.conditions)
            if len(conditions) == 1 and conditions[0].pattern is None:
                constant = conditions[0].expr.constant
                if constant is not None and not constant.hasUnknown():
                    value = True if constant.isTrue() else False if constant.isFalse() else None
            found.setdefault(if_site(node.syntax), []).append(value)
        return ast.VisitAction.Advance

    compilation.getRoot().visit(visit)
    return found


def dead_arm(comment: str, values: list[bool | None] | None) -> bool:
    """Whether the arm a branch/line point names (``comment``: ``if``/``elsif`` the then-arm,
    ``else`` the else-arm) is never taken, given its ``if``'s condition in each instance."""
    if not values or any(v is None for v in values):
        return False
    if comment in ("if", "elsif"):
        return not any(values)
    if comment == "else":
        return all(values)
    return False
