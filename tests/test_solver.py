"""Constrained random on Verilator (issue 9.1): randomize() reaches the SMT solver inside the
sandbox (bubblewrap and Docker), the solver is part of the toolchain identity (result-cache
key), a solver that cannot be run is a sandbox_error, and unsatisfied constraints are named in
the message. Reproducers: tests/verilator_designs/alu*.sv (our own)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reward_service.cache import ResultCache, request_key
from reward_service.engine import Engine
from reward_service.models import ScoreRequest
from reward_service.sandbox import BwrapSandbox, SandboxError
from reward_service.sandbox.toolchain import host_toolchain, versions
from reward_service.sandbox.toolchain_probe import solver
from reward_service.settings import Settings
from reward_service.simulators.verilator import NO_SOLVER, check_solver

DESIGNS = Path(__file__).parent / "verilator_designs"
ALU = (DESIGNS / "alu.sv").read_text()
RAND_TB = (DESIGNS / "alu_rand_tb.sv").read_text()
UNSAT_TB = (DESIGNS / "alu_unsat_tb.sv").read_text()
TXN = re.compile(r"^RS_TXN (\d+) (\d+) (\d+) (\d+)$", re.M)


def alu_request(tb: str) -> dict:
    return {
        "design": {"files": {"alu.sv": ALU}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "engine": "verilator",
        "coverage": {"scope": "dut"},
    }


def replay_tb(txns: list[tuple[int, int, int]]) -> str:
    """The twin of alu_rand_tb.sv: the same transactions, hard-driven at the same times, no
    randomize() (so no solver)."""
    n = len(txns)
    table = lambda k: ", ".join(str(t[k]) for t in txns)  # noqa: E731
    return f"""module tb;
  logic clk = 0;
  logic [3:0] op;
  logic [7:0] a, b, y;
  alu dut (.clk(clk), .op(op), .a(a), .b(b), .y(y));
  always #5 clk = ~clk;
  logic [3:0] ops [{n}] = '{{{table(0)}}};
  logic [7:0] as_ [{n}] = '{{{table(1)}}};
  logic [7:0] bs [{n}] = '{{{table(2)}}};
  initial begin
    op = 4'd15; a = 0; b = 0;
    for (int i = 0; i < {n}; i++) begin
      op = ops[i]; a = as_[i]; b = bs[i];
      @(posedge clk);
    end
    $finish;
  end
