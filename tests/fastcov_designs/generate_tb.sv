module tb;
  reg clk = 0, rst = 1;
  reg [2:0] d = 0;
  wire [2:0] q;
  wire [1:0] m;
  gen_top dut (.clk(clk), .rst(rst), .d(d), .q(q), .m(m));
  always #5 clk = ~clk;
  initial begin
    #12 rst = 0;
    repeat (6) begin @(negedge clk); d = d + 3'd3; end
    $finish;
  end
endmodule
