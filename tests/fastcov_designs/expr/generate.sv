// Expression coverage in generate blocks and in several instances of one module: a loop
// gives one point per iteration when its terms name the genvar, and identical points of two
// instances are one (merged) record.
module gen_leaf (input logic a, b, input logic [3:0] v, output logic y, output logic [3:0] z);
  assign y = a && b;
  for (genvar g = 0; g < 4; g++) begin : gl
    assign z[g] = v[g] & a ^ (g == 0);
  end
endmodule

module generate_top #(parameter USE_B = 1)
  (input logic clk, input logic a, b, c, input logic [3:0] v, output logic [1:0] y, output logic [6:2] o, output logic [7:0] z, output logic oc);
  gen_leaf u0 (.a(a), .b(b), .v(v), .y(y[0]), .z(z[3:0]));
  gen_leaf u1 (.a(b), .b(c), .v(~v), .y(y[1]), .z(z[7:4]));
  if (USE_B) begin : gb
    always @(posedge clk) o[2] <= a | c;
  end else begin : gnb
    always @(posedge clk) o[2] <= a & c;
  end
  for (genvar k = 0; k < 2; k++) begin : gk
    always @(posedge clk) o[3 + k] <= v[k] && a;
    always @(posedge clk) o[5 + k] <= b || c;
  end
  assign oc = c;
endmodule
