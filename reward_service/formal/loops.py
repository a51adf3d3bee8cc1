"""Combinational loops of a yosys JSON netlist, and cutting them for the witness search.

A combinational process that reads a variable before it assigns it on some path
(``restoring_division``: ``if (next_count == WIDTH)`` in the arm that assigns ``next_count``
afterwards), or a design latch fed by its own output, is a loop in the netlist: yosys 0.23's
``write_aiger`` crashes on it (a segmentation fault; newer versions say "combinational logic
loop"). A simulator evaluates such a process once per trigger, so the read sees the value the
previous evaluation left. :func:`cut_loops` models that on the global step of the every-input-
free lowering: each loop is cut at one reader, which then reads the value the signal had at
the previous step (a ``$ff``, a register of the global clock). That is an approximation of the
simulators (which may evaluate the process several times in a step, and need not agree with
each other), so it is used only by the witness search, whose claims count only once replayed
(docs/formal.md): never for a proof.
"""

from __future__ import annotations

#: Inputs of a state element through which a value reaches its output in the same step (an
#: asynchronous control, a transparent latch, an asynchronous memory read).
_ASYNC_PORTS = {
    "$adff": {"ARST"},
    "$adffe": {"ARST"},
    "$dffsr": {"SET", "CLR"},
    "$dffsre": {"SET", "CLR"},
    "$aldff": {"AD", "ALOAD"},
    "$aldffe": {"AD", "ALOAD"},
    "$sr": {"SET", "CLR"},
    "$dff": set(),
    "$dffe": set(),
    "$sdff": set(),
    "$sdffe": set(),
    "$sdffce": set(),
    "$ff": set(),
    "$memwr": set(),
    "$memwr_v2": set(),
    "$meminit": set(),
    "$meminit_v2": set(),
    "$mem": {"RD_ADDR", "RD_EN"},
    "$mem_v2": {"RD_ADDR", "RD_EN", "RD_ARST", "RD_SRST"},
    "$memrd": {"ADDR", "EN"},
    "$memrd_v2": {"ADDR", "EN", "ARST", "SRST"},
}

#: Name prefix of the nets :func:`cut_loops` adds (the previous step's value of a cut signal).
CUT_PREFIX = "__rs_loopcut"


def _drivers(module: dict) -> tuple[dict[int, list[tuple[str, str, int, int]]], int]:
    """Per net bit, the combinational edges into it: (cell, input port, index in the port,
    input bit) of the cells driving it; and the largest bit number of the module."""
    into: dict[int, list[tuple[str, str, int, int]]] = {}
    top = 1
    for name, cell in module.get("cells", {}).items():
        conns, dirs = cell.get("connections", {}), cell.get("port_directions", {})
        through = _ASYNC_PORTS.get(cell["type"])
        ins = [
            (port, index, b)
            for port, bits in conns.items()
            if dirs.get(port) == "input" and (through is None or port in through)
            for index, b in enumerate(bits)
            if isinstance(b, int)
        ]
        for port, bits in conns.items():
            top = max([top, *(b for b in bits if isinstance(b, int))])
            if dirs.get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        into.setdefault(b, []).extend((name, p, i, u) for p, i, u in ins)
    for net in module.get("netnames", {}).values():
        top = max([top, *(b for b in net["bits"] if isinstance(b, int))])
    return into, top


