"""A load-independent reward (issue 18, item 3): ``limits.run_s``/``compile_s`` are CPU-second
budgets of the sample's steps (reward_service/sandbox/cpu.py), so the same sample gets the same
status and reward at idle and with both cores saturated by busy loops; a sample that really
exceeds its budget is a ``timeout`` at any load; a wall-clock backstop that trips while the
sample used less than its budget is ours (``sandbox_error``) unless the sample slept by itself.

The samples run real simulators. The load is four busy processes started by the test (on top
of whatever else the machine runs); "idle" is the same machine without them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reward_service.models import Limits
from reward_service.sandbox import cpu
from reward_service.sandbox.base import ExecSpec, SandboxError
from reward_service.sandbox.bwrap import BwrapSandbox
from reward_service.sandbox.cgroup import CgroupV1
from reward_service.sandbox.proctree import descendants

DUT = """module dut(input logic clk, input logic [3:0] a, output logic [3:0] y);
  always_ff @(posedge clk) y <= a + 1;
endmodule
"""
#: ~1.3 CPU s on the fast path here (800k cycles; 1.4M took 2.2 s here and 3.3 s on a CI machine,
#: past the test's 0.8 x budget); wall time at load is several times that, past what a wall
#: clock would allow.
SV_NEAR = """module tb;
  logic clk=0; logic [3:0] a=0, y;
  dut uut(.clk(clk), .a(a), .y(y));
  always #1 clk = ~clk;
  initial begin repeat (800000) begin @(posedge clk); a = a + 1; end $finish; end
endmodule
"""
SV_FOREVER = SV_NEAR.replace("repeat (800000)", "forever")
#: cocotb start-up plus one CPU second of Python (a loop on the process's CPU clock: the same
#: CPU at any load).
COCOTB_NEAR = """import time
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge


@cocotb.test()
async def drive(dut):
    Clock(dut.clk, 2, unit="ns").start()
    for value in range(16):
        dut.a.value = value
        await RisingEdge(dut.clk)
    t0 = time.process_time()
    while time.process_time() - t0 < __CPU__:
        pass
    await RisingEdge(dut.clk)
"""
COCOTB_SLEEP = COCOTB_NEAR.replace("t0 = time.process_time()", "time.sleep(1e9)\n    t0 = time.process_time()")
FAST = {
    "simulator": "verilator",
    "engine": "fast",
    "coverage": {"scope": "uut", "metrics": ["line", "branch", "toggle"]},
}


def sv_request(testbench: str, **limits) -> dict:
    return {
        "design": {"files": {"dut.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": testbench}},
        "limits": limits,
        **FAST,
    }


def cocotb_request(test: str, **limits) -> dict:
    return {
        "design": {"files": {"dut.sv": DUT}},
        "stimulus": {
            "kind": "cocotb",
            "files": {"test_drive.py": test},
            "toplevel": "dut",
            "test_module": "test_drive",
        },
        "simulator": "verilator",
        "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
        "limits": limits,
    }


@contextmanager
def busy(n: int = 4) -> Iterator[None]:
    """``n`` processes spinning on a CPU each (both cores saturated) for the block's length."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # all running before the sample starts
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def essence(result) -> tuple:
    """What must not depend on the load: status, reward, pass, coverage per metric."""
    return (
        result.status,
        result.reward,
        result.passed,
        {name: (m.covered, m.total) for name, m in result.coverage.metrics.items()},
        [(t.name, t.passed) for t in result.tests],
    )


@pytest.mark.parametrize(
    ("request_of", "run_s"),
    [
        pytest.param(lambda: sv_request(SV_NEAR, run_s=4), 4, id="sv-fast"),
        pytest.param(lambda: cocotb_request(COCOTB_NEAR.replace("__CPU__", "1.0"), run_s=6), 6, id="cocotb-verilator"),
    ],
)
def test_a_sample_near_its_limit_scores_the_same_at_idle_and_under_load(engine, request_of, run_s):
    idle = engine.score(request_of())
    assert idle.status == "ok", idle.message
    # near its limit, with margin: the sample uses a good part of its budget
    assert 0.2 * run_s * 1000 < idle.timings["run_cpu"] < 0.8 * run_s * 1000, idle.timings
    with busy():
        loaded = engine.score(request_of())
    assert essence(loaded) == essence(idle), (loaded.message, loaded.timings, idle.timings)


