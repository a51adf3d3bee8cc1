"""Icarus Verilog: ``iverilog -g2012`` then ``vvp -n`` (``-n``: $stop acts as $finish instead of
opening the interactive prompt), stdin from /dev/null, in one sandbox step
(:func:`compile_and_run`). Icarus has no code coverage; with it the service offers test outcomes
and functional coverage.

Exit statuses lie (iverilog counts errors modulo 256; vvp exits 0 after failed assertions and
missing files): a build is judged by its output file and log (:func:`compile_failed`), a run by
its log.

cocotb stimulus (:meth:`IcarusSimulator.build_cocotb`, the build step of
:func:`~reward_service.simulators.cocotb_flow.run_cocotb`): ``sim.vvp`` is built once per design
into the build cache (:func:`~reward_service.simulators.cocotb_flow.cached_model`, as Verilator's
model): the step (a sandbox start, cocotb's runner, ``iverilog``) took 0.15-0.4 s of a ~1 s
sample, and in RL every rollout of a problem builds the same design.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import signal
import stat
from collections.abc import Mapping
from pathlib import Path

from reward_service.safe_io import UnsafeOutput, output_file, read_output_head_tail, read_output_text
from reward_service.sandbox import Bind, ExecResult, ExecSpec, SandboxError
from reward_service.sandbox.cpu import RUN_IDLE_S, wall_backstop
from reward_service.sandbox.toolchain import require_iverilog
from reward_service.simulators import cocotb_flow
from reward_service.simulators.base import Job, SimRun, SimulatorBackend

#: iverilog's lines of a failed compile (its exit status counts errors modulo 256, so a log with
#: one of these is a failed build whatever the status says).
ELAB_ERRORS = re.compile(r"\d+ error\(s\) during elaboration|I give up|syntax error|Elaboration failed", re.I)


def compile_failed(build: ExecResult) -> bool:
    """Whether the compile half of :func:`compile_and_run` (``build``) failed: a limit ended it,
    it exited non-zero, or its log has one of iverilog's error lines (:data:`ELAB_ERRORS`)."""
    return bool(build.limit_hit) or build.exit_code != 0 or ELAB_ERRORS.search(build.output) is not None


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
    """Icarus Verilog: test outcomes and functional coverage (no code coverage), for SV
    testbenches and cocotb stimulus."""

    name = "icarus"
    #: vvp -n: $stop ends the run instead of opening the interactive prompt
    cocotb_test_args: tuple[str, ...] = ("-n",)
    cocotb_coverage_file: str | None = None
    measures = ("functional",)
    unavailable_reason = (
        "Icarus Verilog has no code coverage: use simulator=verilator (CLI "
        "--simulator verilator) or engine=fast (--engine fast, Icarus with an "
        "instrumented DUT) for line/branch/toggle/expr coverage"
    )

    def run_sv(self, job: Job) -> SimRun:
        toolchain = job.sandbox.toolchain()
        compiler = require_iverilog(toolchain)  # ToolMissing (sandbox_error), not a bogus compile_error
        out = SimRun()
        out.build, out.run = compile_and_run(job, compiler, toolchain.vvp)
        if compile_failed(out.build):
            out.build_failed = True
        else:
            out.ended_by = run_ending(out.run)
        return out

    def run_cocotb(self, job: Job, outputs: tuple[str, ...] = ()) -> SimRun:
        """The cocotb flow on Icarus (:func:`.cocotb_flow.run_cocotb`; ``outputs`` as there)."""
        return cocotb_flow.run_cocotb(job, self, outputs)

    def build_cocotb(
        self, job: Job, tools: Path, out: SimRun, variant: Mapping[str, object] | None = None
    ) -> Path | None:
        """The cocotb build of ``job``'s DUT (:meth:`.cocotb_flow.CocotbSimulator.build_cocotb`):
        ``sim.vvp`` from the build cache (:func:`cocotb_model_key`; ``out.build_cached``), else
        compiled with cocotb's runner under the key's lock and published. The step involves none
        of cocotb's libraries (``iverilog`` only), so one build serves both cocotb runtimes.
        ``variant``: further key entries of a build whose sources are not the request's (the
        fast path's instrumented DUT). Raises :class:`~reward_service.sandbox.toolchain.ToolMissing`
        without Icarus, :class:`SandboxError` for failures of the sandbox (nothing is cached)."""
        args = build_options(job)
        key = cocotb_model_key(job, args, variant)

        def build(tmp: Path) -> bool:
            spec = cocotb_flow.build_spec(job, self.name, args, cocotb_flow.include_dirs(job), cocotb_flow.MODEL)
            out.build, status = cocotb_flow.run_build(
                job,
                tools,
                spec,
                binds=[Bind(tmp, cocotb_flow.MODEL, writable=True)],
                outputs=(f"/work/{cocotb_flow.BUILD_STATUS}", f"{cocotb_flow.MODEL}/{COCOTB_PRODUCT}"),
            )
            vvp = tmp / COCOTB_PRODUCT
            if out.build.limit_hit or out.build.exit_code != 0 or not vvp.is_file() or vvp.stat().st_size == 0:
                own = None if out.build.limit_hit else _OWN_BUILD_FAILURE.search(out.build.output)
                if own is not None:  # the cache volume, not the design: never the sample's build error
                    raise SandboxError(f"our Icarus build could not write its output: {own.group(0)}")
                cocotb_flow.mark_build_failed(out, status, "icarus build")
                return False
            return True

        return cocotb_flow.cached_model(
            job, key, COCOTB_PRODUCT, out, build, {"simulator": self.name, "build_args": args, **(variant or {})}
        )


