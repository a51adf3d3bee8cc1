"""Parameter values a testbench gives the DUT, against the ones the DUT has on its own.

The instrumented DUT is made once per design, elaborated from the DUT files alone: a top DUT
module gets its default parameters. Line and branch flags follow the simulation's own
parameter values (generate existence is resolved by Icarus at run time), but expression points
are enumerated at instrumentation from the elaborated body, and so are the signals sampled for
toggles (a signal of a generate block that only exists under other values would be missed):
Verilator's ``expr`` points depend on parameter values (a generate branch, a width, a folded
constant). A testbench instantiating the DUT as ``dut #(.W(8))`` where the design's default is
4 was measured expr 13/13 on the DUT's own point set where Verilator reports 33/34.

:func:`testbench_values` compares, per DUT module, the parameter values of every instance in a
compilation of the design plus the testbench with the value sets the DUT-only compilation
has. When they differ, the DUT is instrumented under the testbench's elaboration
(:func:`~reward_service.fastcov.instrument.instrument` with ``context``), and the result is
keyed by those value sets (two testbenches giving the same values share it).
:func:`overridden_parameters` says in words what differs.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from reward_service import hdl
from reward_service.fastcov.instrument import headers_of, parse
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
    design = dict(files)
    _, compilation = parse({n: t for n, t in design.items() if hdl.is_hdl_source(n)}, headers=headers_of(design))
    return instance_values(compilation)


#: The parameter value sets of the DUT modules' instances under a testbench:
#: ``((module, ((name, value), ...)), ...)``, sorted.
Signature = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def testbench_values(design: dict[str, str], testbench: dict[str, str]) -> Signature | None:
    """The parameter value sets the testbench's instances give the DUT modules, when any of
    them is one the DUT files alone do not give (None: the DUT's own elaboration holds).

    ``design``/``testbench``: file name -> text (headers are not compiled). Raises
    :class:`Unsupported` with the reason when pyslang cannot elaborate the testbench and its
    text suggests an override (see :func:`overridden_parameters`)."""
    found = _values(design, testbench)
    if found is None:
        return None
    own, seen = found
    if all(value_sets <= own[m] for m, value_sets in seen.items() if m in own):
        return None
    return tuple(sorted((m, values) for m, value_sets in seen.items() if m in own for values in value_sets))


def overridden_parameters(design: dict[str, str], testbench: dict[str, str]) -> str | None:
    """What differs between the testbench's parameter values for the DUT and its own, or
    None when every DUT module instance keeps a value set the DUT files alone give it.

    ``design``/``testbench``: file name -> text (headers are not compiled). A testbench
    pyslang cannot parse or elaborate (one that includes a header, say) counts as overriding
    when the text of any of its files, headers included, has a ``defparam``, or a ``#`` or a
    macro after the name of a DUT module (the safe side: Verilator scores it)."""
    try:
        found = _values(design, testbench)
    except Unsupported as exc:
        return str(exc)
    if found is None:
        return None
    own, seen = found
    for module, value_sets in sorted(seen.items()):
        allowed = own.get(module)
        if allowed is None:
            continue  # a testbench module
        for values in sorted(value_sets - allowed):
            changed = dict(values).items() - _union(allowed)
            shown = ", ".join(f"{k}={v}" for k, v in sorted(changed)) or "its parameters"
            return f"the testbench instantiates {module} with {shown}, other than the design's own parameter values"
    return None


def _values(design: dict[str, str], testbench: dict[str, str]) -> tuple[dict, dict] | None:
    """``(own, seen)``: module -> value sets of the DUT alone and of the design plus the
    testbench; None when the design itself does not elaborate (instrument() says why).
    Raises :class:`Unsupported` when the testbench does not elaborate and its text suggests
    an override."""
    dut = {n: t for n, t in design.items() if hdl.is_hdl_source(n)}  # no headers, no data files
    tb = {n: t for n, t in testbench.items() if hdl.is_hdl_source(n)}
    headers = headers_of(design)
    try:
        own = _design_values(tuple(sorted({**dut, **headers}.items())))
        headers = {**headers, **headers_of(testbench)}  # the testbench's includes too
    except Unsupported:
        return None
    try:
        _, compilation = parse(dut, tb, headers=headers)
        return own, instance_values(compilation)
    except Exception as exc:
        reason = _textual_override(own, testbench)
        if reason is not None:
            raise Unsupported(reason) from exc
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
                return (
                    f"{name} instantiates {module} with parameters (not elaborated here), "
                    "so the DUT's parameters may differ"
                )
    return None
