"""The scoring engine's contract with its callers (reward_service/scoring/): the engine choice,
and a time limit of the caller's runtime leaving the engine's catch-all (``Engine(reraise=...)``,
what a Celery worker passes ``SoftTimeLimitExceeded`` to) instead of becoming an internal error."""

from __future__ import annotations

import signal
import time

import pytest

from reward_service.engine import Engine
from reward_service.engine_choice import choose_engine
from reward_service.settings import Settings

#: An Icarus run that never ends by itself (its own run-time limit is far away).
FOREVER = {
    "design": {"files": {"d.sv": "module d(input logic clk); endmodule\n"}},
    "stimulus": {
        "kind": "sv_testbench",
        "files": {"tb.sv": ("module tb; logic clk = 0; d dut(.clk(clk)); always #1 clk = ~clk; endmodule\n")},
    },
    "simulator": "icarus",
    "coverage": {"scope": "dut", "metrics": ["functional"]},
    "limits": {"run_s": 60},
}


class TimeLimit(Exception):
    """Stands for the worker runtime's soft time limit (raised from a signal handler, as
    Celery raises SoftTimeLimitExceeded from its SIGUSR1 handler)."""


def _score_with_alarm(engine: Engine, seconds: float):
    def fire(signum, frame):
        raise TimeLimit(f"soft time limit ({seconds:g} s) exceeded")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return engine.score(FOREVER)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_callers_time_limit_leaves_the_engine(shared_cache_dir):
    engine = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False), reraise=(TimeLimit,))
    start = time.monotonic()
    with pytest.raises(TimeLimit):
        _score_with_alarm(engine, 3)
    assert time.monotonic() - start < 30  # raised at the limit, not after the run's own 60 s


def test_without_reraise_it_is_an_internal_error(shared_cache_dir):
    """The same exception, not named: the catch-all reports it as ours (sandbox_error)."""
    engine = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False))
    result = _score_with_alarm(engine, 3)
    assert result.status == "sandbox_error" and result.reward is None
    assert result.message == "internal error: TimeLimit"
    # the stages it reached are timed as in any result, and it names the tools it ran with
    assert {"prepare", "toolchain", "total"} <= set(result.timings), result.timings
    assert "reward-service" in result.versions, result.versions


@pytest.mark.parametrize(
    "simulator,engine,path,on_icarus",
    [
        ("verilator", None, "verilator", False),
        ("icarus", None, "icarus", True),
        ("icarus", "fast", "fast", True),
        ("verilator", "fast", "fast", True),
        ("icarus", "auto", "auto", False),
        ("icarus", "verilator", "verilator", False),
    ],
)
def test_the_engine_choice_of_a_request(simulator, engine, path, on_icarus):
    choice = choose_engine(simulator, engine)
    assert (choice.engine, choice.path, choice.on_icarus) == (engine, path, on_icarus)
    assert choice.fast_path == (path in ("fast", "auto"))


def test_a_problems_engine_replaces_the_verilator_path_only():
    assert choose_engine("verilator", given=False, problem_engine="auto").path == "auto"
    assert choose_engine("icarus", given=False, problem_engine="auto").engine is None
    assert choose_engine("icarus", "auto", problem_engine="fast").engine == "auto"  # the request's own
