"""Proofs on the every-input-free model, for designs the one-edge model refuses (issue 23).

The one-edge model (:mod:`.prover`) refuses designs with several clock edges, latches,
memories, set/reset or async-load flip-flops. Here such a design is lowered so that one
**step** is one evaluation of a simulator: every input port, clocks and resets included, is
free at every step, and the state moves the way a simulator's processes move it:

- a flip-flop (``$dff``) whose clock is an input port bit, or logic of input ports alone (a
  clock gated by an input: its edges come when the inputs change, before any flip-flop
  updates, as an input clock's do), takes at step ``t+1`` the value its input had at step
  ``t`` if its clock made its active edge between steps ``t-1`` and ``t``.
  Step ``t`` shows the new input values with the flip-flops' values from before the edge:
  Verilator's input-combinational region (and the fast path's ``#0`` checks) evaluate there,
  before the nonblocking assignments land; step ``t+1`` (inputs unchanged) shows the settled
  values after them. The clock's value before step 0 is its level after the active edge, so
  no edge is seen at step 0 (a testbench that makes one at time 0 is a model step at the
  other level first);
- an asynchronously reset flip-flop (``$adff``) whose clock and reset are such bits
  runs like its process: at a clock edge or at the reset's edge to its active level it takes
  the reset value if the reset is active, else its input. While the reset is held and no edge
  comes it keeps its value (a reset already active at time 0 makes no edge: the flip-flop
  keeps its initial value until the next clock edge, as in a simulator). At any step the
  flip-flops of one reset (and the unreset ones of the same processes) may also all run
  without an edge (a free choice per reset bit and level, ``PULSE``): a testbench's
  zero-width reset pulse (``rst_n = 0; rst_n = 1;``) wakes their processes on Icarus after
  the pulse ended, and they take their inputs with no clock edge (the fast path covers what
  that reaches; Verilator sees no change);
- the model's flags in combinational blocks (``$dlatch`` on a flag) are sticky: set at any
  step their condition holds;
- **free at every step** (an ``$anyseq``: any value, so nothing is proved from them): every
  latch of the design (a latch transparent while its data glitches keeps the glitch on
  Icarus), every flip-flop whose clock or reset depends on state (a divided clock makes its
  edge in the middle of a time step, after the flip-flops it depends on have updated),
  set/reset and async-load flip-flops (their processes run on the controls' edges, yosys's
  cells on their levels);
- (both models, :func:`undelayed`) the targets of a continuous assignment with a delay
  (``assign #1 y = a;``, blanked from the text: yosys ignores the delay, a simulator shows
  ``y`` lagging ``a``); a delay anywhere else refuses the design;
- a division or remainder by zero is any value (yosys's divider gives all ones, Verilator 0);
- memories are mapped to flip-flops (``memory_map``) first, enables and synchronous resets
  to logic (``dffunmap``), and the result is checked as above.

Refused (no proof): an inout port, a signal bit with several drivers, formal cells
(``$assume`` would constrain the model), a global-clock ``$ff`` and gate-level cells of the
design. The timing refusals of :func:`~reward_service.formal.model.build_model` apply as for
the one-edge model (the model is built by the prover before either lowering).

Two yosys steps: the first reads and flattens the design and writes the lowered netlist
(``ticks.json``, ``ticks.il``); the cells to leave free are removed from the RTLIL text (their
outputs become undriven, hence ``$anyseq``) and the second step maps the rest
(:data:`TICKS_MAP`) and writes the AIG the prover's ABC runs read, as for the one-edge model.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from reward_service.formal import divmap
from reward_service.formal.increments import lower_increments
from reward_service.formal.model import FLAG_PREFIX, TOGGLE_PREFIX, FormalModel
from reward_service.sandbox import Sandbox

if TYPE_CHECKING:
    from reward_service.formal.prover import ProofResult

#: The one-edge prover's netlist refusals that this model may lift (its ``reason`` texts).
_LIFTABLE = re.compile(r"^(cell \$\S+ \(.*\) is not modelled|the design has a latch|\d+ clock edges)")

#: State cells modelled exactly (when their clock and reset are input port bits; a ``$dlatch``
#: only on a model flag) and the state cells left free at every step.
_EXACT = {"$dff", "$adff", "$dlatch"}
_FREE = {
    "$dffe",
    "$adffe",
    "$sdff",
    "$sdffe",
    "$sdffce",
    "$dffsr",
    "$dffsre",
    "$aldff",
    "$aldffe",
    "$adlatch",
    "$dlatchsr",
    "$sr",
}
#: Cells of the design that refuse the proof: formal cells (an ``$assume`` would constrain
#: the model, a simulator ignores it), a global-clock flip-flop, free values of the design,
#: memories left after ``memory_map``, FSMs, tri-state buffers.
_REFUSED = {
    "$ff",
    "$anyinit",
    "$anyconst",
    "$anyseq",
    "$allconst",
    "$allseq",
    "$initstate",
    "$assert",
    "$assume",
    "$cover",
    "$live",
    "$fair",
    "$check",
    "$print",
    "$fsm",
    "$tribuf",
    "$equiv",
}

TICKS_MAP = "rs_ticks_map.v"
#: Techmap rules of the exact state cells (see the module docstring). ``idle``: the clock was
#: at its inactive level in the step before (a zero-initialised ``$ff``: no edge at step 0);
#: ``off``: the reset was inactive in the step before (no reset edge at step 0).
TICKS_MAP_TEXT = """(* techmap_celltype = "$dff" *)
module _rs_ticks_dff (CLK, D, Q);
  parameter WIDTH = 1;
  parameter CLK_POLARITY = 1'b1;
  input CLK;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire idle;
  \\$ff #(.WIDTH(1)) past_clock (.D(CLK != CLK_POLARITY), .Q(idle));
  wire active_edge = idle && CLK == CLK_POLARITY;
  \\$ff #(.WIDTH(WIDTH)) ff (.D(active_edge ? D : Q), .Q(Q));
