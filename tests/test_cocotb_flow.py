"""The cocotb flow (reward_service.simulators.cocotb_flow) against the real simulators, in the
bubblewrap sandbox: CVDP cocotb stimulus on Icarus and Verilator (coverage exactly as in
expected.json, the DUT model built once per design), HDL ``$finish`` while the test awaits,
cocotb-coverage export, and a test that tries to write outside its run dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ADVERSARIAL, STIMULUS, cid012_rows, rtl_files

from reward_service.coverage import parse_coverage_dat, parse_functional_yaml, summarise
from reward_service.fastcov.unit import TOKEN_PLACEHOLDER
from reward_service.models import Limits
from reward_service.sandbox import BwrapSandbox
from reward_service.simulators import cocotb_flow, get_simulator, icarus
from reward_service.simulators.base import Job, SimRun
from reward_service.simulators.cocotb_flow import parse_results_xml
from reward_service.simulators.verilator import cocotb_build_args, cocotb_model_key

CVDP = ["cvdp_copilot_fixed_arbiter_0004", "cvdp_copilot_gray_to_binary_0014"]
SIMS = ["icarus", pytest.param("verilator", marks=pytest.mark.slow)]
METRICS = ["line", "branch", "toggle", "expr"]
#: The run limit of a job unless a test sets its own: far above a run's length. cocotb's own
#: start-up and shutdown alone made 9 s runs at a load of 7 and 16 s at 10 on 2 cores; the
#: default limit (30 s) would turn such a run into a timeout.
RUN_S = 120


def make_job(
    root: Path,
    design: dict[str, str],
    stimulus: dict[str, str],
    toplevel: str,
    test_module: str,
    cache_dir: Path,
    **limits,
) -> Job:
    (root / "src").mkdir(parents=True)
    for name, text in {**design, **stimulus}.items():
        (root / "src" / name).write_text(text)
    return Job(
        root=root,
        design_files=list(design),
        stimulus_files=list(stimulus),
        limits=Limits(**{"run_s": RUN_S, **limits}),
        sandbox=BwrapSandbox(),
        cache_dir=cache_dir,
        toplevel=toplevel,
        test_module=test_module,
        seed=1,
    )


def cvdp_job(root: Path, problem_id: str, cache_dir: Path) -> tuple[Job, dict]:
    expected = json.loads((STIMULUS / problem_id / "expected.json").read_text())
    cocotb = expected["cocotb"]
    stimulus = {cocotb["file"]: (STIMULUS / problem_id / cocotb["file"]).read_text()}
    design = rtl_files(cid012_rows()[problem_id])
    assert set(design) == set(expected["rtl_files"])
    return make_job(root, design, stimulus, cocotb["hdl_toplevel"], cocotb["test_module"], cache_dir), expected


def run_cocotb(job: Job, simulator: str) -> SimRun:
    """The cocotb flow on ``simulator`` ("icarus", "verilator"), as the engine runs it."""
    return get_simulator(simulator).run_cocotb(job)


def model_key(job: Job) -> str:
    """The key of ``job``'s cached Verilator cocotb model."""
    return cocotb_model_key(job, cocotb_build_args(job))


def icarus_model_key(job: Job) -> str:
    """The key of ``job``'s cached Icarus cocotb build."""
    return icarus.cocotb_model_key(job, icarus.build_options(job))


def log_of(out: SimRun) -> str:
    return "\n".join(r.output[-3000:] for r in (out.build, out.run) if r is not None)


def code_coverage(out: SimRun, design_files) -> dict:
    points = parse_coverage_dat(out.coverage_dat, dut_files=set(design_files))
    report, _ = summarise(points, METRICS)
    return {m: {"covered": c.covered, "total": c.total} for m, c in report.metrics.items()}


# ---------------------------------------------------------------------------------------------
# CVDP stimulus


