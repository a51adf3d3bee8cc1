"""cocotb stimulus: build the DUT as HDL toplevel, run the cocotb test module against it.

Every step runs in the sandbox as ``python cocotb_driver.py build|test '<spec>'`` (a standalone
copy of :mod:`reward_service.simulators.cocotb_driver`, driving ``cocotb_tools.runner``).
:func:`run_cocotb` is the flow; the simulator (a :class:`CocotbSimulator`) owns its build step:

- **Build cache** (:func:`cached_model`, :func:`model_key`): the DUT is built once per design
  into ``<cache_dir>/models/<key>/``; the key is a content hash of everything the build output
  depends on (design file names and texts, headers and included files, toplevel, simulator,
  build flags with defines, parameters and include dirs, timescale, the builder's Python and
  cocotb, the tool versions and paths, the toolchain identity, plus what the simulator adds).
  The build step writes a temp dir under ``models/`` (bound writable at :data:`MODEL`: only
  build steps, which run no stimulus code, can write the cache), which is renamed into place
  under the key's file lock; later samples reuse it (``SimRun.build_cached``). A build that
  failed, hit a limit (a timeout) or raised a :class:`~reward_service.sandbox.SandboxError`
  (ours) is never published. In RL every rollout of a problem has the same design and only
  the test changes, so only the first sample of a design builds.
- **Verilator** (``VerilatorSimulator.build_cocotb``): the model binary (C++ through ccache).
- **Icarus** (``IcarusSimulator.build_cocotb``): ``sim.vvp``. The build runs cocotb 2.1's
  runner and ``iverilog`` only, whatever the test step's runtime, so one build serves cocotb
  2.1 and 1.9 tests alike. The fast path's instrumented DUT is built the same way, keyed also
  by its instrumentation (``fastcov/backend.py``), and its per-run token is stamped into a
  per-sample copy of ``sim.vvp``.
- **Run**: a fresh ``<root>/run`` (``/work`` in the sandbox) holding copies of the stimulus
  files; the model is bound read-only at ``/model``: the simulation step, where the untrusted
  test runs, can write nothing a later sample reads. Verilator's cocotb main writes
  ``coverage.dat`` there; cocotb writes ``results.xml``; ``rs_fcov_export`` (a PyGPI entry
  point) exports cocotb-coverage's ``coverage_db`` to ``rs_fcov.yml`` on every ending cocotb
  sees (after the last test, or when the HDL ends the simulation early).
- **No test ran** (:func:`no_test_ran`): a test module that cannot be imported (a missing
  module, a ``SyntaxError``), defines no test, or whose every test was skipped, and a run that
  wrote no ``results.xml``, set ``SimRun.not_run``: a failure (``compile_error`` for a
  ``SyntaxError``, else ``runtime_error``; ``sandbox_error`` when a package we ship is missing)
  whose message carries the Python exception, whatever coverage the DUT's reset produced.
  ``rs_fcov_export`` records the discovery exception in ``rs_discovery.json``.

Every in-sandbox tool path (Python, ``VERILATOR_ROOT``, libpython, PATH) comes from
``job.sandbox.toolchain()``; each step names the files the host reads afterwards
(``ExecSpec.outputs``), which is all a copying sandbox (Docker) brings back.

File names: design files are given to the tools relative to ``/work/src`` (the build's cwd), so
Verilator's ``coverage.dat`` names them as the request does (``fixed_priority_arbiter.sv``).

**cocotb runtime** (``Job.cocotb_runtime``, resolved by
:mod:`reward_service.simulators.cocotb_runtime`): cocotb 2.1 by default; with the cocotb 1.9
runtime (Icarus only) the test step runs the driver with the 1.9 venv's Python (part of the
sandbox's toolchain: bwrap binds the host's venv read-only, the simulation image has its own),
``cocotb.runner`` and cocotb 1.9's VPI library, with
``rs_fcov_export:entry_cocotb19`` as the PyGPI entry point. The Icarus build step does not
involve cocotb's libraries (``iverilog`` only), so it is the same for both runtimes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import filelock

from reward_service import hdl
from reward_service.integrity import cocotb_guard
from reward_service.models import Status, TestOutcome
from reward_service.safe_io import UnsafeOutput, output_file, read_output, read_output_text
from reward_service.sandbox import Bind, ExecResult, ExecSpec, SandboxError
from reward_service.sandbox.cpu import RUN_IDLE_S, wall_backstop
from reward_service.sandbox.toolchain import Toolchain, versions
from reward_service.simulators import cocotb_runtime
from reward_service.simulators.base import Job, SimRun
from reward_service.simulators.cocotb_runtime import Runtime

log = logging.getLogger(__name__)

DRIVER = Path(__file__).with_name("cocotb_driver.py")
EXPORTER = Path(__file__).with_name("rs_fcov_export.py")
#: Bumped when the build recipe changes in a way the key does not see.
FLOW_VERSION = "4"
#: Default timescale for modules without a `timescale directive (Icarus would use 1s/1s,
#: which cannot represent the ns timers cocotb tests use).
TIMESCALE = ("1ns", "1ps")
HEADER_SUFFIXES = hdl.HEADER_SUFFIXES
#: Our stand-ins for cocotb's PyGPI entry points (same call, plus a record of what failed).
PYGPI_STANDINS = {"cocotb.regression:_run_regression": "rs_fcov_export:run_regression"}
#: cocotb 2.1's default PyGPI entry points (pygpi/entry.py; ``_run_regression`` through our
#: stand-in, which records a failed test discovery), plus our coverage export, which must come
#: after ``_run_regression`` so that its shutdown callback runs after cocotb's.
PYGPI_USERS = ",".join(
    PYGPI_STANDINS.get(e, e)
    for e in [
        "cocotb_tools._coverage:start_cocotb_library_coverage",
        "cocotb.logging:_configure",
        "cocotb._init:init_package_from_simulation",
        "cocotb.regression:_run_regression",
        "rs_fcov_export:install",
    ]
)
PREMATURE = "simulation ended prematurely"
PREMATURE_19 = "before test run completion"  # cocotb 1.9's SimFailure text
#: PYGPI_USERS of a guarded run (docs/integrity-cocotb.md): the guard's locator wraps cocotb's
#: write scheduling once cocotb is initialised, before the test module is imported.
PYGPI_USERS_GUARDED = PYGPI_USERS.replace(
    "cocotb._init:init_package_from_simulation,", "cocotb._init:init_package_from_simulation,rs_cocotb_guard:install,"
)
#: cocotb 1.9 has no PyGPI users: our module is the entry point and starts cocotb itself.
PYGPI_ENTRY_19 = "rs_fcov_export:entry_cocotb19"
#: Environment of every test step (both runtimes), over the request's ``env``. cocotb's test
#: discovery builds a pytest ``Config`` only to install pytest's assertion rewriting
#: (``RegressionManager.setup_pytest_assertion_rewriting``, 1.9 and 2.1 alike), and pytest
#: then imports every ``pytest11`` plugin installed beside it: in the service's own
#: environment (schemathesis, hypothesis, anyio, xdist, ...) that took 5-9 s of a 6-10 s
#: test step, for a config whose plugins cocotb never calls. Assertion rewriting (the
#: messages of a failing ``assert``) is pytest's core, not a plugin, and stays.
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

#: The macros cocotb's own builds define for the design on every simulator (cocotb 1.9's
#: runner and makefiles, ``-D COCOTB_SIM=1`` for Icarus and Verilator; cocotb-test likewise):
#: designs read it (`ifdef COCOTB_SIM: shorter counters, dump files). cocotb 2.x's runner no
#: longer sets it, but the tests people send were written with it defined; ours set it for
#: both runtimes (one build serves both). A request's ``build.defines`` may override it.
COCOTB_DEFINES: dict[str, str | None] = {"COCOTB_SIM": "1"}


def build_defines(stimulus_kind: str, defines: Mapping[str, str | None]) -> dict[str, str | None]:
    """The macros the design is built with for a stimulus of ``stimulus_kind`` (``cocotb``,
    ``sv_testbench``) and the request's ``build.defines``: :data:`COCOTB_DEFINES` under the
    request's own for cocotb stimulus, the request's alone otherwise."""
    return {**COCOTB_DEFINES, **defines} if stimulus_kind == "cocotb" else dict(defines)


TOOLS = "/rs"  # driver + exporter, read-only
MODEL = "/model"  # build dir: writable while building, read-only in the run step
SRC = "/work/src"
RESULTS = "results.xml"
FCOV = "rs_fcov.yml"
STATUS = "rs_status.json"
BUILD_STATUS = "rs_build_status.json"
DISCOVERY = "rs_discovery.json"
#: What a run step leaves for the engine (the Docker sandbox copies back only these and the
#: caller's ``outputs``, e.g. the fast path's flag file).
RUN_OUTPUTS = tuple(f"/work/{n}" for n in (RESULTS, FCOV, STATUS, DISCOVERY, "coverage.dat", cocotb_guard.RECORD))


# --------------------------------------------------------------------------------------------
# what the flow needs of a simulator


class CocotbSimulator(Protocol):
    """A simulator that cocotb stimulus runs on (``IcarusSimulator``, ``VerilatorSimulator``):
    it builds the DUT for the test step; :func:`run_cocotb` does the rest alike for all."""

    #: cocotb's name of the simulator (``cocotb_tools.runner.get_runner``): "icarus", "verilator".
    name: str
    #: The simulator's own arguments in the test step (``test_args`` of cocotb's runner).
    cocotb_test_args: tuple[str, ...]
    #: The code-coverage file the test step writes in its run dir, or None (no code coverage).
    cocotb_coverage_file: str | None

    def build_cocotb(self, job: Job, tools: Path, out: SimRun) -> Path | None:
        """Build ``job``'s DUT (toplevel ``job.toplevel``) for the test step, with the driver
        and exporter staged at ``tools`` (host dir, bound at :data:`TOOLS`). Sets ``out.build``
        (and ``build_cached``, notes); returns the host build dir (bound read-only at
        :data:`MODEL` in the test step), or None when the build failed (``out.build_failed``).
        Raises :class:`~reward_service.sandbox.SandboxError` for failures of our own."""
        ...


# --------------------------------------------------------------------------------------------
# helpers (for the flow and the simulators' build steps)


def common_env(toolchain: Toolchain) -> dict[str, str]:
    """Environment of every cocotb step: plain logs, the libpython cocotb embeds, and the
    C.UTF-8 locale (other steps run in C, sandbox.base_env): cocotb 1.9 embeds Python the old
    way, which in the C locale keeps stdout and ``open()`` ASCII (no UTF-8 mode, PYTHONUTF8
    ignored), so a test printing or writing "✓" failed."""
    env = {"COCOTB_ANSI_OUTPUT": "0", "NO_COLOR": "1", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if toolchain.libpython:
        env["LIBPYTHON_LOC"] = toolchain.libpython
    return env


def _stage_tools(job: Job) -> Path:
    """Copy the driver, the exporter and the write guard's locator into ``<root>/rs_tools``
    (bound read-only at /rs), and the write guard's library when the job is guarded."""
    tools = job.root / "rs_tools"
    tools.mkdir(parents=True, exist_ok=True)
    for src in (DRIVER, EXPORTER, cocotb_guard.LOCATOR):
        shutil.copyfile(src, tools / src.name)
    if job.cocotb_guard_ports is not None:
        shutil.copyfile(cocotb_guard.library(job.cache_dir), tools / cocotb_guard.LIBRARY)
    return tools


