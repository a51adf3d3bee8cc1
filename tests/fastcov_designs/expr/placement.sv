// Expression coverage: where Verilator counts a point: at the end of the statement list holding
// the expression -- a procedure, an if arm, a loop body (after a for loop's step), a function (on
// every return); a case item is no list, a begin block is one on 5.052 but not on 5.48 (the
// comments say 5.48's place). Blocking assignments after the expression show the difference.
module placement (input logic clk, input logic a, b, c, input logic [1:0] s, input logic [3:0] v,
                  output logic [12:0] o, output logic [3:0] q, output logic [2:0] ca,
                  output logic o_any, output logic [1:0] og);
  logic t, t2, t3, t4, p;
  integer k;
  function automatic logic f(input logic x, input logic y);
    if (x && y) return x ^ y;     // counted after this return: never
    if (!x) return 1'b0;
    return x | y;                 // the function's own list: counted on every return
  endfunction
  task automatic tk(input logic x, output logic r);
    r = x & c;
  endtask
  always @(posedge clk) begin
    t = a;
    begin o[0] <= t & b; end       // counted at the end of the always: t is ~a by then
    if (b) begin
      o[1] <= t | c;               // counted at the end of the if arm
      t = ~t;
    end else
      o[1] <= t ^ c;
    t = ~a;
  end
  always @(posedge clk) begin
    t2 = a;
    case (s)
      2'd0: o[2] <= t2 ^ b;         // a case item is no list: counted after the case
      2'd1: begin o[2] <= t2 && c; end
      default: o[2] <= !t2;
    endcase
    t2 = b;
  end
  always_comb begin
    p = 1'b0;
    for (k = 0; k < 4; k = k + 1) begin
      p = p ^ v[k];                 // counted after the step: k is one higher
    end
    o[3] = p;
  end
  always @(posedge clk) begin
    t3 = a;
    while (t3 && b) begin t3 = ~t3; o[4] <= t3 | c; end
    repeat (2) o[5] <= a & t3;
    o[6] <= f(a, b);
    tk(b, o[7]);
    if (c) if (a || b) o[8] <= 1'b1;
    if (s == 2'd3) begin
      o[9] <= a & b;
      if (a && b && c && 0) $stop;   // never runs; Verilator turns coverage off after it
      o[10] <= b | c;
    end
  end
  always @(posedge clk) begin
    t4 = a;
    do begin t4 = ~t4; end while (t4 && b);
    o[11] <= t4;
    if (a && !a) $error("never");
    o[12] <= a ^ c;                  // after $error: no points
  end
  /* verilator coverage_off */
  assign ca[0] = a && b;
  /* verilator coverage_on */
  assign ca[1] = a || (b && c);
  wire w1 = a ^ c;
  assign ca[2] = w1;
  always @(posedge clk) q <= v & {4{a}};
  logic gp, gq, gm;               // a combinational block sees settled inputs in Verilator,
  assign gp = a ^ b;              // intermediate ones (glitches) on Icarus
  assign gq = gp & c;
  assign gm = ~gq;
  always @* og[0] = (gq || gp) && (gm ^ v[0]);
  always_comb og[1] = gm && gp;
  always @(*) begin               // variables of the body block: checked inside it
    integer j;
    logic any;
    any = v[0];
    for (j = 1; j < 4; j = j + 1) any = any | v[j];
    o_any = ~any;
  end
endmodule