@pytest.mark.parametrize("problem_id", CVDP)
def test_icarus_cvdp_tests_pass_as_expected(tmp_path, shared_cache_dir, problem_id):
    job, expected = cvdp_job(tmp_path / "job", problem_id, shared_cache_dir)
    out = run_cocotb(job, "icarus")
    assert not out.build_failed, log_of(out)
    assert out.results_xml is not None, log_of(out)
    tests = parse_results_xml(out.results_xml)
    assert len(tests) == expected["cocotb"]["tests"]
    assert sum(not t.passed for t in tests) == expected["cocotb"]["failed"], tests
    assert all(t.sim_time_ns and t.sim_time_ns > 0 for t in tests)
    assert out.ended_by == "finish"
    assert out.coverage_dat is None and out.functional == []
    assert out.build is not None and out.run is not None and not out.run.limit_hit


@pytest.mark.slow
@pytest.mark.parametrize("problem_id", CVDP)
def test_verilator_cvdp_coverage_matches_expected(tmp_path, shared_cache_dir, problem_id):
    job, expected = cvdp_job(tmp_path / "first", problem_id, shared_cache_dir)
    out = run_cocotb(job, "verilator")
    assert not out.build_failed, log_of(out)
    assert out.coverage_dat is not None and out.results_xml is not None, log_of(out)
    assert code_coverage(out, job.design_files) == expected["cocotb"]["coverage"]
    tests = parse_results_xml(out.results_xml)
    assert len(tests) == expected["cocotb"]["tests"]
    assert sum(not t.passed for t in tests) == expected["cocotb"]["failed"]
    assert out.ended_by == "finish"

    # A second sample of the same design reuses the model and measures the same.
    again, _ = cvdp_job(tmp_path / "second", problem_id, shared_cache_dir)
    out2 = run_cocotb(again, "verilator")
    assert out2.build_cached and not out2.build_failed, log_of(out2)
    assert out2.build.exit_code == 0
    assert code_coverage(out2, again.design_files) == expected["cocotb"]["coverage"]
    key = model_key(again)
    assert (shared_cache_dir / "models" / key / expected["cocotb"]["hdl_toplevel"]).is_file()


def _tamper_test(find_paths: str) -> str:
    """A cocotb test that fails if it can append to any of the ``paths`` its ``find_paths``
    lines (test-body code) set."""
    return (
        "import os, cocotb\nfrom cocotb.triggers import Timer\n\n"
        "@cocotb.test()\nasync def tamper(dut):\n" + find_paths + "    for path in paths:\n"
        "        try:\n"
        "            with open(path, 'a') as fh:\n"
        "                fh.write('x')\n"
        "        except OSError:\n"
        "            continue\n"
        "        raise AssertionError(f'wrote {path}')\n"
        "    await Timer(1, unit='ns')\n"
    )


@pytest.mark.slow
def test_verilator_model_is_read_only_in_run_step(tmp_path, shared_cache_dir):
    """The simulation step (untrusted Python) cannot modify the cached model."""
    design = {
        "dut.sv": "module dut(input logic clk, output logic q);\n  always_ff @(posedge clk) q <= ~q;\nendmodule\n"
    }
    test = _tamper_test("    paths = ['/model/dut', '/model/evil', '/rs/cocotb_driver.py']\n")
    job = make_job(tmp_path / "job", design, {"test_tamper.py": test}, "dut", "test_tamper", shared_cache_dir)
    out = run_cocotb(job, "verilator")
    tests = parse_results_xml(out.results_xml)
    assert [t.passed for t in tests] == [True], (tests, log_of(out))
    key = model_key(job)
    assert sorted(p.name for p in (shared_cache_dir / "models" / key).iterdir()) == ["dut", "rs_model.json"]


@pytest.mark.slow
def test_concurrent_samples_build_the_model_once(tmp_path, shared_cache_dir):
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    design = {
        "dut.sv": f"// {uuid.uuid4()}\nmodule dut(input logic clk, output logic q);\n"
        "  always_ff @(posedge clk) q <= ~q;\nendmodule\n"
    }
    test = (
        "import cocotb\nfrom cocotb.triggers import Timer\n\n"
        "@cocotb.test()\nasync def t(dut):\n    await Timer(1, unit='ns')\n"
    )
    jobs = [
        make_job(tmp_path / f"job{i}", design, {"test_c.py": test}, "dut", "test_c", shared_cache_dir) for i in range(3)
    ]
    with ThreadPoolExecutor(3) as pool:
        outs = list(pool.map(lambda j: run_cocotb(j, "verilator"), jobs))
    assert all(o.results_xml is not None for o in outs), [log_of(o) for o in outs]
    assert sorted(o.build_cached for o in outs) == [False, True, True]


