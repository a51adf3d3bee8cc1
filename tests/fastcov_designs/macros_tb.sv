module tb;
  reg clk = 0, rst = 1;
  wire [3:0] q, p;
  macros dut (.clk(clk), .rst(rst), .q(q), .p(p));
  always #5 clk = ~clk;
  initial begin #12 rst = 0; repeat (5) @(negedge clk); $finish; end
endmodule
