// Functions and tasks: block points per function/task (counted when the body completes; a
// `return` still counts), early returns, a function with an if and a case, a task called from
// a process, a function in a continuous assignment, a constant function used for a parameter
// and at run time.
module subroutines #(parameter W = 4) (input clk, input [W-1:0] a, output [W-1:0] y, output reg [W-1:0] q);
  function automatic integer clog2(input integer v);
    integer r;
    begin
      r = 0;
      while ((1 << r) < v) r = r + 1;
      clog2 = r;
    end
  endfunction
  localparam D = clog2(W * 4);
  function automatic [W-1:0] pick(input [W-1:0] v);
    if (v == 0) return {W{1'b1}};
    case (v[1:0])
      2'd0: pick = v >> 1;
      2'd1: pick = v << 1;
      default: pick = ~v;
    endcase
  endfunction
  function [W-1:0] twice(input [W-1:0] v);
    twice = v + v;
  endfunction
  task automatic bump(inout [W-1:0] t, input [W-1:0] by);
    if (by > 4'd8) t = t - by;
    else t = t + by;
  endtask
  reg [D:0] depth;
  assign y = twice(a);
  always @(posedge clk) begin : proc
    reg [W-1:0] t;
    t = pick(a);
    bump(t, a);
    q <= t;
    depth <= clog2(a);
  end
endmodule
