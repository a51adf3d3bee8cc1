module tb;
  logic clk = 0; logic [3:0] a = 0; logic [3:0] y0, y1;
  paramgen dut (.clk(clk), .a(a), .y0(y0), .y1(y1));
  always #5 clk = ~clk;
  initial begin
    repeat (3) begin @(negedge clk); a = a + 4'd3; end
    $finish;
  end
endmodule
