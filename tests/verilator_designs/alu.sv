// An 8-operation ALU, registered output: the DUT of the constrained-random reproducers.
module alu (input logic clk, input logic [3:0] op, input logic [7:0] a, b, output logic [7:0] y);
  always_ff @(posedge clk)
    case (op)
      4'd0: y <= a + b;
      4'd1: y <= a - b;
      4'd2: y <= a & b;
      4'd3: y <= a | b;
      4'd4: y <= a ^ b;
      4'd5: y <= ~a;
      4'd6: y <= a << 1;
      4'd7: y <= a >> 1;
      default: y <= 8'h00;
    endcase
endmodule