endmodule

module rs_ticks_dff (CLK, PULSE, D, Q);
  parameter WIDTH = 1;
  parameter CLK_POLARITY = 1'b1;
  input CLK, PULSE;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire idle;
  \\$ff #(.WIDTH(1)) past_clock (.D(CLK != CLK_POLARITY), .Q(idle));
  wire run = (idle && CLK == CLK_POLARITY) || PULSE;
  \\$ff #(.WIDTH(WIDTH)) ff (.D(run ? D : Q), .Q(Q));
endmodule

module rs_ticks_adff (CLK, ARST, PULSE, D, Q);
  parameter WIDTH = 1;
  parameter CLK_POLARITY = 1'b1;
  parameter ARST_POLARITY = 1'b1;
  parameter ARST_VALUE = 0;
  input CLK, ARST, PULSE;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire idle, off;
  wire on = ARST == ARST_POLARITY;
  \\$ff #(.WIDTH(1)) past_clock (.D(CLK != CLK_POLARITY), .Q(idle));
  \\$ff #(.WIDTH(1)) past_reset (.D(!on), .Q(off));
  // PULSE (free, one per reset and level): a reset pulse of zero width (`rst_n = 0; rst_n = 1;`
  // in a testbench) wakes every process on that reset; Icarus runs them after the pulse ended,
  // and they take their inputs with no clock edge
  wire run = (idle && CLK == CLK_POLARITY) || (off && on) || PULSE;
  \\$ff #(.WIDTH(WIDTH)) ff (.D(run ? (on ? ARST_VALUE : D) : Q), .Q(Q));
endmodule

(* techmap_celltype = "$dlatch" *)
module _rs_ticks_flag (EN, D, Q);
  parameter WIDTH = 1;
  parameter EN_POLARITY = 1'b1;
  input EN;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire [WIDTH-1:0] held;
  \\$ff #(.WIDTH(WIDTH)) ff (.D(Q), .Q(held));
  assign Q = EN == EN_POLARITY ? D : held;
