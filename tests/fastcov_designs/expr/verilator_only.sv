// Expression coverage of operators Icarus cannot compile (-> <-> inside): enumeration only.
module verilator_only (input logic a, b, c, input logic [3:0] v, output logic [3:0] o);
  assign o[0] = a -> b;                             // implication: LogIf
  assign o[1] = a <-> b;                            // equivalence: LogEq
  assign o[2] = a && ((b -> c) == a) && ((b <-> c) == a);
  assign o[3] = (v inside {1, 2, [5:7]}) && a && (v === 4'bz);   // inside; a compare with z
endmodule
