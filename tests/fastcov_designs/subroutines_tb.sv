module tb;
  reg clk = 0;
  reg [3:0] a = 0;
  wire [3:0] y, q;
  subroutines dut (.clk(clk), .a(a), .y(y), .q(q));
  always #5 clk = ~clk;
  initial begin
    repeat (7) begin @(negedge clk); a = a + 4'd3; end
    $finish;
  end
endmodule
