// Loops: for, while, repeat, forever (ended by disable), do-while, foreach; each loop body is a
// block point, counted when the body completes (break/continue: see jumps.sv).
module loops (input clk, input [7:0] a, output reg [3:0] ones, output reg [7:0] rev, output reg done);
  reg [7:0] mem [0:3];
  integer i, k;
  always @(posedge clk) begin
    ones = 0;
    for (i = 0; i < 8; i = i + 1) begin
      if (a[i]) ones = ones + 1;
    end
    k = 0;
    while (k < 8) begin
      rev[7 - k] = a[k];
      k = k + 1;
    end
    repeat (2) ones = ones;
    do k = k - 1; while (k > 4);
    foreach (mem[j]) mem[j] <= a + j;
  end
  initial begin : waiter
    done = 0;
    forever begin
      @(posedge clk);
      if (a == 8'hff) disable waiter;
    end
  end
  always @(posedge clk) if (a == 8'hff) done <= 1;
endmodule