# ---------------------------------------------------------------------------------------------
# Icarus and fast-path builds: cached per design, as Verilator's model

CACHE_DUT = """module ctr(input logic clk, input logic rst, input logic en, output logic [3:0] q,
           output logic wrap);
  always_ff @(posedge clk)
    if (rst) q <= 4'd0;
    else if (en) q <= q + 4'd1;
  assign wrap = en && q == 4'hf;
endmodule
"""
#: the same design counting by two: test B's ``q == 3`` fails on it
CACHE_DUT_BY_TWO = CACHE_DUT.replace("q + 4'd1", "q + 4'd2")

CACHE_TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

@cocotb.test()
async def count(dut):
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    dut.en.value = 0
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    dut.en.value = 1
    for _ in range({cycles}):
        await RisingEdge(dut.clk)
    dut.en.value = 0
    await RisingEdge(dut.clk)
    await Timer(1, unit="ns")
    assert int(dut.q.value) == {expected}, int(dut.q.value)
"""
#: two tests of one design (two rollouts of one problem): A wraps the counter, B does not
TEST_A = CACHE_TEST.format(cycles=20, expected=20 % 16)
TEST_B = CACHE_TEST.format(cycles=3, expected=3)


def cache_request(engine: str, test: str, design: str = CACHE_DUT, defines: dict | None = None) -> dict:
    """A cocotb request of the counter on ``engine`` ("icarus" or "fast")."""
    return {
        "design": {"files": {"ctr.sv": design}, "toplevel": "ctr"},
        "stimulus": {"kind": "cocotb", "files": {"test_ctr.py": test}, "test_module": "test_ctr"},
        "coverage": {"metrics": METRICS},
        "limits": {"run_s": RUN_S},
        "build": {"defines": defines or {}},
        **({"engine": "fast"} if engine == "fast" else {"simulator": "icarus"}),
    }


def outcomes(result) -> list[tuple[str, bool]]:
    return [(t.name, t.passed) for t in result.tests]


@pytest.mark.parametrize("engine", ["icarus", "fast"])
def test_icarus_build_is_cached_per_design(tmp_path, engine):
    """A second sample of a design with another test reuses the first one's build (cache.build)
    and measures what an uncached run of it does; a changed design text or define builds anew."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    cache = tmp_path / "cache"
    scorer = Engine(Settings(cache_dir=cache, result_cache=False, work_root=tmp_path))

    def published() -> list[Path]:
        return sorted(p for p in (cache / "models").iterdir() if p.is_dir())

    first = scorer.score(cache_request(engine, TEST_A))
    assert first.status == "ok" and first.engine == engine and first.fallback is None, first.message + first.log
    assert not first.cache.build and outcomes(first) == [("count", True)]
    assert len(published()) == 1
    model = published()[0]
    assert sorted(p.name for p in model.iterdir()) == ["rs_model.json", "sim.vvp"]
    vvp = (model / "sim.vvp").read_text(errors="replace")
    # the fast path's cached build keeps its build placeholder (never the public one, which a
    # design could make): each run stamps its own token
    assert TOKEN_PLACEHOLDER not in vvp and ("__RS_FC_" in vvp) == (engine == "fast")

    second = scorer.score(cache_request(engine, TEST_B))
    assert second.status == "ok" and second.cache.build, second.message + second.log
    assert second.timings["build"] < 50  # a look-up, no sandbox step
    uncached = Engine(Settings(cache_dir=tmp_path / "fresh", result_cache=False, work_root=tmp_path))
    reference = uncached.score(cache_request(engine, TEST_B))
    assert reference.status == "ok" and not reference.cache.build
    assert outcomes(second) == outcomes(reference) == [("count", True)]
    assert second.coverage == reference.coverage
    if engine == "fast":  # the cached build measures its own run, not the first one's
        assert second.coverage.metrics["toggle"].covered < first.coverage.metrics["toggle"].covered
    assert published() == [model]
    if scorer.sandbox.toolchain().cocotb19_python:  # one build serves both runtimes
        legacy = (
            CACHE_TEST.format(cycles=5, expected=5)
            .replace('unit="ns"', 'units="ns"')
            .replace(
                'Clock(dut.clk, 10, units="ns").start()', 'cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())'
            )
        )
        old = scorer.score(cache_request(engine, legacy))
        assert old.status == "ok" and old.engine == engine and "ran on cocotb 1.9" in old.message, old.message
        assert old.cache.build and outcomes(old) == [("count", True)]
        assert published() == [model]

    # a changed design text is another build: counting by two fails test B (a stale build passes)
    changed = scorer.score(cache_request(engine, TEST_B, design=CACHE_DUT_BY_TWO))
    assert not changed.cache.build and outcomes(changed) == [("count", False)], changed.message
    # a define (even one the design does not read) is part of the build's key
    defined = scorer.score(cache_request(engine, TEST_B, defines={"RS_UNUSED": "1"}))
    assert defined.status == "ok" and defined.engine == engine and not defined.cache.build, defined.message
    assert len(published()) == 3
    again = scorer.score(cache_request(engine, TEST_A, defines={"RS_UNUSED": "1"}))
    assert again.cache.build and outcomes(again) == [("count", True)]
    assert len(published()) == 3


