"""Construct suite of the fast path (issue 5): our own small designs in tests/fastcov_designs/,
each ``<name>.sv`` (DUT, plus ``<name>_*.sv`` helper modules) with its testbench
``<name>_tb.sv`` (top ``tb``, DUT instance ``dut``). Each is scored through the engine with
``engine=fast`` and with ``engine=verilator``; their line, branch and toggle points (key and
covered state) must be equal. Designs the fast path must not instrument go to Verilator, with
the reason in the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from reward_service.fastcov.compare import diff_points

DESIGNS = Path(__file__).with_name("fastcov_designs")
METRICS = ["line", "branch", "toggle"]
NAMES = sorted(p.stem for p in DESIGNS.glob("*.sv") if not p.stem.endswith("_tb") and "_" not in p.stem)
#: Designs the fast path hands to Verilator, and the start of the reason it gives.
FALLBACK = {
    "macroarm": "the fast path could not instrument the design: macroarm.sv:6: instrumenting code inside a "
    "macro expansion",
}


def request(name: str, engine: str) -> dict:
    design = {p.name: p.read_text() for p in sorted(DESIGNS.glob(f"{name}*.sv")) if not p.stem.endswith("_tb")}
    return {
        "design": {"files": design},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": (DESIGNS / f"{name}_tb.sv").read_text()}},
        "coverage": {"scope": "dut", "metrics": METRICS},
        "engine": engine,
        "limits": {"run_s": 20},
    }


def test_suite_is_complete():
    assert {
        "branches",
        "generate",
        "subroutines",
        "loops",
        "jumps",
        "instances",
        "stops",
        "signals",
        "macros",
        "macroarm",
        "processes",
        "paramgen",
    } <= set(NAMES)
    assert all((DESIGNS / f"{n}_tb.sv").exists() for n in NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_construct_agrees_with_verilator(engine, name):
    reference_run = engine.scored(request(name, "verilator"))
    reference = reference_run.result
    assert reference.status == "ok" and reference.engine == "verilator", reference.message + reference.log[-2000:]
    fast_run = engine.scored(request(name, "fast"))
    fast = fast_run.result
    if name in FALLBACK:
        assert fast.engine == "verilator" and fast.fallback.startswith(FALLBACK[name]), fast.fallback
        return
    assert fast.status == "ok" and fast.engine == "fast", f"{fast.fallback} {fast.message} {fast.log[-2000:]}"
    assert fast.ended_by == reference.ended_by
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(30)
    assert any(not p.covered for p in reference_run.points)  # some point is uncovered: the check can fail


def _cocotb_request(engine_name: str) -> dict:
    folder = DESIGNS / "cocotb"
    return {
        "design": {"files": {"xcase.sv": (folder / "xcase.sv").read_text()}, "toplevel": "xcase"},
        "stimulus": {
            "kind": "cocotb",
            "test_module": "test_xcase",
            "runtime": "cocotb-2.1",
            "files": {"test_xcase.py": (folder / "test_xcase.py").read_text()},
        },
        "coverage": {"metrics": METRICS},
        "engine": engine_name,
        "limits": {"run_s": 60},
    }


@pytest.mark.slow
def test_x_case_selector_agrees_with_verilator(engine):
    """A case whose selector is X at time 0 (a cocotb toplevel's inputs before the test drives
    them): Verilator's selector is 0 then, so item 2'b00 runs and ``default`` never does; the
    fast path must count the same (Icarus alone would run ``default``)."""
    reference_run = engine.scored(_cocotb_request("verilator"))
    fast_run = engine.scored(_cocotb_request("fast"))
    for run in (reference_run, fast_run):
        assert run.result.status == "ok" and all(t.passed for t in run.result.tests), run.result.log[-2000:]
    assert (reference_run.result.engine, fast_run.result.engine) == ("verilator", "fast"), fast_run.result.fallback
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(30)
    case_items = {p.line: p.covered for p in fast_run.points if p.metric == "line" and p.detail == "case"}
    # y's and z's items 2'b00 ran at time 0 only; the defaults never; z's 2'b10 is never selected
    assert case_items == {
        **{15: True, 16: True, 17: True, 18: True, 19: False},
        **{26: True, 27: True, 28: False, 29: True, 30: False},
    }
