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
        return None, None, "build.parameters override the DUT's parameters"
    files = {n: t for n, t in design.files.items() if hdl.is_hdl_source(n)}
    result = prove(files, design.toplevel, sandbox=sandbox, cache_dir=cache_dir)
    if result.status not in ("proved", "partial"):  # partial: its proved points only
        return None, result, f"{result.status}: {result.reason}"
    if isinstance(stimulus, SvTestbench):
        tb = {n: t for n, t in stimulus.files.items() if hdl.is_hdl_source(n)}
        top = design.toplevel or _model_top(files)
        if not scope or top is None or not _instantiates(tb, top, scope):
            return None, result, f"the testbench's `{scope}` is not an instance of the DUT's top module"
        try:
            if params.testbench_values(files, tb) is not None:
                return None, result, "the testbench gives the DUT other parameter values"
        except Unsupported as exc:
            return None, result, f"parameter values unknown: {exc}"
    elif design.toplevel is None:
        return None, result, "no DUT toplevel"
    return list(result.unreachable), result, ""


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