def test_icarus_model_key_covers_the_build_inputs(tmp_path):
    """The Icarus build's key changes with every input of the build: design text, an included
    file's text, toplevel, defines, parameters, include dirs, the fast path's variant."""
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "wrap.sv").write_text('`include "sub/core.vh"\n' + CACHE_DUT)
    (tmp_path / "src" / "sub" / "core.vh").write_text("localparam int K = 1;\n")

    def key(variant: dict | None = None, **fields) -> str:
        job = Job(
            root=tmp_path,
            design_files=["wrap.sv"],
            stimulus_files=["test_ctr.py"],
            limits=Limits(),
            sandbox=BwrapSandbox(),
            cache_dir=tmp_path,
            include_files=["sub/core.vh"],
            **{"toplevel": "ctr", **fields},
        )
        return icarus.cocotb_model_key(job, icarus.build_options(job), variant)

    base = key()
    assert key() == base
    others = {
        key(toplevel="other"),
        key(defines={"X": None}),
        key(defines={"X": "1"}),
        key(parameters={"W": "8"}),
        key(include_dirs=["sub"]),
        key({"fastcov": "1"}),
        key({"fastcov": "2"}),
    }
    assert len(others) == 7 and base not in others
    (tmp_path / "src" / "sub" / "core.vh").write_text("localparam int K = 2;\n")
    changed_header = key()
    (tmp_path / "src" / "wrap.sv").write_text('`include "sub/core.vh"\n' + CACHE_DUT_BY_TWO)
    assert len({base, changed_header, key()}) == 3
    (tmp_path / "src" / "test_ctr.py").write_text("# another test: the same build\n")
    assert key() == key()


def _slow_to_build_dut(stages: int) -> str:
    """A DUT whose iverilog build takes about ``stages`` / 20000 CPU seconds: a chain of
    ``stages`` continuous assignments from input ``a`` to output ``y``."""
    chain = "\n".join(f"  assign w[{i + 1}] = (w[{i}] ^ {i}) + (w[{i}] >> 1);" for i in range(stages))
    return (
        "module dut(input clk, input [31:0] a, output [31:0] y);\n"
        f"  wire [31:0] w [0:{stages}];\n  assign w[0] = a;\n{chain}\n  assign y = w[{stages}];\nendmodule\n"
    )


