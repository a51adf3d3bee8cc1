// Constrained random with an unsatisfiable inline constraint on the 5th call (a > 8'h10 and
// a < 8'h05): that randomize() returns 0, the others succeed (issue 9.1, "randomize() failed").
class alu_txn;
  rand bit [3:0] op;
  rand bit [7:0] a, b;
  constraint c_op { op < 8; }
  constraint c_ab { a > 8'h10; a != b; }
endclass

module tb;
  logic clk = 0;
  logic [3:0] op;
  logic [7:0] a, b, y;
  alu dut (.clk(clk), .op(op), .a(a), .b(b), .y(y));
  always #5 clk = ~clk;
  initial begin
    alu_txn t = new();
    int ok, failures = 0;
    op = 4'd15; a = 0; b = 0;
    for (int i = 0; i < 10; i++) begin
      ok = (i == 4) ? t.randomize() with { a < 8'h05; } : t.randomize();
      if (ok) begin op = t.op; a = t.a; b = t.b; end
      else failures++;
      @(posedge clk);
    end
    $display("randomize failures: %0d", failures);
    $finish;
  end
endmodule
