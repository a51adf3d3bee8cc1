module tb;
  reg clk = 0;
  reg [7:0] a = 8'h5a;
  wire [3:0] ones;
  jumps dut (.clk(clk), .a(a), .ones(ones));
  always #5 clk = ~clk;
  initial begin repeat (3) @(negedge clk); $finish; end
endmodule