def _driver_argv(step: str, spec: dict, python: str) -> list[str]:
    return [python, f"{TOOLS}/{DRIVER.name}", step, json.dumps(spec)]


def design_headers(job: Job) -> list[str]:
    """Header files of the design (``.vh``/``.svh``/... in ``src`` that are not stimulus files),
    relative to ``src``, sorted. Those that no file includes are in ``job.design_files`` too
    (the engine compiles them as sources, ``hdl.compilation_units``, where they stand in the
    request: :func:`sources`)."""
    stimulus = set(job.stimulus_files)
    found = []
    for path in job.src.rglob("*"):
        name = path.relative_to(job.src).as_posix()
        if path.is_file() and name.lower().endswith(HEADER_SUFFIXES) and name not in stimulus:
            found.append(name)
    return sorted(found)


def sources(job: Job) -> list[str]:
    """The design files given to the compiler, in ``job.design_files`` order (the request's):
    ``hdl.compilation_units(job.design_files, included, included)`` with ``included``
    found in the design's HDL files under ``src`` (not the stimulus's: they do not decide what
    the design is) through the search dirs ``hdl.search_dirs(names, job.include_dirs)``: what
    the SV flow compiles
    (``scoring/run.py``), so both flows build the same files in the same order. For the
    engine's jobs that is ``job.design_files`` itself; a job built by hand may list included
    headers there too. A design header that no file includes holds compilation-unit
    declarations (functions, parameters, macros for the files after it) meant to be compiled
    as a source, as the CVDP harnesses list it in ``VERILOG_SOURCES`` (e.g.
    ``prince_round_functions.vh``). Raises OSError when a file cannot be read."""
    stimulus = set(job.stimulus_files)
    files = {
        name: path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(job.src.rglob("*"))
        if path.is_file()
        and path.name.lower().endswith(hdl.HDL_SUFFIXES)
        and (name := path.relative_to(job.src).as_posix()) not in stimulus
    }
    dirs = hdl.search_dirs(list(files), job.include_dirs)
    included = hdl.included_files(files, dirs)  # the design's own includes (see compilation_units)
    return hdl.compilation_units(job.design_files, included, included)


