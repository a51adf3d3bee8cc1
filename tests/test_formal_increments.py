"""`++i` in a `for` step (MSHR_0003): yosys 0.23 does not read it, so the design had neither a
proof nor a witness; the formal steps write it `i = i + 1` on the same line."""

from __future__ import annotations

from reward_service.formal.increments import lower_increments
from reward_service.formal.prover import prove

INC = """module inc(input clk, input [3:0] a, output reg [3:0] q, output reg hit);
  integer i;
  always @(posedge clk) begin
    for (i = 0; i < 4; ++i) q[i] <= a[i];
  end
  always @(*) begin
    hit = 1'b0;
    if (q[0] && !q[0]) hit = 1'b1;
  end
endmodule
"""


def test_a_for_step_increment_is_lowered_on_its_line():
    text = "for (genvar i = 0; i < N; ++i) begin\n  for (integer j = 4; j > 0; j--) x++;\n"
    out = lower_increments(text)
    assert out == "for (genvar i = 0; i < N; i = i + 1) begin\n  for (integer j = 4; j > 0; j = j - 1) x++;\n"
    assert lower_increments("a = b + c;\n") == "a = b + c;\n"


def test_a_design_with_a_pre_increment_loop_is_proved():
    result = prove({"inc.v": INC})
    assert result.status == "proved", result.reason
    assert ("inc.v", 8, "branch", "if") in result.unreachable
