"""The DUT instance's own coverage: per-instance points kept to one hierarchy, then merged.

Both engines report code coverage per instance (Verilator's ``coverage.dat`` written with
``forcePerInstance``, see ``simulators/rs_main.cpp``; the fast path's flag file has one line
per instance). A testbench may instantiate the DUT's modules more than once (a reference
model, a second DUT), and CVDP's metric is the DUT instance's own coverage, so only points in
the DUT instance's hierarchy (``<top>.<scope>`` and below) count. Within that hierarchy the
instances of one module copy are merged into one point the way Verilator's default
``VerilatedCovImp::write`` merges them (counts summed, hierarchies combined by
:func:`combine_hier`): the totals are those of a testbench holding the DUT instance alone,
which are the numbers the engine reported before per-instance records (see docs/coverage.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from reward_service.coverage.points import CoveragePoint


def combine_hier(old: str, add: str) -> str:
    """Verilator's ``combineHier`` (verilated_cov.cpp): ``(a.x.c, a.y.c) -> a.*.c``,
    ``(q.za, q.zb) -> q.z*``, ``(a.b.c, a.b) -> a.b*``."""
    if old == add or not old:
        return add
    if not add:
        return old
    i = 0
    while i < len(old) and i < len(add) and old[i] == add[i]:
        i += 1
    prefix = old[:i]
    a, b = len(old) - 1, len(add) - 1
    while a > i and b > i and old[a] == add[b]:
        a -= 1
        b -= 1
    suffix = add[b + 1 :] if b < len(add) else ""
    return prefix + "*" + suffix


def natural_key(path: str) -> list:
    """Sort key putting ``u[2]`` before ``u[10]``: Verilator creates (and merges) the instances
    of a generate loop in index order, and :func:`combine_hier` depends on the order."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def in_scope(hier: str, prefix: str) -> bool:
    """Whether the instance path ``hier`` is the instance ``prefix`` or one below it."""
    return hier == prefix or hier.startswith(prefix + ".")


def instance_names(hiers: Iterable[str], top: str) -> list[str]:
    """The names of the instances directly under ``top`` among the instance paths ``hiers``
    (``tb.dut.u_fifo`` -> ``dut``), sorted; paths not under ``top`` are skipped."""
    return sorted({h[len(top) + 1 :].split(".")[0] for h in hiers if h.startswith(top + ".")})


def instance_paths(hiers: Iterable[str], top: str) -> list[str]:
    """Every instance path below ``top`` among the instance paths ``hiers``, relative to it
    (``tb.u_wrap.dut.u_fifo`` -> ``u_wrap``, ``u_wrap.dut``, ``u_wrap.dut.u_fifo``), sorted;
    paths not under ``top`` are skipped."""
    found: set[str] = set()
    for h in hiers:
        if h.startswith(top + "."):
            parts = h[len(top) + 1 :].split(".")
            found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(found, key=natural_key)


def merge_instances(points: Iterable[CoveragePoint], scope: str | None = None) -> list[CoveragePoint]:
    """The code coverage points of the instance ``scope`` (a full instance path such as
    ``tb.dut``; ``None``: every instance) with the instances of one module copy merged.

    A point's ``identity`` (its key without the hierarchy) says which per-instance points are
    one merged point; points without one (functional bins) are kept as they are, whatever the
    scope. The merged point's count is the sum, its ``hier`` the instance paths combined in
    natural order by :func:`combine_hier`. Order: first appearance of each identity.
    """
    groups: dict[tuple, list[CoveragePoint]] = {}
    kept: list[CoveragePoint | tuple] = []
    for point in points:
        if not point.identity:
            kept.append(point)
            continue
        if scope is not None and not in_scope(point.hier, scope):
            continue
        group = groups.get(point.identity)
        if group is None:
            group = groups[point.identity] = []
            kept.append(point.identity)
        group.append(point)
    merged: list[CoveragePoint] = []
    for entry in kept:
        if isinstance(entry, CoveragePoint):
            merged.append(entry)
            continue
        group = groups[entry]
        if len(group) == 1:  # one instance (most points): the point itself (frozen)
            merged.append(group[0])
            continue
        hier = ""
        for path in sorted((p.hier for p in group), key=natural_key):
            hier = combine_hier(hier, path)
        merged.append(replace(group[0], hier=hier, count=sum(p.count for p in group)))
    return merged
