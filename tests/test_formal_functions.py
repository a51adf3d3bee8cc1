"""Coverage points inside functions in the formal model (issue 23, reward_service.formal.functions).

Counterexample first: a testbench may call a pure DUT function itself (`dut.f(4'b0001)`: the
integrity policy allows it), and Verilator and the fast path count the function's points then,
whatever arguments the design's own calls pass. So a point is proved unreachable only when no
argument value reaches it; the design's calls give the witnesses, replayed as usual."""

from __future__ import annotations

import json

import pytest
from conftest import cid012_rows, rtl_files
from helpers import covered_keys

from reward_service import ceiling
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove

#: The design calls f with d[0] == 0 only: line 4's `if` is never taken through it. Line 6's
#: `if` needs d == 3 with d[1] == 0: no argument reaches it.
FN = """module fn(input clk, input [2:0] a, output reg [1:0] y, output [1:0] z);
  function [1:0] f(input [3:0] d);
    begin
      if (d[0]) f = 2'd3;
      else f = d[2:1];
      if (d == 4'd3 && d[1] == 1'b0) f = 2'd0;
    end
  endfunction
  always @(posedge clk) y <= f({a, 1'b0});
  assign z = f({a[1:0], 2'b10});
endmodule
"""

#: Calls the DUT's function directly with d[0] == 1.
TB_CALL = """module tb; reg clk = 0; reg [2:0] a = 0; wire [1:0] y, z; reg [1:0] r;
fn dut(.clk(clk), .a(a), .y(y), .z(z));
initial begin #1 r = dut.f(4'b0001); #1 clk = 1; #1 clk = 0; #1 $finish; end
endmodule
"""

NEVER = {("fn.sv", 6, "branch", "if"), ("fn.sv", 6, "expr", "((d == 4'h3)==1 && (d[1] == 1'h0)==1) => 1")}


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_a_testbench_call_covers_a_function_point_the_design_never_reaches(engine, engine_name):
    scored = engine.scored(
        {
            "design": {"files": {"fn.sv": FN}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB_CALL}},
            "simulator": "verilator",
            "engine": engine_name,
            "coverage": {"scope": "dut"},
        }
    )
    assert scored.result.status == "ok", scored.result.message
    covered = covered_keys(scored)
    assert ("fn.sv", 4, "branch", "if") in covered  # only the testbench's call takes it
    proof = prove({"fn.sv": FN})
    assert proof.status == "proved", proof.reason
    assert not covered & set(proof.unreachable)
    assert ("fn.sv", 4, "branch", "if") not in proof.unreachable


def test_a_function_point_no_argument_reaches_is_proved():
    proof = prove({"fn.sv": FN})
    assert proof.status == "proved", proof.reason
    assert NEVER <= set(proof.unreachable), sorted(proof.unreachable)
    assert not [k for k in proof.unreachable if k[1] in (2, 3, 4, 5)]  # every other function point stays
    model = build_model({"fn.sv": FN})
    assert not [n for n in model.notes if "in a function" in n]


@pytest.mark.slow
def test_function_points_are_witnessed_through_the_designs_calls(engine):
    """The closure: line 4's `if` stays undecided (the design never takes it, the testbench's
    own call is not in the closure testbench); every other function point is witnessed and
    replayed; random stimulus covers no proved point."""
    design = {"fn.sv": FN}
    result = ceiling.closure(design, engine=engine)
    assert result.status == "ok", result.reason
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.proved_but_covered == []
    assert result.undecided_keys == [("fn.sv", 4, "branch", "if")], result.undecided_keys
    sound = ceiling.soundness(design, seeds=(1, 2, 3), steps=200, engine=engine)
    assert sound.status == "ok", sound.reason
    assert sound.proved > 0 and sound.covered == []


@pytest.mark.slow
def test_dual_port_memory_calc_ecc_point_is_witnessed_and_replayed(engine):
    """cid012's dual_port_memory: its one undecided point was an expression inside `calc_ecc`,
    reached with data 4'b1001 through `calc_ecc(data_in)`."""
    design = rtl_files(cid012_rows()["cvdp_agentic_dual_port_memory_0012"])
    key = ("dual_port_memory.sv", 26, "expr", "(d[0]==1 && d[1]==0 && d[3]==1) => 0")
    result = ceiling.closure(design, engine=engine)
    assert result.status == "ok", result.reason
    assert not any(result.not_replayed.values()), result.not_replayed
    assert result.proved_but_covered == []
    assert key in result.witness.claimed
    assert result.undecided == 0, json.dumps(result.to_json())


def test_a_non_ascii_comment_does_not_shift_the_rewritten_calls():
    """pyslang's offsets count bytes (dramcntrl.sv's comments have `µ`)."""
    design = {"fn.sv": "// 100 \u00b5s\n" + FN}
    witness_model = build_model(design, witness=True)
    assert "y <= f__rs_c0({a, 1'b0});" in witness_model.files["fn.sv"]
    assert "assign z = f__rs_c1({a[1:0], 2'b10});" in witness_model.files["fn.sv"]
    proof = prove(design)
    assert proof.status == "proved", proof.reason
    assert {(k[1] - 1, *k[2:]) for k in proof.unreachable if k[1] == 7} == {(6, *k[2:]) for k in NEVER}