def include_dirs(job: Job) -> list[str]:
    """Every directory holding a design file, as an absolute sandbox path (the runner resolves
    include dirs against its own cwd, not the build's), so that `include "x.vh"` finds a header
    next to the file that includes it (Icarus looks only in its cwd and ``-I`` dirs)."""
    dirs = {posixpath.dirname(f) for f in [*job.design_files, *design_headers(job)]}
    dirs |= {d for d in job.include_dirs if d != "."}  # the request's and the engine's search dirs
    # Not ``src`` itself: it is the build's cwd already, and Verilator would then name the
    # files it finds there by absolute path in coverage.dat (it searches -I dirs first).
    return sorted(posixpath.join(SRC, d) for d in dirs if d)


def hdl_toplevel(job: Job) -> str:
    """The cocotb HDL toplevel (``job.toplevel``); raises ValueError when the job names none."""
    if not job.toplevel:
        raise ValueError("cocotb stimulus needs the HDL toplevel (job.toplevel)")
    return job.toplevel


def _read_status(path: Path) -> dict:
    try:
        data = json.loads(read_output_text(path, max_bytes=65536))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


# --------------------------------------------------------------------------------------------
# build (the simulators' build_cocotb run their build step with these)


def build_spec(job: Job, simulator: str, build_args: list[str], includes: list[str], build_dir: str) -> dict:
    """The driver's build spec: cocotb's runner builds ``job.toplevel`` with ``simulator``
    (cocotb's name), ``build_args`` then :func:`sources`, the include dirs ``includes``
    (sandbox paths), in ``build_dir`` (a sandbox path), from cwd :data:`SRC`."""
    return {
        "simulator": simulator,
        "hdl_toplevel": job.toplevel,
        "sources": [],
        "build_args": [*build_args, *sources(job)],
        "includes": includes,
        "cwd": SRC,
        "timescale": list(TIMESCALE),
        "build_jobs": job.build_jobs,
        "status": f"/work/{BUILD_STATUS}",
        "build_dir": build_dir,
    }


