"""Read the flag file of an instrumented run into coverage points keyed like Verilator's.

Each module instance wrote ``<token> F <module> <path> <parameters> <flag bits> <scope bits>`` and each
sampled signal (element) ``<token> T <module> <signal> <element> <path> <left> <right> <rise>
<fall>`` (see :mod:`.instrument`, :mod:`.toggle`). The points are per instance, as Verilator's
``coverage.dat`` written per instance: each point's ``identity`` is its key (file, line,
column, type, module, comment) with the instance's parameter values (Verilator keeps one module
copy per parameter set, and merges only the instances of one copy); the engine keeps the DUT
instance's hierarchy and merges within it
(:func:`~reward_service.coverage.instances.merge_instances`).
"""

from __future__ import annotations

from dataclasses import dataclass

from reward_service.coverage.points import CoveragePoint
from reward_service.errors import RewardServiceError
from reward_service.fastcov.instrument import Instrumented
from reward_service.fastcov.toggle import MAX_WIDTH
from reward_service.fastcov.unit import PREFIX


class FlagFileError(RewardServiceError, ValueError):
    """The flag file holds no line of this run (the simulation never reached an ending)."""


@dataclass
class Item:
    """One instance's point with its column (which :class:`CoveragePoint` does not keep) and
    its identity (the key that merges it with the same point of other instances)."""

    metric: str
    file: str
    line: int
    column: int
    detail: str
    hier: str
    count: int
    identity: tuple = ()


def read_points(text: str, token: str, inst: Instrumented) -> list[CoveragePoint]:
    """Coverage points of the instrumented DUT from the flag file's ``text``, one per instance
    (``hier`` is the instance's path, ``identity`` set); lines without the run's ``token`` are
    ignored. Raises :class:`FlagFileError` when no line has it, ``ValueError`` on a malformed
    line of this run."""
    return [
        CoveragePoint(
            metric=i.metric, file=i.file, line=i.line, detail=i.detail, hier=i.hier, count=i.count, identity=i.identity
        )
        for i in read_items(text, token, inst)
    ]


def read_items(text: str, token: str, inst: Instrumented) -> list[Item]:
    """Like :func:`read_points`, keeping each point's column. Each instance's module line and
    each element line of a signal is written once by the design's final blocks: a line of this
    run that repeats was written by something else (the test) and raises ``ValueError``."""
    items: dict[tuple, Item] = {}
    written: set[tuple] = set()
    instances: dict[str, dict[str, str]] = {}  # module -> instance path -> parameter values
    toggles: list[list[str]] = []
    seen = False
    for raw in text.splitlines():
        words = raw.split()
        if len(words) < 2 or words[0] != token:
            continue
        seen = True
        key = _line_key(words)
        if key in written:
            raise ValueError(
                f"flag file: the line of {' '.join(map(str, key[1:]))} repeats (not written by the design)"
            )
        written.add(key)
        if words[1] == "F" and len(words) == 7:
            _module, path, params, bits, scopes = words[2:]
            table = inst.tables.get(_module)
            if table is None or len(bits) != len(table.points) + 1 or len(scopes) != table.n_scopes:
                raise ValueError(f"flag file: malformed line for module {_module!r}")
            instances.setdefault(_module, {})[path] = params
            for spec, scope, bit in zip(table.points, table.scopes, bits[1:]):
                if scope and scopes[scope] != "1":
                    continue  # the generate block holding the point is not in this instance
                _add(
                    items,
                    (spec.file, spec.line, spec.column, spec.metric, spec.module, spec.comment, params),
                    path,
                    int(bit == "1"),
                )
        elif words[1] == "T" and len(words) == 10:
            toggles.append(words[2:])
        else:
            raise ValueError(f"flag file: malformed line {raw[:80]!r}")
    if not seen:
        raise FlagFileError("the simulation wrote no coverage flags (it did not reach an ending)")
    _toggle_points(items, toggles, instances, inst)
    return list(items.values())


def _line_key(words: list[str]) -> tuple:
    """What a flag line counts for, as the reader parses it: the instance (module line) or the
    instance, signal and element (element line), whatever the spelling (``02`` is index 2, a
    generate scope's path without our own segments). ``ValueError`` on a malformed number."""
    if words[1] == "F":
        return tuple(words[1:4])
    if len(words) < 6:
        return tuple(words[1:])
    path = ".".join(seg for seg in words[5].split(".") if seg and not seg.startswith(PREFIX))
    return words[1], words[2], int(words[3]), _element_key(words[4]), path


def _add(items: dict, key: tuple, hier: str, count: int) -> None:
    """Count one instance's point; the key (the point's identity) ends with the instance's
    parameter values (Verilator merges only instances of the same module copy)."""
    item = items.get((key, hier))
    if item is None:
        file, line, column, metric, _module, comment, _params = key
        item = items[(key, hier)] = Item(metric, file, line, column, comment, hier, 0, key)
    item.count += count


def _toggle_points(
    items: dict, lines: list[list[str]], instances: dict[str, dict[str, str]], inst: Instrumented
) -> None:
    # group the element lines of one signal of one instance (and generate scope): the width
    # limit applies to the signal as a whole
    groups: dict[tuple[str, str, str, int], list[tuple[str, int, int, str, str]]] = {}
    for module, index_text, element, path, left_text, right_text, rise, fall in lines:
        owner = _instance_of(path, list(instances.get(module, {})))
        if owner is None:
            continue  # an instance whose module line is missing (cannot happen on an ending)
        scope = ".".join(seg for seg in path[len(owner) + 1 :].split(".") if seg and not seg.startswith(PREFIX))
        groups.setdefault((module, owner, scope, int(index_text)), []).append(
            (element, int(left_text), int(right_text), rise, fall)
        )
    for (module, owner, scope, index), elements in sorted(groups.items()):
        table = inst.tables[module]
        sig = table.toggles[index]
        if sum(len(e[3]) for e in elements) > MAX_WIDTH:
            continue
        name = f"{scope}.{sig.name}" if scope else sig.name
        for element, left, right, rise, fall in sorted(elements, key=lambda e: _element_key(e[0])):
            names = sig.bit_names(left, right)
            if len(names) != len(rise) or len(rise) != len(fall):
                raise ValueError(f"flag file: signal {sig.name} has {len(rise)} bits, expected {len(names)}")
            suffix = "" if element == "-" else "".join(f"[{i}]" for i in element.split(","))
            for p, bit in enumerate(names):
                pos = len(rise) - 1 - p
                for edge, bits in (("0->1", rise), ("1->0", fall)):
                    _add(
                        items,
                        (
                            table.file,
                            sig.line,
                            sig.column,
                            "toggle",
                            module,
                            f"{name}{suffix}{bit}:{edge}",
                            instances[module][owner],
                        ),
                        owner,
                        int(bits[pos] == "1"),
                    )


def _element_key(element: str) -> tuple[int, ...]:
    return () if element == "-" else tuple(int(i) for i in element.split(","))


def _instance_of(path: str, paths: list[str]) -> str | None:
    best = None
    for p in paths:
        if (path == p or path.startswith(p + ".")) and (best is None or len(p) > len(best)):
            best = p
    return best
