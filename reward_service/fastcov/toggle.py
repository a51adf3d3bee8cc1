"""Verilator's ``toggle`` points: two per bit (``<name>[<bit>]:0->1`` and ``:1->0``) of the ports
and module-level signals of a module (V3Coverage ``varIgnoreToggle``):

- counted: ports of any integral type; nets and variables whose type is built from
  ``bit``/``logic``/``reg`` (vectors, logic enums, packed structs, unpacked arrays of them),
  implicit nets, signals declared in generate blocks (named ``<block>.<name>``);
- not counted: ``integer``/``int``/``byte``/``time``/``real``/``string`` variables (unless
  ports), parameters, anything declared in a procedure, function or task, names starting with
  ``_``, and signals wider than ``--coverage-max-width`` (256) bits in all (elements x width);
- located at the declarator's name.

Sampling (Icarus): a watcher process per signal (``always begin <check>; @(sig); #0; end``) that
reads the signal as 2-state (X/Z -> 0, Verilator's values) and ORs the 0->1 and 1->0 bits into
sticky vectors, starting from 0 (Verilator's zero-initialised previous value). It sees every
value change the signal settles to, as Verilator's toggle check (a combinational process) does.
Once every bit has risen and fallen the watcher stops (waits on an event never triggered): its
vectors can no longer change, and a clock's watcher would otherwise run at every edge.
The watchers' ``final`` blocks write ``<token> T <module> <signal> <element> <path> <left>
<right> <rise bits> <fall bits>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyslang import ast, syntax

from reward_service.fastcov.unit import (
    FLAG_FILE,
    MAX_WIDTH,
    PREFIX,
    TOKEN_PLACEHOLDER,
    ModuleUnit,
    Unsupported,
    other_bodies,
)

_K = syntax.SyntaxKind
_S = ast.SymbolKind


@dataclass
class ToggleSignal:
    """One counted signal of a module. ``bits`` names its bits LSB first (``None``: a plain
    vector named by its runtime ``$left``/``$right``)."""

    index: int
    name: str
    line: int
    column: int
    scoped: bool = False  # declared in a generate block (named by its runtime scope)
    scalar: bool = False
    bits: list[str] | None = None
    dims: list[tuple[str, str]] = field(default_factory=list)  # unpacked (low, high) expressions
    width: str | None = None  # constant expression of the element's width (None: 1 bit)

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
        ports = {p.name for p in unit.body.portList}
        off = _off_regions(unit)
        seen: set[tuple[int, int]] = set()
        # every parameter set's signals: a generate block may exist under one set only (the
        # watcher sits in the block, so an instance without it samples nothing there)
        found = [pair for body in (unit.body, *other_bodies(unit)) for pair in _signals(body)]
        for sym, scoped in found:
            decl = sym.syntax if sym.syntax is not None and sym.syntax.kind == _K.Declarator else None
            if decl is not None:
                key = unit.source.offsets(decl)
                if key in seen:
                    continue  # another iteration of the same generate loop
                seen.add(key)
                line, column = unit.location(decl.name)
                if any(a <= key[0] < b for a, b in off):
                    continue
            else:  # an implicit net: located at its first use
                line, column = unit.source.line_col(sym.location)
            if sym.name.startswith("_"):
                continue
            if _classify(sym.type, sym.name in ports and not scoped) is None:
                continue
            if scoped and decl is None:  # its watcher would go after a declaration it does not have
                raise Unsupported(f"{unit.file}:{line}: implicit net {sym.name} in a generate block")
            sig = ToggleSignal(len(signals), sym.name, line, column, scoped=scoped)
            shadow = _shadow(unit, sym, decl, sig)
            signals.append(sig)
            text = _watcher(unit, sig, shadow, decl)
            if scoped and decl is not None:
                unit.insert_after(decl.parent, " " + text)
            else:
                unit.tail.append(text)
        if signals:
            unit.declare(_time0_latch())  # after the header: the watchers in generate blocks read it


def _signals(scope: Any, scoped: bool = False):
    """(symbol, declared in a generate block) of every net/variable of a scope, recursing into
    the generate blocks an instance has."""
    for m in scope:
        if m.kind in (_S.Net, _S.Variable):
            yield m, scoped
        elif m.kind == _S.GenerateBlock:
            if not m.isUninstantiated:
                yield from _signals(m, True)
        elif m.kind == _S.GenerateBlockArray:
            for entry in m.entries:
                yield from _signals(entry, True)


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


def _shadow(unit: ModuleUnit, sym: Any, decl: Any, sig: ToggleSignal) -> str:
    """The 2-state type text of the signal's element; fills in the signal's shape."""
    t = sym.type.canonicalType
    elements = 1
    while t.kind == _S.FixedSizeUnpackedArrayType:
        sig.dims.append(_unpacked_bounds(unit, decl, len(sig.dims)))
        elements *= t.range.width
        t = t.elementType.canonicalType
    if t.kind == _S.ScalarType:
        sig.scalar = True
        return "bit"
    dims = _packed_dims(unit, decl)
    if t.kind == _S.PackedArrayType and t.elementType.canonicalType.kind == _S.ScalarType and dims is not None:
        text, left, right = dims
        sig.width = f"((({left}) > ({right}) ? ({left}) - ({right}) : ({right}) - ({left})) + 1)"
        return f"bit {text}"
    sig.bits = _flat_names(t)
    sig.width = str(t.bitWidth)
    return f"bit [{t.bitWidth - 1}:0]"


def _unpacked_bounds(unit: ModuleUnit, decl: Any, index: int) -> tuple[str, str]:
    """Constant expressions (in the declaring scope) of the low and high index of unpacked
    dimension ``index`` of a declarator, from its source text (parameters may differ per
    instance)."""
    dims = [d for d in decl.dimensions if isinstance(d, syntax.VariableDimensionSyntax)]
    spec = dims[index].specifier
    sel = spec.selector if isinstance(spec, syntax.RangeDimensionSpecifierSyntax) else None
    if isinstance(sel, syntax.RangeSelectSyntax) and sel.kind == _K.SimpleRangeSelect:
        a, b = unit.source.slice(sel.left), unit.source.slice(sel.right)
        return f"(({a}) < ({b}) ? ({a}) : ({b}))", f"(({a}) > ({b}) ? ({a}) : ({b}))"
    if isinstance(sel, syntax.BitSelectSyntax):  # [N]: 0 .. N-1
        return "0", f"(({unit.source.slice(sel.expr)}) - 1)"
    raise Unsupported(f"{unit.file}:{unit.location(decl)[0]}: unpacked dimension of {decl.name.valueText}")


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
        names: list[str] = []
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


def _packed_dims(unit: ModuleUnit, decl: Any) -> tuple[str, str, str] | None:
    """Source text of the single packed dimension ``[L:R]`` of a declarator's keyword or
    implicit data type, with the texts of L and R; None for other types."""
    if decl is None:
        return None
    owner = decl.parent
    while owner is not None and not hasattr(owner, "type") and not hasattr(owner, "header"):
        owner = owner.parent
    if owner is None:
        return None
    dtype = (
        owner.header.dataType
        if hasattr(owner, "header") and hasattr(owner.header, "dataType")
        else getattr(owner, "type", None)
    )
    if dtype is None or dtype.kind not in (_K.RegType, _K.LogicType, _K.BitType, _K.ImplicitType):
        return None
    dims = [d for d in dtype.dimensions if isinstance(d, syntax.VariableDimensionSyntax)]
    spec = dims[0].specifier if len(dims) == 1 else None
    sel = spec.selector if isinstance(spec, syntax.RangeDimensionSpecifierSyntax) else None
    if not isinstance(sel, syntax.RangeSelectSyntax) or sel.kind != _K.SimpleRangeSelect:
        return None
    return unit.source.slice(dims[0]), unit.source.slice(sel.left), unit.source.slice(sel.right)


def _watcher(unit: ModuleUnit, sig: ToggleSignal, shadow: str, decl: Any) -> str:
    """Watcher process and final block of one signal, in genvar loops over its unpacked
    dimensions (one watcher per element). The final block writes ``T <module> <signal>
    <element indices or -> %m <left> <right> <rise> <fall>``."""
    i, name = sig.index, (decl.name.valueText if decl is not None else sig.name)
    c, p, r, f, idle, late = (f"{PREFIX}t{i}_{x}" for x in "cprfel")
    genvars = [f"{PREFIX}g{d}" for d in range(len(sig.dims))]
    ref = name + "".join(f"[{g}]" for g in genvars)
    # the shadow has the element's packed range ($left of an array element is not that in Icarus)
    left_right = "0, 0" if (sig.scalar or sig.bits is not None) else f"$left({c}), $right({c})"
    element, element_args = ("-", "") if not genvars else (",".join("%0d" for _ in genvars), ", " + ", ".join(genvars))
    fd = f"{PREFIX}fd{i}"
    # --coverage-max-width: no points (and no watchers) when the signal has more bits in all;
    # evaluated per instance, parameters may differ
    total = "*".join([f"(({hi}) - ({lo}) + 1)" for lo, hi in sig.dims] + [sig.width or "1"])
    if len(genvars) == 1:
        return f"if ({total} <= {MAX_WIDTH}) begin : {PREFIX}w{i} {_array_watcher(unit, sig, shadow, ref)} end"
    body = (
        f"int {fd}; {shadow} {c}, {p}, {r}, {f}; bit {late}; event {idle}; "
        # once every bit rose and fell the sticky vectors cannot change: the watcher parks on
        # an event nothing triggers (a clock's watcher stops after its first cycle; measured:
        # the IIR filter's long testbench runs 2.6x fewer instructions in vvp)
        f"always begin {c} = {ref}; {_count(r, f, c, p, late)} {p} = {c}; "
        f"if (&{{{r}, {f}}}) @({idle}); @({ref}); #0; end "
        f'final begin {fd} = $fopen("{FLAG_FILE}", "a"); '
        f'$fwrite({fd}, "{TOKEN_PLACEHOLDER} T {unit.name} {i} {element} %m %0d %0d %b %b\\n"{element_args}, '
        f"{left_right}, {r}, {f}); $fclose({fd}); end"
    )
    for d in reversed(range(len(genvars))):
        lo, hi = sig.dims[d]
        body = (
            f"for (genvar {genvars[d]} = {lo}; {genvars[d]} <= {hi}; {genvars[d]} = {genvars[d]} + 1) "
            f"begin : {PREFIX}a{i}_{d} {body} end"
        )
    return f"if ({total} <= {MAX_WIDTH}) begin : {PREFIX}w{i} {body} end"


def _array_watcher(unit: ModuleUnit, sig: ToggleSignal, shadow: str, ref: str) -> str:
    """The watchers of a one-dimensional unpacked array ``ref`` (``name[<genvar>]``): one
    process per element in a genvar loop, the sticky vectors in arrays beside the loop, and one
    ``final`` block writing every element's line in a loop. One ``$fwrite`` and one file open
    per array instead of per element: Icarus elaborates each copy of a ``$fwrite`` and its
    strings (measured: the 64-entry valid array of the direct-mapped cache took its compile from
    12 to 74 million instructions, mostly those copies). Lines as :func:`_watcher` writes them."""
    i, (lo, hi) = sig.index, sig.dims[0]
    c, p, r, f, idle, k, like, late = (f"{PREFIX}t{i}_{x}" for x in "cprfeksl")
    g, fd = f"{PREFIX}g0", f"{PREFIX}fd{i}"
    # the element's packed range from a variable of its type ($left of an array element is not
    # that in Icarus); the loop variable is the block's (a `for (int k ...)` in a final block
    # of Icarus 11 runs no iteration)
    left_right = "0, 0" if (sig.scalar or sig.bits is not None) else f"$left({like}), $right({like})"
    return (
        f"int {fd}, {k}; {shadow} {like}; {shadow} {r} [{lo}:{hi}], {f} [{lo}:{hi}]; event {idle}; "
        f"for (genvar {g} = {lo}; {g} <= {hi}; {g} = {g} + 1) begin : {PREFIX}a{i}_0 {shadow} {c}, {p}; bit {late}; "
        f"always begin {c} = {ref}; {_count(f'{r}[{g}]', f'{f}[{g}]', c, p, late)} {p} = {c}; "
        f"if (&{{{r}[{g}], {f}[{g}]}}) @({idle}); @({ref}); #0; end end "
        f'final begin {fd} = $fopen("{FLAG_FILE}", "a"); for ({k} = {lo}; {k} <= {hi}; {k} = {k} + 1) '
        f'$fwrite({fd}, "{TOKEN_PLACEHOLDER} T {unit.name} {i} %0d %m %0d %0d %b %b\\n", {k}, {left_right}, '
        f"{r}[{k}], {f}[{k}]); $fclose({fd}); end"
    )


#: The module's "time 0 is over" latch (:func:`_time0_latch`).
LATE0 = f"{PREFIX}late0"


def _time0_latch() -> str:
    """Declaration and process of :data:`LATE0`, set one time precision unit of the module
    after time 0: a delay that rounds to 0 in the module's precision runs within time 0, so
    the process grows it tenfold until time has moved (its last wait is one precision unit).
    Watchers that see it set call no system function (``_count``). Its one timed event moves the
    end of a run whose events run out at time 0 to that unit (1 s under Icarus's default
    timescale: a ``final`` block's ``$time`` shows it; no point changes there)."""
    return (
        f"bit {LATE0}; initial begin : {PREFIX}late0_b real d; d = 1e-18; #(d); "
        f"while ($realtime == 0) begin d = d * 10; #(d); end {LATE0} = 1; end"
    )


def _count(rise: str, fall: str, current: str, previous: str, late: str) -> str:
    """Statement ORing a new value's transitions into the sticky vectors. At time 0 only the
    value the bit settles to counts, as a rise from 0 (docs/semantics.md, time-0 settling):
    the rise bits are the latest time-0 value, no falls; from the first change after time 0
    on, transitions from that settled value count. ``$realtime``: a fractional first delay
    is no longer time 0 in the module's unit. ``late`` (this watcher's) and :data:`LATE0` (the
    module's, set one precision unit after time 0) latch "after time 0" so that a change then
    calls no system function: Icarus ends a thread that calls one after ``$finish``, and a
    change in ``$finish``'s own time step must still count (``@(posedge done) $finish;``: the
    rise of ``done`` that woke the testbench)."""
    counts = f"{rise} |= {current} & ~{previous}; {fall} |= ~{current} & {previous};"
    return (
        f"if ({late} || {LATE0}) begin {counts} end else if ($realtime == 0) {rise} = {current}; "
        f"else begin {late} = 1; {counts} end"
    )


def _off_regions(unit: ModuleUnit) -> list[tuple[int, int]]:
    from reward_service.fastcov.blocks import _off_regions as regions

    return regions(unit.source.data)
