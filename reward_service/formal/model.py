"""The DUT's coverage points as a synthesizable model for yosys.

The points are the fast path's own (:mod:`reward_service.fastcov.blocks` and
:mod:`reward_service.fastcov.toggle` enumerate them; nothing is enumerated here). What differs
from the Icarus instrumentation is the finishing: no ``final`` block, no flag file, no watcher
processes, no emulation rewrites. Instead

- each ``line``/``branch`` flag is a module-level ``(* keep *) reg`` initialised to 0 and set by
  the same statement the fast path inserts. In a clocked block yosys makes it a register that
  holds (sticky); in a combinational block it is assigned on some paths only, so yosys infers a
  latch that ``async2sync`` turns into a sticky register too. Either way the flag is 1 in a
  reachable state iff the point was counted at some evaluation, and "the flag is never 1" is the
  property whose proof makes the point unreachable;
- each ``expr`` point (a term combination of a condition, as :mod:`reward_service.fastcov.expr`
  enumerates them) gets a flag of the same kind, set by the fast path's own check
  (``if (<terms>) flag = 1'b1;``) at the place Verilator counts the point: the end of the
  statement list that holds the condition (sticky in a clocked block, a latch made sticky in a
  combinational one), or an ``always @(*)`` after a continuous assignment (every evaluation).
  The fast path's simulation-only companions (``#0`` settling, pending bits, loop-condition
  functions) are not used: a formal step evaluates on settled values. Checks without such a
  place are left out (their points never proved): a loop's own statement list, a function or
  task, a generate body that is not a ``begin ... end`` block, and in a procedure with an asynchronous reset everything outside
  the ``else`` arm of its reset test (that procedure also runs at the reset edge);
- each toggle signal (scalar or plain vector at module level) gets two ``(* keep *)`` wires, the
  signal and its complement: "the bit is never 1" proves both its ``0->1`` and ``1->0`` points
  unreachable (Verilator's previous value starts at 0), "the bit is never 0" proves ``1->0``.
  An unpacked array (a memory) of such elements, of at most 256 bits in all as Verilator
  counts it, gets the same two wires over the concatenation of its elements (constant
  indices: each element bit is a property bit of its own).

A flag of a ``begin ... end`` generate block is declared in that block (one copy
per elaborated instance of it: the point is proved only when every copy is never 1).
Points the model cannot represent exactly (in a function, task, ``initial``/``final`` or latch
block, in another generate body, of a module instantiated with several parameter sets, toggle bits
of generate-scoped signals and of arrays of other element types) get no property: they are never proved (their flag
statements are removed from the text, so yosys never sees a module variable set in a
function). Semantics: zero initial state, no reset assumed, inputs free at every step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pyslang import ast, syntax
from pyslang.parsing import Token

from reward_service import hdl
from reward_service.fastcov import emulate
from reward_service.fastcov.blocks import BlocksKind
from reward_service.fastcov.expr import ExprKind
from reward_service.fastcov.instrument import _instance_bodies, modules_of, parse
from reward_service.fastcov.screen import PROCESSES, _hierarchical, edge_control, races, signal_uses
from reward_service.fastcov.toggle import MAX_WIDTH, ToggleKind
from reward_service.fastcov.unit import ModuleUnit, Unsupported, ancestors, other_bodies
from reward_service.formal.elaboration import IfSite, constant_conditions, dead_arm, if_site
from reward_service.formal.functions import Function, allowed_spans, in_generate, modelled_functions, rewrite

_K = syntax.SyntaxKind
_S = ast.SymbolKind

#: Output-name prefixes of the model's property signals (yosys ``expose`` makes them outputs).
FLAG_PREFIX = "__rs_f"
TOGGLE_PREFIX = "__rs_formal_t"

#: A point's key, as the result reports it: (file, line, metric, detail).
PointKey = tuple[str, int, str, str]


@dataclass(frozen=True)
class Property:
    """One bad-state signal: ``signal`` (the wire's name in its module, unique in the design)
    bit ``bit`` is never 1 (in every instance of ``module``)."""

    module: str
    signal: str
    bit: int


@dataclass
class FormalModel:
    """The model's SV files (name -> text, for ``read_verilog -formal -sv``), its top module,
    the properties, and every point the fast path enumerates with the indices (in
    ``properties``) of the properties any one of which proves it unreachable (none: it is
    never proved)."""

    files: dict[str, str]
    top: str
    properties: list[Property]
    points: list[tuple[PointKey, tuple[int, ...]]]
    notes: list[str] = field(default_factory=list)  # why some points have no property
    #: indices in ``points`` of the points without a property whose arm elaboration rules out
    #: (:mod:`.elaboration`): unreachable with no proof run
    dead: frozenset[int] = frozenset()
    #: toggle ``_h`` wires (:data:`TOGGLE_PREFIX`) of internal variables (no port, no net)
    #: whose bits nothing outside the netlist can write (:func:`_undriven_safe`): a bit of
    #: one that the netlist leaves undriven keeps its zero initial value on every engine
    undriven_ok: frozenset[str] = frozenset()


def build_model(
    design: dict[str, str], top: str | None = None, expr: bool = True, timing: bool = True, witness: bool = False
) -> FormalModel:
    """Build the formal model of the DUT files ``design`` (name -> text). ``top``: the DUT's
    top module (default: pyslang's single top instance). ``expr=False``: expression points
    get no check (all undecided; the prover's fallback when yosys cannot read the checks).
    ``timing=False``: the design's races and timing outside the model are not refused (the
    witness search's model: a sequence it finds counts only once replayed, so a model that
    misses some simulator states may still show others reachable; never for proofs).
    ``witness``: the witness search's model of points in functions (:mod:`.functions`: the
    design's calls only, no free-argument call; never for proofs).
    Raises :class:`Unsupported` when the design cannot be modelled at all (then every point
    is undecided)."""
    hdl_files = {n: t for n, t in design.items() if hdl.is_hdl_source(n)}
    if any("`include" in hdl.strip_comments(t) for t in hdl_files.values()):
        raise Unsupported("`include in the design is not modelled")
    sources, compilation = parse(hdl_files)
    bodies = _instance_bodies(compilation)
    if top is None:
        tops = [i.name for i in compilation.getRoot().topInstances]
        if len(tops) != 1:
            raise Unsupported(f"the design has {len(tops)} top modules")
        top = compilation.getRoot().topInstances[0].definition.name
    race = timing and races(sources, bodies)  # across modules: a port or a hierarchical name can carry one
    if race:
        raise Unsupported(race)
    properties: list[Property] = []
    points: list[tuple[PointKey, tuple[int, ...]]] = []
    dead: set[int] = set()
    conditions: dict[IfSite, list[bool | None]] | None = None
    module_index = 0
    notes: list[str] = []
    files = {}
    undriven_ok: set[str] | None = set() if _undriven_safe(sources, bodies) else None
    for source in sources:
        strip: list[tuple[str, list[str]]] = []  # per module in file order: tag, statements to remove
        rewrites: list[tuple[str, dict[str, Function], str]] = []  # modules with points in functions
        for module in modules_of(source):
            name = module.header.name.valueText
            why_unsound = timing and _timing_reason(source, module, bodies.get(name))
            if why_unsound:
                raise Unsupported(f"{source.name}: {why_unsound}")
            tag = f"m{module_index}_"  # flag names restart per module; the model's are unique
            module_index += 1
            unit = ModuleUnit(source, module, compilation, bodies.get(name))
            anchors: list[Any] = []
            add_point = unit.add_point

            def recording(metric, line, column, comment, anchor, _add=add_point, _anchors=anchors):
                _anchors.append(anchor)  # which construct sets the flag decides how it is modelled
                return _add(metric, line, column, comment, anchor)

            unit.add_point = recording  # type: ignore[method-assign]
            BlocksKind().instrument(unit)
            several = bool(unit.body is not None and _other_sets(unit))
            functions, function_notes = modelled_functions(unit) if not several else ({}, [])
            notes.extend(function_notes)
            spans = allowed_spans(functions)

            def why_not(flag, anchor, _several=several, _unit=unit, _spans=spans):
                # a flag of a `begin ... end` generate block is declared in that block (one
                # flag per elaborated copy; the prover proves its point only when every copy
                # is never 1, and a block no instance elaborates has no copy)
                return (
                    _unmodelled(anchor, _spans)
                    or ("in a generate block" if flag.scope and _generate_block(_unit, flag) is None else None)
                    or ("module has several parameter sets" if _several else None)
                )

            expr_why = _expr_points(unit, anchors, why_not if expr else _not_asked, notes)
            removed = []
            kept = []
            scoped: dict[int, list[str]] = {}  # generate scope -> its flags' names
            for flag, anchor in zip(unit.flags, anchors):
                key = (flag.spec.file, flag.spec.line, flag.spec.metric, flag.spec.comment)
                if flag.spec.metric == "expr":  # its check is placed only where it is modelled
                    why = expr_why.get(flag.name)
                else:
                    why = why_not(flag, anchor)
                    if why:
                        removed.append(flag.set)
                if why:
                    notes.append(f"{key[0]}:{key[1]} {key[3]}: {why}")
                    if isinstance(anchor, syntax.ConditionalStatementSyntax) and key[2] in ("line", "branch"):
                        if conditions is None:
                            conditions = constant_conditions(compilation)
                        if dead_arm(key[3], conditions.get(if_site(anchor))):
                            dead.add(len(points))
                    points.append((key, ()))
                elif flag.scope:
                    scoped.setdefault(flag.scope, []).append(flag.name)
                    points.append((key, (len(properties),)))
                    properties.append(Property(name, _renamed(flag.name, tag), 0))
                else:
                    owner = _function_of(anchor, functions)
                    if owner is None:
                        kept.append(flag.name)  # a flag in a function is declared by functions.rewrite
                    else:
                        owner.flags.append(_renamed(flag.name, tag))
                    points.append((key, (len(properties),)))
                    properties.append(Property(name, _renamed(flag.name, tag), 0))
            strip.append((tag, removed))
            if any(f.flags for f in functions.values()):
                rewrites.append((name, functions, tag))
            toggle_decls = _toggles(unit, tag, several, properties, points, notes, undriven_ok)
            if kept:  # declared before use: right after the header, as the fast path does
                unit.insert_after(module.header, " (* keep *) reg " + ", ".join(f"{n} = 1'b0" for n in kept) + ";")
            for scope, names in scoped.items():  # first in its block, before any use
                block = unit.scopes[scope]
                opener = block.beginName if block.beginName is not None else block.begin
                unit.insert_after(opener, " (* keep *) reg " + ", ".join(f"{n} = 1'b0" for n in names) + ";")
            if toggle_decls:  # after the signals they read
                unit.insert_before(module.endmodule, " " + " ".join(toggle_decls) + " ")
        # arrays and part-selects indexed as both engines do (Verilator keeps $clog2(hi + 1)
        # index bits, then reads 0 and writes nothing out of range): yosys drops an
        # out-of-range write and reads an undefined value, so `sh[j+1]` of `sh [0:1]` (which
        # is `sh[0]` to Verilator) lost a write the engines make: witnesses that did not
        # replay, proofs of states the model could not reach
        emulate.vector_selects(source, bodies)
        emulate.array_indices(source, bodies)
        # `always @(*)` for `always_comb` (same width: columns stay): a flag set on some paths
        # of a combinational block is a latch, which yosys refuses in an always_comb
        text = _ALWAYS_COMB.sub("always @(*)", _strip(source.apply(), strip))
        for module_name, functions, tag in rewrites:
            text = rewrite(text, module_name, functions, witness, tag, _call_why)
        files[source.name] = text
    return FormalModel(
        files=files,
        top=top,
        properties=properties,
        points=points,
        notes=notes,
        dead=frozenset(dead),
        undriven_ok=frozenset(undriven_ok or ()),
    )


#: Tokens by which something outside the netlist yosys builds writes a variable: a forced
#: value, a procedural continuous assignment, system tasks that write their arguments, a
#: final block (yosys drops it).
_OUTSIDE_WRITES = {
    "force",
    "release",
    "deassign",
    "final",
    "$fscanf",
    "$sscanf",
    "$fread",
    "$fgets",
    "$fgetc",
    "$ungetc",
    "$value$plusargs",
    "$cast",
    "$readmemh",
    "$readmemb",
    "$system",
    "$sformat",
    "$swrite",
    "$swriteb",
    "$swriteo",
    "$swriteh",
    "$random",  # $random(seed) and the $dist_ functions update their seed argument
    "$dist_uniform",
    "$dist_normal",
    "$dist_exponential",
    "$dist_poisson",
    "$dist_chi_square",
    "$dist_t",
    "$dist_erlang",
}


def _undriven_safe(sources: list[Any], bodies: dict[str, Any]) -> bool:
    """Whether a variable bit the netlist leaves undriven is undriven in simulation too: the
    design has no dotted name that may reach into another scope (a hierarchical write yosys
    does not model) and none of :data:`_OUTSIDE_WRITES`. Then such a bit is never assigned:
    Verilator keeps it at 0, Icarus at ``x`` (the fast path reads 0), and its toggle points are
    unreachable on both (the netlist makes it a free input, ``setundef -undriven``, for every
    other reader: Icarus's ``x`` and Verilator's 0 differ there)."""
    for source in sources:
        for module in modules_of(source):
            if any(t.rawText in _OUTSIDE_WRITES for t in _tokens(module)):
                return False
            if next(_hierarchical(module, bodies.get(module.header.name.valueText)), None) is not None:
                return False
    return True


def _timing_reason(source: Any, module: Any, body: Any) -> str | None:
    """Why the module's timing is outside the model (None: it is inside). The model is one
    step per clock edge in which every process sees the registers' values from before it,
    combinational logic settled and ``initial`` blocks done at time 0. Not so (each makes
    the model miss states a simulator reaches, so a covered point would be proved):

    - (checked for the whole design first, :func:`~reward_service.fastcov.screen.races`) a
      variable assigned with ``=`` in a clocked procedure and read by another process, in its
      module, through an output port or by a hierarchical name: the model reads the value
      from before the edge, a simulator that runs the writer first the new one;
    - an ``always`` with an explicit level-sensitive event list that does not name every
      signal it reads: it runs only when a named one changes, and holds a stale value while
      the others do (the model evaluates it as ``@*``);
    - a delay, event or ``wait`` in an ``initial`` block: yosys drops the timing control, so
      the values before it (at time 0 and up to the delay) are never in the model.

    A module the design does not instantiate (``body`` None) has nothing to model."""
    if body is None:
        return None

    def line_of(tok: Any) -> int:
        return source.line_col(tok.location)[0]

    for node in _processes(module):
        if node.kind == _K.InitialBlock:
            tok = next((t for t in _tokens(node.statement) if t.rawText in _TIMING_TOKENS), None)
            if tok is not None:
                return f"`{tok.rawText}` in an initial block (line {line_of(tok)}): its timing is not modelled"
        elif node.kind == _K.AlwaysBlock:
            missing = _unlisted_reads(node, body)
            if missing:
                return (
                    f"the event list of the always block at line {line_of(node.getFirstToken())} does not name "
                    f"{', '.join(f'`{m}`' for m in missing[:3])}, which it reads: it holds its value while they change"
                )
    return None


#: Tokens of a delay (``#``, ``##``), an event control (``@``) or a wait statement.
_TIMING_TOKENS = {"#", "##", "@", "@@", "wait", "wait_order"}


def _processes(node: Any):
    """The processes under ``node`` (:data:`~reward_service.fastcov.screen.PROCESSES`, generate
    blocks included), not looking inside them."""
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            if child.kind in PROCESSES:
                yield child
            else:
                yield from _processes(child)


def _unlisted_reads(node: Any, body: Any) -> list[str]:
    """The signals an ``always @(<level-sensitive list>)`` procedure reads that its list does
    not name as a whole (in text order; empty for ``@*``, a clocked procedure and an always
    block without an event control). A signal the procedure assigns before its first use
    holds its own value there and needs no naming."""
    stmt = node.statement
    if stmt.kind != _K.TimingControlStatement or edge_control(stmt.timingControl):
        return []
    control = stmt.timingControl
    if control.kind not in (_K.EventControl, _K.EventControlWithExpression):
        return []
    named = set()
    if control.kind == _K.EventControl:
        if control.eventName.kind == _K.IdentifierName:
            named.add(control.eventName.identifier.valueText)
    else:
        for item in [control.expr, *_nodes(control.expr)]:
            if item.kind == _K.SignalEventExpression and item.expr.kind == _K.IdentifierName and item.iffClause is None:
                named.add(item.expr.identifier.valueText)
    first: dict[str, str] = {}
    for name, role, _ in signal_uses(stmt.statement, body):
        first.setdefault(name, role)
    return [n for n, role in first.items() if role not in ("write", "nb") and n not in named]


def _nodes(node: Any):
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            yield child
            yield from _nodes(child)


def _not_asked(flag: Any, anchor: Any) -> str:
    return "expression checks left out of the model"


def _expr_points(unit: ModuleUnit, anchors: list[Any], why_not: Any, notes: list[str]) -> dict[str, str]:
    """Add the module's expression points and their checks (the fast path's ``expr`` kind in
    its formal output mode); flag name -> why a point has no check. A module whose points the
    kind cannot enumerate gets none (the fast path falls back to Verilator for it: its points
    are then Verilator's, never proved)."""
    before = len(unit.flags)

    def placed(flag: Any, anchor: Any) -> str | None:
        return why_not(flag, anchor) or _async_reason(anchor)

    try:
        return ExprKind().instrument_formal(unit, placed)
    except Unsupported as exc:
        del unit.flags[before:]
        del anchors[before:]
        notes.append(f"{unit.file}: expression points of {unit.name}: {exc}")
        return {}


def _async_reason(anchor: Any) -> str | None:
    """Why an expression check placed at ``anchor`` is not modelled in a procedure with an
    asynchronous control (None: it is, or the procedure has none). Such a procedure also runs
    at the control's edge, and yosys refuses a flag set there ("Multiple edge sensitive
    events", a non-constant reset value), which would leave the whole design unproved. The
    checks of the ``else`` arm of the top ``if (<reset test>)`` run at clock edges with the
    reset inactive only: yosys makes their flags plain registers of the clock."""
    proc = next((n for n in [anchor, *ancestors(anchor)] if n.kind in (_K.AlwaysBlock, _K.AlwaysFFBlock)), None)
    if proc is None or proc.statement.kind != _K.TimingControlStatement:
        return None
    tokens = [t.rawText for t in _tokens(proc.statement.timingControl)]
    edges = [(tokens[i], tokens[i + 1]) for i, t in enumerate(tokens[:-1]) if t in ("posedge", "negedge")]
    if len(edges) < 2:
        return None
    why = "in a procedure with an asynchronous control, outside the else arm of its reset test"
    if len(edges) > 2:
        return why
    stmt = proc.statement.statement
    while stmt.kind == _K.SequentialBlockStatement and len(stmt.items) == 1:
        stmt = stmt.items[0]
    if stmt.kind != _K.ConditionalStatement or stmt.elseClause is None or len(stmt.predicate.conditions) != 1:
        return why
    cond = "".join(t.rawText for t in _tokens(stmt.predicate.conditions[0])).replace("(", "").replace(")", "")
    if not any(cond in _reset_tests(name, edge) for edge, name in edges):
        return why
    inside = _span_key(stmt.elseClause)
    if not any(_span_key(n) == inside for n in ancestors(anchor)):
        return why
    return None


def _reset_tests(name: str, edge: str) -> set[str]:
    """Texts (without parentheses and blanks) of a test that is true when ``name`` has its
    active value for ``edge`` (``negedge rst_n``: ``!rst_n``, ``rst_n == 1'b0``, ...)."""
    value = "0" if edge == "negedge" else "1"
    tests = {f"{name}{op}{c}" for op in ("==", "===") for c in (value, f"1'b{value}", f"1'd{value}", f"1'h{value}")}
    return tests | ({f"!{name}", f"~{name}"} if edge == "negedge" else {name})


def _tokens(node: Any):
    for child in node:
        if child is None:
            continue
        if isinstance(child, Token):
            if child.rawText:
                yield child
        else:
            yield from _tokens(child)


def _span_key(node: Any) -> tuple:
    rng = node.sourceRange
    return (rng.start.offset, rng.end.offset)


def _other_sets(unit: ModuleUnit) -> list[Any]:
    try:
        return other_bodies(unit)
    except Unsupported:
        return [None]


def _function_of(anchor: Any, functions: dict[str, Function]) -> Function | None:
    """The modelled function ``anchor`` is in (None: not in one)."""
    spans = {f.span: f for f in functions.values()}
    for node in [anchor, *ancestors(anchor)]:
        if node.kind == _K.FunctionDeclaration:
            return spans.get(_span_key(node))
    return None


def _call_why(call: Any) -> str | None:
    """Why the witness model gives the call ``call`` of a function no flags of its own (None:
    it does): its place is not modelled, a generate construct (one call per elaborated copy)
    or where an asynchronous control runs it (the reset arm)."""
    if in_generate(call):
        return "in a generate construct"
    return _unmodelled(call) or _async_reason(call)


def _unmodelled(anchor: Any, functions: set[tuple[int, int]] = frozenset()) -> str | None:  # type: ignore[assignment]
    """Why a flag set under ``anchor`` cannot be modelled (None: it can). ``functions``: the
    spans of the functions :mod:`.functions` models (a flag in one is modelled)."""
    for node in [anchor, *ancestors(anchor)]:
        k = node.kind
        if k == _K.FunctionDeclaration and _span_key(node) in functions:
            return None
        if k in (_K.FunctionDeclaration, _K.TaskDeclaration):
            return "in a function or task"
        if k in (_K.InitialBlock, _K.FinalBlock):
            return "in an initial/final block"
        if k == _K.AlwaysLatchBlock:
            return "in an always_latch block"
        if k in (_K.AlwaysFFBlock, _K.AlwaysCombBlock, _K.ContinuousAssign, _K.NetDeclaration):
            return None
        if k == _K.AlwaysBlock:
            body = node.statement
            if body.kind == _K.TimingControlStatement and body.timingControl.kind in (
                _K.EventControl,
                _K.EventControlWithExpression,
                _K.ImplicitEventControl,
            ):
                return None
            return "in an always block without an event control"
    return "outside a procedure"


def _toggles(
    unit: ModuleUnit,
    tag: str,
    several: bool,
    properties: list[Property],
    points: list[tuple[PointKey, tuple[int, ...]]],
    notes: list[str],
    undriven_ok: set[str] | None = None,
) -> list[str]:
    """Toggle points of the module (the fast path's :class:`ToggleKind` finds the signals) and
    the declarations of their property wires; the ``_h`` wires of internal variables are added
    to ``undriven_ok`` (None: the design has writes outside the netlist)."""
    if unit.body is None:
        return []
    probe = ModuleUnit(
        unit.source.__class__(unit.source.name, unit.source.text, unit.source.tree),
        unit.syntax,
        unit.compilation,
        unit.body,
    )
    try:
        ToggleKind().instrument(probe)  # only its signal list is used; the probe's text is dropped
    except Unsupported as exc:
        notes.append(f"{unit.file}: toggles of {unit.name}: {exc}")
        return []
    decls = []
    for sig in probe.toggles:
        if sig.dims and not sig.scoped:
            array = _array_shape(unit, sig)
            if array is None:
                notes.append(f"{unit.file}:{sig.line} toggles of {sig.name}: not an array of plain elements")
                continue
            elements, shape = array
            element_names = sig.bit_names(*shape)
            if len(elements) * len(element_names) > MAX_WIDTH:
                continue  # Verilator counts no point of it (--coverage-max-width), nor does the fast path
            # one property bit per element bit, element by element: bit b of the k-th element
            # (in the fast path's order) is bit k*W+b
            names = [f"{''.join(f'[{i}]' for i in element)}{bit}" for element in elements for bit in element_names]
            value = (
                "{" + ", ".join(sig.name + "".join(f"[{i}]" for i in element) for element in reversed(elements)) + "}"
            )
        else:
            vector = _shape(unit, sig)
            if vector is None:
                notes.append(f"{unit.file}:{sig.line} toggles of {sig.name}: not a plain vector")
                continue
            names = sig.bit_names(*vector)
            value = sig.name
        width = len(names)
        keys = [
            [(unit.file, sig.line, "toggle", f"{sig.name}{bit}:{edge}") for edge in ("0->1", "1->0")] for bit in names
        ]
        if several or width > MAX_WIDTH:
            notes.append(f"{unit.file}:{sig.line} toggles of {sig.name}: several parameter sets or too wide")
            points.extend((key, ()) for pair in keys for key in pair)
            continue
        high, low = f"{TOGGLE_PREFIX}{tag}{sig.index}_h", f"{TOGGLE_PREFIX}{tag}{sig.index}_l"
        if undriven_ok is not None and _internal_variable(unit, sig):
            undriven_ok.add(high)
        decls.append(
            f"(* keep *) wire [{width - 1}:0] {high} = {value}; (* keep *) wire [{width - 1}:0] {low} = ~{value};"
        )
        for p, (rise, fall) in enumerate(keys):
            never_1, never_0 = len(properties), len(properties) + 1
            properties.append(Property(unit.name, high, p))
            properties.append(Property(unit.name, low, p))
            points.append((rise, (never_1,)))  # 0->1 needs the bit at 1
            points.append((fall, (never_1, never_0)))  # 1->0 needs it at 1, then at 0
    return decls


def _shape(unit: ModuleUnit, sig: Any) -> tuple[int, int] | None:
    """(left, right) of a module-level scalar (0, 0), plain vector, or a signal whose bits the
    fast path names itself (0, 0: unused); None otherwise (arrays: :func:`_array_shape`; generate-scoped signals)."""
    if sig.scoped or sig.dims:
        return None
    if sig.bits is not None:  # enum, packed struct, multi-dimensional: named LSB first
        return 0, 0
    sym = unit.body.find(sig.name)
    if sym is None:
        return None
    t = sym.type.canonicalType
    if t.kind == _S.ScalarType:
        return 0, 0
    if t.kind == _S.PackedArrayType and t.elementType.canonicalType.kind == _S.ScalarType:
        return t.range.left, t.range.right
    return None


def _internal_variable(unit: ModuleUnit, sig: Any) -> bool:
    """Whether ``sig`` is a variable (not a net, whose undriven value a net type may make 1)
    of the module that is not one of its ports (a testbench may drive the net it connects)."""
    sym = unit.body.find(sig.name)
    ports = {p.name for p in unit.body.portList}
    return sym is not None and sym.kind == _S.Variable and sig.name not in ports


def _array_shape(unit: ModuleUnit, sig: Any) -> tuple[list[tuple[int, ...]], tuple[int, int]] | None:
    """The elements of a module-level unpacked array (index tuples, in the fast path's order:
    each dimension from its lower to its upper index) and its element's (left, right) as
    :meth:`ToggleSignal.bit_names` takes them (the fast path's ``$left``/``$right`` of a
    variable of the element's type; (0, 0) for a scalar element or one whose bits the fast
    path names itself); None for another element type."""
    sym = unit.body.find(sig.name)
    if sym is None:
        return None
    t = sym.type.canonicalType
    ranges = []
    while t.kind == _S.FixedSizeUnpackedArrayType:
        ranges.append(range(t.range.lower, t.range.upper + 1))
        t = t.elementType.canonicalType
    if len(ranges) != len(sig.dims):
        return None
    elements: list[tuple[int, ...]] = [()]
    for indices in ranges:
        elements = [e + (i,) for e in elements for i in indices]
    if sig.scalar or sig.bits is not None:
        return elements, (0, 0)
    if t.kind == _S.PackedArrayType and t.elementType.canonicalType.kind == _S.ScalarType:
        return elements, (t.range.left, t.range.right)
    return None


def _generate_block(unit: ModuleUnit, flag: Any) -> Any:
    """The ``begin ... end`` generate block ``flag`` lives in (None: the module itself, or a
    generate body that is not such a block, where no declaration can go)."""
    if not flag.scope:
        return None
    block = unit.scopes[flag.scope]
    return block if block.kind == _K.GenerateBlock else None


def _renamed(flag_name: str, tag: str) -> str:
    return f"{FLAG_PREFIX}{tag}{flag_name[len(FLAG_PREFIX) :]}"


_ALWAYS_COMB = re.compile(r"\balways_comb\b")
_FLAG_NAME = re.compile(r"\b" + re.escape(FLAG_PREFIX) + r"(\d+)\b")


def _strip(text: str, modules: list[tuple[str, list[str]]]) -> str:
    """Remove the flag statements of unmodelled points and give the flags design-unique names,
    module by module (flag names restart in each module, so the text is split at
    ``endmodule``)."""
    parts = re.split(r"(\bendmodule\b)", text)
    for index, (tag, statements) in enumerate(modules):
        segment = parts[2 * index]
        for stmt in statements:
            segment = segment.replace(stmt, " " * len(stmt))
        parts[2 * index] = _FLAG_NAME.sub(lambda m, tag=tag: f"{FLAG_PREFIX}{tag}{m.group(1)}", segment)
    return "".join(parts)
