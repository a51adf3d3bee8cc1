`include "tb_cfg.svh"
module tb;
  localparam int DATA_W = `CFG_DATA_W;
  localparam int DEPTH = `CFG_DEPTH;
  logic clk = 0, rst = 1, wr_en = 0, rd_en = 0;
  logic [DATA_W-1:0] wdata = 0, rdata;
  logic full, empty;

  fifo #(.DATA_W(DATA_W), .DEPTH(DEPTH)) dut (
    .clk(clk), .rst(rst), .wr_en(wr_en), .rd_en(rd_en),
    .wdata(wdata), .rdata(rdata), .full(full), .empty(empty)
  );

  always #5 clk = ~clk;
  initial begin
    @(negedge clk) rst = 0;
    wr_en = 1;
    for (int i = 0; i < 5; i++) begin
      wdata = DATA_W'(i + 3);
      @(negedge clk);
    end
    wr_en = 0; rd_en = 1;
    repeat (2) @(negedge clk);
    rd_en = 0;
    $display("full=%b empty=%b rdata=%h", full, empty, rdata);
    $finish;
  end
endmodule
