"""Proofs on the every-input-free model (reward_service.formal.ticks_proof, issue 23): designs the
one-edge model refuses (several clock edges, latches, memories) are proved on a model in which
every input, clocks and resets included, is free at every step.

Counterexample first: each design of UNSOUND_FOR_SAME_STEP has a point that a simulator covers
and that a model updating its flip-flops in the step their clock edge is seen
(``clk2fflogic``, the witness search's lowering) proves unreachable. The tests show that
lowering proving it, the ticks proof leaving it, and (slow) Verilator and the fast path
covering it (but the zero-width pulses, which only plain Icarus runs: NEITHER)."""

from __future__ import annotations

import pytest
from conftest import cid012_rows, rtl_files
from helpers import covered_keys, point_key, score_one_file

from reward_service.formal import ticks_proof
from reward_service.formal.model import build_model
from reward_service.formal.prover import _run, prove, synthesize
from reward_service.sandbox import get_sandbox

#: name -> (design, testbench, (line, metric, detail) of the point a simulator covers)
UNSOUND_FOR_SAME_STEP = {
    # Verilator's input-combinational region (and the fast path's #0 checks) evaluate the
    # block on the new clock value and the flip-flops' values from before the edge: at the
    # second posedge `c` still equals its negedge copy `m`. A model that updates `c` in the
    # step it sees the edge never shows clk = 1 with c == m once a negedge was seen.
    "edge_view.v": (
        """module edge_view(input clk, output reg hit);
  reg c = 1'b0, m = 1'b0, started = 1'b0;
  always @(posedge clk) c <= ~c;
  always @(negedge clk) begin m <= c; started <= 1'b1; end
  always @(*) begin
    hit = 1'b0;
    if (clk && started && c == m) hit = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0; wire hit;
  edge_view dut(.clk(clk), .hit(hit));
  initial begin repeat (4) begin #5 clk = 1; #5 clk = 0; end $finish; end
endmodule
""",
        (7, "branch", "if"),
    ),
    # The reset's readers see the value from before the reset at its assertion
    # (tests/test_formal_expr.py's one-edge case, here with a negedge flip-flop too).
    "reset_view.v": (
        """module reset_view(input clk, input rst_n, input d, output p, output reg n);
  reg f;
  always @(posedge clk or negedge rst_n) if (!rst_n) f <= 1'b0; else f <= d;
  always @(negedge clk) n <= d;
  assign p = rst_n ^ f;
endmodule
""",
        """module tb; reg clk = 0, rst_n = 1, d = 1; wire p, n;
  reset_view dut(.clk(clk), .rst_n(rst_n), .d(d), .p(p), .n(n));
  initial begin #1 clk = 1; #1 clk = 0; #1 rst_n = 0; #1 rst_n = 1; #1 clk = 1; #1 clk = 0; $finish; end
endmodule
""",
        (5, "expr", "(rst_n==0 && f==1) => 1"),
    ),
    # A reset low from time 0 makes no negedge: the flip-flop keeps its initial 0 until the
    # first clock edge. A model that applies the reset as a level never has q == 0 with it.
    "reset_at_zero.v": (
        """module reset_at_zero(input clk, input rst_n, output reg hit, output reg n);
  reg [1:0] q;
  always @(posedge clk or negedge rst_n) if (!rst_n) q <= 2'd2; else q <= 2'd3;
  always @(negedge clk) n <= ~n;
  always @(*) begin
    hit = 1'b0;
    if (!rst_n && q == 2'd0) hit = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0, rst_n = 0; wire hit, n;
  reset_at_zero dut(.clk(clk), .rst_n(rst_n), .hit(hit), .n(n));
  initial begin #5 clk = 1; #5 clk = 0; #5 rst_n = 1; #5 clk = 1; #5 clk = 0; $finish; end
endmodule
""",
        (7, "branch", "if"),
    ),
    # A derived clock makes its edge after the flip-flops of its own clock updated: `q` takes
    # the new `cnt` (odd at every posedge of `cd`). A model that samples every flip-flop's
    # input from before the step never has q == 1.
    "derived_clock.v": (
        """module derived_clock(input clk, output reg [1:0] q, output reg odd);
  reg cd = 1'b0;
  reg [1:0] cnt = 2'd0;
  always @(posedge clk) begin cnt <= cnt + 2'd1; cd <= ~cd; end
  always @(posedge cd) q <= cnt;
  always @(*) begin
    odd = 1'b0;
    if (q == 2'd1) odd = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0; wire [1:0] q; wire odd;
  derived_clock dut(.clk(clk), .q(q), .odd(odd));
  initial begin repeat (6) begin #5 clk = 1; #5 clk = 0; end $finish; end
endmodule
""",
        (8, "branch", "if"),
    ),
    # yosys ignores the delay of a continuous assignment: `d` would equal `a` at every step,
    # where a simulator shows `d` lagging `a` for 1 time unit. Its target is left free, on
    # the one-edge model too (this design has one clock edge: that model proved it before).
    "delayed_assign.v": (
        """module delayed_assign(input clk, input a, output d, output reg n, output reg hit);
  assign #1 d = a;
  always @(negedge clk) n <= a;
  always @(*) begin
    hit = 1'b0;
    if (a != d) hit = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0, a = 0; wire d, n, hit;
  delayed_assign dut(.clk(clk), .a(a), .d(d), .n(n), .hit(hit));
  initial begin #5 a = 1; #5 clk = 1; #5 clk = 0; #5 $finish; end
endmodule
""",
        (6, "branch", "if"),
    ),
    # A zero-width reset pulse (`rst_n = 0; rst_n = 1;`, no delay between): Icarus wakes the
    # process after the pulse ended and it takes its input with no clock edge, so `q` is 1
    # while `seen` (the same clock, no reset) is still 0. Verilator sees no change of `rst_n`,
    # and the fast path follows it (docs/semantics.md, "Zero-width pulses"): NEITHER.
    "zero_width_reset.v": (
        """module zero_width_reset(input clk, input rst_n, input d, output reg q, output reg n, output reg hit);
  reg seen = 1'b0;
  always @(posedge clk or negedge rst_n) if (!rst_n) q <= 1'b0; else q <= 1'b1;
  always @(posedge clk) seen <= 1'b1;
  always @(negedge clk) n <= d;
  always @(*) begin
    hit = 1'b0;
    if (q && !seen) hit = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0, rst_n = 1, d = 0; wire q, n, hit;
  zero_width_reset dut(.clk(clk), .rst_n(rst_n), .d(d), .q(q), .n(n), .hit(hit));
  initial begin #5 rst_n = 0; rst_n = 1; #5 $finish; end
endmodule
""",
        (8, "branch", "if"),
    ),
    # The same pulse runs the process's `else` branch for a register it does not reset (a
    # plain flip-flop in yosys's netlist, `r`), with no clock edge either.
    "zero_width_unreset.v": (
        """module zero_width_unreset(input clk, input rst_n, input d, output reg q, output reg r, output reg n,
                          output reg hit);
  reg seen = 1'b0;
  always @(posedge clk or negedge rst_n) if (!rst_n) q <= 1'b0; else begin q <= 1'b1; r <= d; end
  always @(posedge clk) seen <= 1'b1;
  always @(negedge clk) n <= d;
  always @(*) begin
    hit = 1'b0;
    if (r && !seen) hit = 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0, rst_n = 1, d = 1; wire q, r, n, hit;
  zero_width_unreset dut(.clk(clk), .rst_n(rst_n), .d(d), .q(q), .r(r), .n(n), .hit(hit));
  initial begin #5 rst_n = 0; rst_n = 1; #5 $finish; end
endmodule
""",
        (9, "branch", "if"),
    ),
    # yosys's divider gives all ones for `a / 0`, Verilator 0: `a / b == 0` holds with b == 0.
    "div_by_zero.v": (
        """module div_by_zero(input clk, input [3:0] a, input [3:0] b, output reg n, output reg hit);
  always @(negedge clk) n <= a[0];
  always @(posedge clk) begin
    hit <= 1'b0;
    if (b == 4'd0 && a / b == 4'd0) hit <= 1'b1;
  end
endmodule
""",
        """module tb; reg clk = 0; reg [3:0] a = 4'd5, b = 4'd0; wire n, hit;
  div_by_zero dut(.clk(clk), .a(a), .b(b), .n(n), .hit(hit));
  initial begin #5 clk = 1; #5 clk = 0; #5 $finish; end
endmodule
""",
        (5, "branch", "if"),
    ),
}