def test_a_sample_over_its_budget_is_a_timeout_at_idle_and_under_load(engine):
    idle = engine.score(sv_request(SV_FOREVER, run_s=1))
    with busy():
        loaded = engine.score(sv_request(SV_FOREVER, run_s=1))
    for result in (idle, loaded):
        assert result.status == "timeout" and result.ended_by == "timeout", result.message
        assert "CPU-second" in result.message and result.reward == 0
        assert 1000 <= result.timings["run_cpu"] < 1000 + 2 * cpu.STOP_GRACE_S * 1000, result.timings


def test_a_cocotb_test_that_sleeps_forever_is_its_own_timeout(engine, monkeypatch):
    """time.sleep in a cocotb test uses no CPU: the wall-clock backstop ends it, and since every
    thread of the step slept by itself it is the sample's timeout, not a sandbox_error."""
    # the default slack (4 x 3 + 30 s): cocotb's start-up (CPU, runnable) takes 9-20 s of wall
    # time at a load of 10 on 2 cores, and must be over before the backstop looks
    result = engine.score(cocotb_request(COCOTB_SLEEP.replace("__CPU__", "0"), run_s=3))
    assert result.status == "timeout" and result.reward == 0, result.message
    assert "waited without using" in result.message, result.message
    assert result.timings["run_cpu"] < 3000, result.timings


def test_a_sleeping_cocotb_test_ends_when_idle_not_at_the_backstop(engine):
    """With the default run budget (backstop minutes away), a test asleep in time.sleep (and one
    polling in time.sleep(0.1)) ends once a whole idle window (cpu.RUN_IDLE_S) passed with no
    CPU: well before the backstop, as the sample's own timeout. One such sample would otherwise
    hold its RL step for minutes."""
    backstop = cpu.wall_backstop(Limits().run_s)
    polling = COCOTB_SLEEP.replace("time.sleep(1e9)", "while True:\n        time.sleep(0.1)")
    for test in (COCOTB_SLEEP.replace("__CPU__", "0"), polling.replace("__CPU__", "0")):
        result = engine.score(cocotb_request(test))
        assert result.status == "timeout" and result.reward == 0, result.message
        assert "waited without using" in result.message, result.message
        # start-up (9-20 s of wall time at a load of 10) + at most two idle windows
        assert result.timings["run"] < min(backstop / 2, 30 + 3 * cpu.RUN_IDLE_S) * 1000, result.timings


def test_the_idle_window_needs_no_cpu_for_a_whole_window() -> None:
    """CpuBudget.idle on worked-out samples: a step that used 0.01 CPU s in 15 s is idle, one
    that used 1 s (7 % of a core) is not; windows restart after a busy one and after
    idle_restart (held by the machine)."""
    budget = cpu.CpuBudget(ExecSpec(argv=["x"], workdir=Path("/tmp"), cpu_s=10, idle_s=15))
    budget.over(0.5)
    assert not budget.idle(100.0)  # the first sample starts the window
    budget.over(0.51)
    assert not budget.idle(110.0)  # the window is not over yet
    assert budget.idle(115.0)  # 0.01 CPU s in 15 s
    budget.idle_restart(115.0)
    budget.over(1.51)
    assert not budget.idle(130.0)  # 1 CPU s in 15 s: busy, a new window starts at 130
    assert not budget.idle(140.0)
    assert budget.idle(145.0)
    assert not cpu.CpuBudget(ExecSpec(argv=["x"], workdir=Path("/tmp"), cpu_s=10)).idle(1e6)  # no idle_s


def _stop_the_first(comm: str, stopped: list[int], done: threading.Event, marker: bytes = b"") -> None:
    """SIGSTOP the first descendant of this process named ``comm`` whose command line holds
    ``marker`` (a worker frozen by its host: no CPU, not asleep by itself), as soon as it
    appears. The marker keeps it off a child this process is forking for another test (named
    python3 until it execs): stopping a vfork child before its exec hangs the parent in clone."""
    while not done.is_set() and not stopped:
        for pid in descendants(os.getpid()):
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if name == comm and marker in cmdline:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
                return
        time.sleep(0.005)