def test_icarus_build_failures_are_not_cached(tmp_path):
    """A build that failed on the sources or hit its time limit publishes nothing; the next
    sample of the design builds again."""
    cache = tmp_path / "cache"
    bad = make_job(
        tmp_path / "bad",
        {"dut.sv": "module dut(input clk);\n  wire x = ;\nendmodule\n"},
        {"test_x.py": "import cocotb\n"},
        "dut",
        "test_x",
        cache,
    )
    out = run_cocotb(bad, "icarus")
    assert out.build_failed and not out.build_cached
    # ~1 CPU second of iverilog (elaboration of a 20000-stage chain), 20x its limit: a build
    # that ends on its own before the budget is judged would not be a timeout
    slow_dut = _slow_to_build_dut(20000)
    slow = make_job(
        tmp_path / "slow",
        {"dut.sv": slow_dut},
        {"test_x.py": "import cocotb\n"},
        "dut",
        "test_x",
        cache,
        compile_s=0.05,
    )
    out = run_cocotb(slow, "icarus")
    assert out.build_failed and out.build.timed_out and not out.build_cached
    assert not [p for p in (cache / "models").iterdir() if p.is_dir()]
    again = make_job(tmp_path / "again", {"dut.sv": slow_dut}, {"test_x.py": "import cocotb\n"}, "dut", "test_x", cache)
    out = run_cocotb(again, "icarus")
    assert not out.build_failed and not out.build_cached, log_of(out)
    assert (cache / "models" / icarus_model_key(again) / "sim.vvp").is_file()


@pytest.mark.parametrize("engine", ["icarus", "fast"])
def test_icarus_model_is_read_only_in_run_step(tmp_path, engine):
    """The test step (untrusted Python) can change neither the cached build nor the fast
    path's stamped copy of it (either is /model), and the cache keeps only the build."""
    from reward_service.fastcov.backend import FastSimulator

    test = _tamper_test(
        "    names = os.listdir('/model')\n"
        "    assert names, 'no build in /model'\n"
        "    paths = [os.path.join('/model', n) for n in names] + ['/model/evil']\n"
    )
    cache = tmp_path / "cache"
    job = make_job(tmp_path / "job", {"dut.sv": FCOV_DUT % ""}, {"test_tamper.py": test}, "dut", "test_tamper", cache)
    out = FastSimulator().run_cocotb(job) if engine == "fast" else run_cocotb(job, "icarus")
    assert [t.passed for t in parse_results_xml(out.results_xml)] == [True], log_of(out)
    (model,) = [p for p in (cache / "models").iterdir() if p.is_dir()]
    assert sorted(p.name for p in model.iterdir()) == ["rs_model.json", "sim.vvp"]
    if engine == "icarus":
        assert model.name == icarus_model_key(job)


# ---------------------------------------------------------------------------------------------
# the HDL ends the simulation while the test awaits (adversarial case 20)


@pytest.mark.parametrize("simulator", SIMS)
def test_hdl_finish_while_awaiting_fails_not_hangs(tmp_path, shared_cache_dir, simulator):
    case = ADVERSARIAL / "20-cocotb-hdl-finish-while-awaiting"
    job = make_job(
        tmp_path / "job",
        {"dut.sv": (case / "dut.sv").read_text()},
        {"test_dut.py": (case / "test_dut.py").read_text()},
        "dut",
        "test_dut",
        shared_cache_dir,
    )
    out = run_cocotb(job, simulator)
    assert not out.build_failed, log_of(out)
    # Not a hang: the run ended by itself, before its limit (RUN_S). The test itself takes 0.01 s;
    # with cocotb's start-up and shutdown the run took 16 s on a loaded 2-core machine, over the
    # 15 s this once allowed of a 20 s limit.
    assert not out.run.timed_out, out.run.duration_ms
    tests = parse_results_xml(out.results_xml)
    assert len(tests) == 1 and not tests[0].passed
    assert "ended prematurely" in tests[0].message
    assert tests[0].sim_time_ns == pytest.approx(200, abs=10)
    assert out.ended_by == "sim_ended_early"
    if simulator == "verilator":  # coverage up to the $finish is still there
        cov = code_coverage(out, job.design_files)
        assert cov["line"]["covered"] > 0 and cov["toggle"]["covered"] > 0


# ---------------------------------------------------------------------------------------------
# cocotb-coverage


FCOV_DUT = """`timescale 1ns/1ps
module dut(input logic clk, input logic [1:0] sel, output logic [3:0] q);
  initial q = 0;
  always_ff @(posedge clk) q <= q + {2'b0, sel};
  %s
endmodule
"""