#: What the cocotb build keeps (cocotb's runner names it so in its build dir).
COCOTB_PRODUCT = "sim.vvp"
#: A failed cocotb build that is ours: iverilog could not write the model into the build cache
#: (a full or read-only cache volume), whatever the design. (Not the model's path: cocotb's
#: runner echoes its command line, which names it, in every build log.)
_OWN_BUILD_FAILURE = re.compile(r"[^\n]*(?:No space left on device|Read-only file system)[^\n]*")


def cocotb_model_key(job: Job, build_args: list[str], variant: Mapping[str, object] | None = None) -> str:
    """The build-cache key (:func:`.cocotb_flow.model_key`) of ``job``'s cocotb ``sim.vvp``
    compiled with ``build_args`` (:func:`build_options`): iverilog's version and path, and
    ``variant`` (the fast path's instrumentation), besides what every model's key holds.
    Raises :class:`~reward_service.sandbox.toolchain.ToolMissing` without Icarus."""
    toolchain = job.sandbox.toolchain()
    tools = {
        "iverilog": toolchain.versions.get("iverilog"),
        "iverilog_path": require_iverilog(toolchain),
        "variant": dict(variant or {}),
    }
    return cocotb_flow.model_key(job, "icarus", build_args, tools)


#: Wall-clock seconds on top of the step's backstop (the sandbox sends SIGINT at the run's CPU
#: budget, then SIGKILL two seconds later if vvp is still there: its final blocks get time to run).
RUN_GRACE_S = 3.0
#: Least process and file-size limits of the step (the compile's needs, as the default limits).
COMPILE_PROCESSES = 64
COMPILE_FILE_MB = 64

#: The one sandbox step (POSIX sh; file names come in as arguments, never as text: the run's
#: plusargs first, ``nplus`` of them, then the compiler's options and files). The compile
#: runs into /work/obj, its log and status in /work/obj/status; the run in /work/run. The
#: sandbox holds each half to its CPU budget (``ExecSpec.cpu_split``: the compile's ends when
#: ``build.rc`` appears, written only after the compiler ended) and stops the run at its budget
#: with SIGINT (``vvp -n`` then finishes, so final blocks still run; SIGKILL two seconds
#: later): which limit ended the step is the sandbox's ``timed_out`` and whether ``build.rc``
#: exists, never an exit status (iverilog's is an error count, a testbench may
#: ``$finish_and_return(124)``). Before the run, /work/obj and its files are made read-only,
#: so the testbench cannot rewrite what the host reads about the build (one ``chmod``, build.rc
#: last; made writable again if any failed: each program started costs ~0.8 ms of CPU). One step because a
#: sandbox start costs as much as either half; the shell staying visible during the run gives
#: the testbench nothing: Icarus has no ``$system``.
_STEP = """
iverilog=$1 vvp=$2 top=$3
shift 3
nplus=$1
shift
st=/work/obj/status
( shift "$nplus"
  exec "$iverilog" -g2012 -grelative-include -o /work/obj/sim.vvp -s "$top" "$@" >/work/obj/status/build.log 2>&1 )
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s /work/obj/sim.vvp ]; then rc=255; fi   # errors counted modulo 256
echo "$rc" >"$st/build.rc"
if [ "$rc" -ne 0 ]; then exit 0; fi
chmod a-w /work/obj/sim.vvp "$st/build.log" "$st" /work/obj "$st/build.rc" \\
  || { chmod u+w "$st/build.rc"; exit 0; }   # the host sees build.rc still writable
cd /work/run || exit 0
n=$# i=0
for a do   # keep the first $nplus arguments (the plusargs): the list is expanded once
  if [ "$i" -lt "$nplus" ]; then set -- "$@" "$a"; fi
  i=$((i + 1))
done
shift "$n"
exec "$vvp" -n /work/obj/sim.vvp "$@" 2>&1
"""
#: What the step writes in /work/obj/status (one directory: one archive call brings it back).
_STATUS_FILES = ("build.log", "build.rc")
#: The file whose appearance ends the compile's CPU budget (``ExecSpec.cpu_split``).
_BUILD_DONE = "/work/obj/status/build.rc"