def run_build(
    job: Job,
    tools: Path,
    spec: dict,
    outputs: tuple[str, ...],
    env: Mapping[str, str] | None = None,
    binds: Sequence[Bind] = (),
    **limits,
) -> tuple[ExecResult, dict]:
    """Run the driver's build step for ``spec`` (:func:`build_spec`) in ``job``'s sandbox, cwd
    ``/work`` (``job.root``), with the tools dir ``tools`` bound at :data:`TOOLS` besides
    ``binds``, :func:`common_env` over ``env``, and the job's compile limits unless ``limits``
    (``ExecSpec`` fields) say otherwise; ``outputs`` as in ``ExecSpec`` (the build status file
    is read after the step). Returns the step's result and the driver's build status
    (``{}`` if none). Raises :class:`~reward_service.sandbox.SandboxError` as ``Sandbox.run``."""
    toolchain = job.sandbox.toolchain()
    limits = {
        "cpu_s": job.limits.compile_s,
        "timeout_s": wall_backstop(job.limits.compile_s),
        "memory_mb": job.limits.memory_mb,
        "output_kb": job.limits.output_kb,
        **limits,
    }
    result = job.sandbox.run(
        ExecSpec(
            argv=_driver_argv("build", spec, toolchain.python),
            workdir=job.root,
            cwd="/work",
            binds=[*binds, Bind(tools, TOOLS)],
            env={**(env or {}), **common_env(toolchain)},
            outputs=outputs,
            **limits,
        )
    )
    return result, _read_status(job.root / BUILD_STATUS)


def mark_build_failed(out: SimRun, status: dict, what: str) -> None:
    """Record a failed build in ``out``, with the driver's error (``status``) as a note."""
    out.build_failed = True
    if status.get("error"):
        out.notes.append(f"{what}: {status['error']}")


# --------------------------------------------------------------------------------------------
# build cache (one for every simulator: ``<cache_dir>/models/<key>/``)

MODELS = "models"
MODEL_INFO = "rs_model.json"


def model_key(job: Job, simulator: str, build_args: Sequence[str], tools: Mapping[str, object]) -> str:
    """Content key (64 hex digits) of ``job``'s DUT built by ``simulator`` (cocotb's name, or a
    variant such as the fast path's) with ``build_args`` (the flags: defines, parameters,
    include dirs, coverage options), in the sandbox's toolchain. Covers: :data:`FLOW_VERSION`,
    toplevel, flags, :data:`TIMESCALE`, the builder's Python (version and path) and cocotb
    version, the toolchain identity, :func:`sources` and :func:`include_dirs`, ``tools`` (the
    simulator's versions and paths, and whatever else changes its build output; its names
    must not be the ones above), and the names and bytes of the design files, design headers
    and every other `include'd HDL file (a stimulus file too: the build sees it in ``src``).
    Raises ValueError when ``tools`` reuses a name; OSError when a file cannot be read."""
    toolchain = job.sandbox.toolchain()
    found = toolchain.versions
    meta: dict[str, object] = {
        "flow": FLOW_VERSION,
        "simulator": simulator,
        "toplevel": job.toplevel,
        "flags": list(build_args),
        "timescale": TIMESCALE,
        "python": found.get("python"),
        "cocotb": found.get("cocotb"),
        "executable": toolchain.python,
        "toolchain": toolchain.identity,
        "sources": sources(job),
        "includes": include_dirs(job),
    }
    clash = set(meta) & set(tools)
    if clash:
        raise ValueError(f"model_key: tools may not set {sorted(clash)}")
    h = hashlib.sha256()

    def put(value: str | bytes) -> None:
        data = value.encode() if isinstance(value, str) else value
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    put(json.dumps({**meta, **tools}, sort_keys=True))
    headers = design_headers(job)
    included = [f for f in job.include_files if f not in headers and f not in job.design_files]
    for name in [*job.design_files, *headers, *included]:
        put(name)
        put((job.src / name).read_bytes())
    return h.hexdigest()