#: Points plain Icarus covers and neither engine does: a zero-width pulse runs no process on
#: Verilator nor on the fast path.
NEITHER = {"zero_width_reset.v", "zero_width_unreset.v"}
#: Points only Verilator covers: Icarus's `a / 0` is `x`, and `x == 0` is not true.
VERILATOR_ONLY = {"div_by_zero.v"}


def _same_step(model, sandbox, work, timeout_s):
    """The witness search's lowering (``clk2fflogic``): flip-flops update in the step their
    clock edge is seen, async resets act as levels (with the final netlist a proof reads)."""
    return synthesize(model, sandbox, work, timeout_s, ticks=True, final=True)


@pytest.mark.parametrize("name", sorted(set(UNSOUND_FOR_SAME_STEP) - {"div_by_zero.v"}))
def test_a_same_step_model_proves_what_a_simulator_covers(name):
    # div_by_zero: every lowering, the witness search's `clk2fflogic` one too, maps a division
    # by zero to a free value (formal/divmap.py); tests/test_formal.py shows yosys's own
    # divider proving that point
    rtl, _, point = UNSOUND_FOR_SAME_STEP[name]
    result = _run(build_model({name: rtl}), get_sandbox("bwrap"), 30.0, 2000, lower=_same_step)
    assert result.status == "proved", result.reason
    assert point_key(name, point) in result.unreachable


