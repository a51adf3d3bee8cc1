module tb;
  logic clk = 0, rst = 1, up = 0, down = 0;
  logic [3:0] count;
  updown dut (.*);

  covergroup cg_ops @(posedge clk);
    cp_up: coverpoint up;
    cp_down: coverpoint down;
    cp_count: coverpoint count { bins low = {[0:3]}; bins high = {[4:15]}; }
    x_ops: cross cp_up, cp_down;
  endgroup
  cg_ops cg = new();

  always #5 clk = ~clk;
  initial begin
    @(negedge clk) rst = 0;
    up = 1;
    repeat (6) @(negedge clk);
    up = 0; down = 1;
    repeat (2) @(negedge clk);
    down = 0;
    @(negedge clk);
    $display("count=%0d", count);
    $finish;
  end
endmodule
