"""Parameter values a testbench gives the DUT, against the ones the instrumentation used.

The instrumented DUT is made once per design, elaborated from the DUT files alone: a top DUT
module gets its default parameters. Line, branch and toggle flags follow the simulation's own
parameter values (generate existence and signal widths are resolved by Icarus at run time),
but expression points are enumerated at instrumentation from the elaborated body, and
Verilator's ``expr`` points depend on parameter values (a generate branch, a width, a folded
constant). A testbench instantiating the DUT as ``dut #(.W(8))`` where the design's default
is 4 would otherwise be scored against the wrong point set (measured: expr 13/13 on the fast
path where Verilator reports 33/34).

:func:`overridden_parameters` compares, per DUT module, the parameter values of every instance
in a compilation of the design plus the testbench with the value sets the DUT-only
compilation has (which the ``expr`` kind already checked to give equal points). Another
value set sends the sample to Verilator (``fallback`` names the module and values).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from reward_service import hdl
from reward_service.fastcov.instrument import parse
from reward_service.fastcov.unit import Unsupported, instance_bodies, parameter_values


def instance_values(compilation: Any) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    """Module name -> the parameter value sets of its elaborated instances in ``compilation``.
    Raises whatever pyslang's elaboration raises."""
    found: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for body in instance_bodies(compilation):
        found.setdefault(body.definition.name, set()).add(parameter_values(body))
    return found


@functools.lru_cache(maxsize=256)
def _design_values(files: tuple[tuple[str, str], ...]) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    _, compilation = parse(dict(files))
    return instance_values(compilation)


def overridden_parameters(design: dict[str, str], testbench: dict[str, str]) -> str | None:
    """Why the testbench's parameter values for the DUT differ from the instrumented ones, or
    None when every DUT module instance keeps a value set the DUT files alone give it.

    ``design``/``testbench``: file name -> text (headers are not compiled). A testbench
    pyslang cannot parse or elaborate (one that includes a header, say) counts as overriding
    when the text of any of its files, headers included, has a ``defparam``, or a ``#`` or a
    macro after the name of a DUT module (the safe side: Verilator scores it)."""
    dut = {n: t for n, t in design.items() if not n.lower().endswith(hdl.HEADER_SUFFIXES)}
    tb = {n: t for n, t in testbench.items() if not n.lower().endswith(hdl.HEADER_SUFFIXES)}
    try:
        own = _design_values(tuple(sorted(dut.items())))
    except Unsupported:
        return None  # the design is not instrumentable anyway; instrument() says why
    try:
        _, compilation = parse({**dut, **tb})
        seen = instance_values(compilation)
    except Exception:  # noqa: BLE001 - Unsupported (syntax, an `include) or an elaboration failure
        return _textual_override(own, testbench)
    for module, value_sets in sorted(seen.items()):
        allowed = own.get(module)
        if allowed is None:
            continue  # a testbench module
        for values in sorted(value_sets - allowed):
            changed = dict(values).items() - _union(allowed)
            shown = ", ".join(f"{k}={v}" for k, v in sorted(changed)) or "its parameters"
            return (f"the testbench instantiates {module} with {shown}, other than the design's "
                    "own parameter values (expression points depend on them)")
    return None


def _union(value_sets: set[tuple[tuple[str, str], ...]]) -> set[tuple[str, str]]:
    return {pair for values in value_sets for pair in values}


def _textual_override(own: dict[str, Any], testbench: dict[str, str]) -> str | None:
    for name, text in testbench.items():
        code = hdl.strip_comments(text)
        if re.search(r"\bdefparam\b", code):
            return f"{name} uses defparam (not elaborated here), so the DUT's parameters may differ"
        for module in own:
            if re.search(rf"\b{re.escape(module)}\s*[#`]", code):
                return (f"{name} instantiates {module} with parameters (not elaborated here), "
                        "so the DUT's parameters may differ")
    return None