def compile_and_run(job: Job, compiler: str, vvp: str, outputs: tuple[str, ...] = ()) -> tuple[ExecResult, ExecResult]:
    """Compile ``job``'s design and stimulus files (``src/``, toplevel ``job.top``) and run
    them, in one sandbox step; ``outputs`` are further paths (under ``/work``) to bring back.

    Returns ``(build, run)``. The build's result comes from its log and status files (wall
    time 0: the run's ``duration_ms`` and ``cpu_s`` cover both; ``oom``/``pids_exhausted``
    when the step hit that limit and the compile failed). The run's is the step's own,
    ``timed_out`` when its CPU budget stopped vvp.
    A build that never finished (the step ended first: a limit, a kill) has both equal to the
    step's result, with the build log in front of the output. Raises
    :class:`~reward_service.sandbox.SandboxError` as ``Sandbox.run`` does, and when the build
    succeeded but its files were not made read-only (the run was then not started)."""
    assert job.top is not None, "an SV testbench job has its top module (scoring.prepare chooses it)"
    obj = job.root / "obj"
    status = obj / "status"
    # Made here, not by the step: one program less per step (each exec costs ~1 ms, more on a
    # fuse-overlayfs container root).
    status.mkdir(parents=True, exist_ok=True)
    job.run_dir.mkdir(exist_ok=True)
    job.stage_data_files(job.run_dir)
    limits = job.limits
    try:
        # The compile needs a few processes (sh, ivlpp, ivl) and room for the vvp file
        # and its log whatever the run's limits; vvp itself cannot fork.
        result = job.sandbox.run(
            ExecSpec(
                argv=[
                    "/bin/sh",
                    "-c",
                    _STEP,
                    "rs-icarus",
                    compiler,
                    vvp,
                    job.top,
                    str(len(job.plusargs)),
                    *job.plusarg_args(),
                    *build_options(job),
                    *job.design_files,
                    *job.stimulus_files,
                ],
                workdir=job.root,
                cwd="/work/src",
                cpu_s=limits.run_s,
                cpu_split=(_BUILD_DONE, limits.compile_s),
                stop_signal=signal.SIGINT,
                timeout_s=wall_backstop(limits.compile_s + limits.run_s) + RUN_GRACE_S,
                idle_s=RUN_IDLE_S,
                memory_mb=limits.memory_mb,
                processes=max(limits.processes, COMPILE_PROCESSES),
                file_mb=max(limits.file_mb, COMPILE_FILE_MB),
                output_kb=limits.output_kb,
                outputs=("/work/obj/status", *outputs),
                system=step_system(compiler, vvp, job.sandbox.toolchain().path_env()),
            )
        )
        protected = _read_only(status / "build.rc")
    finally:
        _writable_again(obj)
    rc_text = _small_text(status / "build.rc")
    log = ""
    if output_file(status / "build.log"):
        try:
            log = read_output_head_tail(status / "build.log", limits.output_kb * 1024)
        except (OSError, UnsafeOutput) as exc:
            log = f"(the build log could not be read: {exc})\n"
    if not rc_text.isdigit():  # the step ended (limit, kill) before the compiler did
        return dataclasses.replace(result, output=log + result.output), result
    rc = int(rc_text)
    failed = rc != 0
    if not failed and not protected:  # chmod failed: the run did not start (nothing to trust)
        raise SandboxError("the Icarus step could not make its build files read-only before the run")
    build = ExecResult(
        exit_code=rc,
        output=log,
        output_bytes=len(log),
        dropped_bytes=0,
        duration_ms=0.0,
        oom=failed and result.oom,
        pids_exhausted=failed and result.pids_exhausted,
    )
    return build, result


