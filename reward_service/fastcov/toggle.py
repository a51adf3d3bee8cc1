"""Verilator's ``toggle`` points: two per bit (``<name>[<bit>]:0->1`` and ``:1->0``) of the ports
and module-level signals of a module (V3Coverage ``varIgnoreToggle``):

- counted: ports of any integral type; nets and variables whose type is built from
  ``bit``/``logic``/``reg`` (vectors, logic enums, packed structs, unpacked arrays of them),
  implicit nets, signals declared in generate blocks (named ``<block>.<name>``);
- not counted: ``integer``/``int``/``byte``/``time``/``real``/``string`` variables (unless
  ports), parameters, anything declared in a procedure, function or task, names starting with
  ``_``, and signals wider than ``--coverage-max-width`` (256) bits in all (elements x width);
- located at the declarator's name.

Sampling (Icarus): a watcher process per signal (``always begin <check>; @(sig); end``) that
reads the signal as 2-state (X/Z -> 0, Verilator's values) and ORs the 0->1 and 1->0 bits into
sticky vectors, starting from 0 (Verilator's zero-initialised previous value). It sees every
value change the signal settles to, as Verilator's toggle check (a combinational process) does.
The watchers' ``final`` blocks write ``<token> T <module> <signal> <element> <path> <left>
<right> <rise bits> <fall bits>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyslang import ast, syntax

from reward_service.fastcov.unit import PREFIX, ModuleUnit, Unsupported

_K = syntax.SyntaxKind
_S = ast.SymbolKind
MAX_WIDTH = 256  # Verilator's --coverage-max-width default


@dataclass
class ToggleSignal:
    """One counted signal of a module. ``bits`` names its bits LSB first relative to the
    runtime range (``None``: a plain vector named by its runtime ``$left``/``$right``);
    ``elements`` the unpacked element suffixes (``[""]`` when not an array)."""

    index: int
    name: str
    line: int
    column: int
    scalar: bool = False
    bits: list[str] | None = None
    width: int | None = None     # fixed width of ``bits`` (checked at runtime)
    array: bool = False
    elements: list[str] = field(default_factory=lambda: [""])

    def bit_names(self, left: int, right: int) -> list[str]:
        """Names (after the signal name and element suffix) of bits 0 (LSB) .. width-1."""
        if self.scalar:
            return [""]
        if self.bits is not None:
            return self.bits
        step = 1 if left >= right else -1
        return [f"[{right + step * p}]" for p in range(abs(left - right) + 1)]


class ToggleKind:
    """Point kind for Verilator's ``toggle`` points."""

    name = "toggle"
    metrics = ("toggle",)

    def instrument(self, unit: ModuleUnit) -> None:
        if unit.body is None:
            raise Unsupported(f"{unit.file}: module {unit.name} could not be elaborated by pyslang")
        signals: list[ToggleSignal] = []
        unit.toggles = signals
        ports = {p.name for p in unit.body.portList} if hasattr(unit.body, "portList") else set()
        off = _off_regions(unit)
        for sym, prefix, scope_syntax in _signals(unit.body):
            decl = sym.syntax
            token = _name_token(decl, sym)
            if token is not None:
                line, column = unit.location(token)
                if any(a <= unit.source.offsets(token)[0] < b for a, b in off):
                    continue
            else:  # an implicit net: located at its first use
                line, column = unit.source.line_col(sym.location)
            if sym.name.startswith("_"):
                continue
            is_port = sym.name in ports and not prefix
            kind = _classify(sym.type, is_port)
            if kind is None:
                continue
            sig = ToggleSignal(len(signals), prefix + sym.name, line, column)
            try:
                shadow = _shadow(unit, sym, decl, sig)
            except _Skip:
                continue
            signals.append(sig)
            text = _watcher(unit, sig, shadow, sym.name)
            if scope_syntax is None:
                unit.tail.append(text)
            else:
                unit.insert_after(scope_syntax, " " + text)


def _signals(body: Any, prefix: str = "", member_syntax: Any = None):
    """(symbol, generate prefix, declaring member syntax in a generate block or None) of every
    net/variable of a scope, recursing into generate blocks (first elaborated copy)."""
    for m in body:
        if m.kind in (_S.Net, _S.Variable):
            decl = m.syntax
            member = decl.parent if prefix and decl is not None else None
            yield m, prefix, member
        elif m.kind == _S.GenerateBlock:
            if m.isUninstantiated:
                continue
            yield from _signals(m, f"{prefix}{m.name}.", None)
        elif m.kind == _S.GenerateBlockArray:
            raise Unsupported("signals in generate loops are not sampled yet")


def _classify(ty: Any, is_port: bool) -> str | None:
    t = ty.canonicalType
    if _bit_logic(t):
        return "bitlogic"
    if is_port and t.isIntegral:
        return "port"
    return None


def _bit_logic(t: Any) -> bool:
    k = t.kind
    if k == _S.ScalarType:
        return True
    if k == _S.PackedArrayType:
        return _bit_logic(t.elementType.canonicalType)
    if k == _S.EnumType:
        return _bit_logic(t.baseType.canonicalType)
    if k == _S.PackedStructType:
        return all(_bit_logic(f.type.canonicalType) for f in t if f.kind == _S.Field)
    if k == _S.FixedSizeUnpackedArrayType:
        return _bit_logic(t.elementType.canonicalType)
    return False


def _name_token(decl: Any, sym: Any) -> Any:
    if decl is not None and hasattr(decl, "name"):
        return decl.name
    return None


