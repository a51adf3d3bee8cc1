// Arms that come from macros: an if expanded from a macro, and a macro statement as an arm.
// Their flags would have to go inside the macro expansion, so the sample goes to Verilator.
`define SAT_INC(r) if (r != 4'hf) r <= r + 1'b1; else r <= r;
`define CLEAR(r) r <= 4'd0;
module macroarm (input clk, output reg [3:0] q, output reg [3:0] p);
  always @(posedge clk) `SAT_INC(q)
  always @(posedge clk) if (q == 4'd3) `CLEAR(p) else p <= p + 1'b1;
endmodule