def test_a_step_held_by_the_machine_is_a_sandbox_error_never_a_timeout(engine, monkeypatch):
    """The run is stopped (SIGSTOP, as a frozen or starved worker holds it) before it used its
    CPU budget: the wall-clock backstop trips with CPU to spare and threads not asleep by
    themselves: ``sandbox_error``, reward None, nothing cached."""
    monkeypatch.setattr(cpu, "BACKSTOP_SLACK_S", 2.0)  # 4 x (1 + 4) + 2 + 3 s
    stopped: list[int] = []
    done = threading.Event()
    stopper = threading.Thread(target=_stop_the_first, args=("vvp", stopped, done))
    stopper.start()
    try:
        result = engine.score(sv_request(SV_NEAR, run_s=4, compile_s=1))
    finally:
        done.set()
        stopper.join()
    assert stopped, "the run was never seen"
    assert result.status == "sandbox_error" and result.reward is None, (result.status, result.message)
    assert "wall-clock backstop" in result.message and "stopped" in result.message, result.message


# -- the sandbox's own view ------------------------------------------------------------------

CGROUPS = [
    pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="no writable cgroup v1")),
    False,
]
#: A Python step that uses CPU seconds (argv[1]) in each of argv[2] child processes (itself when 0).
_SPIN = (
    "import os, sys, time\n"
    "def spin(s):\n"
    "    t = time.process_time()\n"
    "    while time.process_time() - t < s: pass\n"
    "kids = [os.fork() for _ in range(int(sys.argv[2]))]\n"
    "if 0 in kids or not kids: spin(float(sys.argv[1]))\n"
    "if 0 in kids: os._exit(0)\n"
    "for k in kids: os.waitpid(k, 0)\n"
    "print('done', flush=True)\n"
)


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_children_count_against_the_budget(use_cgroups):
    """Three children using 0.6 CPU s each: 1.8 s of the step's, past a 1 s budget (each
    child's own CPU is under it, so a per-process RLIMIT_CPU would not have stopped them)."""
    sandbox = BwrapSandbox(use_cgroups=use_cgroups)
    with tempfile.TemporaryDirectory() as work:
        over = sandbox.run(
            ExecSpec(argv=["python3", "-c", _SPIN, "0.6", "3"], workdir=Path(work), cpu_s=1.0, timeout_s=60)
        )
        fits = sandbox.run(
            ExecSpec(argv=["python3", "-c", _SPIN, "0.6", "3"], workdir=Path(work), cpu_s=5.0, timeout_s=60)
        )
    assert over.timed_out and not over.waited and "done" not in over.output, over
    assert over.cpu_s is not None and over.cpu_s >= 1.0
    assert not fits.timed_out and "done" in fits.output and fits.cpu_s is not None and fits.cpu_s >= 1.8, fits


def _a_stopped_step_is_a_sandbox_error(sandbox: BwrapSandbox, **spec) -> None:
    """A spinning step that another thread stops (SIGSTOP) runs to its backstop and raises
    SandboxError naming the stop: the machine held it, not the sample."""
    stopped: list[int] = []
    done = threading.Event()
    stopper = threading.Thread(target=_stop_the_first, args=("python3", stopped, done, b"process_time"))
    stopper.start()
    try:
        with tempfile.TemporaryDirectory() as work, pytest.raises(SandboxError, match="stopped"):
            sandbox.run(ExecSpec(argv=["python3", "-c", _SPIN, "3", "0"], workdir=Path(work), cpu_s=5.0, **spec))
    finally:
        done.set()
        stopper.join()
    assert stopped


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_a_stopped_step_at_its_backstop_is_a_sandbox_error(use_cgroups):
    _a_stopped_step_is_a_sandbox_error(BwrapSandbox(use_cgroups=use_cgroups), timeout_s=4)


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_an_asleep_step_ends_at_its_idle_limit_and_a_stopped_one_does_not(use_cgroups):
    """idle_s=2, backstop 60 s: ``sleep 600`` ends as waited within a few idle windows; a step
    stopped by someone else (state T: held, the machine's) uses no CPU either but is not the
    sample's to blame: it still runs to its backstop (6 s here) and is a sandbox_error."""
    sandbox = BwrapSandbox(use_cgroups=use_cgroups)
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        asleep = sandbox.run(ExecSpec(argv=["sleep", "600"], workdir=Path(work), cpu_s=5.0, idle_s=2, timeout_s=60))
        took = time.monotonic() - started
    assert asleep.timed_out and asleep.waited and asleep.exit_code == -9, asleep
    assert took < 30, took
    _a_stopped_step_is_a_sandbox_error(sandbox, idle_s=1, timeout_s=6)
