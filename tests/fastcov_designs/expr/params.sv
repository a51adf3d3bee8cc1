// Expression coverage: parameters. Unsized (untyped) ones are not OR-reduced in a boolean
// context when their value fits one bit; replication counts and +: bases use their values,
// typed the way Verilator types them.
module params #(parameter P = 3, parameter Z = 0, parameter O = 1, parameter [3:0] T = 1,
                parameter integer I = 1, parameter [3:0] Q = 2)
  (input logic clk, input logic a, b, input logic [15:0] v, output logic [31:0] o);
  localparam C1 = P - 1;
  localparam C2 = P * 2;
  localparam C3 = P;
  localparam C4 = $clog2(P + 5);
  localparam C5 = Q;
  assign o[0] = a && P;           // 3 does not fit one bit: OR-reduced over 32 bits, no points
  assign o[1] = a && Z;
  assign o[2] = a && O;
  assign o[3] = a && T;           // a sized parameter is OR-reduced
  assign o[4] = a && I;
  assign o[5] = a && 1;
  assign o[6] = a && 2;           // a constant reduces to 1'h1
  assign o[7] = a && (Z + 1);
  assign o[8] = !Z || b;
  assign o[9] = Z ? a : b;        // a 32-bit condition: no points
  assign o[10] = a && (b | O);
  assign o[11] = a && (v[1:0] == {C1{1'b1}}) && (v[5:0] == {C2{1'b1}}) && (v[2:0] == {C3{1'b1}});
  assign o[12] = a && (v[2:0] == {C4{1'b1}}) && (v[1:0] == {C5{1'b1}}) && (v[3:0] == {(P+1){1'b1}}) && (v[2:0] == {P{1'b1}});
  assign o[13] = a && (v[P*2 +: 2] == 2'd0) && (v[v[2:0]*2 +: 2] == 2'd0) && (v[P +: 2] == 2'd0);
endmodule
