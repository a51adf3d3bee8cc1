module tb;
  logic clk = 0, rst_n = 0;
  logic [3:0] req;
  logic [3:0] gnt;
  logic busy;
  handshake dut (.clk(clk), .rst_n(rst_n), .req(req), .gnt(gnt), .busy(busy));
  always #5 clk = ~clk;
  initial begin
    req = 0;
    repeat (2) @(posedge clk);
    rst_n = 1;
    @(negedge clk) req = 4'b0100;
    @(negedge clk) req = 4'b0110;
    @(negedge clk) req = 0;
    repeat (3) @(negedge clk);
    $display("done gnt=%b", gnt);
    $finish;
  end
endmodule
