// One module, two parameter sets: a generate block (and its signal) exists under P == 1 only.
module paramgen (input logic clk, input logic [3:0] a, output logic [3:0] y0, output logic [3:0] y1);
  paramgen_leaf #(.P(0)) u0 (.clk(clk), .a(a), .y(y0));
  paramgen_leaf #(.P(1)) u1 (.clk(clk), .a(a), .y(y1));
endmodule
