// Fully decoded 2-bit cases in combinational blocks, evaluated before the cocotb test drives
// the inputs: on Icarus the selectors are X then, on Verilator 0.
module xcase (
    input  logic [1:0] sel,
    input  logic [3:0] a,
    output logic [3:0] y,
    output logic [3:0] z
);
  logic [3:0] sum;

  always_comb sum = a + {2'b00, sel};

  always @(*) begin
    case (sel)
      2'b00:   y = a;
      2'b01:   y = ~a;
      2'b10:   y = a << 1;
      2'b11:   y = a >> 1;
      default: y = 4'hf;
    endcase
  end

  // a selector computed from the inputs (X while they are)
  always_comb begin
    case (sum[1:0])
      2'b00:   z = 4'd1;
      2'b01:   z = 4'd2;
      2'b10:   z = 4'd3;
      2'b11:   z = 4'd4;
      default: z = 4'd0;
    endcase
  end
endmodule
