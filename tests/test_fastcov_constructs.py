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


#: Cases whose selector's width or signedness matters: signed against negative items, a sum
#: kept wider by 32-bit items (or truncated by 2-bit ones), ``'1`` filled to the items' width,
#: a casez, a concatenation.
SELECTORS = """module sel(input logic [1:0] a, input logic [1:0] b, output int r0, r1, r2, r3, r4, r5);
  always_comb begin
    case ($signed(a)) -1: r0 = 1; -2: r0 = 2; 2'sb01: r0 = 3; 0: r0 = 4; default: r0 = 9; endcase
    case (a + b) 0: r1 = 0; 2: r1 = 2; 3: r1 = 3; 4: r1 = 4; 6: r1 = 6; default: r1 = 9; endcase
    case (a + b) 2'd0: r2 = 0; 2'd1: r2 = 1; 2'd2: r2 = 2; default: r2 = 9; endcase
    case ('1) {a, b}: r3 = 1; 4'b1111: r3 = 2; default: r3 = 9; endcase
    casez (a ^ b) 2'b1?: r4 = 1; 2'b01: r4 = 2; default: r4 = 9; endcase
    case ({a, b[0]}) 3'd0: r5 = 0; 3'd5: r5 = 5; 3'd7: r5 = 7; default: r5 = 9; endcase
  end
endmodule
"""
SELECTORS_TB = """module tb;
  logic [1:0] a, b;
  int r0, r1, r2, r3, r4, r5;
  sel dut(.*);
  initial begin
    for (int i = 0; i < 16; i++) begin
      {a, b} = i[3:0];
      #1 $display("%0d: %0d %0d %0d %0d %0d %0d", i, r0, r1, r2, r3, r4, r5);
    end
    a = 2'bx1;
    b = 2'b1z;
    #1 $display("x: %0d %0d %0d %0d %0d %0d", r0, r1, r2, r3, r4, r5);
  end
endmodule
"""


def _icarus_output(tmp_path, design: str) -> list[str]:
    import subprocess

    (tmp_path / "sel.sv").write_text(design)
    (tmp_path / "tb.sv").write_text(SELECTORS_TB)
    subprocess.run(["iverilog", "-g2012", "-o", "x.vvp", "-s", "tb", "sel.sv", "tb.sv"], cwd=tmp_path, check=True)
    run = subprocess.run(["vvp", "-n", "x.vvp"], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=30)
    return run.stdout.splitlines()


def test_two_state_case_selectors_keep_every_known_value(tmp_path):
    """The selector rewrite compares known values as the case as written does (Icarus runs
    both), and reads X/Z selector bits as 0."""
    from reward_service.fastcov import emulate
    from reward_service.fastcov.instrument import parse

    (source,), _ = parse({"sel.sv": SELECTORS})
    emulate.case_selectors_two_state(source)
    rewritten = source.apply()
    assert rewritten.count("__rs_cs") == 2 * 6
    before, after = _icarus_output(tmp_path, SELECTORS), _icarus_output(tmp_path, rewritten)
    assert before[:16] == after[:16] and len(after) == 17
    # as written, every X selector runs default ('1 is known); rewritten, X/Z bits of the
    # selector's value are 0: $signed(a) = 01, a + b (all X) = 0, a ^ b = 00, {a, b[0]} = 010
    assert (before[16], after[16]) == ("x: 9 9 9 2 9 9", "x: 3 0 0 2 9 9")