def cached_model(
    job: Job,
    key: str,
    product: str,
    out: SimRun,
    build: Callable[[Path], bool],
    info: Mapping[str, object] | None = None,
) -> Path | None:
    """The build dir of ``key`` (a :func:`model_key`) in ``<job.cache_dir>/models/``: the
    published one when it holds ``product`` (the file the test step runs: the Verilator model
    binary, Icarus's ``sim.vvp``), with ``out.build_cached`` set and ``out.build`` a result of
    the look-up (exit 0, its duration); else built under the key's file lock.

    ``build(tmp)`` runs the build step with the host dir ``tmp`` bound writable at
    :data:`MODEL` and sets ``out.build``; it returns whether ``tmp`` now holds ``product``
    (False: a failed build, recorded in ``out`` by the caller, e.g. :func:`mark_build_failed`).
    Only a build that succeeded and hit no limit is published: every other file of ``tmp`` is
    removed, ``info`` (and the key, toplevel, build time, tool versions) goes to
    ``rs_model.json``, and ``tmp`` is renamed to ``models/<key>``; the dir is never changed
    afterwards (test steps bind it read-only). Returns None when the build failed. A
    :class:`~reward_service.sandbox.SandboxError` (or any other exception) from ``build``
    propagates, and nothing is published."""
    models = job.cache_dir / MODELS
    models.mkdir(parents=True, exist_ok=True)
    final = models / key
    start = time.monotonic()

    def cached() -> Path:
        out.build_cached = True
        out.build = ExecResult(
            exit_code=0,
            output=f"DUT model {key[:16]} reused from the build cache\n",
            output_bytes=0,
            dropped_bytes=0,
            duration_ms=(time.monotonic() - start) * 1000,
        )
        return final

    if (final / product).is_file():  # no lock needed: a published dir never changes
        return cached()
    lock = filelock.FileLock(str(models / f"{key}.lock"))
    try:
        lock.acquire(timeout=job.limits.compile_s + 60)
        held = True
    except filelock.Timeout:
        held = False
        out.notes.append("build lock timed out: building without it")
    try:
        if (final / product).is_file():
            return cached()
        return _build_and_publish(job, key, product, out, build, info or {}, final, held)
    finally:
        if held:
            lock.release()


def _build_and_publish(
    job: Job,
    key: str,
    product: str,
    out: SimRun,
    build: Callable[[Path], bool],
    info: Mapping[str, object],
    final: Path,
    held: bool,
) -> Path | None:
    """:func:`cached_model`'s build; ``held``: the caller holds the key's lock (else it timed
    out waiting, and another build of the key may be running)."""
    # Temp dirs of this key left by a killed build: safe to sweep only under the key's lock
    # (without it, one of them may be the lock holder's build in progress).
    if held:
        for stale in final.parent.glob(f"tmp-{key[:16]}-*"):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"tmp-{key[:16]}-", dir=final.parent))
    try:
        built = build(tmp)
        step = out.build
        if not built or step is None or step.limit_hit or step.exit_code != 0 or not (tmp / product).is_file():
            return None
        for entry in tmp.iterdir():  # only what the test step runs
            if entry.name == product:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        (tmp / MODEL_INFO).write_text(
            json.dumps(
                {
                    **info,
                    "key": key,
                    "toplevel": job.toplevel,
                    "design_files": job.design_files,
                    "build_ms": round(step.duration_ms, 1),
                    "versions": versions(job.sandbox),
                },
                indent=1,
            )
        )
        tmp.chmod(0o755)
        try:
            os.rename(tmp, final)
        except OSError:  # someone published it meanwhile (lock timed out): use theirs
            if not (final / product).is_file():
                raise
        return final
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# run


def _fresh_run_dir(job: Job) -> Path:
    run = job.run_dir
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    for name in job.stimulus_files:
        dst = run / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(job.src / name, dst)
    job.stage_data_files(run)
    return run


def _ended_by(out: SimRun, log_text: str, tests: list[TestOutcome], status: dict) -> str:
    run = out.run
    assert run is not None
    if run.timed_out:
        return "timeout"
    if run.limit_hit:
        return "killed"
    if status.get("returncode") in _FILE_SIZE_EXITS:  # the simulator, killed by SIGXFSZ
        return "file_size"
    premature = (
        any(p in (t.message or "") for t in tests for p in (PREMATURE, PREMATURE_19))
        or PREMATURE in log_text
        or PREMATURE_19 in log_text
    )
    if out.results_xml is not None:
        return "sim_ended_early" if premature else "finish"
    rc = status.get("returncode")
    if (isinstance(rc, int) and rc < 0) or (run.exit_code is not None and run.exit_code < 0):
        return "crash"
    return "exit"


#: The simulator's return code, in the driver's status file, when SIGXFSZ ended it (a file over
#: the file-size limit): -25 from subprocess, 153 through a shell.
_FILE_SIZE_EXITS = (-25, 128 + 25)


