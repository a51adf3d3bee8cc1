"""Time-0 settling on both engines (docs/semantics.md): a bit's transition at time 0 counts
only from 0 to the value it has when time 0 has settled. Each sample is scored on real
Verilator and on the fast path (which must not fall back); their toggle points must be equal,
and the points counted only inside time 0 must be uncovered. The two reproducers were counted
differently by each engine before the rule (the fast path counted every time-0 change,
Verilator 5.048 none within one initial block's straight-line code but round trips across
``#0``); the reset pulse writes out every covered point, so a change of one engine alone fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reward_service.fastcov.compare import diff_points

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import semantics_diff

METRICS = ["toggle"]

ALU = """\
module alu (input wire [1:0] op, input wire [7:0] a, input wire [7:0] b,
            output reg [7:0] y, output wire zero);
  always @(*) begin
    case (op)
      2'b00: y = a + b;
      2'b01: y = a - b;
      2'b10: y = a & b;
      default: y = a | b;
    endcase
  end
  assign zero = (y == 0);
endmodule
"""
ALU_TB = """\
module tb;
  reg [1:0] op;
  reg [7:0] a, b;
  wire [7:0] y;
  wire zero;
  alu dut (.op(op), .a(a), .b(b), .y(y), .zero(zero));
  initial begin
    op = 0; a = 8'd3; b = 8'd3;
    #1 op = 1;
    #1 op = 2; a = 8'hF0; b = 8'h0F;
    #1 $display("y=%h zero=%b", y, zero);
    $finish;
  end
endmodule
"""


def toggles(engine, name: str, design: dict[str, str], tb: str, scope: str):
    """The scored run of one engine; asserts it ran on that engine without a fallback."""
    run = engine.scored(
        {
            "design": {"files": design},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "coverage": {"scope": scope, "metrics": METRICS},
            "engine": name,
            "limits": {"run_s": 20},
        }
    )
    result = run.result
    assert result.status == "ok" and result.engine == name and not result.fallback, (
        f"{result.status} {result.fallback} {result.message}"
    )
    return run


def fast_equals_verilator(engine, design: dict[str, str], tb: str, scope: str = "dut"):
    """Fast path and Verilator toggle points must be equal; returns Verilator's points."""
    reference = toggles(engine, "verilator", design, tb, scope)
    fast = toggles(engine, "fast", design, tb, scope)
    diff = diff_points(fast.points, reference.points, set(METRICS))
    assert diff.equal, diff.describe(40)
    return reference.points


def covered(points) -> set[str]:
    return {p.detail for p in points if p.metric == "toggle" and p.covered}


@pytest.mark.slow
def test_comb_glitch_at_time_zero_is_no_toggle(engine):
    # zero is 1 while y is still 0 at time 0, then 0 once the always @(*) has run (y = 6):
    # it settles at 0, rises at #1 (3 - 3) and stays 1 (0xF0 & 0x0F): no fall
    points = fast_equals_verilator(engine, {"alu.v": ALU}, ALU_TB)
    names = covered(points)
    assert "zero:1->0" not in names and "zero:0->1" in names, sorted(names)
    assert "y[1]:0->1" in names and "y[1]:1->0" in names  # settled to 6 at time 0, 0 at #1


@pytest.mark.slow
def test_initialiser_overwritten_at_time_zero_is_no_toggle(engine):
    # S = 3'b111 and D = 32'hffffffff are overwritten by the initial at time 0
    points = fast_equals_verilator(engine, {"mux8.sv": semantics_diff.TIME0_DUT}, semantics_diff.TIME0_TB)
    names = covered(points)
    # S counts 0..7 from time 0: S[2] rises at #40 and never falls; the initialiser's 1s are no rise
    assert "S[2]:1->0" not in names and "S[2]:0->1" in names, sorted(names)
    assert "Y[2]:1->0" not in names, sorted(names)


