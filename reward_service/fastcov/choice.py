"""``engine=auto``: one decision per design (content hash), made once and cached on disk, so all
samples of a problem are scored by the same engine.

A design goes to the fast path when it instruments and a *self-check* agrees: a generated
testbench (deterministic pseudo-random values on every input, clocks toggled apart from the
data, no ``$random``) is scored by the fast path and by Verilator, and every point (key and
covered state) must be equal. Otherwise the design stays on Verilator and the decision keeps
the reason. Decisions live in ``<cache_dir>/fastcov/decisions/<key>.json``, written under a file
lock (one self-check per design even with many workers); the key covers the design texts,
the toplevel, the metrics the fast path measures and its version.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import filelock
from pyslang import ast

from reward_service import hdl
from reward_service.engine_choice import FALLBACK
from reward_service.fastcov.backend import FastSimulator, all_metrics, design_key, instrumented
from reward_service.fastcov.compare import diff_points
from reward_service.fastcov.expr import model_variant
from reward_service.fastcov.instrument import headers_of, parse
from reward_service.fastcov.unit import Unsupported
from reward_service.models import Design, ScoreRequest, SvTestbench
from reward_service.revisions import FASTCOV_VERSION  # bumped there, with the other revisions
from reward_service.scoring.types import Prepared, Simulate
from reward_service.settings import Settings
from reward_service.simulators import get_simulator

log = logging.getLogger(__name__)

SELF_CHECK_TOP = "rs_selfcheck_tb"
SELF_CHECK_INSTANCE = "dut"
SELF_CHECK_CYCLES = 300
_CLOCK = re.compile(r"(?i)(^|_)(clk|clock)(_|$)|^clk|clk$")
_RESET = re.compile(r"(?i)(rst|reset)")


@dataclass
class Decision:
    """Which engine scores a design under ``engine=auto``, and why."""

    engine: str  # "fast" or "verilator"
    reason: str
    key: str
    decided_at: float = 0.0
    points: int = 0

    @property
    def fast(self) -> bool:
        return self.engine == "fast"


def decision_key(
    design_files: dict[str, str], toplevel: str | None, defines: Mapping[str, str | None] | None = None
) -> str:
    """Content key of a decision: design texts, toplevel, the build's macros (when any), the
    metrics the fast path measures, its version and the expression point model of the selected
    Verilator (the decision compares the fast path with that Verilator)."""
    meta: list = [toplevel, list(all_metrics()), FASTCOV_VERSION, model_variant()]
    if defines:
        meta.append(sorted(defines.items()))
    return design_key({**design_files, "\0meta": json.dumps(meta)})


def decide(
    design: Design, run: Simulate, settings: Settings, defines: Mapping[str, str | None] | None = None
) -> Decision:
    """The cached decision for ``design`` built with ``defines`` (the macros the sample's build
    sets, e.g. cocotb's ``COCOTB_SIM``), making it (instrumentation and a self-check of every
    metric the fast path measures, simulated by ``run``) when none is cached; decisions live
    under ``settings.cache_dir`` and ``settings.fastcov_self_check`` can skip the self-check.
    Thread and process safe."""
    metrics = all_metrics()
    key = decision_key(design.files, design.toplevel, defines)
    folder = Path(settings.cache_dir) / "fastcov" / "decisions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}.json"
    cached = _load(path)
    if cached is not None:
        return cached
    with filelock.FileLock(str(folder / f"{key}.lock")):
        cached = _load(path)
        if cached is not None:
            return cached
        decision = _decide(design, metrics, key, run, settings, dict(defines or {}))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".decision-")
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(decision), fh)
        os.replace(tmp, path)
        log.info("fastcov: design %s -> %s (%s)", key[:12], decision.engine, decision.reason)
        return decision


def _load(path: Path) -> Decision | None:
    try:
        return Decision(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _decide(
    design: Design,
    metrics: tuple[str, ...],
    key: str,
    run: Simulate,
    settings: Settings,
    defines: dict[str, str | None],
) -> Decision:
    now = time.time()
    try:
        instrumented(dict(design.files), metrics, defines=defines)
        tb = self_check_testbench(dict(design.files), design.toplevel)
    except Unsupported as exc:
        return Decision("verilator", f"not instrumentable: {exc}", key, now)
    if not settings.fastcov_self_check:
        return Decision("fast", "instruments (self-check disabled by settings)", key, now)
    stimulus = SvTestbench(files={"rs_selfcheck_tb.sv": tb}, top=SELF_CHECK_TOP)
    request = ScoreRequest.model_validate(
        {
            "design": design.model_dump(),
            "engine": "verilator",
            "stimulus": stimulus.model_dump(),
            "coverage": {"scope": SELF_CHECK_INSTANCE, "metrics": list(metrics)},
            "build": {"defines": defines},
            "limits": {"run_s": 60, "compile_s": 600},
        }
    )
    # the generated testbench names its top and instantiates the DUT as the scope: prepared as is
    prepared = Prepared(request=request, design=design, stimulus=stimulus)
    fast_run = run(prepared, {}, FastSimulator(metrics))
    reference_run = run(prepared, {}, get_simulator(FALLBACK))
    fast, reference = fast_run.result, reference_run.result
    if reference.status != "ok":
        return Decision(
            "verilator", f"self-check: Verilator run {reference.status.value}: {reference.message[:200]}", key, now
        )
    if fast.status != "ok":
        return Decision("verilator", f"self-check: fast-path run {fast.status.value}: {fast.message[:200]}", key, now)
    diff = diff_points(fast_run.points, reference_run.points, set(metrics) - {"functional"})
    if not diff.equal:
        return Decision(
            "verilator",
            f"self-check: {len(diff.only_fast) + len(diff.only_reference)} point(s) "
            f"differ from Verilator ({diff.describe(2)})",
            key,
            now,
        )
    return Decision(
        "fast",
        f"self-check agreed with Verilator on {len(reference_run.points)} points",
        key,
        now,
        points=len(reference_run.points),
    )


def self_check_testbench(files: dict[str, str], toplevel: str | None = None) -> str:
    """A deterministic testbench for the design's top module: each step sets every data input
    from a 64-bit LFSR, then toggles the clocks; inputs named like resets are 1 one time in
    eight. Raises :class:`Unsupported` for ports it cannot drive (interfaces, unpacked arrays)."""
    sources, compilation = parse({n: t for n, t in files.items() if hdl.is_hdl_source(n)}, headers=headers_of(files))
    tops = [i for i in compilation.getRoot().topInstances]
    top = next((i for i in tops if i.name == toplevel), None) if toplevel else (tops[0] if len(tops) == 1 else None)
    if top is None:
        raise Unsupported(f"self-check: cannot tell the design's top module (found {[i.name for i in tops]})")
    decls, conns, drive, clocks = [], [], [], []
    for port in top.body.portList:
        if port.kind != ast.SymbolKind.Port:
            raise Unsupported(f"self-check: port {port.name} of kind {port.kind.name}")
        ty = port.type.canonicalType
        if not ty.isIntegral:
            raise Unsupported(f"self-check: port {port.name} is not integral ({port.type})")
        width = ty.bitWidth
        sig = f"p_{port.name}"
        dims = f" [{width - 1}:0]" if width > 1 else ""
        direction = str(port.direction).split(".")[-1].lower()
        conns.append(f".{port.name}({sig})")
        if direction == "in":
            decls.append(f"  logic{dims} {sig} = '0;")
            if width == 1 and _CLOCK.search(port.name):
                clocks.append(sig)
            elif width == 1 and _RESET.search(port.name):
                active_low = port.name.lower().endswith(("_n", "n", "_b", "_l"))
                bit = "(s[3] & s[17] & s[29])"
                drive.append(f"      {sig} = {'~' if active_low else ''}{bit};")
            else:
                reps = (width + 63) // 64
                drive.append(f"      s = rs_next(s); {sig} = {{{reps}{{s}}}};")
        else:
            decls.append(f"  wire{dims} {sig};")
    clock_lines = "".join(f"      {c} = ~{c};\n" for c in clocks)
    return (
        f"module {SELF_CHECK_TOP};\n" + "\n".join(decls) + "\n"
        f"  logic [63:0] s = 64'h0123456789abcdef;\n"
        "  function automatic logic [63:0] rs_next(input logic [63:0] v);\n"
        "    return {v[62:0], v[63] ^ v[62] ^ v[60] ^ v[59]};\n  endfunction\n"
        f"  {top.name} {SELF_CHECK_INSTANCE} ({', '.join(conns)});\n"
        "  initial begin\n"
        f"    repeat ({SELF_CHECK_CYCLES}) begin\n      #5;\n      s = rs_next(s);\n" + "\n".join(drive) + "\n"
        f"      #5;\n{clock_lines}      #5;\n{clock_lines}    end\n    $finish;\n  end\nendmodule\n"
    )
