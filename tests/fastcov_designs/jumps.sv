// break/continue: Icarus 11 does not parse them, so the sample goes to Verilator (fallback).
module jumps (input clk, input [7:0] a, output reg [3:0] ones);
  integer i;
  always @(posedge clk) begin
    ones = 0;
    for (i = 0; i < 8; i = i + 1) begin
      if (!a[i]) continue;
      if (i == 7) break;
      ones = ones + 1;
    end
  end
endmodule