COUNTER = """\
module cnt (input logic clk, input logic rst, input logic en, output logic [2:0] q);
  always_ff @(posedge clk or posedge rst)
    if (rst) q <= 0;
    else if (en) q <= q + 1;
endmodule
"""
# A reset pulse inside time 0 (across a #0, which Verilator 5.048 counted as two toggles), an
# enable set before the #0 that stays 1, then four counting edges: q goes 0 -> 4.
PULSE_TB = """\
module tb;
  logic clk = 0, rst = 0, en = 0;
  logic [2:0] q;
  cnt dut (.clk(clk), .rst(rst), .en(en), .q(q));
  always #5 clk = ~clk;
  initial begin
    rst = 1; en = 1;
    #0 rst = 0;
    repeat (4) @(posedge clk);
    #1 $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_reset_pulse_at_time_zero_counts_on_neither_engine(engine):
    # Written out so that a change of one engine alone fails: equality alone would pass if both
    # went back to counting time-0 round trips, these sets alone if only one did.
    points = fast_equals_verilator(engine, {"cnt.sv": COUNTER}, PULSE_TB)
    assert covered(points) == {
        "clk:0->1",
        "clk:1->0",
        "en:0->1",  # settled at 1 at time 0, never falls
        "q[0]:0->1",
        "q[0]:1->0",
        "q[1]:0->1",
        "q[1]:1->0",
        "q[2]:0->1",
    }
    assert {p.detail for p in points if p.metric == "toggle"} >= {"rst:0->1", "rst:1->0", "q[2]:1->0"}


# No delay anywhere: the whole run is time 0 (events run out there; a model without timing)
ALU_TIME0_ONLY_TB = """\
module tb;
  reg [1:0] op;
  reg [7:0] a, b;
  wire [7:0] y;
  wire zero;
  alu dut (.op(op), .a(a), .b(b), .y(y), .zero(zero));
  initial begin
    op = 2; a = 8'hF0; b = 8'h3C;
  end
endmodule
"""


@pytest.mark.slow
def test_a_run_that_never_leaves_time_zero_counts_its_settled_values(engine):
    points = fast_equals_verilator(engine, {"alu.v": ALU}, ALU_TIME0_ONLY_TB)
    # op = 2, a = F0, b = 3C, y = a & b = 30: rises to the settled 1s only; zero (1 while y is
    # still 0) settles at 0: no point
    assert covered(points) == {
        "op[1]:0->1",
        *(f"a[{i}]:0->1" for i in range(4, 8)),
        *(f"b[{i}]:0->1" for i in range(2, 6)),
        "y[4]:0->1",
        "y[5]:0->1",
    }


DONE_DUT = """\
module dut (input logic clk, input logic rst, output logic done, output logic [3:0] cnt);
  always_ff @(posedge clk) begin
    if (rst) begin cnt <= 0; done <= 0; end
    else begin cnt <= cnt + 1; if (cnt == 4'd5) done <= 1; end
  end
endmodule
"""
# The testbench ends in the time step of `done`'s first change after time 0: the change wakes it
# and the DUT's toggle watcher alike, and it calls $finish first.
FINISH_ON_DONE_TB = """\
module tb;
  logic clk = 0, rst = 1; logic done; logic [3:0] cnt;
  dut u (.clk(clk), .rst(rst), .done(done), .cnt(cnt));
  always #5 clk = ~clk;
  initial begin
    @(posedge clk); rst <= 0;
    @(posedge done); $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_a_rise_in_the_finish_time_step_counts(engine):
    # Icarus ends a thread that calls a system function after $finish: a watcher asking
    # $realtime whether time 0 is over at done's first change would lose its rise; the
    # module's time-0 latch answers without a call
    points = fast_equals_verilator(engine, {"dut.sv": DONE_DUT}, FINISH_ON_DONE_TB, scope="u")
    names = covered(points)
    assert "done:0->1" in names and "done:1->0" not in names, sorted(names)
    assert len(names) == 10, sorted(names)