FCOV_TEST = """
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

cov = coverage_section(
    CoverPoint("top.sel", xf=lambda s, q: s, bins=[0, 1, 2, 3]),
    CoverPoint("top.q_low", xf=lambda s, q: q < 8, bins=[True, False]),
    CoverCross("top.cross", items=["top.sel", "top.q_low"]),
)

@cov
def sample(s, q):
    pass

@cocotb.test()
async def drive(dut):
    Clock(dut.clk, 10, unit="ns").start()
    for s in (0, 1, 2):
        dut.sel.value = s
        await RisingEdge(dut.clk)
        sample(s, int(dut.q.value))
    await Timer(%d, unit="ns")
    assert %s, "deliberate failure"
"""


@pytest.mark.parametrize("simulator", SIMS)
@pytest.mark.parametrize("ending", ["pass", "fail", "hdl_finish"])
def test_functional_coverage_is_exported(tmp_path, shared_cache_dir, simulator, ending):
    early = "initial #100 $finish;" if ending == "hdl_finish" else ""
    test = FCOV_TEST % (1000 if ending == "hdl_finish" else 10, "False" if ending == "fail" else "True")
    job = make_job(
        tmp_path / "job", {"dut.sv": FCOV_DUT % early}, {"test_fcov.py": test}, "dut", "test_fcov", shared_cache_dir
    )
    out = run_cocotb(job, simulator)
    tests = parse_results_xml(out.results_xml)
    assert [t.passed for t in tests] == [ending == "pass"], (tests, log_of(out))
    assert out.ended_by == ("sim_ended_early" if ending == "hdl_finish" else "finish")
    assert [p.name for p in out.functional] == ["rs_fcov.yml"], log_of(out)
    points = parse_functional_yaml(out.functional[0])
    by_bin = {p.detail: p.covered for p in points}
    assert by_bin["top.sel bin 0"] and by_bin["top.sel bin 2"] and not by_bin["top.sel bin 3"]
    assert by_bin["top.q_low bin True"] and not by_bin["top.q_low bin False"]
    assert sum(p.hier == "top.cross" for p in points) == 8
    assert len(points) == 4 + 2 + 8


def test_no_functional_file_without_cocotb_coverage(tmp_path, shared_cache_dir):
    case = STIMULUS / "cvdp_copilot_gray_to_binary_0014"
    job, _ = cvdp_job(tmp_path / "job", case.name, shared_cache_dir)
    out = run_cocotb(job, "icarus")
    assert out.results_xml is not None and out.functional == []


# ---------------------------------------------------------------------------------------------
# failures


def test_icarus_build_error_is_reported(tmp_path, shared_cache_dir):
    job = make_job(
        tmp_path / "job",
        {"dut.sv": "module dut(input clk);\n  wire x = ;\nendmodule\n"},
        {"test_x.py": "import cocotb\n"},
        "dut",
        "test_x",
        shared_cache_dir,
    )
    out = run_cocotb(job, "icarus")
    assert out.build_failed and out.run is None
    assert "dut.sv:2" in out.build.output and "syntax error" in out.build.output


@pytest.mark.slow
def test_verilator_build_error_is_reported_and_not_cached(tmp_path, shared_cache_dir):
    design = {"bad.sv": "module dut(input logic clk);\n  assign y = undeclared_thing +;\nendmodule\n"}
    job = make_job(tmp_path / "job", design, {"test_x.py": "import cocotb\n"}, "dut", "test_x", shared_cache_dir)
    out = run_cocotb(job, "verilator")
    assert out.build_failed and out.run is None and not out.build_cached
    assert "bad.sv:2" in out.build.output
    key = model_key(job)
    assert not (shared_cache_dir / "models" / key).exists()
    # no temp dir of this key (other tests build into the shared cache at the same time)
    assert not [p for p in (shared_cache_dir / "models").iterdir() if p.name.startswith(f"tmp-{key[:16]}-")]


def test_run_timeout_is_reported(tmp_path, shared_cache_dir, monkeypatch):
    """A test that sleeps uses no CPU: the wall-clock backstop (4 x run_s + 30 s of slack, which
    covers cocotb's start-up under load) ends it, as the sample's own timeout (every thread
    slept by itself)."""
    test = "import cocotb, time\n\n@cocotb.test()\nasync def spin(dut):\n    while True:\n        time.sleep(0.1)\n"
    job = make_job(
        tmp_path / "job",
        {"dut.sv": FCOV_DUT % ""},
        {"test_spin.py": test},
        "dut",
        "test_spin",
        shared_cache_dir,
        run_s=3,
    )
    out = run_cocotb(job, "icarus")
    assert out.run.timed_out and out.run.waited and out.ended_by == "timeout"
    assert out.run.cpu_s is not None and out.run.cpu_s < 3
    assert out.run.duration_ms < 90_000


