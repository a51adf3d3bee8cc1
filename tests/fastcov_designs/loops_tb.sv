module tb;
  reg clk = 0;
  reg [7:0] a = 0;
  wire [3:0] ones;
  wire [7:0] rev;
  wire done;
  loops dut (.clk(clk), .a(a), .ones(ones), .rev(rev), .done(done));
  always #5 clk = ~clk;
  initial begin
    repeat (5) begin @(negedge clk); a = a * 3 + 8'd29; end
    @(negedge clk); a = 8'hff;
    repeat (2) @(negedge clk);
    $finish;
  end
endmodule
