"""Every adversarial case of ../shared/cases/adversarial, asserting the service-level outcome its
CASE.md asks: the status, no hang, nothing written outside the work dir, no process left behind,
and the engine still healthy afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import ADVERSARIAL
from helpers import seconds_before_run

from reward_service.sandbox.cpu import wall_backstop

COUNTER = ADVERSARIAL / "12-hang-no-finish-zero-delay" / "dut_counter.v"


def score(engine, case: str, tb: str, simulator: str, design: Path | None = None, run_s: float = 3.0, **extra):
    d = ADVERSARIAL / case
    design = design or COUNTER
    started = time.monotonic()
    result = engine.score(
        {
            "design": {"files": {design.name: design.read_text()}},
            "stimulus": {"kind": "sv_testbench", "files": {tb: (d / tb).read_text()}},
            "simulator": simulator,
            "limits": {"run_s": run_s},
            **extra,
        }
    )
    return result, time.monotonic() - started


def healthy(engine) -> None:
    """The engine still scores a normal sample after an adversarial one."""
    tb = (ADVERSARIAL / "16-verilator-needtimingopt" / "tb_timing.sv").read_text()
    r = engine.score(
        {
            "design": {"files": {"dut_counter.v": COUNTER.read_text()}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb_timing.sv": tb}},
            "simulator": "icarus",
        }
    )
    assert r.status == "ok" and "q after 5 clocks = 5" in r.log


# -- 11: Icarus exit statuses lie --------------------------------------------------------------
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_11_many_errors_is_compile_error_despite_exit_0(isolated, simulator):
    # many_errors.v: 256 undeclared r-values -> 512 errors, iverilog exit status 512 % 256 = 0
    r, _ = score(isolated, "11-icarus-exit-codes-lie", "many_errors.v", simulator)
    assert r.status == "compile_error"
    assert "nosuch_0" in r.message
    assert r.reward == 0.0


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_11_readmem_missing_runs_and_reports_io(isolated, simulator):
    r, _ = score(isolated, "11-icarus-exit-codes-lie", "readmem_missing.v", simulator)
    assert r.status == "ok" and r.ended_by == "finish"
    if simulator == "icarus":  # Verilator only warns
        assert "Unable to open does_not_exist.hex" in r.message
    assert "mem[0] =" in r.log


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_11_error_then_finish_is_simulated_with_assertion_reported(isolated, simulator):
    r, _ = score(isolated, "11-icarus-exit-codes-lie", "error_then_finish.sv", simulator)
    assert r.status == "ok"
    assert r.ended_by == "finish"  # $error does not end the run (Verilator's error limit is lifted)
    assert "x is 3, expected 4" in r.message


def test_11_dump_unwritable_is_simulated_with_vcd_error(isolated):
    r, _ = score(isolated, "11-icarus-exit-codes-lie", "dump_unwritable.v", "icarus")
    assert r.status == "ok" and "VCD Error" in r.message


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_11_fatal_exit_ends_by_fatal(isolated, simulator):
    r, _ = score(isolated, "11-icarus-exit-codes-lie", "fatal_exit.v", simulator)
    assert r.status == "ok" and r.ended_by == "fatal"
    assert "self-check failed" in r.log


# -- 12: never-ending testbenches ----------------------------------------------------------------
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("tb", ["tb_no_finish.v", "tb_wait_forever.v"])
def test_12_hang_is_timeout_within_limit_with_coverage(isolated, simulator, tb):
    r, elapsed = score(isolated, "12-hang-no-finish-zero-delay", tb, simulator, run_s=2.0)
    assert r.status == "timeout"
    # the limit counts CPU seconds: a loaded machine stretches the wall clock (up to the backstop)
    assert elapsed < wall_backstop(2.0) + seconds_before_run(r), r.timings
    assert r.timings["run_cpu"] < (2.0 + 1.0) * 1000, r.timings
    assert r.reward == 0.0  # chorus: a timeout yields no reward
    if simulator == "verilator":  # coverage up to the kill is still reported
        assert r.ended_by == "timeout"
        assert r.coverage.metrics["line"].covered > 0 and r.coverage.overall > 0.5
    healthy(isolated)


def test_12_zero_delay_always_is_icarus_compile_error(isolated):
    r, _ = score(isolated, "12-hang-no-finish-zero-delay", "tb_zero_delay_always.v", "icarus")
    assert r.status == "compile_error"
    assert "does not have any delay" in r.message


def test_12_zero_delay_always_is_verilator_runtime_error(isolated):
    r, _ = score(isolated, "12-hang-no-finish-zero-delay", "tb_zero_delay_always.v", "verilator")
    assert r.status == "runtime_error"
    assert "DIDNOTCONVERGE" in r.message
    assert r.reward == 0.0


# -- 13: $stop at the end ---------------------------------------------------------------------
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_13_stop_ends_promptly_like_finish(isolated, simulator):
    r, elapsed = score(isolated, "13-stop-interactive-prompt", "tb_stop.v", simulator, run_s=10.0)
    assert r.status == "ok"
    # no interactive prompt, no wait for the limit (a sleeping wait would last until the wall
    # backstop, 70 s; the run itself is milliseconds of CPU, seconds of wall on a loaded machine)
    assert r.timings["run"] < 10000, r.timings
    assert "end of test after 10 cycles" in r.log
    assert r.ended_by == ("stop" if simulator == "verilator" else "finish")


# -- 15: Verilator-only rejections ---------------------------------------------------------------
@pytest.mark.parametrize("tb", ["tb_alu4.v", "tb_alu4_reworded.v"])
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_15_lint_and_metacomment_do_not_zero_the_score(isolated, simulator, tb):
    r, _ = score(
        isolated,
        "15-verilator-lint-fatal-timescale",
        tb,
        simulator,
        design=ADVERSARIAL / "15-verilator-lint-fatal-timescale" / "alu4.v",
    )
    assert r.status == "ok", r.message + r.log
    assert "errors = 0" in r.log
    if simulator == "verilator":
        assert r.coverage.overall == pytest.approx(0.95)
        assert r.reward == pytest.approx(1.95)
        if tb == "tb_alu4.v":
            assert "comment(s) starting with 'verilator'" in r.message


# -- 16: --timing always ---------------------------------------------------------------------------
@pytest.mark.parametrize("tb", ["tb_timing.sv", "tb_timing_nowait.sv"])
def test_16_verilator_always_builds_with_timing(isolated, tb):
    r, _ = score(isolated, "16-verilator-needtimingopt", tb, "verilator")
    assert r.status == "ok"
    assert "q after 5 clocks = 5 (expect 5)" in r.log
    assert r.coverage.metrics["line"].covered > 0


# -- 18: escapes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("use_system", [False, True])
def test_18_writes_and_shell_stay_in_the_sandbox(isolated, simulator, use_system, tmp_path):
    d = ADVERSARIAL / "18-sandbox-file-and-shell-escape"
    for probe in ("/tmp/escape_abs.txt",):
        Path(probe).unlink(missing_ok=True)
    tb = (d / "tb_escape.sv").read_text()
    if use_system:
        tb = "`define USE_SYSTEM\n" + tb
    r = isolated.score(
        {
            "design": {"files": {"dut_stub.sv": (d / "dut_stub.sv").read_text()}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb_escape.sv": tb}},
            "simulator": simulator,
            "limits": {"run_s": 5},
        }
    )
    assert not Path("/tmp/escape_abs.txt").exists()
    assert not list(tmp_path.parent.glob("escape_*"))
    assert "READ /etc/hostname" not in r.log  # the host's /etc/hostname is not visible
    if use_system and simulator == "icarus":
        assert r.status == "ok" or r.status == "runtime_error"
        assert "$system() is not defined" in r.log
    elif use_system:
        assert r.status == "ok"
        assert "uid=0" not in r.log
    else:
        assert r.status == "ok"


# -- 19: output floods ---------------------------------------------------------------------------
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_19_flood_is_capped_and_stopped(isolated, simulator):
    r, elapsed = score(isolated, "19-runaway-output-flood", "tb_flood.v", simulator, run_s=3.0)
    # Icarus' VCD dump hits the per-file size limit first; Verilator (no --trace) runs to the limit.
    assert r.status in ("timeout", "resource_limit")
    assert len(r.log.encode()) <= 256 * 1024 + 200
    assert "bytes of output dropped" in r.log
    if simulator == "verilator":
        assert r.status == "timeout" and r.coverage.metrics["toggle"].covered > 0


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_19_zero_time_flood_is_killed_at_the_time_limit(isolated, simulator):
    r, elapsed = score(isolated, "19-runaway-output-flood", "tb_flood_zero_time.v", simulator, run_s=2.0)
    assert r.status == "timeout"
    assert r.timings["run_cpu"] < (2.0 + 1.0) * 1000, r.timings  # CPU seconds: the wall clock varies with load
    assert "bytes of output dropped" in r.log
    healthy(isolated)