def test_helper_modules_are_importable(tmp_path, shared_cache_dir):
    helper = "VALUE = 3\n"
    test = (
        "import cocotb\nfrom cocotb.triggers import Timer\nimport my_helpers\n\n"
        "@cocotb.test()\nasync def uses_helper(dut):\n    assert my_helpers.VALUE == 3\n"
        "    await Timer(1, unit='ns')\n"
    )
    job = make_job(
        tmp_path / "job",
        {"dut.sv": FCOV_DUT % ""},
        {"test_h.py": test, "my_helpers.py": helper},
        "dut",
        "test_h",
        shared_cache_dir,
    )
    out = run_cocotb(job, "icarus")
    assert [t.passed for t in parse_results_xml(out.results_xml)] == [True], log_of(out)


PLUGIN_TEST = """
import importlib.metadata, sys
import cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def no_pytest_plugin_loaded(dut):
    await Timer(1, unit="ns")
    loaded = sorted(e.module for e in importlib.metadata.entry_points(group="pytest11") if e.module in sys.modules)
    assert not loaded, "pytest plugins loaded: " + ", ".join(loaded)

@cocotb.test()
async def rewritten_assert(dut):
    await Timer(1, unit="ns")
    got = [1, 2]
    assert got == [1, 3]
"""


def test_test_step_loads_no_pytest_plugin_and_keeps_assertion_rewriting(tmp_path, shared_cache_dir):
    """cocotb builds a pytest Config for assertion rewriting; pytest would import every
    installed ``pytest11`` plugin for it (5-9 s here). The test step turns that off
    (cocotb_flow.TEST_ENV) and a failing ``assert`` still carries pytest's rewritten text."""
    import importlib.metadata

    job = make_job(
        tmp_path / "job", {"dut.sv": FCOV_DUT % ""}, {"test_p.py": PLUGIN_TEST}, "dut", "test_p", shared_cache_dir
    )
    out = run_cocotb(job, "icarus")
    tests = {t.name: t for t in parse_results_xml(out.results_xml)} if out.results_xml else {}
    assert set(tests) == {"no_pytest_plugin_loaded", "rewritten_assert"}, log_of(out)
    if importlib.metadata.entry_points(group="pytest11"):  # else nothing could have been loaded
        assert tests["no_pytest_plugin_loaded"].passed, tests["no_pytest_plugin_loaded"].message
    assert not tests["rewritten_assert"].passed
    assert "assert [1, 2] == [1, 3]" in (tests["rewritten_assert"].message or ""), tests["rewritten_assert"]


