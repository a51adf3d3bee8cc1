module paramgen_leaf #(parameter int P = 0) (input logic clk, input logic [3:0] a, output logic [3:0] y);
  if (P == 1) begin : g
    logic [1:0] z;
    always_ff @(posedge clk) z <= a[1:0];
    assign y = {a[3:2], z};
  end else begin : h
    logic [3:0] w;
    assign w = ~a;
    assign y = w;
  end
endmodule
