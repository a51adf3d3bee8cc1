// Expression coverage: how Verilator prints terms (V3Width's lowering, V3EmitV's text).
package expr_pkg;
  localparam logic [1:0] PA = 2'd2;
  typedef enum logic [1:0] {S0, S1, S2} st_t;
endpackage

module terms import expr_pkg::*; #(parameter int N = 3, parameter logic [3:0] M = 4'hA)
  (input logic clk, input logic a, b, c, input logic [3:0] v, u, input logic [7:0] w,
   input logic signed [7:0] sw, input logic signed [3:0] s4, input int iv, input st_t st2,
   output logic [31:0] o);
  localparam logic [2:0] L3 = 3'd5;
  localparam IDLE = 2'b00, RUN = 2'b01;
  typedef enum logic [2:0] {A0, A1 = 3'd4, A2} ae_t;
  typedef struct packed { logic x; logic [2:0] y; } s_t;
  logic [2:0] st;
  s_t sv;
  logic [1:0] state;
  always @(posedge clk) begin
    st <= v[2:0];
    sv.x <= u[3];
    sv.y <= u[2:0];
    state <= v[1:0];
  end
  function automatic logic fa(input logic x, input logic y); return x & ~y; endfunction
  function logic fs(input logic x); return ~x; endfunction
  // constants: resized only when their msb is clear; unsized ones are 32 bits
  assign o[0] = a && (v == 4'b1010) && (v != 'd7) && (v == '1) && (v == 1'b1) && (w == 4'hF) && (w == 2'd1);
  assign o[1] = a && (w + 1'b1 == 8'd0) && (w + 2'd1 == 8'd0) && (sw + 2'sd1 == 8'sd0) && (w - 1 == 0);
  assign o[2] = a && (sw > -2'sd1) && (sw == -1) && (w == -2'd1) && (w == ~2'd1) && (iv > 10);
  assign o[3] = a && (v == 4'bxx01) && (w == 32'hFFFF_FFFF) && (v == "A");
  // names: parameters, localparams, enum items (a package's with its prefix), package parameters
  assign o[4] = a && (st == A1) && (st2 == S2) && (state == IDLE) && (state != RUN) && (v == M) && (v[2:0] == L3) && (v[1:0] == PA);
  assign o[5] = a && sv.x && (sv.y == 3'd2) && (v == N) && (v < N - 1);
  // operators inside terms
  assign o[6] = a && ((v << 1) == w) && ((v >> a) == 4'd0) && ((v >>> 1) == 4'd0) && ((sw >>> 1) == 0) && (v * 2 == 8);
  assign o[7] = a && ({v, w} == 12'h0) && ({2{v}} == 8'h0) && (-v == 4'd1) && (~v == 4'd1) && (v ** 2 == 4) && ({a, b, c} == 3'd1);
  assign o[8] = a && ((!b) == c) && ((b ~^ c) == a) && ((a ? v : w) == 8'd3);
  assign o[9] = a && ((|v) == b) && ((~&v) == b) && ((v ==? 4'b1x0x) == b) && ((v !=? 4'b1x0x) == b);
  assign o[10] = a && (state == 2'(1)) && (int'(v) == 3) && (v == 4'(w)) && ($signed(v) < 0) && ($unsigned(sw) > 1);
  assign o[11] = a && ($countones(v) == 2) && $onehot(w) && $onehot0(u) && (v == $clog2(N));
  assign o[12] = fa(a, b) && c;                      // automatic function: a term
  assign o[13] = fs(a) && c;                         // static function: no points
  assign o[14] = a;
  assign o[15] = a && ((v + u) == 4'hF) && ((v - 1) == 0) && (M == v);
  assign o[16] = a && ((((w + w) + w) == 8'd0) || (s4 < 0));
endmodule
