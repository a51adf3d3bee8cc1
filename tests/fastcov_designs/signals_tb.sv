module tb;
  reg clk = 0;
  reg [3:0] a = 0;
  int k = 0;
  wire [5:0] o;
  signals dut (.clk(clk), .a(a), .k(k), .o(o));
  always #5 clk = ~clk;
  initial begin
    repeat (9) begin @(negedge clk); a = a + 4'd5; k = k + 3; end
    $finish;
  end
endmodule
