"""Benchmark problems: a DUT, the testbench the prompt asks for, and the coverage target.

Currently the CVDP cid012 ("testbench stimulus generation") problems, see
:mod:`reward_service.problems.cvdp`.
"""

from reward_service.problems.cvdp import Problem, find_toplevel, load_problems, problem_from_row

__all__ = ["Problem", "find_toplevel", "load_problems", "problem_from_row"]
