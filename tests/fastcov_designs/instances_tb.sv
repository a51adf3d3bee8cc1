module tb;
  reg clk = 0, rst = 1;
  reg [3:0] a = 0;
  wire [3:0] s0, s1;
  wire [7:0] s2;
  instances dut (.clk(clk), .rst(rst), .a(a), .s0(s0), .s1(s1), .s2(s2));
  always #5 clk = ~clk;
  initial begin
    #12 rst = 0;
    a = 4'b0001; repeat (20) @(negedge clk);
    a = 4'b0100; repeat (3) @(negedge clk);
    $finish;
  end
endmodule
