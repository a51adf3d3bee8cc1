"""Reachability witnesses: input sequences that set coverage flags of the formal model, and the
plain SystemVerilog testbench that replays them (docs/formal.md, "Witnesses").

The search runs on the prover's own model (:func:`~reward_service.formal.prover.synthesize`:
the same yosys run, the same AIG): the model's free choices that a testbench cannot make
(``x`` values, the pre-reset view of an async reset, undriven nets) are tied to 0, the DUT's
input ports stay free. From the model's zero initial state, ABC's ``bmc3 -a`` looks for a
counterexample to each property not yet reached (a flag that becomes 1, a toggle bit at 1 and
later at 0); the sequence is simulated on the AIG (:mod:`.aiger`) and appended when it reaches
a new point, and the search goes on from the state it ends in. The result is ONE input
sequence from the zero state: the design's closure stimulus. It claims points; only a replay
through the engine shows them (``reward_service.ceiling``): a claimed point the replay does not
cover is a bug of the model, never counted.

One step of the sequence is one clock edge: the step's input values are driven while the
clock is at its inactive level, then the clock makes its active edge (the flip-flops take the
step's values), then it returns. A design without flip-flops gets one evaluation per step.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reward_service.fastcov.unit import Unsupported
from reward_service.formal.aiger import Aig, read_aig, simulate, tie_inputs, write_aig
from reward_service.formal.model import TOGGLE_PREFIX, FormalModel, PointKey, build_model
from reward_service.formal.prover import read_map, synthesize
from reward_service.sandbox import ExecSpec, Sandbox, get_sandbox


@dataclass
class Port:
    """A DUT port: name, direction (``input``/``output``/``inout``), width in bits."""

    name: str
    direction: str
    width: int


@dataclass
class Witness:
    """The closure stimulus of one design. ``status``: ``ok`` (a sequence was searched; it may
    claim nothing), ``unsupported`` (no model, or a DUT the testbench cannot drive: every point
    undecided; ``reason`` says why) or ``error``. ``ports``: the DUT's ports; ``clock``: the
    clock port and its active edge (``posedge``/``negedge``; None: no flip-flops, or a design
    searched with every input free at every global step: ``clocks`` then names the inputs
    that clock something, driven first in a step, the others one time unit later); ``idle``:
    input port name -> its value at time 0 where that is not 0 (the inactive level of the
    asynchronous set, reset and load inputs that are port bits, so that a first step asserting
    one makes the edge the DUT's process waits for; the model sees them as levels); ``steps``:
    per step, input port name -> value (``clock`` not included); ``claimed``: point key ->
    the first step after which the model has it covered; ``frames``: the deepest ``bmc3``
    window used; ``seconds``: wall time; ``notes``: counterexamples that did not simulate
    as ABC said (a bug of the model or of this module)."""

    status: str
    top: str = ""
    ports: list[Port] = field(default_factory=list)
    clock: tuple[str, str] | None = None
    clocks: list[str] = field(default_factory=list)
    idle: dict[str, int] = field(default_factory=dict)
    steps: list[dict[str, int]] = field(default_factory=list)
    claimed: dict[PointKey, int] = field(default_factory=dict)
    reason: str = ""
    frames: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def search(
    design: dict[str, str],
    top: str | None = None,
    sandbox: Sandbox | None = None,
    budget_s: float = 60.0,
    skip: set[PointKey] | None = None,
    frames: int = 16,
    max_frames: int = 256,
    refused: bool = False,
) -> Witness:
    """Search one input sequence from the zero state that reaches as many points of
    ``design`` (name -> HDL text) as ``budget_s`` seconds allow (the yosys step has its own
    limit of ``budget_s``). ``skip``: point keys not to look for (proved unreachable).
    ``frames``: the first ``bmc3`` window, doubled (up to ``max_frames``) whenever a window
    from the current state reaches nothing new. ``refused``: the prover already found the design
    outside its semantics (``unsupported``): the search starts with every input free. Never
    raises for a design it cannot handle."""
    start = time.monotonic()
    sandbox = sandbox or get_sandbox("bwrap")
    work = Path(tempfile.mkdtemp(prefix="rs_witness_"))
    model: FormalModel | None = None
    failed: tuple[str, str] | None = ("unsupported", "the proof does not model the design")
    try:
        if not refused:
            model, failed = _synthesized(design, top, sandbox, work, budget_s, ticks=False)
        if failed is not None and failed[0] == "unsupported":
            # outside the proof's semantics (several clock edges, a latch, a memory, a race, a
            # derived clock): every input driven at every global step, clocks included
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            left = max(1.0, budget_s - (time.monotonic() - start))
            model, again = _synthesized(design, top, sandbox, work, left, ticks=True)
            if again is not None:
                status = "error" if again[0] == "error" else "unsupported"
                return Witness(status, reason=f"{failed[1]}; with every input free: {again[1]}")
            failed = None
        if failed is not None or model is None:
            return Witness(
                "error" if failed and failed[0] == "error" else "unsupported", reason=failed[1] if failed else ""
            )
        result = _search(model, work, sandbox, start + budget_s, skip or set(), frames, max_frames)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.seconds = round(time.monotonic() - start, 3)
    return result


def _synthesized(
    design: dict[str, str], top: str | None, sandbox: Sandbox, work: Path, budget_s: float, ticks: bool
) -> tuple[FormalModel | None, tuple[str, str] | None]:
    """The model (``ticks``: without the proof's timing refusals) and its AIG in ``work``;
    (model, None) or (model or None, (status, reason)) when there is none."""
    try:
        model = build_model(design, top, timing=not ticks, witness=True)
    except Unsupported as exc:
        return None, ("unsupported", str(exc))
    except Exception as exc:  # a parser failure: no witness, every point undecided
        return None, ("unsupported", f"model: {exc}")
    failed = synthesize(model, sandbox, work, budget_s, ticks=ticks)
    if failed is None:
        (work / "lowering").write_text("ticks" if ticks else "edges")
        if not ticks and _clock(json.loads((work / "pre.json").read_text())["modules"][model.top]) is False:
            failed = ("unsupported", "the clock is not an input port")
    return model, failed


def _search(
    model: FormalModel,
    work: Path,
    sandbox: Sandbox,
    deadline: float,
    skip: set[PointKey],
    frames: int,
    max_frames: int,
) -> Witness:
    pre = json.loads((work / "pre.json").read_text())["modules"][model.top]
    ports = [Port(n, p["direction"], len(p["bits"])) for n, p in pre["ports"].items()]
    if any(p.direction == "inout" for p in ports):
        return Witness("unsupported", top=model.top, ports=ports, reason="an inout port")
    ticks = (work / "lowering").read_text() == "ticks"
    clock = None if ticks else _clock(pre)
    assert clock is not False  # refused by _synthesized
    aig = read_aig((work / "model.aig").read_bytes())
    inputs = _read_inputs(work / "model.map")
    drivable = {p.name for p in ports if p.direction == "input"} - ({clock[0]} if clock else set())
    # the model's own free choices and the clock (driven by the testbench, not by the sequence)
    tied = {i for i in range(aig.inputs) if inputs.get(i, ("", 0))[0] not in drivable}
    aig = tie_inputs(aig, tied)
    outputs = read_map(work / "model.map")
    goals = _Goals(model, outputs, len(aig.outputs), skip)
    witness = Witness(
        "ok",
        top=model.top,
        ports=ports,
        clock=clock,
        clocks=_clock_ports(pre) if ticks else [],
        idle=_async_idle(pre, drivable),
    )
    state = list(aig.init)
    trace: list[list[int]] = []
    while frames <= max_frames and time.monotonic() < deadline - 1:
        wanted = goals.wanted()
        if not wanted:
            break
        probe = Aig(aig.inputs, aig.latches, state, [aig.outputs[o] for o in wanted], aig.ands)
        (work / "w.aig").write_bytes(write_aig(probe))
        (work / "cex.txt").unlink(missing_ok=True)
        # half the time left per ABC run: the counterexamples it found by then are kept, and the
        # rest of the budget goes to simulating them and to runs from the state they reach
        left = max(1, int(deadline - time.monotonic()) // 2)
        (work / "bmc.cmd").write_text(f"read_aiger w.aig; bmc3 -a -x -F {frames} -T {left}; write_cex -a cex.txt\n")
        res = sandbox.run(
            ExecSpec(
                argv=["yosys-abc", "-f", "bmc.cmd"], workdir=work, timeout_s=left + 10, memory_mb=2048, output_kb=256
            )
        )
        witness.frames = max(witness.frames, frames)
        if res.exit_code != 0 and not res.timed_out:
            # ABC crashed, ran out of memory or the sandbox failed: our fault, never "nothing
            # reachable" (ceiling.closure keeps only an ok closure)
            witness.status, witness.reason = "error", f"yosys-abc exited {res.exit_code}: {res.output[-500:]}"
            return witness
        cexes = _read_cexes((work / "cex.txt").read_text() if (work / "cex.txt").exists() else "", aig.inputs)
        progress = False
        for index, steps in sorted(cexes.items(), key=lambda item: len(item[1])):
            if index >= len(wanted) or time.monotonic() > deadline:
                continue
            target = wanted[index]
            if not goals.open(target):
                continue
            seen, after = simulate(aig, state, steps)
            if not progress and not seen[-1][target]:
                # from the state ABC started in, its counterexample must set the output (after
                # a first one was appended the state moved: the others may no longer apply)
                witness.notes.append(f"output {target}: ABC's counterexample does not set it in simulation")
                continue
            if goals.record(seen, len(trace)):
                trace.extend(steps)
                state = after
                progress = True
        if not progress:
            if frames >= max_frames or res.timed_out:
                break
            frames *= 2
    witness.steps = [_port_values(step, inputs, drivable) for step in trace]
    witness.claimed = goals.claimed()
    return witness


class _Goals:
    """Which AIG outputs the sequence has set so far, and what that claims about the points.
    A flag output (line, branch, expr) is reached when it is 1 at some step; a toggle point
    ``0->1`` when its ``_h`` bit is 1, ``1->0`` when its ``_l`` bit is 1 at a step after the
    ``_h`` bit was (in the same instance)."""

    def __init__(self, model: FormalModel, outputs: dict[int, list[tuple[str, int]]], count: int, skip: set[PointKey]):
        self.model = model
        self.first: dict[int, int] = {}  # output -> first step it is 1
        self.fall: dict[int, int] = {}  # `_l` output -> first step it is 1 after its `_h` partner
        by_name: dict[tuple[str, int], int] = {}
        for index, names in outputs.items():
            for wire, bit in names:
                by_name[(wire, bit)] = index
        self.partner: dict[int, int] = {}  # `_l` output -> its `_h` output
        for (wire, bit), index in by_name.items():
            if wire.endswith("_l") and TOGGLE_PREFIX in wire:
                high = by_name.get((wire[:-2] + "_h", bit))
                if high is not None:
                    self.partner[index] = high
        # per property (module signal, bit): its outputs, one per instance
        leaves: dict[tuple[str, int], list[int]] = {}
        for (wire, bit), index in by_name.items():
            leaves.setdefault((wire.rsplit(".", 1)[-1], bit), []).append(index)
        self.leaves = leaves
        live: set[int] = set()
        for key, provers in model.points:
            if key in skip or not provers:
                continue
            for i in provers[:1]:  # line/branch/expr: the flag; toggle: the `_h` bit (its `_l` via partner)
                prop = model.properties[i]
                live.update(leaves.get((prop.signal, prop.bit), []))
        self.live = {o for o in live if o < count}
        self.live |= {low for low, high in self.partner.items() if high in self.live}

    def open(self, output: int) -> bool:
        if output in self.partner:
            return output not in self.fall
        return output not in self.first

    def wanted(self) -> list[int]:
        """Outputs still worth a search: live, not reached, a `_l` bit only once its `_h` is."""
        return sorted(o for o in self.live if self.open(o) and (o not in self.partner or self.partner[o] in self.first))

    def record(self, seen: list[list[int]], offset: int) -> bool:
        """Take the outputs of steps ``offset``.. (``seen``); whether anything new was reached."""
        new = False
        for step, values in enumerate(seen, start=offset):
            for o, v in enumerate(values):
                if not v:
                    continue
                if o not in self.first:
                    self.first[o] = step
                    new = new or o in self.live
                high = self.partner.get(o)
                if high is not None and o not in self.fall and self.first.get(high, step) < step:
                    self.fall[o] = step
                    new = new or o in self.live
        return new

    def claimed(self) -> dict[PointKey, int]:
        """Point key -> the step at which the model first has it covered (a key of several
        points: when the first of them is)."""
        out: dict[PointKey, int] = {}
        for key, provers in self.model.points:
            if not provers:
                continue
            prop = self.model.properties[provers[0]]
            instances = self.leaves.get((prop.signal, prop.bit), [])
            if key[2] == "toggle" and len(provers) == 2:  # 1->0: the `_l` partner after the `_h`
                lows = [low for low, high in self.partner.items() if high in instances]
                steps = [self.fall[o] for o in lows if o in self.fall]
            else:
                steps = [self.first[o] for o in instances if o in self.first]
            if steps:
                out[key] = min(min(steps), out.get(key, min(steps)))
        return out


def _clock(pre: dict) -> tuple[str, str] | None | Literal[False]:
    """(clock port, ``posedge``/``negedge``) of the netlist's flip-flops, None without
    flip-flops, False when the clock is not a whole input port (a derived clock)."""
    clocks = set()
    for cell in pre.get("cells", {}).values():
        if "CLK" in cell.get("connections", {}):
            polarity = cell.get("parameters", {}).get("CLK_POLARITY", 1)
            value = int(polarity, 2) if isinstance(polarity, str) else int(polarity)
            clocks.add((tuple(cell["connections"]["CLK"]), value))
    if not clocks:
        return None
    (bits, value), *_ = clocks
    for name, port in pre["ports"].items():
        if port["direction"] == "input" and port["bits"] == list(bits):
            return name, "posedge" if value else "negedge"
    return False


def _clock_ports(pre: dict) -> list[str]:
    """Input ports of the netlist a clock of a flip-flop or a memory port depends on (through
    combinational cells: a gated or derived clock counts its inputs)."""
    cells = pre.get("cells", {}).values()
    drivers: dict[int, list[int]] = {}  # net bit -> the input bits of the combinational cell driving it
    sequential = ("CLK", "RD_CLK", "WR_CLK")
    for cell in cells:
        conns, dirs = cell.get("connections", {}), cell.get("port_directions", {})
        if any(port in conns for port in sequential) or "latch" in cell["type"]:
            continue  # a state element ends the cone
        ins = [b for port, bits in conns.items() if dirs.get(port) == "input" for b in bits if isinstance(b, int)]
        for port, bits in conns.items():
            if dirs.get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        drivers.setdefault(b, []).extend(ins)
    todo = [
        b
        for cell in cells
        for port in sequential
        for b in cell.get("connections", {}).get(port, [])
        if isinstance(b, int)
    ]
    seen: set[int] = set()
    while todo:
        b = todo.pop()
        if b not in seen:
            seen.add(b)
            todo.extend(drivers.get(b, []))
    return sorted(n for n, p in pre["ports"].items() if p["direction"] == "input" and set(p["bits"]) & seen)


#: Asynchronous control ports of yosys's flip-flop and latch cells and the parameter holding
#: each one's active level (one level for all the port's bits).
_ASYNC_CONTROLS = {
    "$adff": (("ARST", "ARST_POLARITY"),),
    "$adffe": (("ARST", "ARST_POLARITY"),),
    "$adlatch": (("ARST", "ARST_POLARITY"),),
    "$aldff": (("ALOAD", "ALOAD_POLARITY"),),
    "$aldffe": (("ALOAD", "ALOAD_POLARITY"),),
    "$dffsr": (("SET", "SET_POLARITY"), ("CLR", "CLR_POLARITY")),
    "$dffsre": (("SET", "SET_POLARITY"), ("CLR", "CLR_POLARITY")),
    "$dlatchsr": (("SET", "SET_POLARITY"), ("CLR", "CLR_POLARITY")),
    "$sr": (("SET", "SET_POLARITY"), ("CLR", "CLR_POLARITY")),
}


def _async_idle(pre: dict, drivable: set[str]) -> dict[str, int]:
    """Input port name -> value at time 0 (only ports with a bit at 1): every port bit that
    directly is an asynchronous set/reset/load control starts at its inactive level. The model
    applies such a control as a level from the zero state on; a simulator applies it on its
    edge (``always @(posedge clk or negedge rst_n)``), and a port that starts at the level a
    first step asserts makes no edge: the DUT would start unreset where the model is reset.
    A bit used at both levels, or reached only through logic, is left at 0."""
    levels: dict[int, set[int]] = {}
    for cell in pre.get("cells", {}).values():
        conns, params = cell.get("connections", {}), cell.get("parameters", {})
        for port, polarity in _ASYNC_CONTROLS.get(cell["type"], ()):
            raw = params.get(polarity, 1)  # the JSON writes parameters as binary strings
            active = int(raw, 2) & 1 if isinstance(raw, str) else int(raw) & 1
            for bit in conns.get(port, []):
                if isinstance(bit, int):
                    levels.setdefault(bit, set()).add(1 - active)
    idle: dict[str, int] = {}
    for name, port in pre.get("ports", {}).items():
        if port["direction"] != "input" or name not in drivable:
            continue
        value = 0
        for offset, bit in enumerate(port["bits"]):
            if levels.get(bit) == {1}:
                value |= 1 << offset
        if value:
            idle[name] = value
    return idle


def _read_inputs(path: Path) -> dict[int, tuple[str, int]]:
    """AIG input index -> (port name, bit) from the ``write_aiger -map`` file."""
    out = {}
    for line in path.read_text().splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "input":
            out[int(words[1])] = (words[3].lstrip("\\"), int(words[2]))
    return out


_CEX = re.compile(r"# CEX for output (\d+)\s*\n#\s*\n([01x\s]*?)#", re.S)


def _read_cexes(text: str, n_inputs: int) -> dict[int, list[list[int]]]:
    """``write_cex -a`` text -> output index -> its input values per frame (the first line,
    the initial state, is dropped; ``x`` reads as 0)."""
    out = {}
    for m in _CEX.finditer(text):
        lines = m.group(2).split()
        frames = [[1 if c == "1" else 0 for c in line] for line in lines[1:]]
        if frames and all(len(f) == n_inputs for f in frames):
            out[int(m.group(1))] = frames
    return out


def _port_values(step: list[int], inputs: dict[int, tuple[str, int]], drivable: set[str]) -> dict[str, int]:
    values: dict[str, int] = {}
    for index, (name, bit) in inputs.items():
        if name in drivable:
            values[name] = values.get(name, 0) | (step[index] << bit)
    return values


def random_steps(witness: Witness, steps: int, seed: int) -> Witness:
    """A copy of ``witness`` (its DUT, ports and clock) whose sequence is ``steps`` random
    steps (seed ``seed``): every input port free at every step, resets included. The
    soundness check replays it: no point proved unreachable may ever be covered."""
    import random

    rng = random.Random(seed)
    clock = witness.clock[0] if witness.clock else None
    drivable = [p for p in witness.ports if p.direction == "input" and p.name != clock]
    sequence = [{p.name: rng.getrandbits(p.width) for p in drivable} for _ in range(steps)]
    return Witness(
        "ok",
        top=witness.top,
        ports=list(witness.ports),
        clock=witness.clock,
        clocks=list(witness.clocks),
        idle=dict(witness.idle),
        steps=sequence,
    )


def to_testbench(witness: Witness, instance: str = "dut", half_period: int = 5) -> str:
    """The witness as a plain SystemVerilog testbench: one ``reg`` per DUT input port (0 at
    time 0; the clock and the asynchronous controls of ``witness.idle`` at their inactive
    level), one ``wire`` per output, the DUT instantiated
    by name as ``instance``, and per step the inputs driven ``half_period`` time units before
    the clock's active edge (no clock: one evaluation per step)."""
    top = witness.top
    decls, conns = [], []
    for p in witness.ports:
        width = f"[{p.width - 1}:0] " if p.width > 1 else ""
        if p.direction == "input":
            start = 1 if witness.clock and p.name == witness.clock[0] and witness.clock[1] == "negedge" else 0
            start = witness.idle.get(p.name, start)
            decls.append(f"  reg {width}{p.name} = {start};")
        else:
            decls.append(f"  wire {width}{p.name};")
        conns.append(f".{p.name}({p.name})")
    body = []
    widths = {p.name: p.width for p in witness.ports}
    for step in witness.steps:
        drive = " ".join(f"{n} = {widths[n]}'h{v:x};" for n, v in sorted(step.items()))
        if witness.clock:
            clk, edge = witness.clock
            active, idle = ("1", "0") if edge == "posedge" else ("0", "1")
            body.append(f"    {drive} #{half_period} {clk} = {active}; #{half_period} {clk} = {idle};")
        elif witness.clocks:
            # clocks first: a flip-flop takes what its input settled to in the step before
            first = " ".join(f"{n} = {widths[n]}'h{v:x};" for n, v in sorted(step.items()) if n in witness.clocks)
            rest = " ".join(f"{n} = {widths[n]}'h{v:x};" for n, v in sorted(step.items()) if n not in witness.clocks)
            body.append(f"    {first} #1 {rest} #{half_period};")
        else:
            body.append(f"    {drive} #{half_period};")
    lines = [
        "`timescale 1ns/1ps",
        "module tb;",
        *decls,
        f"  {top} {instance} ({', '.join(conns)});",
        "  initial begin",
        f"    #{half_period};",
        *body,
        f"    #{half_period} $finish;",
        "  end",
        "endmodule",
        "",
    ]
    return "\n".join(lines)