def test_driver_imports_the_runner_without_running_cocotbs_init():
    """The driver's cocotb 2.x runner import leaves cocotb's package __init__ (pytest, the
    scheduler) unrun until something reads an attribute of ``cocotb``; then it is the whole
    package."""
    script = (
        "import importlib.metadata, importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('driver', {str(cocotb_flow.DRIVER)!r})\n"
        "driver = importlib.util.module_from_spec(spec); spec.loader.exec_module(driver)\n"
        "runner = driver._import_runner_21()\n"
        "assert runner.get_runner('icarus') is not None\n"
        "assert 'cocotb._decorators' not in sys.modules and 'pytest' not in sys.modules\n"
        "import cocotb\n"
        "assert cocotb.__version__ == importlib.metadata.version('cocotb')\n"
        "assert 'cocotb._decorators' in sys.modules and callable(cocotb.test)\n"
        "try:\n    cocotb.no_such_name\nexcept AttributeError:\n    print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ---------------------------------------------------------------------------------------------
# the test tries to write outside its run dir (adversarial case 18)

PROBES = [Path("/tmp/escape_cocotb_abs.txt"), Path("/tmp/escape_abs.txt")]


def _snapshot(path: Path) -> tuple | None:
    return (path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else None


@pytest.mark.parametrize("simulator", SIMS)
def test_escape_writes_nothing_outside_run_dir(tmp_path, shared_cache_dir, simulator):
    case = ADVERSARIAL / "18-sandbox-file-and-shell-escape"
    parent = tmp_path / "parent"
    job = make_job(
        parent / "job",
        {"dut_stub.sv": (case / "dut_stub.sv").read_text()},
        {"test_escape.py": (case / "test_escape.py").read_text()},
        "dut_stub",
        "test_escape",
        shared_cache_dir,
    )
    before_tmp = {p: _snapshot(p) for p in PROBES}
    out = run_cocotb(job, simulator)
    assert not out.build_failed, log_of(out)
    assert out.results_xml is not None, log_of(out)
    # Nothing appeared next to the job or the run dir, nor in the host's /tmp.
    assert sorted(p.name for p in parent.iterdir()) == ["job"]
    assert not list(parent.rglob("escape_*")), list(parent.rglob("escape_*"))
    assert {p: _snapshot(p) for p in PROBES} == before_tmp
    # The test's first write, to the work dir's parent (bwrap's private root), is refused: that
    # root is read-only (its tmpfs pages were counted by no limit). The subprocess part of the
    # case (uid 65534, scrubbed environment) is test_bad_input's cocotb network/writes test.
    assert "Read-only file system: '../escape_cocotb_parent.txt'" in out.run.output
    assert "uid=0(" not in out.run.output


# ---------------------------------------------------------------------------------------------
# pieces


def test_parse_results_xml(tmp_path):
    xml = tmp_path / "results.xml"
    xml.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="results">'
        '<testsuite name="all" package="all">'
        '<testcase name="ok_test" classname="test_m" time="0.1">'
        '<properties><property name="sim_time_unit" value="ns"/>'
        '<property name="sim_time_duration" value="85.0"/></properties></testcase>'
        '<testcase name="bad" classname="test_m"><failure message="assert 1 == 2"/></testcase>'
        '<testcase name="boom" classname="test_m"><error>Traceback\nValueError: x</error></testcase>'
        '<testcase name="later" classname="test_m"><skipped message="not now"/></testcase>'
        '<testcase name="export" classname="rs_fcov_export"/>'
        "</testsuite></testsuites>"
    )
    tests = parse_results_xml(xml)
    assert [(t.name, t.passed) for t in tests] == [("ok_test", True), ("bad", False), ("boom", False), ("later", True)]
    assert tests[0].sim_time_ns == 85.0 and tests[0].message is None
    assert tests[1].message == "assert 1 == 2"
    assert tests[2].message == "ValueError: x"
    assert tests[3].message.startswith("skipped")
    (tmp_path / "broken.xml").write_text("<testsuites><testcase")
    assert parse_results_xml(tmp_path / "broken.xml") == []
    assert parse_results_xml(tmp_path / "missing.xml") == []


def test_pygpi_entry_points_keep_cocotbs_defaults():
    """Our PYGPI_USERS replaces cocotb's default list: it must still hold every default."""
    import inspect

    import pygpi.entry

    source = inspect.getsource(pygpi.entry)
    standins = {v: k for k, v in cocotb_flow.PYGPI_STANDINS.items()}
    ours = [standins.get(e, e) for e in cocotb_flow.PYGPI_USERS.split(",")]
    assert ours[-1] == "rs_fcov_export:install"
    assert all(f'"{entry}"' in source for entry in ours[:-1])


def test_driver_is_standalone_and_reports_errors(tmp_path):
    driver = Path(cocotb_flow.DRIVER)
    for source in (cocotb_flow.DRIVER, cocotb_flow.EXPORTER):
        assert "import reward_service" not in source.read_text()
        assert "from reward_service" not in source.read_text()
    status = tmp_path / "status.json"
    spec = {"simulator": "no-such-sim", "hdl_toplevel": "x", "build_dir": str(tmp_path / "b"), "status": str(status)}
    proc = subprocess.run(
        [sys.executable, str(driver), "build", json.dumps(spec)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    assert json.loads(status.read_text())["ok"] is False
    proc = subprocess.run([sys.executable, str(driver), "frobnicate", "{}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
