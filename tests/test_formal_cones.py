"""The small-cones-first pass of the prover's one-by-one phase (formaldeep): cone sizes on a
hand-built AIG, and a design whose easy property sits among hard ones."""

from __future__ import annotations

from reward_service.formal.aiger import Aig
from reward_service.formal.cones import cone_latches, small_cones


def _aig() -> Aig:
    # var 1: input; 2: latch a (next = input); 3: latch b (next = b); 4: latch c (next = b & a)
    # var 5 = a & b; outputs: a, a & b, c
    return Aig(inputs=1, latches=[2, 6, 10], init=[0, 0, 0], outputs=[4, 10, 8], ands=[(4, 6)])


def test_cone_latches_follow_the_next_state_functions():
    aig = _aig()
    assert cone_latches(aig, 0, 10) == 1
    assert cone_latches(aig, 1, 10) == 2
    assert cone_latches(aig, 2, 10) == 3  # c reads a and b through its next state
    assert cone_latches(aig, 2, 1) == 2  # stops past the limit


def test_small_cones_are_the_ones_within_the_limit_smallest_first():
    assert small_cones(_aig(), [2, 1, 0], 2) == [0, 1]