endmodule
"""


DIV_MAP = "rs_ticks_div_map.v"  # divmap.DIV_MAP_TEXT, written into the work dir


def applies(reason: str) -> bool:
    """Whether the one-edge prover's ``unsupported`` reason is a netlist refusal this model
    may lift (several clock edges, a latch, a cell it does not model)."""
    return bool(_LIFTABLE.match(reason))


def classify(netlist: dict, top: str) -> tuple[str | None, list[str], Counter]:
    """Check the lowered netlist (after ``memory_map``/``dffunmap``): (why it is refused or
    None, the names of the state cells to leave free, per reason the count of those cells)."""
    module = netlist.get("modules", {}).get(top)
    if module is None:
        return f"yosys has no module {top}", [], Counter()
    ports = module.get("ports", {})
    if any(p["direction"] == "inout" for p in ports.values()):
        return "an inout port", [], Counter()
    inputs = {b for p in ports.values() if p["direction"] == "input" for b in p["bits"] if isinstance(b, int)}
    flags = {b for name, net in module.get("netnames", {}).items() if f"{FLAG_PREFIX}m" in name for b in net["bits"]}
    free: list[str] = []
    why_free: Counter = Counter()
    for name, cell in module.get("cells", {}).items():
        kind = cell["type"]
        if kind in _REFUSED or not kind.startswith("$") or kind.startswith(("$_", "$mem", "$specify")):
            return f"cell {kind} ({name}) is not modelled", [], Counter()
    from_inputs = _input_logic(module, inputs)
    for name, cell in module.get("cells", {}).items():
        kind, conns = cell["type"], cell["connections"]
        if kind in _FREE:
            free.append(name)
            why_free[f"{kind} cells"] += 1
        elif kind == "$dlatch" and not set(conns["Q"]) <= flags:
            free.append(name)
            why_free["latches"] += 1
        elif kind in ("$dff", "$adff") and not all(  # clocked and reset by the inputs alone
            len(conns[c]) == 1 and from_inputs(conns[c][0]) for c in ("CLK", "ARST") if c in conns
        ):
            free.append(name)
            why_free["flip-flops clocked or reset by state"] += 1
    several = several_drivers(module)
    if several:
        return f"{len(several)} signal bits have several drivers", [], Counter()
    return None, free, why_free


def _input_logic(module: dict, inputs: set) -> Callable[[int | str], bool]:
    """A test of whether a netlist bit is a function of the input ports alone: an input port
    bit, a constant, or the output of combinational cells whose inputs are such bits (a clock
    gated by an input, ``!clk_gate_en & pclk``). Such a clock makes its edges when the inputs
    change, before any flip-flop updates, as an input clock does; a bit that depends on a
    state element (a divided clock) or on an undriven net does not."""
    drivers: dict[int, list] = {}
    for cell in module.get("cells", {}).values():
        if cell["type"] in _EXACT or cell["type"] in _FREE:
            continue  # a state element ends the logic
        conns, dirs = cell["connections"], cell.get("port_directions", {})
        ins = [b for port, bits in conns.items() if dirs.get(port) == "input" for b in bits]
        for port, bits in conns.items():
            if dirs.get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        drivers.setdefault(b, []).extend(ins)
    known: dict[int, bool] = {}

    def test(bit: int | str) -> bool:
        if not isinstance(bit, int):
            return True  # a constant
        todo, seen = [bit], set()
        while todo:
            b = todo.pop()
            if not isinstance(b, int) or b in inputs or b in seen:
                continue
            if known.get(b) is False or b not in drivers:
                known[bit] = False
                return False
            seen.add(b)
            todo.extend(drivers[b])
        known[bit] = True
        return True

    return test


def several_drivers(module: dict) -> list[int]:
    """Signal bits driven by more than one cell output or input port (yosys keeps every
    driver, the AIG one of them, where a simulator lets the last write win)."""
    drivers = Counter(
        b
        for port in module.get("ports", {}).values()
        if port["direction"] == "input"
        for b in port["bits"]
        if isinstance(b, int)
    )
    for cell in module.get("cells", {}).values():
        directions = cell.get("port_directions", {})
        drivers.update(
            b
            for port, bits in cell["connections"].items()
            if directions.get(port) == "output"
            for b in bits
            if isinstance(b, int)
        )
    return [b for b, n in drivers.items() if n > 1]


def without_cells(rtlil: str, top: str, names: set[str]) -> str:
    """``rtlil`` (``write_rtlil`` text) with the cells ``names`` (as ``write_json`` names them)
    of module ``top`` removed, with the attribute lines before each; their outputs are then
    undriven. Raises ``ValueError`` when a name is not found (the two writers disagree)."""
    out: list[str] = []
    pending: list[str] = []  # attribute lines not yet known to belong to a kept object
    in_top = skipping = False
    found: set[str] = set()
    for line in rtlil.splitlines(keepends=True):
        words = line.split()
        if not words:
            out.append(line)
            continue
        if words[0] == "module":
            in_top = _json_name(words[1]) == top
        if skipping:
            if words == ["end"] and line.startswith("  end"):
                skipping = False
            continue
        if words[0] == "attribute":
            pending.append(line)
            continue
        if in_top and words[0] == "cell" and len(words) == 3 and _json_name(words[2]) in names:
            found.add(_json_name(words[2]))
            pending, skipping = [], True
            continue
        out.extend(pending)
        pending = []
        out.append(line)
    out.extend(pending)
    if found != names:
        raise ValueError(f"cells not found in the RTLIL text: {sorted(names - found)[:3]}")
    return "".join(out)


def pulse_groups(netlist: dict, top: str, free: list[str]) -> dict[str, int]:
    """Per flip-flop of ``top`` modelled exactly (not in ``free``) that a zero-width reset
    pulse can run, the index of its pulse choice: one per reset bit and active level, shared
    by every flip-flop such a pulse wakes. Those are the ``$adff`` cells of that reset and
    the ``$dff`` cells of the same processes (yosys's ``src`` attribute: a register its
    process does not reset, ``else r <= d;``, is a plain flip-flop there, and the process
    runs its ``else`` branch at the pulse too)."""
    cells = netlist["modules"][top]["cells"]
    skip = set(free)
    groups: dict[tuple, int] = {}
    by_process: dict[str, int] = {}
    out: dict[str, int] = {}
    for name, cell in cells.items():
        if cell["type"] != "$adff" or name in skip:
            continue
        raw = cell.get("parameters", {}).get("ARST_POLARITY", 1)
        level = int(raw, 2) & 1 if isinstance(raw, str) else int(raw) & 1
        key = (tuple(cell["connections"]["ARST"]), level)
        out[name] = groups.setdefault(key, len(groups))
        src = cell.get("attributes", {}).get("src")
        if src:
            by_process.setdefault(src, out[name])
    for name, cell in cells.items():
        src = cell.get("attributes", {}).get("src")
        if cell["type"] == "$dff" and name not in skip and src in by_process:
            out[name] = by_process[src]
    return out


def with_pulses(rtlil: str, top: str, pulses: dict[str, int]) -> str:
    """``rtlil`` with each ``$adff``/``$dff`` cell of ``pulses`` (name as ``write_json`` names
    it -> pulse index) made an ``rs_ticks_adff``/``rs_ticks_dff`` whose ``PULSE`` is the wire
    ``__rs_pulse<index>`` (declared in ``top``, undriven: free at every step). Raises
    ``ValueError`` when a cell is not found."""
    connects = {name: [f"    connect \\PULSE \\__rs_pulse{i}\n"] for name, i in pulses.items()}
    wires = [f"__rs_pulse{i}" for i in sorted(set(pulses.values()))]
    return retyped_flip_flops(rtlil, top, connects, "rs_ticks_", wires)


def retyped_flip_flops(
    rtlil: str, top: str, connects: Mapping[str, Sequence[str]], prefix: str, wires: Sequence[str]
) -> str:
    """``rtlil`` (``write_rtlil`` text) with each ``$adff``/``$dff`` cell of module ``top`` named
    in ``connects`` (name as ``write_json`` names it) retyped ``<prefix>adff``/``<prefix>dff``
    and given the ``connect`` lines ``connects[name]``, and the ``wires`` declared in ``top``
    (undriven: free at every step). Raises ``ValueError`` when a named cell is not found (the
    two writers disagree)."""
    out: list[str] = []
    in_top = False
    current: str | None = None
    found: set[str] = set()
    for line in rtlil.splitlines(keepends=True):
        words = line.split()
        if words[:1] == ["module"]:
            in_top = _json_name(words[1]) == top
            out.append(line)
            if in_top:
                out.extend(f"  wire \\{w}\n" for w in wires)
            continue
        kind = words[1] if len(words) == 3 and words[0] == "cell" else ""
        if in_top and kind in ("$adff", "$dff") and _json_name(words[2]) in connects:
            current = _json_name(words[2])
            found.add(current)
            out.append(line.replace(f"cell {kind} ", f"cell \\{prefix}{kind[1:]} ", 1))
            continue
        if current is not None and words == ["end"]:
            out.extend(connects[current])
            current = None
        out.append(line)
    if found != set(connects):
        raise ValueError(f"cells not found in the RTLIL text: {sorted(set(connects) - found)[:3]}")
    return "".join(out)


def _json_name(rtlil_id: str) -> str:
    return rtlil_id[1:] if rtlil_id.startswith("\\") else rtlil_id


def without_delays(name: str, text: str) -> tuple[str, str | None]:
    """The model file ``text`` with every continuous assignment that has a delay
    (``assign #1 y = a;``) blanked (same length, newlines kept), so that its targets are
    undriven, hence free at every step; and why the file is refused (None: it is not): a delay
    anywhere else (a procedure's ``#5``, ``q <= #1 d``, ``wire #1 w = a``). yosys ignores
    delays: it would make ``y`` equal ``a`` at every step, where a simulator shows ``y`` lagging
    for the delay (``a != y`` covered)."""
    from pyslang import syntax

    tree = syntax.SyntaxTree.fromText(text, name)
    cut: list[tuple[int, int]] = []
    other: list[int] = []

    def walk(node: syntax.SyntaxNode, in_assign: bool) -> None:
        for child in node:
            if not isinstance(child, syntax.SyntaxNode):
                continue
            if child.kind == syntax.SyntaxKind.ContinuousAssign and getattr(child, "delay", None) is not None:
                cut.append((child.sourceRange.start.offset, child.sourceRange.end.offset))
                walk(child, True)
            elif child.kind == syntax.SyntaxKind.DelayControl and not in_assign:
                other.append(child.sourceRange.start.offset)
            else:
                walk(child, in_assign)

    walk(tree.root, False)
    if other:
        line = text.count("\n", 0, other[0]) + 1
        return text, f"{name}:{line}: a delay outside a continuous assignment is not modelled"
    for start, end in sorted(cut, reverse=True):
        text = text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
    return text, None


def undelayed(model: FormalModel) -> tuple[FormalModel, str | None]:
    """``model`` with the continuous assignments that have a delay blanked
    (:func:`without_delays`; a note says how many), and why it is refused (a delay anywhere
    else; None: it is not). For both models: a free value covers every value a lagging target
    shows a simulator, at any evaluation."""
    files: dict[str, str] = {}
    cut = 0
    for name, text in model.files.items():
        files[name], why = without_delays(name, text)
        if why:
            return model, why
        cut += len(_ASSIGN_DELAY.findall(text)) if files[name] != text else 0
    if files == model.files:
        return model, None
    note = "the targets of continuous assignments with a delay are free at every step (yosys ignores the delay)"
    return replace(model, files=files, notes=[note, *model.notes]), None


_ASSIGN_DELAY = re.compile(r"\bassign\s*#")


def lower(model: FormalModel, sandbox: Sandbox, work: Path, timeout_s: float) -> tuple[str, str] | None:
    """The every-input-free lowering of ``model`` in ``work``, with the contract of
    :func:`~reward_service.formal.prover.synthesize` (``model.aig``, ``model.map``,
    ``pre.json``, ``final.json``; None, or (status, reason) when there is no AIG). The two
    yosys steps share ``timeout_s``. A ``notes.json`` in ``work`` lists what was left free."""
    from reward_service.formal.prover import _NAME_PART, _first_error, _read

    deadline = time.monotonic() + timeout_s
    for name, text in model.files.items():  # as the one-edge step writes them
        if not all(_NAME_PART.fullmatch(part) for part in name.split("/")):
            return "unsupported", f"file name {name!r}"
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(lower_increments(text))
    names = " ".join(sorted(model.files))
    (work / "ticks1.ys").write_text(
        "\n".join(
            [
                f"read_verilog -formal -sv {names}",
                f"hierarchy -check -top {model.top}",
                f"prep -top {model.top} -flatten",
                "write_json pre.json",
                "memory_map",
                "opt_clean",
                "dffunmap",
                "write_json ticks.json",
                "write_rtlil ticks.il",
                "",
            ]
        )
    )
    failed = _yosys(sandbox, work, "ticks1.ys", timeout_s)
    if failed:
        return failed
    netlist = json.loads((work / "ticks.json").read_text())
    why, free, why_free = classify(netlist, model.top)
    if why:
        return "unsupported", f"every-input-free model: {why}"
    try:
        cut = without_cells((work / "ticks.il").read_text(), model.top, set(free))
        cut = with_pulses(cut, model.top, pulse_groups(netlist, model.top, free))
    except ValueError as exc:
        return "error", f"every-input-free model: {exc}"
    (work / "ticks_cut.il").write_text(cut)
    (work / TICKS_MAP).write_text(TICKS_MAP_TEXT)
    (work / DIV_MAP).write_text(divmap.DIV_MAP_TEXT)
    (work / "notes.json").write_text(json.dumps(dict(why_free)))
    (work / "ticks2.ys").write_text(
        "\n".join(
            [
                "read_rtlil ticks_cut.il",
                divmap.techmap_command(DIV_MAP),
                f"techmap -map {TICKS_MAP} t:$dff t:rs_ticks_dff t:rs_ticks_adff t:$dlatch",
                # combinational clean-up only (no opt_dff: it may replace a flip-flop whose
                # initial value is undefined by a constant, where Verilator starts it at 0);
                # merges the clock-history flip-flops of one clock (a memory has hundreds)
                "opt_expr",
                "opt_merge",
                "opt_clean",
                "setundef -undriven -anyseq",
                "setundef -anyseq",
                "setundef -init -zero",
                "delete -output o:*",
                f"expose w:*{FLAG_PREFIX}* w:*{TOGGLE_PREFIX}*",
                "techmap",
                "aigmap",
                "opt_clean",
                "write_json final.json",
                "write_aiger -zinit -map model.map model.aig",
                "",
            ]
        )
    )
    failed = _yosys(sandbox, work, "ticks2.ys", max(1.0, deadline - time.monotonic()))
    if failed:
        return failed
    if not (work / "model.aig").exists():
        return "unsupported", "yosys: " + _first_error(_read(work / "yosys.log"))
    return None


def _yosys(sandbox: Sandbox, work: Path, script: str, timeout_s: float) -> tuple[str, str] | None:
    """Run one yosys script in ``work``; (status, reason) when it failed, as the prover's
    one-edge step reports it."""
    from reward_service.formal.prover import _first_error, _read
    from reward_service.formal.prover import _yosys as run_yosys  # the one yosys step spec

    res = run_yosys(sandbox, work, script, timeout_s)
    if res.timed_out:
        return "timeout", f"yosys: over {timeout_s:g} s"
    if res.exit_code in (126, 127):
        return "error", f"yosys did not run (exit {res.exit_code}): {res.output[-200:]}"
    if res.limit_hit:
        return "unsupported", f"yosys over its limit ({res.limit_hit})"
    if res.exit_code != 0:
        return "unsupported", "yosys: " + (
            f"crashed (signal {-(res.exit_code or 0)})"
            if (res.exit_code or 0) < 0
            else _first_error(res.output + _read(work / "yosys.log"))
        )
    return None


def free_note(work: Path) -> str:
    """What the lowering in ``work`` left free at every step, in words (empty: nothing)."""
    path = work / "notes.json"
    counts = json.loads(path.read_text()) if path.exists() else {}
    return ", ".join(f"{what} {n}" for what, n in sorted(counts.items()))


def prove_ticks(
    model: FormalModel, sandbox: Sandbox, timeout_s: float, per_property_ms: int, refused: ProofResult
) -> ProofResult:
    """Prove ``model``'s properties on the every-input-free model (the prover's ABC runs and
    limits, :func:`lower` as its yosys step). ``refused``: the one-edge model's verdict
    (``unsupported``, its reason a netlist refusal). Returns the new verdict (``model``
    ``ticks``; its first note says why the one-edge model refused the design and what was
    left free) when it proved some point unreachable; ``refused`` with a note when it proved
    none, refused the design, ran out of time or yosys failed on its lowering (the design's
    verdict, kept, and the result's note about it stay the one-edge model's: a yosys error
    here is the design's, since the same yosys read and flattened it for the one-edge model);
    an ``error`` verdict (a tool that did not run, ABC output not read: not kept) as it is."""
    from reward_service.formal.prover import _run

    free: list[str] = []

    def lowering(m: FormalModel, sb: Sandbox, work: Path, limit: float) -> tuple[str, str] | None:
        failed = lower(m, sb, work, limit)
        free.append(free_note(work))
        return failed

    result = _run(model, sandbox, timeout_s, per_property_ms, lower=lowering)
    if result.status in ("proved", "partial") and result.unreachable:
        result.model = "ticks"
        left = f"; free at every step: {free[0]}" if free and free[0] else ""
        result.notes.insert(0, f"one-edge model: {refused.reason}; proved on the every-input-free model{left}")
        return result
    if result.status == "error":  # a tool that did not run, ABC output not read: not kept
        return result
    what = f"{result.status}, no point proved" if result.status in ("proved", "partial") else result.status
    refused.notes.insert(0, f"every-input-free model: {what}" + (f": {result.reason}" if result.reason else ""))
    return refused
