// GF(2^WIDTH) multiply-accumulate with a parameterised reduction polynomial.
module gf_mac #(parameter int WIDTH = 8, parameter logic [WIDTH-1:0] POLY = 'h1B) (
  input  logic             clk,
  input  logic             rst_n,
  input  logic             en,
  input  logic             clear,
  input  logic [WIDTH-1:0] a,
  input  logic [WIDTH-1:0] b,
  output logic [WIDTH-1:0] acc,
  output logic [WIDTH-1:0] prod,
  output logic             valid
);
  function automatic logic [WIDTH-1:0] gf_mul(input logic [WIDTH-1:0] x, input logic [WIDTH-1:0] y);
    logic [WIDTH-1:0] p = '0;
    logic [WIDTH-1:0] t = x;
    for (int i = 0; i < WIDTH; i++) begin
      if (y[i]) p = p ^ t;
      if (t[WIDTH-1]) t = (t << 1) ^ POLY;
      else t = t << 1;
    end
    return p;
  endfunction

  always_comb prod = gf_mul(a, b);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      acc <= '0;
      valid <= 1'b0;
    end else if (clear) begin
      acc <= '0;
      valid <= 1'b0;
    end else if (en) begin
      acc <= acc ^ prod;
      valid <= 1'b1;
    end else begin
      valid <= 1'b0;
    end
  end
endmodule
