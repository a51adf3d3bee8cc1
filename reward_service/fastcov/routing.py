"""Scoring with ``engine=fast``/``auto``: the fast path, its fallback to Verilator, the shadow
check (called by :meth:`reward_service.engine.Engine._score_with_engine`).

Fallback (the result's ``fallback`` says why, ``engine`` is then ``verilator``): a requested
metric the fast path does not measure, a design it cannot instrument, an SV testbench giving
the DUT other parameter values when ``expr`` is measured (:mod:`.params`), ``auto`` with a design
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

import json
import logging
import random
from typing import Any

from reward_service.fastcov.backend import FastSimulator, all_metrics, build_unsupported, instrumented
from reward_service.fastcov.compare import diff_points
from reward_service.fastcov.unit import Unsupported
from reward_service.models import ScoreResult, ShadowCheck, Status

log = logging.getLogger(__name__)

#: Outcomes of the fast path that send the sample to Verilator.
_FALLBACK_STATUSES = {Status.compile_error: "Icarus could not compile the sample",
                      Status.runtime_error: "the Icarus run failed"}


def unsupported(prepared: Any) -> str | None:
    """Why the fast path cannot score this request at all, or None."""
    spec = prepared.request.coverage
    missing = [m for m in spec.metrics if m != "functional" and m not in all_metrics()]
    if missing:
        return f"the fast path does not measure {', '.join(missing)}"
    if spec.fsm:
        return "the fast path has no FSM coverage"
    build_reason = build_unsupported(prepared.request.build, dict(prepared.design.files))
    if build_reason:
        return build_reason
    try:
        instrumented(dict(prepared.design.files), tuple(spec.metrics))
    except Unsupported as exc:
        return f"not instrumentable: {exc}"
    from reward_service.fastcov.screen import reads_files

    reading = reads_files(prepared.stimulus)
    if reading:
        return f"{reading}: the fast path's coverage token would be readable (docs/fastcov.md)"
    if "expr" in spec.metrics and prepared.stimulus.kind == "sv_testbench":
        from reward_service.fastcov.params import overridden_parameters

        return overridden_parameters(dict(prepared.design.files), dict(prepared.stimulus.files))
    return None


def simulate(engine: Any, prepared: Any, timings: dict[str, float]) -> ScoreResult:
    """Score ``prepared`` on the fast path, or on Verilator with the reason in ``fallback``."""
    from reward_service.simulators.verilator import VerilatorSimulator

    request = prepared.request
    fallback = unsupported(prepared)
    if fallback is None and request.engine == "auto":
        from reward_service.fastcov.choice import decide

        decision = decide(engine, prepared.design)
        if not decision.fast:
            fallback = f"auto chose Verilator for this design: {decision.reason}"
    if fallback is None:
        fast = FastSimulator(tuple(request.coverage.metrics))
        result = engine._simulate(prepared, dict(timings), simulator=fast)
        # A cocotb run that ran no test (import error, no test defined) fails alike on Verilator.
        reason = None if result.ended_by == "no_tests" else _FALLBACK_STATUSES.get(result.status)
        if reason is None:
            if result.status == Status.ok and random.random() < engine.settings.fastcov_shadow_rate:
                result.shadow = shadow_check(engine, prepared, result)
            return result
        fallback = f"{reason}: {result.message[:300]}"
    result = engine._simulate(prepared, timings, simulator=VerilatorSimulator())
    result.fallback = fallback
    return result


def shadow_check(engine: Any, prepared: Any, fast: ScoreResult) -> ShadowCheck:
    """Score the sample on Verilator too and diff the points of the metrics both measure."""
    from reward_service.simulators.verilator import VerilatorSimulator

    reference = engine._simulate(prepared, {}, simulator=VerilatorSimulator())
    if reference.status != Status.ok:
        return ShadowCheck(agreed=False, message=f"Verilator run {reference.status.value}: {reference.message[:200]}")
    metrics = set(prepared.request.coverage.metrics) & set(all_metrics())
    diff = diff_points(fast._points, reference._points, metrics)
    check = ShadowCheck(agreed=diff.equal, differences=len(diff.only_fast) + len(diff.only_reference),
                        metrics=diff.per_metric(), message=diff.describe(3) or None)
    if not diff.equal:
        log.warning("fastcov shadow check disagrees (%d points: %s); inputs: %s", check.differences,
                    check.message, json.dumps({"design": prepared.design.files,
                                               "stimulus": prepared.stimulus.files,
                                               "metrics": sorted(metrics)})[:200_000])
    return check
