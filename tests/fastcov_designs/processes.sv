// Processes: initial and final blocks in the DUT, always @(*) and always_comb evaluated at time 0
// (Verilator settles combinational logic before time advances; Icarus runs always @(*) only on
// a change), always_latch, always_ff with an asynchronous reset (a level list, always @(a or en),
// keeps a design on Verilator: tests/test_zero_width_pulse_open.py).
module processes (input clk, input rst_n, input [3:0] a, input en, output reg [3:0] f, output reg [3:0] g,
                  output reg [3:0] l, output reg [3:0] s, output reg [3:0] q);
  reg [3:0] const_src;
  initial const_src = 4'd5;
  always @(*) f = const_src + 1;          // inputs never change after time 0
  always_comb g = a ^ const_src;
  always_latch if (en) l = a;
  always @* s = en ? a : 4'd0;
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) q <= 0;
    else q <= q + a;
  final if (q == 4'd15) $display("q saturated");
endmodule
