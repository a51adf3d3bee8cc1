"""Zero-width reset pulses on the one-edge model (:mod:`.prover`, issue 23).

A testbench that writes ``rst_n = 0; rst_n = 1;`` in one time step wakes every process
``always @(posedge clk or negedge rst_n)``; plain Icarus runs it after the pulse ended, on its
``else`` branch, with no clock edge (IEEE 1800 4.7 lets a woken process run then); Verilator
sees no change, and neither does the fast path any more (``fastcov.emulate.edge_processes``).
A model whose flip-flops move only at clock edges proved ``q && !seen`` unreachable (``q`` set
by that process, ``seen`` by the same clock with no reset) while Icarus covered it
(tests/test_formal_pulse.py); the pulse below keeps such points unproved (sound, not tight).

So the one-edge model has two more free choices per step, neither a DUT input (the witness
search ties both to 0: every step a clock edge, no pulse, the model it searched before):

- ``__rs_hold``: the step is not a clock edge; every flip-flop keeps its value (an async reset
  still acts). Alone it adds no state: the inputs are free at every step already;
- ``__rs_pulse<i>``, one per reset bit and active level (:func:`.ticks_proof.pulse_groups`):
  the flip-flops of that reset, and the unreset flip-flops of the same processes (yosys's
  ``src``), take their inputs in a step without a clock edge. A reset bit that is logic of
  state pulses too (a glitch of a derived reset wakes its processes the same way on Icarus).

The lowering is a second yosys step on the ``write_rtlil`` text of the first (after ``prep``
and ``dffunmap``: enables and synchronous resets are logic, every flip-flop a ``$dff`` or an
``$adff``), whose cells become ``rs_edges_dff``/``rs_edges_adff`` (:data:`MAP_TEXT`).
"""

from __future__ import annotations

import json
from pathlib import Path

from reward_service.formal import ticks_proof

MAP = "rs_adff_map.v"
#: The flip-flops of the one-edge model. ``HOLD``: no clock edge at this step; ``PULSE``: a
#: zero-width pulse of the flip-flop's reset ran its process (0 for a flip-flop no pulse
#: runs). An ``$adff``'s readers may see the value from before the reset in the step it is
#: asserted (``old``, a free choice per flip-flop): simulators evaluate logic on the new reset
#: value and the old state before the reset's own assignment lands (Verilator's
#: input-combinational region, the ``#0`` checks of the fast path).
MAP_TEXT = """module rs_edges_dff (CLK, HOLD, PULSE, D, Q);
  parameter WIDTH = 1;
  parameter CLK_POLARITY = 1'b1;
  input CLK, HOLD, PULSE;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire run = !HOLD || PULSE;
  \\$dff #(.WIDTH(WIDTH), .CLK_POLARITY(CLK_POLARITY)) ff (.CLK(CLK), .D(run ? D : Q), .Q(Q));
endmodule

module rs_edges_adff (CLK, ARST, HOLD, PULSE, D, Q);
  parameter WIDTH = 1;
  parameter CLK_POLARITY = 1'b1;
  parameter ARST_POLARITY = 1'b1;
  parameter ARST_VALUE = 0;
  input CLK, ARST, HOLD, PULSE;
  input [WIDTH-1:0] D;
  output [WIDTH-1:0] Q;
  wire [WIDTH-1:0] q;
  wire old;
  wire active = ARST == ARST_POLARITY;
  wire run = !HOLD || PULSE;
  \\$dff #(.WIDTH(WIDTH), .CLK_POLARITY(CLK_POLARITY)) ff (.CLK(CLK), .D(active ? ARST_VALUE : (run ? D : q)), .Q(q));
  \\$anyseq #(.WIDTH(1)) before_reset (.Y(old));
  assign Q = (active && !old) ? ARST_VALUE : q;
endmodule
"""

HOLD = "__rs_hold"
PULSE = "__rs_pulse"


def with_hold_and_pulses(rtlil: str, netlist: dict, top: str) -> str:
    """``rtlil`` (``write_rtlil`` of the netlist ``netlist``, after ``dffunmap``) with every
    ``$dff``/``$adff`` cell of ``top`` an ``rs_edges_dff``/``rs_edges_adff`` whose ``HOLD`` is
    the wire :data:`HOLD` and whose ``PULSE`` is its reset's wire ``__rs_pulse<i>`` (0 when no
    pulse runs it); the wires are declared in ``top``, undriven: free at every step. Raises
    ``ValueError`` when a cell is not found (the two writers disagree)."""
    cells = netlist["modules"][top]["cells"]
    pulses = ticks_proof.pulse_groups(netlist, top, [])
    connects = {
        name: [
            f"    connect \\HOLD \\{HOLD}\n",
            f"    connect \\PULSE \\{PULSE}{pulses[name]}\n" if name in pulses else "    connect \\PULSE 1'0\n",
        ]
        for name, cell in cells.items()
        if cell["type"] in ("$dff", "$adff")
    }
    wires = [HOLD, *(f"{PULSE}{i}" for i in sorted(set(pulses.values())))]
    return ticks_proof.retyped_flip_flops(rtlil, top, connects, "rs_edges_", wires)


def rewrite(work: Path, top: str) -> None:
    """``edges.il`` and ``edges.json`` of the first yosys step in ``work`` -> ``edges_cut.il``
    (:func:`with_hold_and_pulses`) and the map file."""
    netlist = json.loads((work / "edges.json").read_text())
    (work / "edges_cut.il").write_text(with_hold_and_pulses((work / "edges.il").read_text(), netlist, top))
    (work / MAP).write_text(MAP_TEXT)
