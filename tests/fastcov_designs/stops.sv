// $stop in an arm (the arm has no branch point; the other arm becomes a line point), the same
// for $error (Verilator treats it as a stop in its point model), $stop in a case item, coverage_off/coverage_on regions and coverage_block_off (no points), and disable
// of a named block.
module stops (input clk, input [3:0] a, output reg [3:0] q, output reg [3:0] r);
  always @(posedge clk) begin
    if (a == 4'd15) $stop;
    else q <= a;
    case (a)
      4'd14: $stop;
      4'd1: q <= 1;
      default: q <= q;
    endcase
  end
  always @(posedge clk) begin
    if (a == 4'd13) $error("a is 13");
    else r <= a;
  end
  /* verilator coverage_off */
  always @(posedge clk) begin
    if (a == 4'd3) r <= 0;
  end
  reg [3:0] hidden;
  /* verilator coverage_on */
  always @(posedge clk) begin
    if (a == 4'd2) begin
      // verilator coverage_block_off
      r <= 1;
    end else r <= 2;
  end
  always @(posedge clk) begin : seq
    if (a == 4'd9) disable seq;
    r <= r + 1;
  end
endmodule
