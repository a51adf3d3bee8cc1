// Expression coverage: selects as Verilator lowers them (lsb minus the low bound, fitted to the
// bits of the high bound; ascending ranges counted from the top) and the values Icarus must read.
module selects #(parameter W = 4, parameter D = 2)
  (input logic clk, input logic a, input logic [3:0] v, input logic [7:0] w, input logic [63:0] w64,
   input logic [4:1] r41, input logic [0:3] rev, input logic [1:8] x18, input logic [2:0] i3,
   input logic [1:0] i2, output logic [31:0] o);
  logic [3:0] mem [4];
  logic [3:0] mem14 [1:4];
  logic [3:0] mem29 [2:9];
  logic [3:0] m2 [2][3];
  integer ii;
  always @(posedge clk) begin
    mem[i2] <= v;
    mem14[i2 + 1] <= v;
    mem29[i3 + 2] <= v;
    m2[i2[0]][i2] <= v;
    ii <= {28'd0, v} - 4'd2;
  end
  assign o[0] = a && v[2] && v[W-1] && (w[7:6] == 2'b01) && v[ii] && w[i3];
  assign o[1] = a && r41[v] && r41[2] && rev[1] && rev[i2] && x18[2] && x18[i3];
  assign o[2] = a && (mem[1] == 4'd3) && (mem14[2] == v) && mem[v[1:0]][0] && (mem29[3] == 4'd0) && (m2[a][i2] == 4'd0);
  assign o[3] = a && (v[3:2] == 2'b11) && (v[a +: 2] == 2'd1) && (w[v -: 3] == 3'd0) && (w[7 -: 2] == 2'd1) && (w[v +: 4] == 4'd1);
  assign o[4] = a && (w64[v*4 +: 4] == 4'd0) && (w64[v+1 +: 2] == 2'd0) && (w64[(v+D) +: 2] == 2'd0) && (w64[v*3 +: 2] == 2'd0);
  assign o[5] = a && (w64[(D-1)*W +: W] == 4'd0) && (w[W-1 +: 2] == 2'd0) && (x18[1:4] == 4'd0) && (x18[i3 +: 2] == 2'd0) && (rev[i2 -: 2] == 2'd0);
  assign o[6] = (v[3:2]) ? a : v[0];
  assign o[7] = w[7 -: 3] ? a : v[1];
  assign o[8] = mem[v[1:0]] ? a : v[2];
  assign o[9] = {a, v[0]} ? a : v[3];
  assign o[10] = a ^ v[ii];                         // index wraps at the select width
endmodule
