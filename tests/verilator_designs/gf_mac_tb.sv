// Directed + random stimulus for gf_mac #(.WIDTH(32)) with a reference model in functions and
// tasks (issue 9.7): the inlined, unrolled reference makes Verilator split its C++ output, so the
// build uses the precompiled header (make VM_PARALLEL_BUILDS=1).
module tb;
  localparam int W = 32;
  localparam logic [W-1:0] P = 32'h0040_0007;
  logic clk = 0, rst_n = 0, en = 0, clear = 0;
  logic [W-1:0] a = '0, b = '0, acc, prod;
  logic valid;
  logic [W-1:0] model_acc = '0;
  int errors = 0;

  gf_mac #(.WIDTH(W), .POLY(P)) dut (.clk, .rst_n, .en, .clear, .a, .b, .acc, .prod, .valid);

  always #5 clk = ~clk;

  function automatic logic [W-1:0] ref_mul(input logic [W-1:0] x, input logic [W-1:0] y);
    logic [W-1:0] p = '0;
    logic [W-1:0] t = x;
    for (int i = 0; i < W; i++) begin
      if (y[i]) p ^= t;
      t = t[W-1] ? ((t << 1) ^ P) : (t << 1);
    end
    return p;
  endfunction

  task automatic mac(input logic [W-1:0] x, input logic [W-1:0] y);
    @(negedge clk);
    a = x; b = y; en = 1;
    #1;
    if (prod !== ref_mul(x, y)) begin
      errors++;
      $display("ERROR prod %h * %h = %h, expected %h", x, y, prod, ref_mul(x, y));
    end
    model_acc ^= ref_mul(x, y);
    @(negedge clk);
    en = 0;
    if (acc !== model_acc) begin
      errors++;
      $display("ERROR acc %h, expected %h", acc, model_acc);
    end
  endtask

  task automatic do_clear();
    @(negedge clk);
    clear = 1;
    @(negedge clk);
    clear = 0;
    model_acc = '0;
  endtask

  initial begin
    repeat (2) @(negedge clk);
    rst_n = 1;
    mac(32'h0000_0001, 32'h0000_0001);
    mac(32'hFFFF_FFFF, 32'h0000_0002);
    mac(32'h8000_0000, 32'h8000_0000);
    do_clear();
    for (int k = 0; k < 200; k++) mac($urandom, $urandom);
    $display("Mismatches: %0d", errors);
    $finish;
  end
endmodule
