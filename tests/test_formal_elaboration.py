"""Branch arms ruled out by elaboration (reward_service.formal.elaboration): an ``if`` whose
condition is a parameter/genvar constant in every elaborated instance never takes its other arm.
Counterexamples first: where an instance takes the arm (another generate iteration, another
parameter set), both engines cover it and the prover must not prove it."""

from __future__ import annotations

import pytest

from reward_service.formal.prover import prove

PIPE = """module pipe #(parameter DEPTH = 1) (input clk, input [1:0] d, output [1:0] q);
  reg [2*DEPTH-1:0] st;
  genvar i;
  generate
    for (i = 0; i < DEPTH; i = i + 1) begin : stage
      always @(posedge clk) begin
        if (i == 0)
          st[i*2 +: 2] <= d;
        else
          st[i*2 +: 2] <= st[(i-1)*2 +: 2];
      end
    end
  endgenerate
  assign q = st[2*DEPTH-1 -: 2];
endmodule
"""

TWO_SETS = """module leaf #(parameter MODE = 0) (input clk, input a, output reg y);
  always @(posedge clk) begin
    if (MODE == 0) y <= a;
    else y <= ~a;
  end
endmodule
module top (input clk, input a, output y0, output y1);
  leaf #(.MODE(0)) u0 (.clk(clk), .a(a), .y(y0));
  leaf #(.MODE(1)) u1 (.clk(clk), .a(a), .y(y1));
endmodule
"""

SELECTED = """module sel #(parameter REG = 1, parameter FMT = 0) (input clk, input a, output reg y);
  generate
    if (REG == 1) begin : with_reg
      always @(posedge clk) begin
        if (FMT == 0) y <= a;
        else y <= ~a;
      end
    end else begin : without_reg
      always @(*) begin
        if (FMT == 1) y = a;
        else y = ~a;
      end
    end
  endgenerate
endmodule
"""


def _tb(top: str, ports: str, cycles: int = 8) -> str:
    return f"""module tb;
  reg clk = 0, a = 0; reg [1:0] d = 0;
  {top} dut ({ports});
  always #5 clk = ~clk;
  initial begin
    repeat ({cycles}) begin @(negedge clk); a = ~a; d = d + 1; end
    $finish;
  end
endmodule
"""


def _covered(engine, design: dict[str, str], tb: str, engine_name: str) -> set[tuple[str, int, str, str]]:
    scored = engine.scored(
        {
            "design": {"files": design},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "simulator": "verilator",
            "engine": engine_name,
            "coverage": {"scope": "dut"},
        }
    )
    assert scored.result.status == "ok", scored.result.message
    return {(p.file, p.line, p.metric, p.detail) for p in scored.points if p.count}


def test_the_other_arm_of_a_single_iterations_genvar_test_is_proved():
    result = prove({"pipe.v": PIPE})
    assert result.status == "proved", result.reason
    dead = dict(zip(result.unreachable, result.kinds, strict=True))
    assert dead.get(("pipe.v", 7, "branch", "else")) == "constant"
    assert ("pipe.v", 7, "branch", "if") not in dead


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_a_second_iteration_takes_the_else_and_nothing_is_proved(engine, engine_name):
    design = {"pipe.v": PIPE.replace("DEPTH = 1", "DEPTH = 2")}
    result = prove(design)
    assert ("pipe.v", 7, "branch", "else") not in set(result.unreachable)
    tb = _tb("pipe", ".clk(clk), .d(d), .q()")
    assert ("pipe.v", 7, "branch", "else") in _covered(engine, design, tb, engine_name)


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_two_parameter_sets_take_both_arms_and_nothing_is_proved(engine, engine_name):
    result = prove({"two.v": TWO_SETS}, top="top")
    proved = set(result.unreachable)
    assert ("two.v", 3, "branch", "if") not in proved and ("two.v", 3, "branch", "else") not in proved
    tb = _tb("top", ".clk(clk), .a(a), .y0(), .y1()")
    covered = _covered(engine, {"two.v": TWO_SETS}, tb, engine_name)
    assert {("two.v", 3, "branch", "if"), ("two.v", 3, "branch", "else")} <= covered


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_only_the_selected_generate_branch_counts_and_its_proof_holds_on_both_engines(engine, engine_name):
    """REG=1 selects with_reg, where FMT=0 rules out the else; the unselected block's `if`
    (its own constants, FMT == 1 false) proves nothing and is not a point at all."""
    result = prove({"sel.v": SELECTED})
    assert result.status == "proved", result.reason
    dead = set(result.unreachable)
    assert ("sel.v", 5, "branch", "else") in dead and ("sel.v", 5, "branch", "if") not in dead
    assert not any(k[1] == 10 for k in dead)
    tb = _tb("sel", ".clk(clk), .a(a), .y()")
    covered = _covered(engine, {"sel.v": SELECTED}, tb, engine_name)
    assert ("sel.v", 5, "branch", "if") in covered and ("sel.v", 5, "branch", "else") not in covered


def test_a_condition_with_an_unknown_bit_never_proves_the_arm_simulators_take():
    """``if (i == 1'bx)``: x is false to a simulator, which takes the else arm every time. The
    elaboration rule decides nothing on an unknown bit; the model (generate-block flags) proves
    the then-arm only."""
    rtl = PIPE.replace("if (i == 0)", "if (i == 1'bx)")
    proved = set(prove({"pipe.v": rtl}).unreachable)
    assert ("pipe.v", 7, "branch", "else") not in proved
