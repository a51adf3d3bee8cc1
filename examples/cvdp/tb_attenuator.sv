// Stimulus for the CVDP Attenuator: reset, idle with unchanged data, back-to-back changes,
// walking ones/zeros and all-ones/all-zeros patterns, each followed by the full
// LOAD -> SHIFT x5 -> LATCH sequence. Written by the reward-service team.
`timescale 1ns / 1ps
module tb_attenuator;
  reg clk = 1'b0;
  reg reset = 1'b1;
  reg [4:0] data = 5'b00000;
  wire ATTN_CLK, ATTN_DATA, ATTN_LE;

  Attenuator uut (
    .clk(clk), .reset(reset), .data(data),
    .ATTN_CLK(ATTN_CLK), .ATTN_DATA(ATTN_DATA), .ATTN_LE(ATTN_LE)
  );

  always #5 clk = ~clk;

  integer latches = 0;
  always @(posedge ATTN_LE) latches = latches + 1;

  // Drive a value and give the FSM time for LOAD, five SHIFTs and LATCH (clk_div2 cycles).
  task automatic send(input [4:0] value);
    begin
      @(negedge clk) data = value;
      repeat (20) @(posedge clk);
    end
  endtask

  initial begin
    repeat (4) @(posedge clk);
    reset = 1'b0;
    repeat (6) @(posedge clk);          // idle, data unchanged
    send(5'b10101);
    send(5'b10101);                     // identical data: stays in IDLE
    send(5'b01010);
    send(5'b11111);
    send(5'b00000);
    for (int i = 0; i < 5; i++) send(5'b00001 << i);
    for (int i = 0; i < 5; i++) send(~(5'b00001 << i));
    reset = 1'b1;                       // reset in the middle of a transfer
    repeat (2) @(posedge clk);
    reset = 1'b0;
    send(5'b11001);
    $display("latch pulses seen: %0d", latches);
    $finish;
  end
endmodule
