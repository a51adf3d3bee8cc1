"""Scoring with ``engine=fast``/``auto``: the fast path, its fallback to Verilator, the shadow
check (called by :meth:`reward_service.scoring.engine.Engine._score_with_engine`).

The engine hands this module a prepared request and a run callable
(:data:`~reward_service.scoring.types.Simulate`, bound to its sandbox and settings): the fast
path runs samples through it and never reaches into the engine.

Fallback (the result's ``fallback`` says why, ``engine`` is then ``verilator``): a requested
metric the fast path does not measure, a design it cannot instrument (also under the parameter
values an SV testbench gives it, :mod:`.params`), a DUT process waiting on an event control
an SV testbench's zero-width pulse could wake on Icarus only
(:func:`.screen.design_unguarded_waits`), ``auto`` with a design
whose self-check did not agree, and a sample Icarus cannot compile or run (compile error,
crash without flags). A timeout is not a fallback: the stimulus did not end on Icarus either;
nor is a cocotb run that ran no test (``ended_by == "no_tests"``: the test module does not
import, defines no test or skips every test, on any simulator).

Shadow check: with probability ``settings.fastcov_shadow_rate`` a fast-path sample with status
``ok`` is also scored on Verilator and the two diffed point by point; the result carries the
:class:`~reward_service.models.ShadowCheck` (the API counts disagreements) and a disagreement
is logged with the inputs.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import re
import time

from reward_service import hdl
from reward_service.engine_choice import FALLBACK
from reward_service.fastcov.backend import (
    FastSimulator,
    ParameterContext,
    all_metrics,
    build_unsupported,
    instrumented,
)
from reward_service.fastcov.compare import diff_points
from reward_service.fastcov.unit import Unsupported
from reward_service.models import ScoreResult, ShadowCheck, Status
from reward_service.scoring.types import Prepared, Scored, Simulate
from reward_service.settings import Settings
from reward_service.simulators import cocotb_flow, get_simulator

log = logging.getLogger(__name__)

#: Outcomes of the fast path that send the sample to Verilator.
_FALLBACK_STATUSES = {Status.compile_error: "compile", Status.runtime_error: "run"}
#: Appended to a fallback whose fault is known (ours, or the user's source on Icarus).
SCORED_ON_VERILATOR = " — scored on Verilator"
_TOOL_PREFIX = re.compile(r"^\w+ rejected the design or stimulus: ")
_ERROR_FILE = re.compile(r"([\w./-]+\.(?:sv|v|svh|vh|sva)):\d+")


def unsupported(prepared: Prepared) -> str | None:
    """Why the fast path cannot score this request at all, or None."""
    return plan(prepared)[1]


def design_defines(prepared: Prepared) -> dict[str, str | None]:
    """The macros the design is built with (``cocotb_flow.build_defines``: the request's, and
    cocotb's own ``COCOTB_SIM`` for cocotb stimulus): the fast path parses the design with
    them, so it instruments and checks the code the simulators compile."""
    return cocotb_flow.build_defines(prepared.stimulus.kind, prepared.request.build.defines)


def plan(prepared: Prepared) -> tuple[ParameterContext | None, str | None]:
    """``(context, None)`` when the fast path can score the request (``context``: the SV
    testbench's parameter values for the DUT, when not the DUT's own, to instrument under),
    ``(None, reason)`` when it cannot."""
    spec = prepared.request.coverage
    missing = [m for m in spec.metrics if m != "functional" and m not in all_metrics()]
    if missing:
        return None, f"the fast path does not measure {', '.join(missing)}"
    if spec.fsm:
        return None, "the fast path has no FSM coverage"
    build_reason = build_unsupported(prepared.request.build, dict(prepared.design.files))
    if build_reason:
        return None, build_reason
    defines = design_defines(prepared)
    try:
        instrumented(dict(prepared.design.files), tuple(spec.metrics), defines=defines)
    except Unsupported as exc:
        return None, ours("the design", str(exc))
    # A blocking write in one clocked process read by another is a race at the edge: Icarus and
    # Verilator may order the two processes differently, so the fast path could count points
    # Verilator does not (or miss ones it does). Verilator is the reference: it scores these.
    from reward_service.fastcov.screen import design_race

    race = design_race(dict(prepared.design.files), defines)
    if race:
        return (
            None,
            f"the design has a race at a clock edge the fast path may order unlike Verilator: {race}{SCORED_ON_VERILATOR}",
        )
    if prepared.stimulus.kind == "sv_testbench":
        # cocotb's writes of one time step land together (the last one wins): no pulse to see
        from reward_service.fastcov.screen import design_unguarded_waits

        waits = design_unguarded_waits(dict(prepared.design.files), defines)
        if waits:
            return None, f"{waits}{SCORED_ON_VERILATOR}"
    ports = _connected_array_ports(prepared)
    if ports:
        shown = ", ".join(f"{m}.{n}" for m, n in ports[:3]) + (" ..." if len(ports) > 3 else "")
        return None, (
            f"Icarus 11 does not connect unpacked-array ports ({shown}): their values would "
            f"read X on the other side{SCORED_ON_VERILATOR}"
        )
    from reward_service.fastcov.screen import reads_files

    # the request's data files, copied as written into the run's cwd: a testbench may read those
    data_files = [n for n in (*prepared.design.files, *prepared.stimulus.files) if hdl.is_data_file(n)]
    reading = reads_files(prepared.stimulus, data_files)
    if reading:
        return None, f"{reading}: the fast path's coverage token would be readable (docs/fastcov.md)"
    context = None
    # expression points and the sampled signals depend on parameter values (fastcov/params.py)
    if prepared.stimulus.kind == "sv_testbench" and {"expr", "toggle"} & set(spec.metrics):
        from reward_service.fastcov.params import testbench_values

        files = dict(prepared.stimulus.files)
        # headers too: instrument() compiles the others and reads these where they are included
        testbench = {n: t for n, t in files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)}
        try:
            signature = testbench_values(dict(prepared.design.files), files)
        except Unsupported as exc:
            return None, str(exc)
        if signature is not None:
            context = ParameterContext(testbench, signature)
            try:
                instrumented(dict(prepared.design.files), tuple(spec.metrics), context=context)
            except Unsupported as exc:
                return None, ours("the design under the testbench's parameter values", str(exc))
    return context, None


def simulate(prepared: Prepared, timings: dict[str, float], run: Simulate, settings: Settings) -> Scored:
    """Score ``prepared`` on the fast path, or on Verilator (:data:`~reward_service.engine_choice.FALLBACK`)
    with the reason in ``fallback``; ``run`` simulates (the engine's), ``timings`` collects the
    stages (ms), ``settings`` gives the shadow rate and the ``auto`` decisions' cache."""
    scored, fallback = attempt(prepared, timings, run, settings)
    if scored is not None:
        return scored
    scored = run(prepared, timings, get_simulator(FALLBACK))
    scored.result.fallback = fallback
    return scored


def attempt(
    prepared: Prepared, timings: dict[str, float], run: Simulate, settings: Settings
) -> tuple[Scored | None, str | None]:
    """The fast path's own part of :func:`simulate`: ``(scored, None)`` when the fast path
    scored the sample (shadow check included), ``(None, reason)`` when it goes to Verilator
    (the reason becomes the result's ``fallback``). Nothing runs on Verilator here
    (``bench/fallback_rate.py`` measures the fallback rate with it)."""
    request = prepared.request
    t0 = time.perf_counter()
    context, fallback = plan(prepared)
    timings["fast_plan"] = (time.perf_counter() - t0) * 1000  # instrumentation (cached per design)
    if fallback is None and request.engine == "auto":
        from reward_service.fastcov.choice import decide

        t0 = time.perf_counter()
        try:
            decision = decide(prepared.design, run, settings, design_defines(prepared))
        except Unsupported as exc:  # the self-check's fast run refused the design's build
            decision = None
            fallback = f"auto chose Verilator for this design: {exc}{SCORED_ON_VERILATOR}"
        # the design's self-check (a fast and a Verilator run) when not decided before: its own stage
        timings["auto_check"] = (time.perf_counter() - t0) * 1000
        if decision is not None and not decision.fast:
            fallback = f"auto chose Verilator for this design: {decision.reason}"
    if fallback is not None:
        return None, fallback
    fast = FastSimulator(tuple(request.coverage.metrics), context)
    t0 = time.perf_counter()
    try:
        scored = run(prepared, dict(timings), fast)
    except Unsupported as exc:  # found after the build: the sources make the token placeholder
        timings["fast_attempt"] = (time.perf_counter() - t0) * 1000
        return None, f"{exc}{SCORED_ON_VERILATOR}"
    result = scored.result
    # A cocotb run that ran no test (import error, no test defined) fails alike on Verilator.
    reason = None if result.ended_by == "no_tests" else _FALLBACK_STATUSES.get(result.status)
    if reason is None:
        if result.status == Status.ok and random.random() < settings.fastcov_shadow_rate:
            t1 = time.perf_counter()
            result.shadow = shadow_check(prepared, scored, run)
            result.timings["shadow"] = (time.perf_counter() - t1) * 1000
        return scored, None
    fault = whose_fault(prepared, result, run)
    # the failed fast run and the plain Icarus run that told whose fault: before Verilator's stages
    timings["fast_attempt"] = (time.perf_counter() - t0) * 1000
    return None, fault


def _connected_array_ports(prepared: Prepared) -> list[tuple[str, str]]:
    """The design's unpacked-array ports that a run would connect: all of them, except those
    of a cocotb toplevel (cocotb reads the toplevel's own signals, no port between)."""
    files = {n: t for n, t in prepared.design.files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)}
    toplevel = getattr(prepared.stimulus, "toplevel", None) if prepared.stimulus.kind == "cocotb" else None
    defines = json.dumps(design_defines(prepared), sort_keys=True)
    return [p for p in _array_ports(json.dumps(files, sort_keys=True), defines) if p[0] != toplevel]


@functools.lru_cache(maxsize=256)
def _array_ports(files_json: str, defines_json: str) -> tuple[tuple[str, str], ...]:
    from reward_service.fastcov.emulate import array_ports
    from reward_service.fastcov.instrument import headers_of, parse

    # parses: instrumented() took the design
    files = json.loads(files_json)
    sources, _ = parse(
        {n: t for n, t in files.items() if hdl.is_hdl_source(n)},
        defines=json.loads(defines_json),
        headers=headers_of(files),
    )
    return tuple(p for source in sources for p in array_ports(source))


def ours(what: str, reason: str) -> str:
    """The fallback message of a failure of our instrumentation of ``what``."""
    return f"the fast path could not instrument {what}: {reason}{SCORED_ON_VERILATOR}"


def whose_fault(prepared: Prepared, fast: ScoreResult, run: Simulate) -> str:
    """The fallback message of a sample the fast path could not compile or run (``fast``:
    its compile_error / runtime_error result), saying whose fault it is. The design and
    testbench as written are run on plain Icarus: when they fail the same way there, it is the
    user's source (or a limit of Icarus): "Icarus rejects the testbench: <error>"; when only
    the instrumented build fails, it is ours: "the fast path could not instrument the
    design: ...". Both end with " — scored on Verilator". ``run`` simulates."""
    plain = run(prepared, {}, get_simulator("icarus")).result
    # the fast run's own error text: the rewrites keep line numbers, and its hints name the engine
    error = _TOOL_PREFIX.sub("", fast.message)[:300]
    if plain.status == fast.status or (fast.status == Status.runtime_error and plain.status == Status.compile_error):
        verb = "rejects" if plain.status == Status.compile_error else "cannot run"
        return f"Icarus {verb} {_where(prepared, error)}: {error}{SCORED_ON_VERILATOR}"
    if fast.status == Status.compile_error:
        reason = f"Icarus rejects the instrumented build ({error}), not the sources as written"
    else:
        reason = f"the instrumented run failed ({error}), not the run of the sources as written"
    return ours(_where(prepared, error, "the design"), reason)


def _where(prepared: Prepared, error: str, default: str = "the testbench") -> str:
    """``the design`` or ``the testbench``: whose file the error names."""
    found = _ERROR_FILE.search(error)
    if found is None:
        return default
    name = found.group(1)
    return "the design" if name in prepared.design.files else "the testbench"


def shadow_check(prepared: Prepared, fast: Scored, run: Simulate) -> ShadowCheck:
    """Score the sample on Verilator too (``run``) and diff the points of the metrics both
    measure with ``fast``'s (the fast path's scored run)."""
    scored = run(prepared, {}, get_simulator(FALLBACK))
    reference = scored.result
    if reference.status != Status.ok:
        return ShadowCheck(agreed=False, message=f"Verilator run {reference.status.value}: {reference.message[:200]}")
    metrics = set(all_metrics()) & set(prepared.request.coverage.metrics)
    diff = diff_points(fast.points, scored.points, metrics)
    check = ShadowCheck(
        agreed=diff.equal,
        differences=len(diff.only_fast) + len(diff.only_reference),
        metrics=diff.per_metric(),
        message=diff.describe(3) or None,
    )
    if not diff.equal:
        log.warning(
            "fastcov shadow check disagrees (%d points: %s); inputs: %s",
            check.differences,
            check.message,
            json.dumps(
                {"design": prepared.design.files, "stimulus": prepared.stimulus.files, "metrics": sorted(metrics)}
            )[:200_000],
        )
    return check
