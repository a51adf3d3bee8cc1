"""Icarus Verilog: ``iverilog -g2012`` then ``vvp -n`` (``-n``: $stop acts as $finish instead of
opening the interactive prompt), stdin from /dev/null, in one sandbox step
(:func:`compile_and_run`). Icarus has no code coverage; with it the service offers test outcomes
and functional coverage.

Exit statuses lie (iverilog counts errors modulo 256; vvp exits 0 after failed assertions and
missing files): a build is judged by its output file and log, a run by its log.
"""

from __future__ import annotations

import re

from reward_service.safe_io import UnsafeOutput, output_file, read_output_text
from reward_service.sandbox import ExecResult, ExecSpec
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
        out.build, out.run = compile_and_run(job, compiler, toolchain.vvp)
        if out.build.limit_hit or out.build.exit_code != 0 or _ELAB_ERRORS.search(out.build.output):
            out.build_failed = True
        else:
            out.ended_by = run_ending(out.run)
        return out

    def run_cocotb(self, job: Job) -> SimRun:
        return cocotb_flow.run_cocotb(job, simulator="icarus")



#: The sandbox kills the step this long after the run's time limit (``timeout`` sends SIGINT,
#: then SIGKILL one second later if vvp is still there).
RUN_GRACE_S = 2.0
TIMEOUT_EXIT = 124           # coreutils timeout: the command timed out (and ended on SIGINT)
KILLED_BY_TIMEOUT = 137      # coreutils timeout: the command needed the SIGKILL (or a compile limit)
MISSING_OUTPUT = 255         # iverilog exited 0 without writing the vvp file (errors modulo 256)

#: The one sandbox step (POSIX sh; file names come in as arguments, never as text): compile
#: under the compile limit into /work/obj (log and status in files), then run in /work/run under
#: the run limit with SIGINT (``vvp -n`` then finishes, so final blocks still run; SIGKILL a
#: second later). A sandbox start costs as much as either half, and the shell staying visible
#: during the run gives the testbench nothing: Icarus has no ``$system``.
_STEP = """
iverilog=$1 vvp=$2 top=$3 compile_s=$4 run_s=$5
shift 5
timeout -s KILL "$compile_s" "$iverilog" -g2012 -o /work/obj/sim.vvp -s "$top" "$@" >/work/obj/build.log 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s /work/obj/sim.vvp ]; then rc=255; fi
echo "$rc" >/work/obj/build.rc
if [ "$rc" -ne 0 ]; then exit 0; fi
cd /work/run || exit 0
exec timeout -s INT -k 1 "$run_s" "$vvp" -n /work/obj/sim.vvp
"""


def compile_and_run(job: Job, compiler: str, vvp: str, outputs: tuple[str, ...] = ()) -> tuple[ExecResult, ExecResult]:
    """Compile ``job``'s design and stimulus files (``src/``, toplevel ``job.top``) and run
    them, in one sandbox step; ``outputs`` are further paths (under ``/work``) to bring back.

    Returns ``(build, run)``: the build's result comes from its log and status files (wall time
    0: the run's ``duration_ms`` covers both), the run's is the step's own. A build that never
    finished (the step ended first: a limit, a kill) has both equal to the step's result, with
    the build log in front of the output. Raises
    :class:`~reward_service.sandbox.SandboxError` as ``Sandbox.run`` does."""
    (job.root / "obj").mkdir(exist_ok=True)
    job.run_dir.mkdir(exist_ok=True)
    limits = job.limits
    result = job.sandbox.run(ExecSpec(
        argv=["/bin/sh", "-c", _STEP, "rs-icarus", compiler, vvp, job.top, f"{limits.compile_s:g}",
              f"{limits.run_s:g}", *job.design_files, *job.stimulus_files],
        workdir=job.root, cwd="/work/src", timeout_s=limits.compile_s + limits.run_s + RUN_GRACE_S,
        memory_mb=limits.memory_mb, processes=limits.processes, file_mb=limits.file_mb,
        output_kb=limits.output_kb, outputs=("/work/obj/build.log", "/work/obj/build.rc", *outputs)))
    obj = job.root / "obj"
    try:
        rc_path, log_path = output_file(obj / "build.rc"), output_file(obj / "build.log")
        rc_text = read_output_text(rc_path, max_bytes=64).strip() if rc_path else ""
        log = read_output_text(log_path, max_bytes=limits.output_kb * 1024) if log_path else ""
    except (OSError, UnsafeOutput):
        rc_text, log = "", ""
    if not rc_text.isdigit():  # the step ended (limit, kill) before the compiler did
        return ExecResult(exit_code=result.exit_code, output=log + result.output, output_bytes=result.output_bytes,
                          dropped_bytes=result.dropped_bytes, duration_ms=result.duration_ms,
                          timed_out=result.timed_out, oom=result.oom, pids_exhausted=result.pids_exhausted), result
    rc = int(rc_text)
    build = ExecResult(exit_code=rc, output=log, output_bytes=len(log), dropped_bytes=0, duration_ms=0.0,
                       timed_out=rc == KILLED_BY_TIMEOUT)
    return build, result


def run_ending(run: ExecResult) -> str | None:
    """How the run half of :func:`compile_and_run` ended: ``timeout`` when ``timeout`` stopped
    vvp at the run limit, None when a sandbox limit did (``run.limit_hit`` says which), else
    from vvp's log (:func:`ended_by_from_log`)."""
    if run.limit_hit and not run.timed_out:
        return None
    if run.timed_out or run.exit_code in (TIMEOUT_EXIT, KILLED_BY_TIMEOUT):
        return "timeout"
    return ended_by_from_log(run.output, run.exit_code)
