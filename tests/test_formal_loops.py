"""Combinational loops in the witness model (issue 23, item 2): a process that reads a variable
before it writes it (restoring_division's `if (next_count == WIDTH)`) is a loop in yosys's
netlist, on which yosys 0.23's write_aiger crashes. The witness search cuts each loop at the
reader (the previous step's value) and lowers the netlist again; its claims count only once
replayed, and the proof never uses the cut (the design stays unsupported there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reward_service import ceiling
from reward_service.formal.loops import CUT_PREFIX, cut_loops, loop_cuts
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove, synthesize
from reward_service.formal.witness import search
from reward_service.sandbox import get_sandbox

#: `next` is read before it is written on the path with `start` low: a loop through the
#: `==` and the multiplexers that assign `next`. Both simulators settle it (`next` holds 6).
RBW = """module rbw(input clk, input rst_n, input start, input [2:0] d, output reg [2:0] cnt);
  reg [2:0] next;
  always @(*) begin
    if (start) next = d;
    else if (next == 3'd6) next = 3'd6;
    else next = cnt + 3'd1;
  end
  always @(posedge clk or negedge rst_n)
    if (!rst_n) cnt <= 3'd0;
    else cnt <= next;
endmodule
"""


def _netlist(tmp_path: Path) -> dict:
    model = build_model({"rbw.sv": RBW}, timing=False)
    synthesize(model, get_sandbox("bwrap"), tmp_path, 60, ticks=True)
    return json.loads((tmp_path / "pre.json").read_text())


def test_the_loop_is_cut_where_the_process_reads_the_variable(tmp_path: Path):
    netlist = _netlist(tmp_path)
    module = netlist["modules"]["rbw"]
    cuts = loop_cuts(module)
    next_bits = set(module["netnames"]["next"]["bits"])
    # every cut input reads a bit of `next` (the `==`), none is inside the multiplexers
    assert cuts and all(module["cells"][c]["connections"][p][i] in next_bits for c, p, i in cuts), cuts
    assert {module["cells"][c]["type"] for c, _, _ in cuts} == {"$eq"}
    assert cut_loops(netlist, "rbw") == len(cuts)
    assert loop_cuts(netlist["modules"]["rbw"]) == []  # no loop left
    ffs = [c for name, c in module["cells"].items() if name.startswith(CUT_PREFIX)]
    assert ffs and all(c["type"] == "$ff" and c["connections"]["D"][0] in next_bits for c in ffs)


def test_a_netlist_without_a_loop_is_not_cut():
    # a chain a -> b -> c through two cells, and a flip-flop feeding itself (not combinational)
    module = {
        "cells": {
            "n1": {
                "type": "$not",
                "port_directions": {"A": "input", "Y": "output"},
                "connections": {"A": [2], "Y": [3]},
            },
            "n2": {
                "type": "$not",
                "port_directions": {"A": "input", "Y": "output"},
                "connections": {"A": [3], "Y": [4]},
            },
            "ff": {
                "type": "$dff",
                "port_directions": {"CLK": "input", "D": "input", "Q": "output"},
                "connections": {"CLK": [5], "D": [6], "Q": [6]},
            },
        },
        "netnames": {},
    }
    assert loop_cuts(module) == []
    # the same chain closed (c drives a): one cut
    module["cells"]["n3"] = {
        "type": "$not",
        "port_directions": {"A": "input", "Y": "output"},
        "connections": {"A": [4], "Y": [2]},
    }
    assert len(loop_cuts(module)) == 1


def test_the_proof_never_uses_the_cut():
    """The design stays outside the proof (yosys cannot lower the loop for it): nothing proved."""
    proof = prove({"rbw.sv": RBW})
    assert proof.status == "unsupported" and not proof.unreachable


def test_the_witness_search_lowers_the_cut_netlist():
    witness = search({"rbw.sv": RBW}, refused=True)
    assert witness.status == "ok", witness.reason
    assert witness.clocks == ["clk"] and witness.claimed
    # the arm that reads `next` back at 6 (line 5) needs `start` with d = 6 first, then `start` low
    assert ("rbw.sv", 5, "line", "if") in witness.claimed, sorted(witness.claimed)


@pytest.mark.slow
def test_every_claim_of_the_cut_model_replays(engine):
    """The counterexample-first check: the cut model is an approximation of the simulators,
    so the replay judges it; on this design every claim replays on both engines and no point
    is left undecided."""
    result = ceiling.closure({"rbw.sv": RBW}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proof.status == "unsupported"
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.replayed_on == {"fast": "fast", "verilator": "verilator"}
    assert result.proved_but_covered == []
    assert result.undecided == 0, json.dumps(result.to_json())


#: Verilator iterates the process until it settles: at `c == 3` it never does (`n` 4 -> 0 -> 4
#: ...), a run-time error (DIDNOTCONVERGE); Icarus evaluates it once per trigger.
OSC = """module osc(input clk, input go, output reg [2:0] c);
  reg [2:0] n;
  always @(*) begin
    if (n == 3'd4) n = 3'd0;
    else n = c + 3'd1;
  end
  always @(posedge clk) if (go) c <= n;
endmodule
"""


@pytest.mark.slow
def test_a_sequence_the_design_fails_on_is_replayed_up_to_a_prefix(engine):
    """The closure sequence reaches `c == 3`, where Verilator stops with DIDNOTCONVERGE: the
    closure is the longest prefix both engines replay, its claims those made before it ends
    (each replays), and the points only the oscillation reaches stay undecided."""
    result = ceiling.closure({"osc.sv": OSC}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.reason.startswith("the first ") and "DIDNOTCONVERGE" in result.reason, result.reason
    shown, full = (int(w) for w in result.reason.split()[2:5:2])
    assert 0 < shown == len(result.witness.steps) < full
    assert all(step < shown for step in result.witness.claimed.values())
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert ("osc.sv", 4, "branch", "if") in result.undecided_keys  # `n == 4` settles on Verilator only in the loop
    assert result.metrics["branch"].witnessed >= 1 and result.metrics["line"].undecided == 0


#: A third edge whose arm loads a non-constant value: yosys 0.23's proc refuses it ("Async
#: reset \load_n yields non-constant value"); the witness model tests `load_n` at the clock.
ASYNC_LOAD = """module al(input clk, input rst_n, input load_n, input d, output reg q, output reg [1:0] n);
  always @(posedge clk or negedge rst_n or negedge load_n)
    if (!rst_n) q <= 1'b0;
    else if (!load_n) q <= d;
    else q <= ~q;
  always @(posedge clk) n <= n + {1'b0, q};
endmodule
"""


def test_an_async_load_is_made_synchronous_in_the_witness_model_only():
    assert prove({"al.sv": ASYNC_LOAD}).status == "unsupported"
    model = build_model({"al.sv": ASYNC_LOAD}, timing=False)
    assert "negedge load_n" in model.files["al.sv"]
    witness = search({"al.sv": ASYNC_LOAD}, refused=True)
    assert witness.status == "ok", witness.reason
    assert ("al.sv", 4, "branch", "elsif") in witness.claimed or any(k[1] == 4 for k in witness.claimed)


@pytest.mark.slow
def test_the_synchronous_load_is_an_approximation_the_replay_judges(engine):
    """A simulator loads `q` at `load_n`'s edge (1 time unit after the clock in the closure
    testbench), the model at the next clock edge: `q`'s own points replay, but the counter
    `n` that sums `q` at the clock sees other values, and the model's claims on its upper
    bits do not all replay. Those are listed and stay undecided, never witnessed."""
    result = ceiling.closure({"al.sv": ASYNC_LOAD}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved_but_covered == []
    missing = {k for keys in result.not_replayed.values() for k in keys}
    assert missing <= {k for k in result.witness.claimed if k[3].startswith("n[")}, sorted(missing)
    assert missing <= set(result.undecided_keys)
    q_points = [k for k in result.witness.claimed if k[3].startswith("q:") or k[2] in ("line", "branch")]
    assert q_points and not set(q_points) & missing
