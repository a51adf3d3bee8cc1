`timescale 1ns / 1ps
module tb;
  reg clk = 0, reset = 1;
  reg [4:0] data = 0;
  wire ATTN_CLK, ATTN_DATA, ATTN_LE;
  Attenuator uut(.clk(clk), .reset(reset), .data(data), .ATTN_CLK(ATTN_CLK), .ATTN_DATA(ATTN_DATA), .ATTN_LE(ATTN_LE));
  always #5 clk = ~clk;
  initial begin
    #20 reset = 0;
    data = 5'b00001;
    #400 $finish;
  end
endmodule
