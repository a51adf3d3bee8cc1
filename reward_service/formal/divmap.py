"""Division and remainder by zero in the formal models: a yosys techmap both the one-edge proof
(:mod:`.prover`) and the every-input-free proof (:mod:`.ticks_proof`) run once after ``prep``.

yosys's divider gives all ones for ``a / 0``, Verilator 0 and Icarus ``x``: a point reached only
through a zero divisor (``if (b == 0 && a / b == 0)``) was proved unreachable while Verilator
covers it. The result is a free choice there (``$anyseq``), as an ``x`` is; the witness search
ties it to 0, Verilator's value. Applied with ``techmap -max_iter 1``: the inner cell is not
mapped again."""

from __future__ import annotations


def techmap_command(path: str) -> str:
    """The yosys command that applies :data:`DIV_MAP_TEXT`, written to the file ``path``."""
    return f"techmap -max_iter 1 -map {path} t:$div t:$mod"


DIV_MAP_TEXT = "\n".join(
    f"""(* techmap_celltype = "${op}" *)
module _rs_{op} (A, B, Y);
  parameter A_SIGNED = 0;
  parameter B_SIGNED = 0;
  parameter A_WIDTH = 1;
  parameter B_WIDTH = 1;
  parameter Y_WIDTH = 1;
  input [A_WIDTH-1:0] A;
  input [B_WIDTH-1:0] B;
  output [Y_WIDTH-1:0] Y;
  wire [Y_WIDTH-1:0] y, any;
  \\${op} #(.A_SIGNED(A_SIGNED), .B_SIGNED(B_SIGNED), .A_WIDTH(A_WIDTH), .B_WIDTH(B_WIDTH), .Y_WIDTH(Y_WIDTH))
    op (.A(A), .B(B), .Y(y));
  \\$anyseq #(.WIDTH(Y_WIDTH)) by_zero (.Y(any));
  assign Y = (B == 0) ? any : y;
endmodule
"""
    for op in ("div", "mod")
)
