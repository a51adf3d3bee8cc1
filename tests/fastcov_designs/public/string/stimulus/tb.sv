module tb;
  logic clk = 0, en = 0;
  logic [7:0] din = 0;
  logic [6:0] dout;
  string phase;
  rounder dut (.clk(clk), .en(en), .din(din), .dout(dout));
  always #5 clk = ~clk;
  initial begin
    phase = "reset";
    @(negedge clk);
    phase = "run";
    en = 1;
    for (int i = 0; i < 6; i++) begin
      din = 8'(i * 37);
      @(negedge clk);
      $display("%s din=%0d dout=%0d", phase, din, dout);
    end
    $finish;
  end
endmodule
