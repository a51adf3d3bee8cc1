`include "alu_defs.vh"
module alu (
  input  wire [1:0]          op,
  input  wire [`ALU_W-1:0]   a,
  input  wire [`ALU_W-1:0]   b,
  output reg  [`ALU_W-1:0]   y,
  output wire                zero
);
  always @(*) begin
    case (op)
      `ALU_ADD: y = a + b;
      `ALU_SUB: y = a - b;
      `ALU_AND: y = a & b;
      default:  y = a | b;
    endcase
  end
  assign zero = (y == 0);
endmodule
