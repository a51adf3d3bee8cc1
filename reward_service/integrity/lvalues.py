"""What SystemVerilog code writes, read off pyslang's bound expressions.

One analysis for the two checks that need it: the integrity check (:mod:`.sv`: which writes
reach the DUT) and the race analysis (:mod:`.races`: which writes meet a DUT process at a clock
edge). A write form one of them saw and the other did not would let a testbench race the DUT
unordered (the engines then disagree) or write the DUT unrefused.
"""

from __future__ import annotations

from typing import Any

from pyslang import ast

_EK = ast.ExpressionKind

#: System subroutines that write some of their arguments, and from which argument on
#: (an int: every argument from that 0-based position on; a tuple: only those positions).
WRITING_SYSTEM_CALLS: dict[str, tuple[int, ...] | int] = {
    "$readmemh": (1,),
    "$readmemb": (1,),
    "$sreadmemh": (0,),
    "$sreadmemb": (0,),
    "$fread": (0,),
    "$fgets": (0,),
    "$sscanf": 2,  # every argument from the third on
    "$fscanf": 2,
    "$value$plusargs": (1,),
    "$sformat": (0,),
    "$swrite": (0,),
    "$swriteb": (0,),
    "$swriteh": (0,),
    "$swriteo": (0,),
    "$cast": (0,),
    "$deposit": (0,),
    "$random": (0,),
    "$dist_uniform": (0,),
    "$dist_normal": (0,),
    "$dist_exponential": (0,),
    "$dist_poisson": (0,),
    "$dist_chi_square": (0,),
    "$dist_t": (0,),
    "$dist_erlang": (0,),
}

#: ``++x``, ``--x``, ``x++``, ``x--``: blocking writes of their operand.
INCREMENTS = frozenset(
    {ast.UnaryOperator.Preincrement, ast.UnaryOperator.Predecrement}
    | {ast.UnaryOperator.Postincrement, ast.UnaryOperator.Postdecrement}
)

_PATTERNS = (_EK.SimpleAssignmentPattern, _EK.StructuredAssignmentPattern, _EK.ReplicatedAssignmentPattern)


def written_symbols(lhs: Any, selectors: list[Any] | None = None) -> list[Any]:
    """The symbols an lvalue expression (pyslang Expression or None) writes: the root of each
    select/member access, each operand of a concatenation or streaming concatenation, each
    element of an assignment pattern, the actual of an output argument bound as
    ``actual = <formal>``; a hierarchical reference's target. When ``selectors`` is a list, the
    index expressions of the selects met on the way (``mem[addr]``: ``addr``; ``v[i +: 4]``:
    ``i`` and ``4``), which the write reads, are appended to it."""
    out: list[Any] = []
    stack = [lhs]
    while stack:
        e = stack.pop()
        if e is None:
            continue
        kind = e.kind
        if kind in (_EK.NamedValue, _EK.HierarchicalValue):
            out.append(e.symbol)
        elif kind == _EK.ElementSelect:
            if selectors is not None:
                selectors.append(e.selector)
            stack.append(e.value)
        elif kind == _EK.RangeSelect:
            if selectors is not None:
                selectors.extend((e.left, e.right))
            stack.append(e.value)
        elif kind == _EK.MemberAccess:
            stack.append(e.value)
        elif kind == _EK.Concatenation:
            stack.extend(e.operands)
        elif kind == _EK.Streaming:
            stack.extend(s.operand for s in e.streams)
        elif kind in _PATTERNS:
            stack.extend(e.elements)
        elif kind == _EK.Conversion:
            stack.append(e.operand)
        elif kind == _EK.Assignment:  # an output argument bound as `actual = <formal>`
            stack.append(e.left)
        else:
            ref = e.getSymbolReference() if hasattr(e, "getSymbolReference") else None
            if ref is not None:
                out.append(ref)
    return out


def written_arguments(call: Any) -> list[tuple[Any, Any]]:
    """The arguments a call (pyslang CallExpression) writes, as (lvalue expression, direction):
    of a system subroutine, those :data:`WRITING_SYSTEM_CALLS` lists (direction None: written
    during the call); of a task or function, the actual of each ``output``, ``inout`` or ``ref``
    formal (direction: the formal's ``ast.ArgumentDirection``; ``output``/``inout`` are copied
    out when the subroutine returns, ``ref`` written whenever its body writes the formal)."""
    args = list(call.arguments)
    if call.isSystemCall:
        spec = WRITING_SYSTEM_CALLS.get(call.subroutineName)
        if spec is None:
            return []
        picked = args[spec:] if isinstance(spec, int) else [args[i] for i in spec if i < len(args)]
        return [(arg, None) for arg in picked]
    sub = call.subroutine
    if sub is None:
        return []
    out = []
    for formal, arg in zip(list(sub.arguments), args, strict=False):
        if formal.direction in (ast.ArgumentDirection.Ref, ast.ArgumentDirection.Out, ast.ArgumentDirection.InOut):
            out.append((arg.left if arg.kind == _EK.Assignment else arg, formal.direction))
    return out


def node_writes(node: Any) -> list[tuple[Any, bool]]:
    """The lvalues one expression node writes by itself (not inside its operands), as
    (lvalue expression, nonblocking): an assignment's left side (compound ones included), an
    increment's operand, a call's written arguments (:func:`written_arguments`); [] for any
    other node. Meant for a visitor that meets every node once."""
    kind = getattr(node, "kind", None)
    if kind == _EK.Assignment:
        return [(node.left, bool(node.isNonBlocking))]
    if kind == _EK.UnaryOp and node.op in INCREMENTS:
        return [(node.operand, False)]
    if kind == _EK.Call:
        return [(lhs, False) for lhs, _ in written_arguments(node)]
    return []