@pytest.mark.parametrize("name", sorted(UNSOUND_FOR_SAME_STEP))
def test_the_ticks_proof_leaves_it(name):
    rtl, _, point = UNSOUND_FOR_SAME_STEP[name]
    result = prove({name: rtl})
    # each is refused by the one-edge model (two clock edges) and reaches the ticks proof, but
    # the delayed assignment, whose target both models leave free
    assert result.status in ("proved", "unsupported"), result.reason
    if name == "delayed_assign.v":
        assert result.notes[0].startswith("the targets of continuous assignments with a delay are free")
    else:
        assert "every-input-free model" in result.notes[0] or result.notes[0].startswith("one-edge model: ")
    assert point_key(name, point) not in result.unreachable


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["verilator", "fast"])
@pytest.mark.parametrize("name", sorted(UNSOUND_FOR_SAME_STEP))
def test_simulators_cover_it(engine, name, engine_name):
    rtl, tb, point = UNSOUND_FOR_SAME_STEP[name]
    scored = score_one_file(engine, name, rtl, tb, engine_name)
    assert scored.result.status == "ok", scored.result.message
    covered = {(p.line, p.metric, p.detail) for p in scored.points if p.covered}
    if name in NEITHER or (engine_name == "fast" and name in VERILATOR_ONLY):
        assert point not in covered, sorted(covered)
    else:
        assert point in covered, sorted(covered)
    dead = set(prove({name: rtl}).unreachable)
    assert not covered_keys(scored) & dead


