// Code from macros: constants, expressions and a whole statement from macros. No point needs a
// flag inside a macro expansion, so the fast path instruments it; see macroarm.sv otherwise.
`define WIDTH 4
`define RESET_VALUE 4'd2
`define NEXT(x) ((x) + 1'b1)
`define CLEAR(r) r <= `RESET_VALUE;
module macros (input clk, input rst, output reg [`WIDTH-1:0] q, output reg [`WIDTH-1:0] p);
  always @(posedge clk) begin
    if (rst) q <= `RESET_VALUE;
    else q <= `NEXT(q);
    `CLEAR(p)
  end
endmodule