def run_cocotb(job: Job, simulator: CocotbSimulator, outputs: tuple[str, ...] = ()) -> SimRun:
    """Build the DUT (``job.toplevel``) with ``simulator``'s :meth:`~CocotbSimulator.build_cocotb`
    and run the cocotb test module ``job.test_module`` against it in a fresh run dir (``/work``
    in the test step); ``outputs`` are further sandbox paths the caller reads after the run
    (besides :data:`RUN_OUTPUTS`). Returns what the steps produced; the caller turns it into a
    result. Raises ValueError when the job
    names no toplevel or test module, :class:`~reward_service.sandbox.toolchain.ToolMissing`
    when the cocotb runtime cannot run, :class:`~reward_service.sandbox.SandboxError` for
    failures of the sandbox."""
    hdl_toplevel(job)
    test_module = job.test_module or next((Path(f).stem for f in job.stimulus_files if f.endswith(".py")), None)
    if not test_module:
        raise ValueError("cocotb stimulus needs a test module (job.test_module)")

    stimulus_py = {}
    for name in job.stimulus_files:
        if name.endswith(".py"):
            try:
                stimulus_py[name] = (job.src / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                pass
    toolchain = job.sandbox.toolchain()
    runtime: Runtime = cocotb_runtime.resolve(
        job.cocotb_runtime or cocotb_runtime.AUTO, stimulus_py, simulator.name, toolchain
    )  # ToolMissing -> sandbox_error
    out = SimRun()
    out.notes.extend(runtime.notes)
    tools = _stage_tools(job)
    build_dir = simulator.build_cocotb(job, tools, out)
    if build_dir is None:
        return out

    run = _fresh_run_dir(job)
    spec = {
        "simulator": simulator.name,
        "hdl_toplevel": job.toplevel,
        "hdl_toplevel_lang": "verilog",
        "test_module": test_module,
        "build_dir": MODEL,
        "test_dir": "/work",
        "results_xml": f"/work/{RESULTS}",
        "seed": job.seed,
        "status": f"/work/{STATUS}",
        "test_args": list(simulator.cocotb_test_args),
        "runtime": runtime.name,
        "plusargs": job.plusarg_args(),
    }
    env = {
        **job.cocotb_env,
        **common_env(toolchain),
        **TEST_ENV,
        "RS_FCOV_FILE": f"/work/{FCOV}",
        "RS_DISCOVERY_FILE": f"/work/{DISCOVERY}",
    }
    guarded = job.cocotb_guard_ports is not None
    if guarded:  # the driver preloads the guard into the simulator only (docs/integrity-cocotb.md)
        spec["preload"] = f"{TOOLS}/{cocotb_guard.LIBRARY}"
        env.update(
            RS_GUARD_TOP=hdl_toplevel(job),
            RS_GUARD_PORTS=",".join(job.cocotb_guard_ports or ()),
            RS_GUARD_OUTPUTS=",".join(job.cocotb_guard_outputs),
            RS_GUARD_FILE=f"/work/{cocotb_guard.RECORD}",
            RS_GUARD_TEST_DIR="/work",
        )
    binds = [Bind(tools, TOOLS), Bind(build_dir, MODEL)]
    if runtime.venv is not None:  # cocotb 1.9 (the venv is part of the sandbox's toolchain)
        env["PYGPI_ENTRY_POINT"] = PYGPI_ENTRY_19
        env["VIRTUAL_ENV"] = runtime.venv  # cocotb 1.9's embedding picks the venv from it
    else:
        env["PYGPI_USERS"] = PYGPI_USERS_GUARDED if guarded else PYGPI_USERS
    out.run = job.sandbox.run(
        ExecSpec(
            argv=_driver_argv("test", spec, runtime.python),
            workdir=run,
            cwd="/work",
            env=env,
            binds=binds,
            # CPU seconds: cocotb's start-up (Python, the simulator loading the model) counts
            cpu_s=job.limits.run_s,
            timeout_s=wall_backstop(job.limits.run_s),
            idle_s=RUN_IDLE_S,
            memory_mb=job.limits.memory_mb,
            processes=job.limits.processes,
            file_mb=job.limits.file_mb,
            output_kb=job.limits.output_kb,
            outputs=(*RUN_OUTPUTS, *outputs),
        )
    )

    out.results_xml = output_file(run / RESULTS)
    coverage = simulator.cocotb_coverage_file
    out.coverage_dat = output_file(run / coverage) if coverage else None
    out.functional = [f for f in [output_file(run / FCOV)] if f is not None]
    out.tests = parse_results_xml(out.results_xml) if out.results_xml else []
    status = _read_status(run / STATUS)
    out.ended_by = _ended_by(out, out.run.output, out.tests, status)
    cannot_write = _check_guard(job, out, run / cocotb_guard.RECORD) if guarded else None
    out.not_run = no_test_ran(out, status, _read_status(run / DISCOVERY), runtime.name, test_module, toolchain.versions)
    if out.not_run is not None:
        out.ended_by = "no_tests"
    if cannot_write is not None and not out.violations and not out.run.limit_hit:
        # the test used up what the simulator needed to write its coverage: its own doing, but
        # the machine's numbers (a resource_limit: the failure value, never cached), not a quiet 0
        out.not_run = (
            Status.resource_limit,
            "the cocotb test used up the simulator's file descriptors or disk space, so that it could not "
            f"write its coverage: {cannot_write}",
        )
    died = _died_on_our_runtime(out, runtime, simulator.name)
    other = _other_runtime(runtime, simulator.name, toolchain) if died is not None else None
    if died is not None and other is None and runtime.detection is not None:
        if runtime.detection.runtime == runtime.name:
            # no idiom of another version and no other runtime to try here: nothing was picked
            # wrongly, the death is the test's own (a test can raise such a message itself and
            # would be dropped as our sandbox_error: red team 12-04)
            died = None
    if died is not None and other is not None and job.cocotb_runtime == cocotb_runtime.AUTO:
        # routed to the runtime it may have been written for, and scored on that run whatever
        # it does there: a test that dies on both runtimes' APIs (or only says it does, in its
        # own failure message) is its own failure, never a dropped sample
        # with what is left of the run's CPU budget: one sample, one budget, whichever runtime
        used = out.run.cpu_s if out.run is not None and out.run.cpu_s is not None else 0.0
        left = job.limits.model_copy(update={"run_s": max(1.0, job.limits.run_s - used)})
        again = run_cocotb(dataclasses.replace(job, cocotb_runtime=other, limits=left), simulator, outputs)
        again.notes.insert(0, f"{died}; run again on {other}, the run scored")
        return again
    if died is not None:
        out.not_run = (Status.sandbox_error, died)
    elif out.not_run is None and status.get("error") and not out.run.limit_hit:
        out.notes.append(f"cocotb run: {status['error']}")
    return out


def _died_on_our_runtime(out: SimRun, runtime: Runtime, simulator: str) -> str | None:
    """The message of a run that died on the cocotb API of the runtime ``auto`` picked
    (:func:`cocotb_runtime.api_death` of the failed tests or the import failure) when that
    pick was ours (:meth:`Runtime.ours`: the test wanted the other runtime, or showed no
    version's idiom): a ``sandbox_error`` (reward None), never ``ok`` with the test's coverage
    up to its death. None otherwise (a runtime the request named, or a test written with this
    runtime's idioms: its own mistake, scored as it is)."""
    if not runtime.ours() or runtime.detection is None:
        return None
    messages = [t.message or "" for t in out.tests if not t.passed]
    if out.not_run is not None and out.not_run[0] != Status.sandbox_error:
        messages.append(out.not_run[1])
    death = cocotb_runtime.api_death(messages)
    if death is None:
        return None
    detection = runtime.detection
    if detection.runtime != runtime.name:
        why = f"it was written for {detection.runtime} ({detection.reason()}), which does not run on {simulator}"
    else:
        why = "auto found no idiom of either cocotb version in it and guessed"
    return f"the cocotb test died on the API of {runtime.name}, the runtime we picked: {death}; {why}: not scored"


def _other_runtime(runtime: Runtime, simulator: str, toolchain: Toolchain) -> str | None:
    """The cocotb runtime other than ``runtime`` that can run on ``simulator`` in the sandbox
    of ``toolchain`` (cocotb 1.9 on Icarus only, where installed), or None."""
    if runtime.name == cocotb_runtime.COCOTB_19:
        return cocotb_runtime.COCOTB_21
    if simulator == "icarus" and toolchain.cocotb19_python is not None:
        return cocotb_runtime.COCOTB_19
    return None


def _check_guard(job: Job, out: SimRun, record: Path) -> str | None:
    """Read the write guard's records (the record file and the step's output) into
    ``out.violations``. Raises :class:`~reward_service.sandbox.SandboxError` when a test ran
    but the guard never started (our failure: the run was unguarded, its numbers mean nothing).
    Returns the guard's line when the simulator could not write its coverage file
    (:func:`cocotb_guard.cannot_write`), else None."""
    assert out.run is not None
    try:
        text = read_output_text(record, max_bytes=1 << 20)
    except (OSError, UnsafeOutput):  # missing (deleted by the test, or no simulator started)
        text = ""
    found = cocotb_guard.records(text, out.run.output)
    out.violations = cocotb_guard.violations(found, hdl_toplevel(job))
    note = cocotb_guard.dropped_note(found)
    if note:
        out.notes.append(note)
    if not out.violations and (out.tests or out.results_xml is not None) and not cocotb_guard.armed(found):
        raise SandboxError("the cocotb write guard did not start in the simulator: the run was not checked")
    # only the record file (written from a descriptor the guard opened at start, which the
    # test cannot write): a test prints whatever it likes on the step's output
    return cocotb_guard.cannot_write(cocotb_guard.records(text))


#: The driver's exit statuses (cocotb_driver.EXIT_*) that mean the runner failed before or
#: around the simulator: our installation, not the test.
_RUNNER_FAILED = (2, 3)


def _skipped(test: TestOutcome) -> bool:
    return test.passed and (test.message or "").startswith("skipped:")


def no_test_ran(
    out: SimRun,
    status: dict,
    discovery: dict,
    runtime: str,
    test_module: str,
    versions: Mapping[str, str] | None = None,
) -> tuple[Status, str] | None:
    """Why the cocotb run ``out`` ran no test, as ``(status, message)``, or None when a test
    ran (or the run was cut short: timeouts, limits and crashes keep their own status).

    ``status`` is the driver's status file, ``discovery`` the exporter's record of a failed
    test discovery (``rs_fcov_export.record_discovery_error``; ``{}`` if none), ``runtime`` the
    cocotb runtime's name, ``versions`` the toolchain's probed versions (what is installed). Cases: the test module could not be imported (``compile_error`` for
    a ``SyntaxError``; ``sandbox_error`` when the missing module is one we ship,
    :func:`cocotb_runtime.shipped`), it defines no test, every test was skipped, no
    ``results.xml`` (``sandbox_error`` when the driver says the runner itself failed), a
    ``results.xml`` without test cases: ``runtime_error``."""
    if out.run is None or out.run.limit_hit or out.ended_by in ("timeout", "killed", "crash", "file_size"):
        return None
    if out.tests:
        if all(_skipped(t) for t in out.tests):
            return Status.runtime_error, (
                f"every cocotb test was skipped ({len(out.tests)} of {len(out.tests)}): no stimulus ran"
            )
        return None
    exception = str(discovery.get("exception") or "")
    kind = discovery.get("kind")
    if kind == "import":
        missing = discovery.get("missing")
        if isinstance(missing, str) and cocotb_runtime.shipped(runtime, missing, versions):
            return Status.sandbox_error, (
                f"the cocotb test module could not be imported: {exception} "
                f"({missing} is shipped for {runtime}: the installation is broken)"
            )
        bad = Status.compile_error if discovery.get("syntax_error") else Status.runtime_error
        return bad, f"the cocotb test module could not be imported: {exception}"
    if kind == "no_tests":
        return Status.runtime_error, (
            f"the cocotb test module {test_module!r} defines no test (no @cocotb.test() function was discovered)"
        )
    if kind:
        bad = Status.compile_error if discovery.get("syntax_error") else Status.runtime_error
        return bad, f"cocotb's test discovery failed, no test ran: {exception}"
    if out.results_xml is not None:  # cocotb 1.9 writes an empty one when it discovers no test
        return Status.runtime_error, (
            f"results.xml lists no test case: the cocotb test module "
            f"{test_module!r} defines no test (no @cocotb.test() function "
            "was discovered) or none ran"
        )
    # The status file and the log are writable by the test itself (it runs in the same sandbox,
    # and can kill the driver before it writes): ours only when the step's exit code agrees,
    # bwrap's 1 when it could not start the driver, the driver's own 2/3 when the runner failed.
    if not status and out.run.exit_code == 1:  # no status: the driver never ran
        # bubblewrap could not start it (e.g. a runtime's Python not bound): its one line is all
        # the output (a test can print a `bwrap: ` line of its own, then die: red team 12-04)
        started = out.run.output.strip()
        if started.startswith("bwrap: ") and "\n" not in started:
            return Status.sandbox_error, f"the sandbox could not start the cocotb driver: {started}"
    if status.get("exit") in _RUNNER_FAILED and out.run.exit_code == status.get("exit"):
        return Status.sandbox_error, f"the cocotb runner failed, no test ran: {status.get('error')}"
    last = _last_exception(out.run.output)
    return Status.runtime_error, ("the cocotb run wrote no results.xml, no test ran" + (f": {last}" if last else ""))


_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b:?.*)$", re.M)


