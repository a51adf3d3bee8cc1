"""Sequential cone sizes of an AIG's outputs (issue 23, formaldeep): the prover's one-by-one
phase proves outputs with small cones first, on their own, so that an easy property (a
full case's ``default:`` over a 2-bit state) is not left undecided because it was grouped
with the hard ones of a datapath (gaussian_rounding_div_0014: 7 latches, proved in 0.01 s on
its own cone; its group of 16 proved none within the limit and was never split)."""

from __future__ import annotations

from reward_service.formal.aiger import Aig


def cone_latches(aig: Aig, output: int, limit: int) -> int:
    """The number of latches in the sequential cone of ``output`` (through latches' next-state
    functions), counting stops past ``limit`` (returns ``limit + 1``)."""
    first_latch = aig.inputs + 1
    first_and = first_latch + len(aig.latches)
    seen: set[int] = set()
    latches = 0
    stack = [aig.outputs[output] >> 1]
    while stack:
        var = stack.pop()
        if var == 0 or var in seen:
            continue
        seen.add(var)
        if var >= first_and:
            a, b = aig.ands[var - first_and]
            stack.extend((a >> 1, b >> 1))
        elif var >= first_latch:
            latches += 1
            if latches > limit:
                return limit + 1
            stack.append(aig.latches[var - first_latch] >> 1)
    return latches


def small_cones(aig: Aig, outputs: list[int], limit: int) -> list[int]:
    """The outputs of ``outputs`` whose sequential cone has at most ``limit`` latches,
    smallest first."""
    sizes = [(cone_latches(aig, o, limit), o) for o in outputs if o < len(aig.outputs)]
    return [o for size, o in sorted(sizes) if size <= limit]