def _shadow(unit: ModuleUnit, sym: Any, decl: Any, sig: ToggleSignal) -> str:
    """The 2-state type text of the signal's element, and fill in the signal's shape."""
    t = sym.type.canonicalType
    if t.kind == _S.FixedSizeUnpackedArrayType:
        if t.elementType.canonicalType.kind == _S.FixedSizeUnpackedArrayType:
            raise Unsupported(f"{unit.file}:{sig.line}: multi-dimensional unpacked array {sym.name}")
        rng = t.range
        sig.array = True
        sig.elements = [f"[{i}]" for i in _indices(rng.left, rng.right)]
        t = t.elementType.canonicalType
        if len(sig.elements) * t.bitWidth > MAX_WIDTH:
            raise _Skip()
    if t.kind == _S.ScalarType:
        sig.scalar = True
        return "bit"
    dims = _packed_dims_text(unit, decl)
    if t.kind == _S.PackedArrayType and t.elementType.canonicalType.kind == _S.ScalarType and dims is not None:
        return f"bit {dims}"
    sig.bits = _flat_names(t)
    sig.width = t.bitWidth
    return f"bit [{t.bitWidth - 1}:0]"


class _Skip(Exception):
    pass


def _indices(left: int, right: int) -> list[int]:
    lo, hi = min(left, right), max(left, right)
    return list(range(lo, hi + 1))


def _flat_names(t: Any) -> list[str]:
    """Bit names (LSB first) of a packed type, the way Verilator's toggleVarRecurse names them."""
    k = t.kind
    if k == _S.ScalarType:
        return [""]
    if k == _S.EnumType:
        return _flat_names(t.baseType.canonicalType)
    if k == _S.PredefinedIntegerType:
        return [f"[{i}]" for i in range(t.bitWidth)]
    if k == _S.PackedArrayType:
        elem = t.elementType.canonicalType
        rng = t.range
        step = 1 if rng.left >= rng.right else -1
        sub = _flat_names(elem)
        names = []
        for p in range(rng.width):
            idx = rng.right + step * p
            names.extend(f"[{idx}]{s}" for s in sub)
        return names
    if k == _S.PackedStructType:
        fields = [f for f in t if f.kind == _S.Field]
        names = []
        for f in reversed(fields):  # the last member holds the LSBs
            names.extend(f".{f.name}{s}" for s in _flat_names(f.type.canonicalType))
        return names
    raise Unsupported(f"toggle coverage of type {t} is not supported")


def _packed_dims_text(unit: ModuleUnit, decl: Any) -> str | None:
    """Source text of the packed dimensions of a declarator's data type (``[W-1:0]``) when the
    type is a keyword type or an implicit one, else None."""
    if decl is None:
        return None
    owner = decl.parent
    while owner is not None and not hasattr(owner, "type") and not hasattr(owner, "header"):
        owner = owner.parent
    if owner is None:
        return None
    dtype = owner.header.dataType if hasattr(owner, "header") and hasattr(owner.header, "dataType") \
        else getattr(owner, "type", None)
    if dtype is None or dtype.kind not in (_K.RegType, _K.LogicType, _K.BitType, _K.ImplicitType):
        return None
    dims = [d for d in dtype.dimensions if isinstance(d, syntax.SyntaxNode)]
    if len(dims) != 1:
        return None
    return unit.source.slice(dims[0])


def _watcher(unit: ModuleUnit, sig: ToggleSignal, shadow: str, name: str) -> str:
    """Watcher process(es) and final block of one signal (one per element of an array)."""
    i = sig.index
    c, p, r, f = (f"{PREFIX}t{i}_{x}" for x in "cprf")
    token = "__RS_FASTCOV_TOKEN__"
    left_right = "0, 0" if (sig.scalar or sig.bits is not None) else f"$left({name}), $right({name})"
    if sig.array:
        left_right = "0, 0" if (sig.scalar or sig.bits is not None) else f"$left({name}[{PREFIX}g]), $right({name}[{PREFIX}g])"
        los = [int(e[1:-1]) for e in sig.elements]
        ref = f"{name}[{PREFIX}g]"
        body = (f"{shadow} {c}, {p}, {r}, {f}; "
                f"always begin {c} = {ref}; {r} |= {c} & ~{p}; {f} |= ~{c} & {p}; {p} = {c}; @({ref}); end "
                f"final begin {PREFIX}fd{i} = $fopen(\"rs_fastcov.txt\", \"a\"); "
                f"$fwrite({PREFIX}fd{i}, \"{token} T {unit.name} {i} %0d %m %0d %0d %b %b\\n\", {PREFIX}g, "
                f"{left_right}, {r}, {f}); $fclose({PREFIX}fd{i}); end")
        return (f"for (genvar {PREFIX}g = {min(los)}; {PREFIX}g <= {max(los)}; {PREFIX}g++) "
                f"begin : {PREFIX}a{i} int {PREFIX}fd{i}; {body} end")
    return (f"{shadow} {c}, {p}, {r}, {f}; "
            f"always begin {c} = {name}; {r} |= {c} & ~{p}; {f} |= ~{c} & {p}; {p} = {c}; @({name}); end "
            f"final begin {PREFIX}fd = $fopen(\"rs_fastcov.txt\", \"a\"); "
            f"$fwrite({PREFIX}fd, \"{token} T {unit.name} {i} - %m %0d %0d %b %b\\n\", {left_right}, {r}, {f}); "
            f"$fclose({PREFIX}fd); end")


def _off_regions(unit: ModuleUnit) -> list[tuple[int, int]]:
    from reward_service.fastcov.blocks import _off_regions as regions
    return regions(unit.source.data)