endmodule
"""


def coverage_of(result) -> dict:
    return {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}


class SolverSandbox(BwrapSandbox):
    """bubblewrap whose toolchain has ``solver_cmd`` as its solver and no solver version (as a
    host without z3 would probe)."""

    def __init__(self, solver_cmd: str | None) -> None:
        super().__init__()
        self.solver_cmd = solver_cmd

    def toolchain(self):
        tc = super().toolchain()
        return dataclasses.replace(
            tc, solver=self.solver_cmd, versions={k: v for k, v in tc.versions.items() if k != "smt-solver"}
        )


def test_host_toolchain_has_the_solver():
    exe = shutil.which("z3")
    assert exe, "z3 is not installed (scripts/install.sh installs Debian's z3)"
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    tc = host_toolchain()
    assert tc.solver == f"{exe} --in"
    assert versions()["smt-solver"] == version == tc.versions["smt-solver"]


def test_probe_follows_verilator_solver(monkeypatch):
    monkeypatch.setenv("VERILATOR_SOLVER", "/nonexistent/z3 --in")
    assert solver() == (None, None)
    monkeypatch.setenv("VERILATOR_SOLVER", "z3 -in -smt2")
    assert solver()[0] == f"{shutil.which('z3')} -in -smt2"


def test_randomize_is_solved_and_equals_its_hard_driven_twin(engine):
    rand = engine.score(alu_request(RAND_TB))
    assert rand.status == "ok", (rand.message, rand.log[-2000:])
    assert rand.message == "" and rand.ended_by == "finish"
    txns = [tuple(map(int, m)) for m in TXN.findall(rand.log)]
    assert len(txns) == 40
    # Every randomize() succeeded and met the class constraints: the solver really ran.
    assert all(ok == 1 and op < 8 and a > 0x10 and a != b for ok, op, a, b in txns), txns
    assert len({op for _, op, _, _ in txns}) > 1
    twin = engine.score(alu_request(replay_tb([t[1:] for t in txns])))
    assert twin.status == "ok", (twin.message, twin.log[-2000:])
    assert coverage_of(rand) == coverage_of(twin)
    assert [(u.line, u.metric, u.detail) for u in rand.uncovered] == [
        (u.line, u.metric, u.detail) for u in twin.uncovered
    ]
    # What the testbench scores when randomize() fails every time (its defaults, op = 15).
    defaults = engine.score(alu_request(replay_tb([(15, 0, 0)] * 40)))
    assert defaults.coverage.metrics["line"].covered < rand.coverage.metrics["line"].covered


def test_unsatisfied_constraint_is_in_the_message(engine):
    result = engine.score(alu_request(UNSAT_TB))
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "randomize failures: 1" in result.log
    assert re.search(
        r"randomize\(\) failed: \d+ unsatisfied-constraint warning\(s\), first: tb\.sv:\d+", result.message
    ), result.message


def test_missing_solver_is_a_sandbox_error(shared_cache_dir):
    missing = Engine(
        Settings(cache_dir=shared_cache_dir, result_cache=False), sandbox=SolverSandbox("/nonexistent/z3 --in")
    )
    result = missing.score(alu_request(RAND_TB))
    assert result.status == "sandbox_error" and result.reward is None
    assert "SMT solver" in result.message and "/nonexistent/z3" in result.message, result.message


def test_a_toolchain_without_solver_never_runs_one(shared_cache_dir):
    """A toolchain whose probe found no solver (its versions, so the result-cache key, name
    none) while Verilator's default ``z3 --in`` is on the sandbox's PATH (as when the service's
    VERILATOR_SOLVER names a missing executable): the run must not use that solver, since its
    result would be stored under the key of a toolchain without one."""
    assert shutil.which("z3"), "z3 is not installed (scripts/install.sh installs Debian's z3)"
    without = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False), sandbox=SolverSandbox(None))
    assert "smt-solver" not in versions(without.sandbox)
    result = without.score(alu_request(RAND_TB))
    assert result.status == "sandbox_error" and result.reward is None, (result.status, result.message)
    assert "SMT solver" in result.message and NO_SOLVER in result.message, result.message
    assert not TXN.findall(result.log) or all(m[0] == "0" for m in TXN.findall(result.log))


def test_result_of_a_toolchain_without_solver_is_never_served(engine, shared_cache_dir, tmp_path):
    prepared = engine.prepare(ScoreRequest.model_validate(alu_request(RAND_TB)))
    without, with_solver = SolverSandbox("/nonexistent/z3 --in"), BwrapSandbox()
    assert "smt-solver" not in versions(without) and "smt-solver" in versions(with_solver)
    assert request_key(prepared.request, prepared.design, prepared.stimulus, versions(without)) != request_key(
        prepared.request, prepared.design, prepared.stimulus, versions(with_solver)
    )
    settings = Settings(cache_dir=shared_cache_dir, result_cache=True)
    engines = [Engine(settings, sandbox=sb) for sb in (without, with_solver)]
    for e in engines:  # a private result cache, the shared ccache
        e.results = ResultCache(tmp_path / "results")
    assert engines[0].score(alu_request(RAND_TB)).status == "sandbox_error"
    first, again = engines[1].score(alu_request(RAND_TB)), engines[1].score(alu_request(RAND_TB))
    assert first.status == "ok" and not first.cache.result and again.cache.result
    assert [m[0] for m in TXN.findall(first.log)] == ["1"] * 40


#: Verilator 5.48's log of a run without a solver (captured from alu_rand_tb.sv with no z3 on PATH).
NO_SOLVER_LOG = """VlRProcess::open: execvp(z3): No such file or directory
%Warning: Subprocess command `z3 --in' failed: exit status 127
%Warning: Unable to communicate with SAT solver, please check its installation or specify a different one in VERILATOR_SOLVER environment variable.
 ... Tried: $ z3 --in

RS_TXN 0 15 0 0
- tb.sv:23: Verilog $finish
"""


@pytest.mark.parametrize("limit_hit", [None, "timed_out"])
def test_solver_log_classification(limit_hit):
    with pytest.raises(SandboxError, match=r"SMT solver .*VlRProcess::open: execvp\(z3\)"):
        check_solver(NO_SOLVER_LOG, [], limit_hit=limit_hit)
    died = "%Warning: Subprocess command `/usr/bin/z3 --in' failed: Killed\n"
    notes: list[str] = []
    check_solver(died, notes, limit_hit="oom")  # the OOM kill explains it: the limit's status stands
    assert notes == []
    with pytest.raises(SandboxError, match="failed: Killed"):
        check_solver(died, notes)
    check_solver("%Warning-UNSATCONSTR: tb.sv:5: Unsatisfied constraint: 'a < 5'\n", notes)
    assert notes == [
        "randomize() failed: 1 unsatisfied-constraint warning(s), first: tb.sv:5: Unsatisfied constraint: 'a < 5'"
    ]


def test_spinning_on_a_missing_solver_is_a_sandbox_error_not_a_timeout(shared_cache_dir):
    """A testbench that retries randomize() until it succeeds spins when the solver is missing;
    it is ours (sandbox_error), not the testbench's timeout ("does it end with $finish?")."""
    spin = RAND_TB.replace("ok = t.randomize();", "do ok = t.randomize(); while (!ok);")
    assert spin != RAND_TB
    missing = Engine(
        Settings(cache_dir=shared_cache_dir, result_cache=False), sandbox=SolverSandbox("/nonexistent/z3 --in")
    )
    result = missing.score({**alu_request(spin), "limits": {"run_s": 2}})
    assert result.status == "sandbox_error" and result.reward is None, (result.status, result.message)
    assert "SMT solver" in result.message


def test_a_testbench_printing_the_solver_failure_is_not_a_sandbox_error(engine):
    """A testbench that prints Verilator's no-solver warning itself (no randomize() at all) while
    the solver works in the sandbox is scored as its twin without that line: the warning alone
    would make it a sandbox_error (reward None: a cheap way out of every low reward)."""
    forged = replay_tb([(0, 1, 2), (3, 4, 5)]).replace(
        "    $finish;",
        '    $display("%%Warning: Unable to communicate with SAT solver, please check '
        'its installation");\n    $display("VlRProcess::open: execvp(z3): nope");\n    $finish;',
    )
    assert forged != replay_tb([(0, 1, 2), (3, 4, 5)])
    result = engine.score(alu_request(forged))
    assert result.status == "ok", (result.status, result.message)
    assert "Unable to communicate with SAT solver" in result.log
    twin = engine.score(alu_request(replay_tb([(0, 1, 2), (3, 4, 5)])))
    assert coverage_of(result) == coverage_of(twin) and result.reward == twin.reward
