// Expression coverage: which operators make roots and terms, and where Verilator gives up.
module operators (input logic clk, input logic a, b, c, d, e, f, g, h, i, j,
                  input logic [3:0] v, u, input logic [4:0] v5, input logic [5:0] v6,
                  input logic [31:0] v32, output logic [31:0] o, output logic [3:0] o4);
  assign o[0] = a && b || !c;                       // logical operators
  assign o[1] = (a | b) & ~c;                       // 1-bit bitwise operators
  assign o[2] = a ^ b ^ c;                          // xor trees
  assign o[3] = (a ~^ b) && (c ^~ d);               // xnor is ~(x ^ y)
  assign o[4] = a & !b;
  assign o[5] = !(a ^ b) || c;
  assign o[6] = |v && &u;                           // reductions unrolled bit by bit
  assign o[7] = ^v5;                                // 2^5 = 32 points: at the limit
  assign o[8] = ^v6;                                // 64 > 32: no points
  assign o[9] = |v32;                               // 33 > 32: no points
  assign o[10] = ~&v;                               // !(&v)
  assign o[11] = ~|v || ~^u;                        // !(|v), !(^u)
  assign o[12] = (a|b)&(c|d)&(e|f)&(g|h);           // 16 + 4 = 20 points
  assign o[13] = (a|b)&(c|d)&(e|f)&(g|h)&(i|j);     // 37 > 32: no points
  assign o[14] = a | a;                             // identical points merge
  assign o[15] = a && (c ? b : d);                  // a ?: contributes no term
  assign o[16] = (a && b) == c;                     // a root inside a comparison
  assign o[17] = a && v;                            // multi-bit operand: OR-reduced
  assign o[18] = !v;
  assign o[19] = v ? a : b;                         // ?: condition is a root
  assign o[20] = (a && b) ? c : (d ? e && f : g);   // arms are never looked into
  assign o4 = (a && b) | v;                         // inside a wide | : not covered
  assign o[21] = |a;                                // 1-bit reduction: no root
  assign o[22] = a & b & c & d & e & f & g & h & i & j;
  assign o[23] = ~(a & b);
  assign o[24] = (a ^ b) & (a ^ c);                 // contradictory terms dropped
  assign o[25] = (a & b) | (a & !b);                // redundant terms dropped
  always @(posedge clk) o[26] <= (v + u) ? a : b;
  assign o[27] = a && 1'b1;                         // a constant term
  assign o[28] = a && (b || (c && (d || e)));
  assign o[29] = !(!a);
  assign o[30] = a & (b ^ (c | d));
  assign o[31] = (v == u) ^ (v != 4'd3);
endmodule
