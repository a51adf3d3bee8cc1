"""The prover as the scoring pipeline's plug-in: the points of a measured sample proved
unreachable, counted in its report and, when the request asks, excluded from the judged figure
(docs/formal.md). The composition root (:mod:`reward_service.engine`) gives :func:`reachable`
to the engine as its :class:`~reward_service.scoring.types.Plugins` ``prover``."""

from __future__ import annotations

from pathlib import Path

from reward_service import hdl
from reward_service.coverage.points import CoveragePoint
from reward_service.formal.exclude import annotate
from reward_service.formal.prover import kept
from reward_service.formal.verdicts import applicable, explain
from reward_service.formal.witnessed import load as load_witnessed
from reward_service.models import CoverageReport, UncoveredPoint
from reward_service.sandbox import Sandbox
from reward_service.scoring.types import Prepared, Reachable
from reward_service.simulators import cocotb_flow


def reachable(
    prepared: Prepared,
    points: list[CoveragePoint],
    report: CoverageReport,
    unavailable: dict[str, str],
    uncovered: list[UncoveredPoint],
    sandbox: Sandbox,
    cache_dir: Path,
) -> Reachable:
    """The engine's prover plug-in (:data:`~reward_service.scoring.types.Prover`): the report targets are judged on (``report`` itself unless proved points were excluded),
    the uncovered points, the proved keys that apply to the sample with how each was proved,
    and whether the proof behind them is the design's own verdict
    (:func:`~reward_service.formal.prover.kept`: not a prover that could not run, whose result
    must not be cached). The points proved unreachable (docs/formal.md) are counted in
    ``report``, its ``unreachable_note`` says what the proof did, and when the request's
    ``exclude_unreachable`` is True they are left out of the judged figure and of ``uncovered``.
    ``sandbox`` runs the proof; ``cache_dir`` is the engine's cache: the design's verdicts are
    kept under its ``formal/``, the closures that witness points under its ``ceiling/``."""
    request, spec = prepared.request, prepared.request.coverage
    defines = cocotb_flow.build_defines(prepared.stimulus.kind, request.build.defines)
    read = hdl.macros_read(prepared.design.files.values(), defines)
    if read:  # the proof models the design as written, not the branch these macros build
        report.unreachable_note = (
            f"no point excluded as unreachable: the design reads {', '.join(read)}, which this build sets, "
            "and the proof models the design as written"
        )
        return report, uncovered, {}, True
    dead, proof, why = applicable(
        prepared.design, prepared.stimulus, spec.scope, request.build.parameters, sandbox, cache_dir / "formal"
    )
    settled = proof is None or kept(proof)
    if dead is None:
        report.unreachable_note, _ = explain(None, why, {}, bool(spec.exclude_unreachable))
        return report, uncovered, {}, settled
    files = {n: t for n, t in prepared.design.files.items() if hdl.is_hdl_source(n)}
    closure = load_witnessed(cache_dir, files, prepared.design.toplevel)
    witnessed = closure[0] if closure else None
    reach, reach_uncovered = annotate(
        report, points, dead, list(spec.metrics), unavailable, spec.weights, witnessed=witnessed
    )
    per_metric = {m: entry.unreachable for m, entry in report.metrics.items()}
    report.unreachable_note, changed = explain(dead, why, per_metric, bool(spec.exclude_unreachable))
    assert proof is not None  # dead is the proof's
    kinds = dict(zip(proof.unreachable, proof.kinds or ["proved"] * len(proof.unreachable), strict=True))
    applied = {k: kinds[k] for k in dead}
    if changed:
        return reach, reach_uncovered, applied, settled
    return report, uncovered, applied, settled