#: A design the one-edge model refuses (posedge and negedge flip-flops, a latch) with points
#: dead by construction: the `default:` of a case over every value of a 2-bit state, and the
#: `else if (!go)` inside `if (go)` (its expression point `go==0`).
REFUSED = """module r(input clk, input go, input [1:0] s, input en, input d, output reg [1:0] q, output reg n,
         output reg l, output reg y);
  reg [1:0] st;
  always @(posedge clk) st <= s;
  always @(negedge clk) n <= go;
  always @(*) if (en) l = d;
  always @(*) begin
    y = 1'b0;
    case (st)
      2'd0: q = 2'd1;
      2'd1: q = 2'd2;
      2'd2: q = 2'd3;
      2'd3: q = 2'd0;
      default: begin q = 2'd0; y = 1'b1; end
    endcase
  end
endmodule
"""


def test_a_refused_design_is_proved_on_the_ticks_model():
    result = prove({"r.v": REFUSED})
    assert result.status == "proved" and result.model == "ticks", result.reason
    assert result.notes[0] == (
        "one-edge model: the design has a latch; proved on the every-input-free model; free at every step: latches 1"
    )
    dead = {k[1:] for k in result.unreachable}
    assert (14, "line", "case") in dead
    # the latch is free at every step: nothing about `l` is proved, though `l` only ever takes `d`
    assert not {k for k in dead if k[2].startswith("l:")}
    # the clocks and inputs are free: none of their toggles is proved
    assert not {k for k in dead if k[1] == "toggle" and k[2].split(":")[0] in ("clk", "go", "s[0]", "en", "d")}
    assert len(result.kinds) == len(result.unreachable)


@pytest.mark.slow
def test_random_stimulus_covers_no_point_of_the_ticks_proofs(engine):
    """ceiling.soundness on the small refused design and on thermostat_0003 (a latch: the
    `default:` of its 3-bit state with 7 states is proved on the ticks model)."""
    from reward_service import ceiling

    for design in ({"r.v": REFUSED}, rtl_files(cid012_rows()["cvdp_copilot_thermostat_0003"])):
        result = ceiling.soundness(design, engine=engine, seeds=(1, 2), steps=300)
        assert result.status == "ok", result.reason
        assert result.proved and result.covered == []


def test_the_netlist_refusals():
    """Refused for the ticks proof: an inout port, two drivers of a bit, a formal cell; left
    free: a latch of the design and a flip-flop clocked by logic; exact: flip-flops clocked
    by input ports and the model's flag latches."""
    inout = {"modules": {"t": {"ports": {"p": {"direction": "inout", "bits": [2]}}, "cells": {}, "netnames": {}}}}
    assert ticks_proof.classify(inout, "t")[0] == "an inout port"
    ports = {"clk": {"direction": "input", "bits": [2]}, "a": {"direction": "input", "bits": [3]}}

    def cell(kind, **conns):
        dirs = {p: ("output" if p == "Q" else "input") for p in conns}
        return {"type": kind, "connections": conns, "port_directions": dirs, "parameters": {}}

    cells = {
        "ff": cell("$dff", CLK=[2], D=[3], Q=[4]),
        "derived": cell("$dff", CLK=[4], D=[3], Q=[5]),
        "latch": cell("$dlatch", EN=[3], D=[4], Q=[6]),
        "flag": cell("$dlatch", EN=[3], D=["1"], Q=[7]),
    }
    nets = {"__rs_fm0_1": {"bits": [7]}}
    why, free, counts = ticks_proof.classify(
        {"modules": {"t": {"ports": ports, "cells": cells, "netnames": nets}}}, "t"
    )
    assert why is None and sorted(free) == ["derived", "latch"]
    assert counts == {"latches": 1, "flip-flops clocked or reset by state": 1}
    two = dict(cells, other=cell("$dff", CLK=[2], D=[3], Q=[4]))
    assert ticks_proof.classify({"modules": {"t": {"ports": ports, "cells": two, "netnames": nets}}}, "t")[0] == (
        "1 signal bits have several drivers"
    )
    assume = dict(cells, a=cell("$assume", A=[3], EN=["1"]))
    why = ticks_proof.classify({"modules": {"t": {"ports": ports, "cells": assume, "netnames": nets}}}, "t")[0]
    assert why == "cell $assume (a) is not modelled"


