// Population count and leading-one position over a parameterised vector.
module popcount #(parameter int W = 8) (
  input  logic [W-1:0]         din,
  input  logic [W-1:0]         mask,
  output logic [$clog2(W+1)-1:0] ones,
  output logic [$clog2(W)-1:0] lead,
  output logic                 any
);
  always_comb begin
    ones = '0;
    lead = '0;
    foreach (din[i]) begin
      if (din[i] && !mask[i]) begin
        ones = ones + 1'b1;
        lead = i[$clog2(W)-1:0];
      end
    end
  end
  assign any = |din;
endmodule