def _last_exception(log_text: str) -> str | None:
    """The last ``SomeError: text`` line of a log (a Python traceback's final line)."""
    found = _EXCEPTION_LINE.findall(log_text[-200_000:])
    return found[-1].strip()[:500] if found else None


# --------------------------------------------------------------------------------------------
# results.xml

MAX_RESULTS_BYTES = 16 * 1024 * 1024
MAX_MESSAGE = 2000


def _sim_time_ns(testcase: ET.Element) -> float | None:
    props = {p.get("name"): p.get("value") for p in testcase.iter("property")}
    raw = testcase.get("sim_time_ns")
    scale = 1.0
    if raw is None:
        raw = props.get("sim_time_duration")
        unit = props.get("sim_time_unit", "ns")
        scale = {"fs": 1e-6, "ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}.get(unit or "ns", 1.0)
    try:
        return float(raw) * scale if raw is not None else None
    except ValueError:
        return None


def parse_results_xml(path: Path) -> list[TestOutcome]:
    """cocotb's JUnit XML as test outcomes, in file order. A test case with a ``<failure>`` or
    ``<error>`` child failed; a skipped one counts as passed with message ``skipped: ...``.
    The simulated time (ns) is taken from cocotb's ``sim_time_*`` properties.

    The file is written in the (untrusted) run dir: a missing, oversized or malformed file
    yields an empty list rather than an exception."""
    path = Path(path)
    try:
        root = ET.fromstring(read_output(path, max_bytes=MAX_RESULTS_BYTES))
    except (OSError, UnsafeOutput, ET.ParseError) as exc:
        log.warning("%s: unreadable results file: %s", path, exc)
        return []
    outcomes: list[TestOutcome] = []
    for case in root.iter("testcase"):
        if (case.get("classname") or "").split(".")[0] == "rs_fcov_export":
            continue
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        message = None
        if bad is not None:
            message = bad.get("message")
            if not message:
                lines = (bad.text or "").strip().splitlines()
                message = lines[-1] if lines else bad.tag
        elif skipped is not None:
            message = "skipped: " + (skipped.get("message") or "")
        outcomes.append(
            TestOutcome(
                name=case.get("name") or "?",
                passed=bad is None,
                message=message[:MAX_MESSAGE] if message else None,
                sim_time_ns=_sim_time_ns(case),
            )
        )
    return outcomes
