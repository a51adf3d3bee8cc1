"""Benchmark and registered problems: a DUT, the testbench the prompt asks for, and the
coverage target.

- :mod:`.cvdp`: the CVDP cid012 ("testbench stimulus generation") problems;
- :mod:`.resolve`: the one rule by which a request naming a ``problem_id`` combines with its
  problem (API, engine, CLI and rescore alike);
- :mod:`.store`: registered problems (:class:`~reward_service.models.ProblemSpec`) by id, in
  memory or in Redis.
"""

from reward_service.problems.cvdp import Problem, find_toplevel, load_problems, problem_from_row

__all__ = ["Problem", "find_toplevel", "load_problems", "problem_from_row"]
