"""Open (red team 12-04, 23:30): zero-width clock pulses on DUT processes that
``fastcov.emulate.edge_processes`` leaves as written. The fast path runs their body after
``clk = 1; clk = 0;`` (Icarus), Verilator does not: fast pays more. Measured fast / Verilator:
genif 1.6875 / 1.375, always_begin 1.6875 / 1.375, initial_forever 1.65 / 1.35, inner_event
1.6667 / 1.5833; at_self 1.625 / 1.6667 (the fast path misses clk's toggles: pays less). No
cid012 or cocotb-corpus design uses these styles (checked); a user's design can. Fix idea:
guard every edge event control in a DUT process (inner `@`, `initial forever`, a bare
`generate if` item) with the same shadow check, or decline such designs on the fast path."""

from __future__ import annotations

import pytest


def _dut(proc: str) -> str:
    return f"""module zw(input clk, input rst_n, input en, output reg q, output reg hit);
  reg seen = 1'b0;
{proc}
  always @(posedge clk) seen <= 1'b1;
  always @(*) begin
    hit = 1'b0;
    if (q && !seen) hit = 1'b1;
  end
endmodule
"""


def _tb(stim: str, pre: str = "") -> str:
    return (
        "module tb; reg clk = 0, rst_n = 1, en = 1; wire q, hit;\n" + pre + "  zw dut(.clk(clk), .rst_n(rst_n), "
        f".en(en), .q(q), .hit(hit));\n  initial begin {stim} #5 $finish; end\nendmodule\n"
    )


CLK = "#5 clk = 1; clk = 0;"
CASES = {
    "genif": (_dut("  generate if (1) always @(posedge clk) q <= 1'b1; endgenerate"), _tb(CLK)),
    "always_begin": (_dut("  always begin @(posedge clk); q <= 1'b1; end"), _tb(CLK)),
    "initial_forever": (_dut("  initial forever @(posedge clk) q <= 1'b1;"), _tb(CLK)),
    "inner_event": (
        _dut("  always @(posedge clk) begin @(posedge clk) q <= 1'b1; end"),
        _tb("#5 clk = 1; #5 clk = 0; #5 clk = 1; clk = 0;"),
    ),
    "at_self": (
        _dut("  always @(posedge clk) q <= 1'b1;"),
        _tb("#5 clk = 1; @(e2) clk = 0;", "  event e1, e2; always @(posedge clk) ->e2;\n"),
    ),
}


@pytest.mark.xfail(reason="open: zero-width pulses on DUT event controls edge_processes leaves as written", strict=True)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_zero_width_clock_pulse_scores_the_same_on_fast_and_verilator(engine, name: str) -> None:
    rtl, tb = CASES[name]
    rewards = {}
    for which in ("fast", "verilator"):
        request = {
            "design": {"files": {"zw.sv": rtl}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "engine": which,
            "coverage": {"scope": "dut"},
        }
        result = engine.score(request)
        assert result.status == "ok" and result.engine == which, result.message
        rewards[which] = result.reward
    assert rewards["fast"] == pytest.approx(rewards["verilator"])
