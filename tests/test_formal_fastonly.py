"""Closure of a design Verilator rejects (issue 23): perceptron_0018, hebbian_rule_0020 and
word_change_detector_0012 assign one variable with `=` and `<=` (Verilator's BLKANDNBLK), so
no testbench scores there and the fast path is the only engine that does. The closure is then
replayed on the fast path alone and says so; any other Verilator failure still fails it."""

from __future__ import annotations

import pytest

from reward_service import ceiling

#: `q` written with `<=` in one bit and `=` in another: Verilator refuses the design.
BLK = """module blk(input clk, input d, input e, output reg [1:0] q, output reg hit);
  always @(posedge clk) begin
    q[0] <= d;
    q[1] = e;
  end
  always @(*) begin
    hit = 1'b0;
    if (q == 2'b11) hit = 1'b1;
  end
endmodule
"""


def test_only_a_compile_error_in_the_design_is_verilator_rejecting_it():
    design = {"blk.v": BLK}
    msg = "verilator rejected the design or stimulus: %Error-BLKANDNBLK: blk.v:4:5: Unsupported: ..."
    assert ceiling.rejected_by_verilator(("verilator", "compile_error", msg), design)
    # an error in the closure testbench, a runtime failure, the fast path's failure: not it
    tb = "%Error: closure_tb.sv:3:1: syntax error"
    assert not ceiling.rejected_by_verilator(("verilator", "compile_error", tb), design)
    assert not ceiling.rejected_by_verilator(("verilator", "compile_error", msg + " " + tb), design)
    assert not ceiling.rejected_by_verilator(("verilator", "runtime_error", msg), design)
    assert not ceiling.rejected_by_verilator(("fast", "compile_error", msg), design)
    assert not ceiling.rejected_by_verilator(("verilator", "compile_error", "no file named"), design)


@pytest.mark.slow
def test_a_design_verilator_rejects_is_closed_on_the_fast_path_alone(engine):
    result = ceiling.closure({"blk.v": BLK}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.reason.startswith("replayed on the fast path only: Verilator rejects the design")
    assert "BLKANDNBLK" in result.reason
    assert result.replayed_on["verilator"] is None and result.replayed_on["fast"] == "fast"
    assert set(result.not_replayed) == {"fast"} and result.not_replayed["fast"] == []
    witnessed = sum(m.witnessed for m in result.metrics.values())
    assert witnessed and result.undecided == 0, result.undecided_keys
