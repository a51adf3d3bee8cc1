module tb;
  logic [7:0] din, mask;
  logic [3:0] ones;
  logic [2:0] lead;
  logic any;
  popcount dut (.din(din), .mask(mask), .ones(ones), .lead(lead), .any(any));
  initial begin
    din = 0; mask = 8'h01;
    #1 din = 8'b0000_0101;
    #1 din = 8'b1000_0000;
    #1 $display("ones=%0d lead=%0d any=%b", ones, lead, any);
    $finish;
  end
endmodule
