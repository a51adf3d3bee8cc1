module tb;
  reg clk = 0;
  reg [7:0] a = 8'h5a;
  wire [3:0] ones, lead, odd;
  jumps dut (.clk(clk), .a(a), .ones(ones), .lead(lead), .odd(odd));
  always #5 clk = ~clk;
  initial begin
    repeat (3) @(negedge clk);
    a = 8'h00; @(negedge clk);
    a = 8'h81; @(negedge clk);
    a = 8'h0f; repeat (2) @(negedge clk);
    $display("ones=%0d lead=%0d odd=%0d", ones, lead, odd);
    $finish;
  end
endmodule
