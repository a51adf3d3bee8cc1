// Continuous assignments whose expression points are all set early: their checking processes
// park (fastcov/expr.py, _comb_watcher) while the inputs keep changing, in a generate loop one
// process per iteration under a generate `if` of its genvar guard. The points must stay the ones
// the reference counts, including a point no input reaches (its process never parks).
module parking_top (input logic clk, input logic a, b, input logic [1:0] s, output logic y, output logic [1:0] z,
                    output logic w, output logic q);
  assign y = a && b;
  for (genvar g = 0; g < 2; g++) begin : gp
    assign z[g] = s[g] && (a || b) && (g == 1 || !b);
  end
  // an unnamed generate block after the loop keeps its name (genblk2) beside the inserted blocks
  if (1) begin
    logic w2;
    assign w2 = a || s[1];
  end
  assign w = (a && !a) || s[0];
  always @(posedge clk) q <= y ^ w;
endmodule