def test_cells_left_free_are_cut_from_the_rtlil_text():
    text = (
        "module \\t\n"
        "  wire input 1 \\a\n"
        '  attribute \\src "t.v:3"\n'
        "  cell $dlatch $procdff$1\n"
        "    connect \\Q \\l\n"
        "  end\n"
        '  attribute \\src "t.v:4"\n'
        "  cell $dff \\keep\n"
        "  end\n"
        "end\n"
    )
    cut = ticks_proof.without_cells(text, "t", {"$procdff$1"})
    assert "$dlatch" not in cut and "t.v:3" not in cut and "\\keep" in cut and "t.v:4" in cut
    with pytest.raises(ValueError):
        ticks_proof.without_cells(text, "t", {"missing"})


def test_the_one_edge_verdict_stays_when_the_ticks_model_proves_nothing():
    """A design with nothing dead: the ticks model proves no point, so the verdict (and the
    result's note about the design) stays the one-edge model's."""
    rtl = """module z(input clk, input d, output reg a, output reg b);
  always @(posedge clk) a <= d;
  always @(negedge clk) b <= d;
endmodule
"""
    result = prove({"z.v": rtl})
    assert result.status == "unsupported" and result.model == "edges"
    assert result.reason == "2 clock edges (one clock edge only)"
    assert result.notes[0] == "every-input-free model: proved, no point proved"


def test_initial_values_survive_the_flip_flop_mapping():
    """A flip-flop that holds its initial 1 is stuck at 1 (its `1->0` proved, its `0->1`
    counted at time 0 by Verilator, not proved); without the initialiser it is stuck at 0."""
    rtl = """module i(input clk, input d, output reg q, output reg n);
  initial q = 1'b1;
  always @(posedge clk) q <= q;
  always @(negedge clk) n <= d;
endmodule
"""
    result = prove({"i.v": rtl})
    assert result.model == "ticks" and result.unreachable == [("i.v", 1, "toggle", "q:1->0")]
    assert result.kinds == ["stuck at 1"]
    result = prove({"i.v": rtl.replace("  initial q = 1'b1;\n", "")})
    assert result.unreachable == [("i.v", 1, "toggle", "q:0->1"), ("i.v", 1, "toggle", "q:1->0")]


def test_a_delay_outside_a_continuous_assignment_refuses_the_ticks_proof():
    text = """module m(input clk, input a, output reg q, output y);
  assign #1 y = a;
  always @(posedge clk) q <= #1 a;
endmodule
"""
    cut, why = ticks_proof.without_delays("m.v", text)
    assert why == "m.v:3: a delay outside a continuous assignment is not modelled"
    cut, why = ticks_proof.without_delays("m.v", text.replace("<= #1 a", "<= a"))
    plain = text.replace("<= #1 a", "<= a")
    assert why is None and "assign" not in cut and cut.count("\n") == plain.count("\n")
    assert len(cut) == len(plain)


def test_a_reset_pulse_choice_is_shared_by_the_flip_flops_of_one_reset():
    def adff(arst, level):
        return {"type": "$adff", "connections": {"ARST": [arst]}, "parameters": {"ARST_POLARITY": level}}

    cells = {"a": adff(2, "0"), "b": adff(2, "0"), "c": adff(2, "1"), "d": adff(3, "0"), "e": adff(3, "0")}
    groups = ticks_proof.pulse_groups({"modules": {"t": {"cells": cells}}}, "t", ["e"])
    assert groups["a"] == groups["b"] and len({groups["a"], groups["c"], groups["d"]}) == 3 and "e" not in groups
    text = "module \\t\n  cell $adff $x\n    connect \\Q \\q\n  end\nend\n"
    out = ticks_proof.with_pulses(text, "t", {"$x": 0})
    assert out == (
        "module \\t\n  wire \\__rs_pulse0\n  cell \\rs_ticks_adff $x\n    connect \\Q \\q\n"
        "    connect \\PULSE \\__rs_pulse0\n  end\nend\n"
    )
