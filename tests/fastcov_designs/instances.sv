// Several instances of one module: identical points of instances with the same parameters are
// merged into one record (hierarchy `tb.dut.c*`); instances with other parameter values are
// another copy of the module in Verilator and keep their own records.
module instances (input clk, input rst, input [3:0] a, output [3:0] s0, output [3:0] s1,
                  output [7:0] s2);
  instances_counter c0 (.clk(clk), .rst(rst), .en(a[0]), .q(s0));
  instances_counter c1 (.clk(clk), .rst(rst), .en(a[1]), .q(s1));
  instances_counter #(.W(8)) wide (.clk(clk), .rst(rst), .en(a[2]), .q(s2));
endmodule
