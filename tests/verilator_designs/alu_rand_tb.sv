// Class-based constrained-random stimulus (issue 9.1): every transaction comes from randomize(),
// which Verilator 5.48 solves with an external SMT solver. Each applied transaction is printed
// (RS_TXN op a b) so a test can replay the same values without randomize().
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
    int ok;
    op = 4'd15; a = 0; b = 0;  // what the DUT sees when randomize() fails
    for (int i = 0; i < 40; i++) begin
      ok = t.randomize();
      if (ok) begin op = t.op; a = t.a; b = t.b; end
      $display("RS_TXN %0d %0d %0d %0d", ok, op, a, b);
      @(posedge clk);
    end
    $finish;
  end
endmodule