def loop_cuts(module: dict) -> list[tuple[str, str, int]]:
    """The cell inputs (cell, port, index in the port) whose edges close the combinational
    loops of the JSON ``module``, so that without them the netlist has none (empty: it has
    none). Per strongly connected set of bits, the readers inside it of one of the design's
    own signals in it (the one with the most bits there): a loop is cut where the process
    reads the signal before it writes it, not inside the multiplexers that assign it; a set
    without such a signal is cut at the back edges of a depth-first search. Repeated until
    no loop is left."""
    into, _ = _drivers(module)
    names: dict[int, list[str]] = {}
    for name, net in module.get("netnames", {}).items():
        if not net.get("hide_name") and not name.startswith("$") and not name.startswith(CUT_PREFIX):
            for b in net["bits"]:
                if isinstance(b, int):
                    names.setdefault(b, []).append(name)
    cuts: dict[tuple[str, str, int], None] = {}
    for _ in range(1000):
        sccs = _components(into)
        if not sccs:
            break
        for scc in sccs:
            inside = set(scc)
            count: dict[str, int] = {}
            for bit in scc:
                for name in names.get(bit, []):
                    count[name] = count.get(name, 0) + 1
            if count:
                wire = min(count, key=lambda n: (-count[n], n))
                chosen = {bit for bit in scc if wire in names.get(bit, [])}
                edges = [(bit, e) for bit in scc for e in into.get(bit, []) if e[3] in chosen]
            else:
                edges = _back_edges(into, scc, inside)
            for bit, edge in edges:
                cuts[edge[:3]] = None
                into[bit] = [e for e in into[bit] if e != edge]
    return list(cuts)


def _back_edges(
    into: dict[int, list[tuple[str, str, int, int]]], scc: list[int], inside: set[int]
) -> list[tuple[int, tuple[str, str, int, int]]]:
    """The back edges of a depth-first search inside one strongly connected set of bits."""
    state: dict[int, int] = {}  # 1 on the search's path, 2 done
    out = []
    for root in sorted(scc):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(into.get(root, [])))]
        while stack:
            bit, it = stack[-1]
            step = next(it, None)
            if step is None:
                state[bit] = 2
                stack.pop()
                continue
            source = step[3]
            if source not in inside:
                continue
            seen = state.get(source)
            if seen == 1:
                out.append((bit, step))
            elif seen is None:
                state[source] = 1
                stack.append((source, iter(into.get(source, []))))
    return out


def _components(into: dict[int, list[tuple[str, str, int, int]]]) -> list[list[int]]:
    """The strongly connected sets of bits of the graph ``into`` that hold a loop (more than
    one bit, or a bit driven by itself); Tarjan's algorithm, without recursion."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    for root in sorted(into):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(into.get(root, [])))]
        while work:
            bit, it = work[-1]
            step = next(it, None)
            if step is not None:
                source = step[3]
                if source not in index:
                    index[source] = low[source] = len(index)
                    stack.append(source)
                    on_stack.add(source)
                    work.append((source, iter(into.get(source, []))))
                elif source in on_stack:
                    low[bit] = min(low[bit], index[source])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[bit])
            if low[bit] == index[bit]:
                scc = []
                while True:
                    b = stack.pop()
                    on_stack.discard(b)
                    scc.append(b)
                    if b == bit:
                        break
                if len(scc) > 1 or any(e[3] == bit for e in into.get(bit, [])):
                    out.append(scc)
    return out


def cut_loops(netlist: dict, top: str) -> int:
    """Cut the combinational loops of module ``top`` of the yosys JSON ``netlist`` in place:
    each input of :func:`loop_cuts` reads, instead of its net bit, a ``$ff`` of it (the value
    at the previous global step, 0 at the first). Returns the number of inputs cut."""
    module = netlist["modules"][top]
    cuts = loop_cuts(module)
    _, bit = _drivers(module)
    delayed: dict[int, int] = {}  # net bit -> the bit of its previous value
    for n, (cell, port, index) in enumerate(cuts):
        bits = module["cells"][cell]["connections"][port]
        source = bits[index]
        if source not in delayed:
            bit += 1
            delayed[source] = bit
            module["cells"][f"{CUT_PREFIX}_ff{n}"] = {
                "hide_name": 0,
                "type": "$ff",
                "parameters": {"WIDTH": "00000000000000000000000000000001"},
                "attributes": {},
                "port_directions": {"D": "input", "Q": "output"},
                "connections": {"D": [source], "Q": [bit]},
            }
            module["netnames"][f"{CUT_PREFIX}{n}"] = {"hide_name": 0, "bits": [bit], "attributes": {}}
        bits[index] = delayed[source]
    return len(cuts)
