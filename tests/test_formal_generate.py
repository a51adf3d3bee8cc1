"""Line/branch points in `begin ... end` generate blocks (issue 23, formaldeep): each flag is
declared in its block, one copy per elaborated instance of the block, and a point is proved
only when every copy is never set. Counterexample first: a loop whose copies take different
arms of `if (i == ...)` has both arms covered (on Verilator and the fast path) and neither
proved; a loop over one index proves the arm no copy takes; a block no parameter elaborates
has no copy and proves nothing."""

from __future__ import annotations

import json

import pytest

from reward_service import ceiling
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove


def _loop(n: int) -> str:
    return f"""module gl #(parameter N = {n}) (input clk, input [1:0] a, output reg [1:0] q);
  genvar i;
  for (i = 0; i < N; i = i + 1) begin : g
    always @(posedge clk)
      if (i == 1) q[i] <= a[i];
      else q[i] <= ~a[i];
  end
endmodule
"""


#: The generate-if's block exists only when M == 1 (here it never is).
OFF = """module go #(parameter M = 0) (input clk, input a, output reg q);
  if (M == 1) begin : on
    always @(posedge clk)
      if (a) q <= 1'b1;
      else q <= 1'b0;
  end else begin : off
    always @(posedge clk) q <= a;
  end
endmodule
"""


def _branches(result, line: int) -> set[tuple]:
    return {k for k in result.unreachable if k[1] == line and k[2] in ("branch", "line")}


def test_the_flags_are_declared_in_their_generate_block():
    model = build_model({"gl.sv": _loop(2)})
    text = model.files["gl.sv"]
    assert "begin : g (* keep *) reg __rs_f" in text, text
    assert not [n for n in model.notes if "in a generate block" in n and ":5 " in n], model.notes


def test_two_copies_taking_different_arms_prove_neither():
    """i = 0 takes the `else`, i = 1 the `if`: a prover that read one copy only would prove the
    other arm."""
    result = prove({"gl.sv": _loop(2)})
    assert result.status == "proved", result.reason
    assert not _branches(result, 5) and not _branches(result, 6), result.unreachable


def test_one_copy_proves_the_arm_it_never_takes():
    result = prove({"gl.sv": _loop(1)})
    assert result.status == "proved", result.reason
    assert ("gl.sv", 5, "branch", "if") in result.unreachable, result.unreachable
    assert ("gl.sv", 6, "branch", "else") not in result.unreachable


def test_a_block_no_parameter_elaborates_proves_nothing():
    """No copy of `on` exists: no output, never proved (the points are not in Verilator's
    instance either)."""
    result = prove({"go.sv": OFF})
    assert result.status == "proved", result.reason
    assert not [k for k in result.unreachable if k[1] in (4, 5)], result.unreachable


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2])
def test_the_replay_covers_no_proved_point_and_every_claim(engine, n):
    """Counterexample first on both engines: the closure replay (fast path and Verilator)
    covers every arm the two copies take, no proved point, and every claim replays."""
    result = ceiling.closure({"gl.sv": _loop(n)}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved_but_covered == []
    assert result.not_replayed == {"fast": [], "verilator": []}
    # (with N = 1, q[1] has no driver: its toggles stay undecided, x is any value)
    assert result.metrics["branch"].undecided == 0 and result.metrics["line"].undecided == 0, json.dumps(
        result.to_json()
    )
    assert result.metrics["branch"].unreachable == (1 if n == 1 else 0)
    assert result.metrics["branch"].witnessed == (1 if n == 1 else 2)


#: Expression points of a generate loop: the fast path enumerates them per copy (`c[0]`,
#: `c[1]`) and guards each copy's checks with its genvar value; `c[1]` is always 0.
GX = """module gx (input clk, input [1:0] a, output reg [1:0] q);
  wire [1:0] c = 2'b01;
  genvar i;
  for (i = 0; i < 2; i = i + 1) begin : g
    always @(posedge clk)
      if (a[i] && c[i]) q[i] <= 1'b1;
      else q[i] <= 1'b0;
  end
endmodule
"""


def test_expression_points_of_a_generate_loop_are_proved_per_copy():
    """Copy 0 covers `(a[0]==1 && c[0]==1) => 1` and the `if` arm: neither proved; copy 1's
    `(a[1]==1 && c[1]==1) => 1` and copy 0's `(c[0]==0) => 0` are."""
    result = prove({"gx.sv": GX})
    assert result.status == "proved", result.reason
    assert ("gx.sv", 6, "expr", "(a[1]==1 && c[1]==1) => 1") in result.unreachable, result.unreachable
    assert ("gx.sv", 6, "expr", "(c[0]==0) => 0") in result.unreachable
    assert ("gx.sv", 6, "expr", "(a[0]==1 && c[0]==1) => 1") not in result.unreachable
    assert ("gx.sv", 6, "branch", "if") not in result.unreachable
    assert ("gx.sv", 7, "branch", "else") not in result.unreachable


@pytest.mark.slow
def test_expression_points_of_a_generate_loop_replay(engine):
    """Counterexample first on both engines: the replay covers no proved expression point of
    the loop, every claim replays, and every expression point is classified."""
    result = ceiling.closure({"gx.sv": GX}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved_but_covered == []
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.metrics["expr"].undecided == 0, json.dumps(result.to_json())
    assert result.metrics["expr"].unreachable >= 2 and result.metrics["expr"].witnessed >= 1
