// Rounding stage whose mode is a string parameter, as vendor-style IP often has.
module rounder #(parameter string MODE = "NEAREST", parameter int W = 8) (
  input  logic         clk,
  input  logic         en,
  input  logic [W-1:0] din,
  output logic [W-2:0] dout
);
  always_ff @(posedge clk) begin
    if (en && MODE == "NEAREST") dout <= din[W-1:1] + din[0];
    else if (en) dout <= din[W-1:1];
  end
endmodule
