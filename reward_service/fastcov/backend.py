"""The fast path as a simulator backend: the instrumented DUT on Icarus, in the sandbox.

SV testbench: Icarus's one sandbox step (:func:`~reward_service.simulators.icarus.compile_and_run`)
on the instrumented DUT and the emulation-rewritten testbench; vvp finishes on the run limit's
SIGINT with ``-n``, so the ``final`` blocks write the flags at the run-time limit too.
``timings.build`` is then 0 and ``run`` covers both. cocotb: the cocotb flow on Icarus with the
instrumented DUT as the toplevel's source. The flag file carries a per-run token: lines without it are ignored, so a
testbench cannot forge coverage by writing the file itself.

The cocotb build is cached per design as the plain Icarus one (:func:`.cocotb_flow.cached_model`):
it compiles the instrumented texts with the design's :func:`build_placeholder` in place of
:data:`TOKEN_PLACEHOLDER`, keyed also by :data:`~reward_service.revisions.FASTCOV_VERSION` and the
instrumentation's metrics and emulation, and each run gets a copy of ``sim.vvp`` with its own token
in place of that placeholder (:func:`stamp_token`; it stands only in ``$fwrite`` format strings,
which vvp keeps verbatim), bound read-only at ``/model`` like the cached build itself.

Only the instrumented sources carry the placeholder (the design's own text may not hold
:data:`TOKEN_PLACEHOLDER`: :class:`~reward_service.fastcov.unit.SourceFile`), but the design or an
SV testbench can still *make* it: Icarus folds a constant concatenation such as
``{"__RS_FASTCOV", "_TOKEN__ F m ..."}`` into one string of ``sim.vvp``, and a design header or
data file is not instrumented. So the token never replaces the public placeholder in a compiled
model (the SV run's sources get the token itself, the cocotb build a placeholder derived from the
instrumented text, which no design can spell), and a ``sim.vvp`` holding
:data:`TOKEN_PLACEHOLDER` at all is refused (:func:`check_placeholders`: :class:`Unsupported`, the
sample goes to Verilator): the instrumentation puts none there, so the sources made it, to forge
flag lines.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import shutil
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reward_service import hdl
from reward_service.coverage.points import CoveragePoint
from reward_service.fastcov.expr import model_variant
from reward_service.fastcov.instrument import (
    FLAG_FILE,
    TOKEN_PLACEHOLDER,
    Instrumented,
    emulate_testbench,
    instrument,
)
from reward_service.fastcov.results import FlagFileError, read_points
from reward_service.fastcov.unit import Unsupported
from reward_service.revisions import FASTCOV_VERSION
from reward_service.safe_io import UnsafeOutput, output_file, read_output, read_output_text
from reward_service.sandbox.toolchain import require_iverilog
from reward_service.simulators.base import Job, SimRun, SimulatorBackend
from reward_service.simulators.icarus import (
    COCOTB_PRODUCT,
    COMPILE_FILE_MB,
    IcarusSimulator,
    compile_and_run,
    compile_failed,
    run_ending,
)


@dataclass
class FastRun(SimRun):
    """A :class:`SimRun` with the coverage points read from the flag file (``None``: the run
    wrote no flags of this run, e.g. it crashed)."""

    points: list[CoveragePoint] | None = None


def design_key(files: dict[str, str]) -> str:
    """Content hash of a design (file names and texts)."""
    h = hashlib.sha256()
    for name in sorted(files):
        for part in (name, files[name]):
            data = part.encode()
            h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _instrument_cached(
    key: str,
    files_json: str,
    metrics: tuple[str, ...],
    emulation: str,
    toplevel: str | None,
    defines_json: str,
    variant: str,
) -> Instrumented | Unsupported:
    # variant (expr.model_variant(), read again by instrument()): only a key part
    try:
        return instrument(json.loads(files_json), metrics, emulation, toplevel, defines=json.loads(defines_json))
    except Unsupported as exc:
        return exc


@dataclass(frozen=True)
class ParameterContext:
    """The testbench to elaborate the DUT under (:func:`.params.testbench_values`): its HDL
    files and the DUT modules' parameter value sets they give (the cache key: two testbenches
    giving the same values get the same instrumentation)."""

    testbench: dict[str, str]
    signature: tuple


#: Instrumentations under a testbench's parameter values, keyed without the testbench's text.
_CONTEXT_CACHE: OrderedDict[tuple, Instrumented | Unsupported] = OrderedDict()
_CONTEXT_LOCK = threading.Lock()


def instrumented(
    files: dict[str, str],
    metrics: tuple[str, ...] | None = None,
    emulation: str = "two_state",
    toplevel: str | None = None,
    context: ParameterContext | None = None,
    defines: Mapping[str, str | None] | None = None,
) -> Instrumented:
    """:func:`~reward_service.fastcov.instrument.instrument` for the code ``metrics`` (default:
    all the fast path measures) with the build's ``defines`` (name -> value or None), cached
    per design content and defines (and, with ``context``, per the testbench's parameter
    values) and the expression point model of the selected Verilator
    (:func:`~reward_service.fastcov.expr.model_variant`). Raises :class:`Unsupported` (cached too)."""
    wanted = tuple(sorted(set(metrics) - {"functional"})) if metrics is not None else all_metrics()
    defines_json = json.dumps(dict(defines or {}), sort_keys=True)
    variant = model_variant()
    result: Instrumented | Unsupported | None
    if context is None:
        result = _instrument_cached(
            design_key(files), json.dumps(files, sort_keys=True), wanted, emulation, toplevel, defines_json, variant
        )
    else:
        key = (design_key(files), context.signature, wanted, emulation, toplevel, defines_json, variant)
        with _CONTEXT_LOCK:
            result = _CONTEXT_CACHE.get(key)
            if result is not None:
                _CONTEXT_CACHE.move_to_end(key)
        if result is None:
            try:
                result = instrument(files, wanted, emulation, toplevel, context=context.testbench, defines=defines)
            except Unsupported as exc:
                result = exc
            with _CONTEXT_LOCK:
                _CONTEXT_CACHE[key] = result
                while len(_CONTEXT_CACHE) > 256:
                    _CONTEXT_CACHE.popitem(last=False)
    if isinstance(result, Unsupported):
        raise result
    return result


def all_metrics() -> tuple[str, ...]:
    """The code metrics the fast path measures (expr only when its point kind is installed)."""
    from reward_service.fastcov.instrument import _kinds

    return tuple(sorted({m for k in _kinds() for m in k.metrics}))


def build_unsupported(build: Any, design_files: dict[str, str]) -> str | None:
    """Why the fast path cannot honour the request's ``build`` options
    (:class:`~reward_service.models.BuildOptions`), or None. The DUT is instrumented from its
    text as written: a parameter override of the top, or a define the design reads, would
    change the points under it (plusargs and include dirs act at run or build time: fine)."""
    if build.parameters:
        return (
            f"build parameter overrides ({', '.join(build.parameters)}) are not applied on the "
            "fast path (its points are enumerated from the DUT as written)"
        )
    from reward_service.simulators.cocotb_flow import COCOTB_DEFINES

    # cocotb's own (COCOTB_SIM=1) is one every cocotb build sets: the fast path parses the
    # design with the build's macros (routing.design_defines), this one included
    others = [n for n, v in build.defines.items() if COCOTB_DEFINES.get(n, ...) != v]
    used = hdl.macros_read(design_files.values(), others)
    if used:
        return f"the design reads the build's define(s) {', '.join(used)} (the fast path instruments it as written)"
    return None


class FastSimulator(SimulatorBackend):
    """Icarus with the instrumented DUT: Verilator's line/branch/toggle (and expr, when the
    expression kind is installed) points plus test outcomes and functional coverage."""

    name = "fast"
    unavailable_reason = (
        "the fast path measures Verilator's line, branch, toggle and expression "
        "points; use engine=verilator (CLI --engine verilator) for user cover points "
        "and FSM coverage"
    )

    def __init__(self, metrics: tuple[str, ...] | None = None, context: ParameterContext | None = None) -> None:
        #: the code metrics to instrument for (default: all the fast path measures)
        self.metrics = metrics
        #: the SV testbench's parameter values for the DUT, when not the DUT's own
        self.context = context
        #: the metrics this backend measures (the base class's attribute, per instance here:
        #: which point kinds are installed is known once the kinds are imported)
        self.measures = all_metrics() + ("functional",)

    def prepare(self, job: Job, emulation: str, stamp: bool = True) -> tuple[Instrumented, str]:
        """Write the instrumented DUT over ``job.src``; returns the instrumentation and this
        run's token, which replaces :data:`TOKEN_PLACEHOLDER` in the instrumented sources, or
        with ``stamp`` False :func:`build_placeholder` does (the cocotb build, cached across
        runs: :func:`stamp_token` puts the token into the run's copy of the compiled DUT).
        Headers and data files are written as they are: the placeholder in them is the
        design's, not ours. Raises :class:`Unsupported`."""
        # the design's headers only: instrument() reads those a design file includes, and a
        # stimulus header must never stand in for one (prepare refuses a name that could)
        headers = [
            n
            for n in job.include_files
            if n.lower().endswith(hdl.HEADER_SUFFIXES) and n not in job.design_files and n not in job.stimulus_sources
        ]
        design = {n: (job.src / n).read_text(encoding="utf-8") for n in [*job.design_files, *headers]}
        inst = instrumented(
            design,
            self.metrics,
            emulation,
            job.toplevel if emulation == "zero_init" else None,
            self.context if emulation == "two_state" else None,
            job.defines,
        )
        token = secrets.token_hex(16)
        ours = token if stamp else build_placeholder(inst)
        for name, text in inst.files.items():
            if hdl.is_hdl_source(name):  # what instrument() parsed and instrumented
                text = text.replace(TOKEN_PLACEHOLDER, ours)
            (job.src / name).write_text(text, encoding="utf-8")
        return inst, token

    def run_sv(self, job: Job) -> FastRun:
        inst, token = self.prepare(job, "two_state")
        hdl_tb = {n: (job.src / n).read_text(encoding="utf-8") for n in job.stimulus_files}
        included = {n: (job.src / n).read_text(encoding="utf-8") for n in job.include_files}
        rewritten, skipped = emulate_testbench(hdl_tb, included)
        for name, text in rewritten.items():
            (job.src / name).write_text(text, encoding="utf-8")
        out = FastRun()
        if skipped:
            out.notes.append(f"testbench file(s) {', '.join(skipped)} kept 4-state (pyslang could not parse them)")
        toolchain = job.sandbox.toolchain()
        compiler = require_iverilog(toolchain)
        out.build, out.run = compile_and_run(
            job, compiler, toolchain.vvp, outputs=(f"/work/run/{FLAG_FILE}", f"/work/obj/{COCOTB_PRODUCT}")
        )
        if compile_failed(out.build):
            out.build_failed = True
            return out
        # the sources carried the token itself: a placeholder in the build is the design's or
        # the testbench's own (a folded concatenation, a header's macro), never scored here
        check_placeholders(_read_vvp(job.root / "obj" / COCOTB_PRODUCT, max(job.limits.file_mb, COMPILE_FILE_MB)), 0)
        out.ended_by = run_ending(out.run)
        if out.ended_by == "finish" and not skipped and "$finish called" not in out.run.output:
            out.ended_by = "no_events"  # emulate.mark_endings prints it before every $finish (not in skipped files)
        out.points = _read_flags(job.run_dir, token, inst, out.notes)
        return out

    def run_cocotb(self, job: Job) -> FastRun:
        emulation = "zero_init"  # cocotb tests read logic vectors
        inst, token = self.prepare(job, emulation, stamp=False)
        variant = {
            "fastcov": FASTCOV_VERSION,
            "metrics": list(inst.metrics),
            "emulation": emulation,
            "model": model_variant(),
        }
        icarus = _InstrumentedIcarus(variant, token, build_placeholder(inst))
        base = icarus.run_cocotb(job, outputs=(f"/work/{FLAG_FILE}",))  # /work: the run dir
        out = FastRun(**{f: getattr(base, f) for f in base.__dataclass_fields__})
        if out.run is not None:
            out.points = _read_flags(job.run_dir, token, inst, out.notes)
        return out


class _InstrumentedIcarus(IcarusSimulator):
    """Icarus's cocotb flow on the instrumented DUT (written over ``job.src`` with
    ``placeholder``, its :func:`build_placeholder`): the build is cached under ``variant``
    (:meth:`IcarusSimulator.build_cocotb`), and the test step runs a copy stamped with ``token``."""

    def __init__(self, variant: Mapping[str, object], token: str, placeholder: str) -> None:
        self.variant = variant
        self.token = token
        self.placeholder = placeholder

    def build_cocotb(
        self, job: Job, tools: Path, out: SimRun, variant: Mapping[str, object] | None = None
    ) -> Path | None:
        model = super().build_cocotb(job, tools, out, {**self.variant, **(variant or {})})
        # checked on every run, the cached build's too: the build is the design's alone (the
        # cocotb stimulus is Python), and its key covers every file compiled into it
        return None if model is None else stamp_token(model, job.root / "fast_model", self.token, self.placeholder)


def build_placeholder(inst: Instrumented) -> str:
    """What stands for the token in ``inst``'s instrumented sources when they are compiled once
    for many runs (the cocotb build): ``__RS_FC_<32 hex digits>__``, a hash of the instrumented
    texts. Not :data:`TOKEN_PLACEHOLDER`, which a design can make (a folded concatenation); this
    one it cannot, as the hash covers the design's own text. The same design gives the same
    placeholder in every process, so the build cache keeps working."""
    digest = hashlib.sha256(b"reward-service fastcov build placeholder\0" + design_key(inst.files).encode())
    return f"__RS_FC_{digest.hexdigest()[:32]}__"


def check_placeholders(vvp: bytes, expected: int) -> None:
    """Refuse a compiled model (``vvp``: ``sim.vvp``'s bytes) holding more :data:`TOKEN_PLACEHOLDER`
    than ``expected`` (those the instrumentation put there: none since the build placeholder,
    :func:`build_placeholder`). More means the design or the stimulus made the placeholder, e.g.
    by a concatenation of string constants Icarus folds into one, to have the token stamped into
    lines of its own. Raises :class:`Unsupported` (the sample is scored on Verilator)."""
    found = vvp.count(TOKEN_PLACEHOLDER.encode())
    if found > expected:
        raise Unsupported(
            f"the compiled design and stimulus hold the fast path's token placeholder `{TOKEN_PLACEHOLDER}` "
            f"{found - expected} time(s) besides the instrumentation's own (e.g. a concatenation of string "
            "constants Icarus folds into one): lines written with it could pass for the run's coverage flags"
        )


def stamp_token(model: Path, dest: Path, token: str, placeholder: str) -> Path:
    """A fresh ``dest`` holding ``model``'s ``sim.vvp`` (a cached build of the instrumented DUT)
    with ``token`` in place of every ``placeholder`` (the :func:`build_placeholder` the build was
    compiled with): the run's own flag token, where the cached build is shared by every run of
    the design. Returns ``dest``. Raises :class:`Unsupported` when the model holds
    :data:`TOKEN_PLACEHOLDER` (:func:`check_placeholders`), OSError."""
    vvp = (model / COCOTB_PRODUCT).read_bytes()
    check_placeholders(vvp, 0)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / COCOTB_PRODUCT).write_bytes(vvp.replace(placeholder.encode(), token.encode()))
    return dest


def _read_vvp(path: Path, limit_mb: int) -> bytes:
    """The SV run's ``sim.vvp`` (at most ``limit_mb``, the step's file size limit). Raises
    :class:`Unsupported` when it cannot be read (the build could not be checked)."""
    try:
        return read_output(path, max_bytes=limit_mb << 20)
    except (OSError, UnsafeOutput) as exc:
        raise Unsupported(f"the fast path could not check its compiled {COCOTB_PRODUCT}: {exc}") from exc


def _read_flags(run_dir: Path, token: str, inst: Instrumented, notes: list[str]) -> list[CoveragePoint] | None:
    path = output_file(run_dir / FLAG_FILE)
    if path is None:
        return None
    try:
        return read_points(read_output_text(path, max_bytes=256 << 20), token, inst)
    except FlagFileError:
        return None
    except (ValueError, IndexError, KeyError, UnsafeOutput, OSError) as exc:
        # IndexError/KeyError: a line naming a point the design has none of (a forged line: the
        # run's own lines name only its points), never our internal error (a sandbox_error the
        # trainer would drop)
        notes.append(f"fast-path flag file unreadable: {type(exc).__name__} {exc}")
        return None
