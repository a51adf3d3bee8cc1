module tb;
  reg clk = 0;
  reg [3:0] a = 0;
  wire [3:0] q, r;
  stops dut (.clk(clk), .a(a), .q(q), .r(r));
  always #5 clk = ~clk;
  initial begin
    repeat (12) begin @(negedge clk); a = a + 4'd1; end
    $finish;
  end
endmodule
