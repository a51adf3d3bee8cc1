module tb;
  reg clk = 0, rst_n = 0, en = 0;
  reg [3:0] a = 0;
  wire [3:0] f, g, l, s, q;
  processes dut (.clk(clk), .rst_n(rst_n), .a(a), .en(en), .f(f), .g(g), .l(l), .s(s), .q(q));
  always #5 clk = ~clk;
  initial begin
    #12 rst_n = 1;
    repeat (6) begin @(negedge clk); a = a + 4'd3; en = ~en; end
    $finish;
  end
endmodule
