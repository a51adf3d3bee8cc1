"""Which proved-unreachable points apply to one sample.

A proof is about the DUT's top module with its own parameter values, driven by free inputs.
It applies to a sample only when the sample measures exactly that: the DUT instance (the
coverage scope of an SV testbench, or the cocotb toplevel) is of the design's top module,
with no parameter override (by the testbench or by ``build.parameters``). Otherwise no point
is excluded and the note says why.
"""

from __future__ import annotations

import re
from pathlib import Path

from reward_service import hdl
from reward_service.fastcov import params
from reward_service.fastcov.unit import Unsupported
from reward_service.formal.model import PointKey
from reward_service.formal.prover import ProofResult, prove
from reward_service.models import CocotbStimulus, Design, SvTestbench
from reward_service.sandbox import Sandbox


def applicable(
    design: Design,
    stimulus: SvTestbench | CocotbStimulus,
    scope: str | None,
    build_parameters: dict[str, str],
    sandbox: Sandbox | None,
    cache_dir: Path | None,
) -> tuple[list[PointKey] | None, ProofResult | None, str]:
    """(proved-unreachable keys or None, the proof, a note) for one sample. The proof runs
    on first use of a design and is cached under ``cache_dir`` (it does not depend on the
    stimulus). None: no point is excluded (the note says why)."""
    if build_parameters:
        return None, None, "not applied: build.parameters give the DUT other parameter values than the ones proved"
    files = {n: t for n, t in design.files.items() if hdl.is_hdl_source(n)}
    result = prove(files, design.toplevel, sandbox=sandbox, cache_dir=cache_dir)
    if result.status not in ("proved", "partial"):  # partial: its proved points only
        return None, result, _not_proved(result)
    if isinstance(stimulus, SvTestbench):
        tb = {n: t for n, t in stimulus.files.items() if hdl.is_hdl_source(n)}
        top = design.toplevel or _model_top(files)
        if not scope or top is None or not _instantiates(tb, top, scope):
            return (
                None,
                result,
                f"not applied: the testbench's `{scope}` is not an instance of the DUT's top module, "
                "which is what the proof is about",
            )
        try:
            if params.testbench_values(files, tb) is not None:
                return (
                    None,
                    result,
                    "not applied: the testbench gives the DUT other parameter values than the ones proved",
                )
        except Unsupported as exc:
            return None, result, f"not applied: the DUT's parameter values in the testbench are unknown ({exc})"
    elif design.toplevel is None:
        return None, result, "not applied: no DUT toplevel"
    return list(result.unreachable), result, ""


#: The prover's reasons for a design it does not model, in a hardware engineer's words.
_PLAIN = (
    (
        re.compile(r"(\d+) clock edges"),
        "its flip-flops use {0} clock edges (two clocks, or posedge and negedge flip-flops); the proof models "
        "designs clocked on one edge only",
    ),
    (re.compile(r"the design has a latch"), "the design has a latch, which the proof does not model"),
    (re.compile(r"cell \$(mem\w*)"), "the design has a memory array, which the proof does not model"),
    (re.compile(r"several drivers"), "a signal has several drivers, which the proof does not model"),
)


def _not_proved(result: ProofResult) -> str:
    """Why ``result`` (not ``proved``/``partial``) excludes nothing, in plain words with the
    prover's own reason after them."""
    reason = result.reason or "no reason given"
    if result.status == "timeout":
        return f"the proof ran out of time on this design ({reason})"
    if result.status == "unsupported":
        for pattern, text in _PLAIN:
            m = pattern.search(reason)
            if m:
                return text.format(*m.groups()) + f" (prover: {reason})"
        return f"the proof does not model this design ({reason})"
    return f"the proof could not run ({reason})"


def explain(
    dead: list[PointKey] | None, why: str, unreachable: dict[str, int], judged_on_reachable: bool
) -> tuple[str, bool]:
    """The note of one sample's unreachability proof in plain words (``CoverageReport.
    unreachable_note``) and whether it changed the judged figure (points excluded: the note
    then goes into the result's message too). ``dead``/``why`` are :func:`applicable`'s,
    ``unreachable`` the sample's proved points per metric (``MetricCoverage.unreachable``),
    ``judged_on_reachable`` the request's ``exclude_unreachable``."""
    if dead is None:
        if why.startswith("not applied: "):
            return f"every coverage point counts: the unreachability proof was {why.replace(': ', ' (', 1)})", False
        return f"every coverage point counts: no point could be proved unreachable, because {why}", False
    total = sum(unreachable.values())
    if total == 0:
        return "every coverage point counts: the unreachability proof found no point that no stimulus can cover", False
    per = ", ".join(f"{m} {n}" for m, n in unreachable.items() if n)
    points = f"{total} coverage point{'s' if total != 1 else ''} ({per})"
    if judged_on_reachable:
        return (
            f"{points} can never be covered by any stimulus (proved by formal analysis) and "
            "are left out of the figure the targets are judged on; the reward uses the raw coverage",
            True,
        )
    return (
        f"{points} can never be covered by any stimulus (proved by formal analysis); "
        "targets are judged on the raw coverage (coverage.exclude_unreachable false)",
        False,
    )


def _model_top(files: dict[str, str]) -> str | None:
    from reward_service.formal.model import build_model

    try:
        return build_model(files).top
    except Exception:  # no top: no exclusion
        return None


def _instantiates(testbench: dict[str, str], module: str, instance: str) -> bool:
    """Whether a testbench file instantiates ``module`` as ``instance`` (textual, comments
    stripped; a miss only costs the exclusion)."""
    pattern = re.compile(rf"\b{re.escape(module)}\s*(#\s*\(.*?\)\s*)?\b{re.escape(instance)}\s*\(", re.S)
    return any(pattern.search(hdl.strip_comments(t)) for t in testbench.values())