@functools.lru_cache(maxsize=16)
def step_system(compiler: str, vvp: str, path: str) -> tuple[str, ...] | None:
    """The system files of the Icarus step (``ExecSpec.system``): the programs :data:`_STEP`
    runs and iverilog's library dir (ivlpp, ivl, code generators, VPI modules and their .conf
    files, which vvp loads too); ``path`` is the step's PATH. None when the library dir is not
    found: the step then sees the whole system. Remembered per process (lookups on every step
    would be stat chains, FUSE round trips in the worker container)."""
    found, runtime = shutil.which(compiler, path=path), shutil.which(vvp, path=path)
    library = library_dir(os.path.realpath(found), os.path.realpath(runtime)) if found and runtime else None
    return None if library is None else ("sh", "chmod", compiler, vvp, library)


@functools.lru_cache(maxsize=8)
def library_dir(iverilog: str, vvp: str | None = None) -> str | None:
    """iverilog's library dir for the compiler at ``iverilog`` (a real path): ``<prefix>/lib/ivl``
    as Icarus installs it, or ``<prefix>/lib/<multiarch>/ivl`` as Debian does; the one holding
    ``ivl`` and ``vvp.tgt`` whose path is compiled into iverilog (its base dir) and into ``vvp``
    (a real path: its VPI module dir), so that it is the dir both use. None when there is none."""
    prefix = Path(iverilog).parent.parent
    candidates = [prefix / "lib" / "ivl", prefix / "lib64" / "ivl", *sorted((prefix / "lib").glob("*/ivl"))]
    try:
        binaries = [Path(iverilog).read_bytes(), *([Path(vvp).read_bytes()] if vvp else [])]
    except OSError:
        return None
    for candidate in candidates:
        if (candidate / "ivl").is_file() and (candidate / "vvp.tgt").is_file():
            if all(str(candidate).encode() + b"\0" in binary for binary in binaries):
                return str(candidate)
    return None


def build_options(job: Job) -> list[str]:
    """iverilog's options from the job: include dirs, defines, and ``-P<top>.NAME=VAL`` per
    parameter override of the top module (``job.top``, or the cocotb toplevel)."""
    top = job.top or job.toplevel
    return [*job.include_args(), *job.define_args(), *(f"-P{top}.{k}={v}" for k, v in job.parameters.items())]


def run_ending(run: ExecResult) -> str | None:
    """How the run half of :func:`compile_and_run` ended: ``timeout`` at the run limit, None
    when another sandbox limit ended it (``run.limit_hit`` says which), else from vvp's log
    (:func:`ended_by_from_log`)."""
    if run.timed_out:
        return "timeout"
    if run.limit_hit:
        return None
    return ended_by_from_log(run.output, run.exit_code)


def _small_text(path: Path) -> str:
    """The stripped text of a small status file the step wrote, or "" when absent/unreadable."""
    if not output_file(path):
        return ""
    try:
        return read_output_text(path, max_bytes=4096).strip()
    except (OSError, UnsafeOutput):
        return ""


def _read_only(path: Path) -> bool:
    """Whether the step made ``path`` read-only (its mode comes back through either sandbox)."""
    try:
        return not os.lstat(path).st_mode & 0o222
    except OSError:
        return False


def _writable_again(obj: Path) -> None:
    """Undo the step's ``chmod a-w`` in ``obj`` (bwrap shares the host dir), so the work dir
    can be removed by a worker that is not root."""
    # one lstat per path (not exists, is_symlink and stat: this runs after every Icarus step)
    for path in (obj, obj / "status", obj / "sim.vvp", *(obj / "status" / name for name in _STATUS_FILES)):
        try:
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode) and not mode & 0o200:
                os.chmod(path, stat.S_IMODE(mode) | 0o200)
        except OSError:
            pass
