"""Verilator's expression coverage model (V3Coverage.cpp, ``--coverage-expr``), on
:class:`~reward_service.fastcov.expr_ir.VNode` trees.

A *root* is a 1-bit logical expression Verilator covers; its points are the minterms
("cover expressions") that make it 1 and those that make it 0, each a list of *terms* (the
non-logical leaves) with the value each must have. The functions mirror V3Coverage's
``coverExprs``/``exprEither``/``exprBoth``/``xorExpr``/``exprReduce`` including where they
give up (``--coverage-expr-max``, default 32 cover expressions per root, checked on the
intermediate lists too) and how they drop redundant and contradictory terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from reward_service.fastcov.expr_ir import LOGICAL_BIN, VNode, bit_of, emit

#: ``--coverage-expr-max`` default (V3Options: 32).
MAX_EXPRS = 32


class _Abort(Exception):
    """V3Coverage's ``abortExprCoverage``: no points for the whole root."""


@dataclass(frozen=True, eq=False)
class Term:
    node: VNode
    objective: bool
    text: str  # V3EmitV text of the node

    @property
    def var(self):
        """Variables are compared by identity (V3Coverage compares AstVarRef by variable)."""
        n = self.node
        return n.ident if n.kind == "var" and n.ident and n.ident[0] in ("var", "param") else None


@dataclass(frozen=True)
class CoverExpr:
    """One point of a root: all ``terms`` hold their objective -> the root is ``result``."""

    terms: tuple[Term, ...]
    result: bool

    @property
    def comment(self) -> str:
        """Verilator's ``o`` key: ``(a==1 && b==0) => 1``."""
        body = " && ".join(f"{t.text}=={int(t.objective)}" for t in self.terms)
        return f"({body}) => {int(self.result)}"


def cover(root: VNode) -> list[CoverExpr]:
    """The points of ``root`` (V3Coverage ``coverExprs``): those making it 1, then those making
    it 0; empty when Verilator gives up on it."""
    try:
        false = _seek(root, False)
        true = _seek(root, True)
        if len(true) + len(false) > MAX_EXPRS:
            return []
    except _Abort:
        return []
    return [CoverExpr(tuple(t), True) for t in true] + [CoverExpr(tuple(f), False) for f in false]


def roots(n: VNode, out: list[VNode]) -> None:
    """Append the roots of expression ``n`` that V3Coverage finds when it is not already
    inside a covered expression (``m_seeking == NONE``)."""
    k, op = n.kind, n.op
    if (k == "bin" and op in LOGICAL_BIN) or (k == "un" and op in ("!", "~")):
        if n.width == 1:
            out.append(n)
        return  # a wider &, |, ^, ~ is not looked into at all
    if k == "un" and op.startswith("red"):
        w = n.kids[0].width
        if (2**w if op == "red^" else w + 1) > MAX_EXPRS:
            return
        roots(unroll(n), out)
        return
    if k == "cond":
        if n.kids[0].width == 1:  # coverExprs(condp) wants a 1-bit condition
            out.append(n.kids[0])
        return  # the arms are never looked into
    if k == "call" and not n.auto:
        return  # exprUnsupported: the arguments are not looked into either
    for kid in n.kids:
        roots(kid, out)


def unroll(n: VNode) -> VNode:
    """``exprReduce``: ``|x`` -> ``x[0] | (x[1] | (... | x[w-1]))`` (also ``&``, ``^``)."""
    x = n.kids[0]
    op = n.op[3:]
    tree = bit_of(x, x.width - 1)
    tree.loc = n.loc
    for bit in range(x.width - 2, -1, -1):
        sel = bit_of(x, bit)
        sel.loc = n.loc
        tree = VNode("bin", 1, False, [sel, tree], op=op, loc=n.loc)
    return tree


# -- the seeking visitor ----------------------------------------------------------------------


def _seek(n: VNode, obj: bool) -> list[list[Term]]:
    k, op = n.kind, n.op
    if k == "bin" and op in ("||", "|"):
        return _either(n, obj, obj) if obj else _both(n, obj, obj)
    if k == "bin" and op in ("&&", "&"):
        return _both(n, obj, obj) if obj else _either(n, obj, obj)
    if k == "bin" and op == "^":
        return _xor(n, obj)
    if k == "bin" and op == "->":
        return _either(n, False, True) if obj else _both(n, True, False)
    if k == "bin" and op == "<->":
        return _xor(n, not obj)
    if k == "un" and op in ("!", "~"):
        return _seek(n.kids[0], not obj)
    if k == "un" and op.startswith("red"):
        w = n.kids[0].width
        if (2**w if op == "red^" else w + 1) > MAX_EXPRS:
            raise _Abort
        return _seek(unroll(n), obj)
    if k == "cond":
        return []  # no term and no abort (V3Coverage's visit(AstCond) while seeking)
    if k == "call" and not n.auto:
        raise _Abort  # "non-automatic function"
    for sub in n.walk():
        if sub.ineligible:
            raise _Abort  # "not coverage eligible"
    return [[Term(n, obj, emit(n))]]


def _check(size: int) -> None:
    if size > MAX_EXPRS:
        raise _Abort


def _either(n: VNode, lobj: bool, robj: bool) -> list[list[Term]]:
    left = _seek(n.kids[0], lobj)
    _check(len(left))
    right = _seek(n.kids[1], robj)
    out = right + left
    _check(len(out))
    return out


def _both(n: VNode, lobj: bool, robj: bool) -> list[list[Term]]:
    left = _seek(n.kids[0], lobj)
    _check(len(left))
    right = _seek(n.kids[1], robj)
    _check(len(right))
    out: list[list[Term]] = []
    for lterms in left:
        for rterms in right:
            seen_vars: dict[bool, set] = {False: set(), True: set()}
            seen_text: dict[bool, set] = {False: set(), True: set()}
            expr = []
            for t in lterms:
                if t.var is not None:
                    seen_vars[t.objective].add(t.var)
                else:
                    seen_text[t.objective].add(t.text)
                expr.append(t)
            impossible = False
            for t in rterms:
                if t.var is not None:
                    redundant = t.var in seen_vars[t.objective]
                    impossible |= t.var in seen_vars[not t.objective]
                else:
                    redundant = t.text in seen_text[t.objective]
                    impossible |= t.text in seen_text[not t.objective]
                if not redundant:
                    expr.append(t)
            if not impossible:
                out.append(expr)
            _check(len(out))
    return out


def _xor(n: VNode, obj: bool) -> list[list[Term]]:
    out: list[list[Term]] = []
    for lobj in (False, True):
        out = _both(n, lobj, lobj ^ obj) + out
        _check(len(out))
    return out
