"""Icarus Verilog: ``iverilog -g2012`` then ``vvp -n`` (``-n``: $stop acts as $finish instead of
opening the interactive prompt), stdin from /dev/null. Icarus has no code coverage; with it the
service offers test outcomes and functional coverage.

Exit statuses lie (iverilog counts errors modulo 256; vvp exits 0 after failed assertions and
missing files): a build is judged by its output file and log, a run by its log.
"""

from __future__ import annotations

import re

from reward_service.sandbox import Bind, ExecSpec
from reward_service.simulators import cocotb_flow
from reward_service.simulators.base import Job, SimRun, SimulatorBackend
from reward_service.simulators.toolchain import require_iverilog

_ELAB_ERRORS = re.compile(r"\d+ error\(s\) during elaboration|I give up|syntax error|Elaboration failed",
                          re.I)


def ended_by_from_log(log: str, exit_code: int | None) -> str:
    """How a vvp run ended, from its log (vvp's exit status does not say)."""
    if re.search(r"^FATAL: ", log, re.M) or re.search(r"\$fatal", log) and exit_code == 1:
        return "fatal"
    if "** VVP Stop" in log or re.search(r"\$stop called", log):
        return "stop"
    if re.search(r"\$finish called|VCD info: dumpfile", log) or exit_code == 0:
        return "finish"
    return "exit"


class IcarusSimulator(SimulatorBackend):
    name = "icarus"
    measures = ("functional",)
    unavailable_reason = ("Icarus Verilog has no code coverage: use simulator=verilator for "
                          "line/branch/toggle/expr coverage")

    def run_sv(self, job: Job) -> SimRun:
        toolchain = job.sandbox.toolchain()
        compiler = require_iverilog(toolchain)  # ToolMissing (sandbox_error), not a bogus compile_error
        out = SimRun()
        argv = [compiler, "-g2012", "-o", "/work/obj/sim.vvp", "-s", job.top,
                *job.design_files, *job.stimulus_files]
        (job.root / "obj").mkdir(exist_ok=True)
        out.build = job.sandbox.run(ExecSpec(
            argv=argv, workdir=job.root, cwd="/work/src", timeout_s=job.limits.compile_s,
            memory_mb=job.limits.memory_mb, output_kb=job.limits.output_kb,
            outputs=("/work/obj/sim.vvp",)))
        vvp_file = job.root / "obj" / "sim.vvp"
        if (out.build.limit_hit or not vvp_file.exists() or _ELAB_ERRORS.search(out.build.output)
                or out.build.exit_code != 0):
            out.build_failed = True
            return out
        job.run_dir.mkdir(exist_ok=True)
        out.run = job.sandbox.run(ExecSpec(
            argv=[toolchain.vvp, "-n", "/obj/sim.vvp"], workdir=job.run_dir, no_shell=True, outputs=(),
            binds=[Bind(job.root / "obj", "/obj")], timeout_s=job.limits.run_s,
            memory_mb=job.limits.memory_mb, processes=job.limits.processes,
            file_mb=job.limits.file_mb, output_kb=job.limits.output_kb))
        if not out.run.limit_hit:
            out.ended_by = ended_by_from_log(out.run.output, out.run.exit_code)
        return out

    def run_cocotb(self, job: Job) -> SimRun:
        return cocotb_flow.run_cocotb(job, simulator="icarus")

