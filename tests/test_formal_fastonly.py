"""Closure of a design Verilator rejects (issue 23): perceptron_0018, hebbian_rule_0020 and
word_change_detector_0012 assign one variable with `=` and `<=` (Verilator's BLKANDNBLK), so
no testbench scores there and the fast path is the only engine that does. The closure is then
replayed on the fast path alone and says so; any other Verilator failure still fails it."""

from __future__ import annotations

import pytest
from conftest import cid012_rows, rtl_files

from reward_service import ceiling


def test_only_a_compile_error_in_the_design_is_verilator_rejecting_it():
    design = {"blk.v": "module blk; endmodule\n"}
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
    """perceptron_0018: its weights are written with `<=` in the reset of a clocked process and
    with `=` in a combinational one; Verilator refuses it, the fast path scores it."""
    result = ceiling.closure(rtl_files(cid012_rows()["cvdp_copilot_perceptron_0018"]), engine=engine)
    assert result.status == "ok", result.reason
    assert result.reason.startswith("replayed on the fast path only: Verilator rejects the design")
    assert "BLKANDNBLK" in result.reason
    assert result.replayed_on["verilator"] is None and result.replayed_on["fast"] == "fast"
    assert set(result.not_replayed) == {"fast"}
    assert sum(m.witnessed for m in result.metrics.values()) >= 300
    assert not result.proved_but_covered
