module tb;
  reg clk = 0;
  wire [3:0] q, p;
  macroarm dut (.clk(clk), .q(q), .p(p));
  always #5 clk = ~clk;
  initial begin repeat (5) @(negedge clk); $finish; end
endmodule
