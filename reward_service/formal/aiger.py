"""Binary AIGER (the prover's ``model.aig``): read, simulate, write back with other outputs and
another initial state.

The witness search (:mod:`.witness`) works on the prover's own model: it reads the AIG yosys
wrote, simulates input sequences on it (which outputs each step sets), and hands ABC's ``bmc3``
a copy whose latches start in a state the sequence reached and whose outputs are the points
still to be reached. Only the AIGER 1.0 binary subset yosys 0.23 writes is read (header
``aig M I L O A``, latch lines ``next`` with an optional init, no B/C/J/F sections).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Aig:
    """An and-inverter graph. Variables: 1..I inputs, I+1..I+L latches, then the and gates
    (``ands[k]`` defines variable I+L+1+k as the AND of its two literals). A literal is
    ``2 * var + negated``; literal 0 is false, 1 true. ``latches``: the next-state literal of
    each latch; ``init``: each latch's initial value (0 or 1); ``outputs``: output literals."""

    inputs: int
    latches: list[int]
    init: list[int]
    outputs: list[int]
    ands: list[tuple[int, int]]

    @property
    def max_var(self) -> int:
        return self.inputs + len(self.latches) + len(self.ands)


def read_aig(data: bytes) -> Aig:
    """Parse a binary AIGER file. Raises ``ValueError`` on anything else (ASCII ``aag``, a
    latch with an undefined initial value, extra header fields)."""
    end = data.index(b"\n")
    header = data[:end].split()
    if len(header) != 6 or header[0] != b"aig":
        raise ValueError(f"not a plain binary AIGER header: {data[:end]!r}")
    m, i, n_latches, n_outputs, n_ands = map(int, header[1:])
    if m != i + n_latches + n_ands:
        raise ValueError(f"AIGER header M={m} is not I+L+A")
    pos = end + 1
    latches, init = [], []
    for k in range(n_latches):
        end = data.index(b"\n", pos)
        words = data[pos:end].split()
        pos = end + 1
        latches.append(int(words[0]))
        value = int(words[1]) if len(words) > 1 else 0
        if value not in (0, 1):
            raise ValueError(f"latch {k} has no defined initial value")
        init.append(value)
    outputs = []
    for _ in range(n_outputs):
        end = data.index(b"\n", pos)
        outputs.append(int(data[pos:end]))
        pos = end + 1
    ands = []
    for k in range(n_ands):
        lhs = 2 * (i + n_latches + 1 + k)
        d0, pos = _varint(data, pos)
        d1, pos = _varint(data, pos)
        rhs0 = lhs - d0
        ands.append((rhs0, rhs0 - d1))
    return Aig(i, latches, init, outputs, ands)


def write_aig(aig: Aig) -> bytes:
    """The binary AIGER text of ``aig`` (latch lines carry their initial value)."""
    lines = [f"aig {aig.max_var} {aig.inputs} {len(aig.latches)} {len(aig.outputs)} {len(aig.ands)}"]
    lines += [f"{nxt} {value}" for nxt, value in zip(aig.latches, aig.init)]
    lines += [str(lit) for lit in aig.outputs]
    out = bytearray(("\n".join(lines) + "\n").encode())
    base = aig.inputs + len(aig.latches) + 1
    for k, (a, b) in enumerate(aig.ands):
        lhs = 2 * (base + k)
        hi, lo = max(a, b), min(a, b)
        out += _encode(lhs - hi) + _encode(hi - lo)
    return bytes(out)


def tie_inputs(aig: Aig, zero: set[int]) -> Aig:
    """``aig`` with the inputs ``zero`` (0-based input indices) replaced by constant 0 (they
    stay inputs, read by nothing)."""
    lits = {2 * (k + 1) for k in zero}

    def sub(lit: int) -> int:
        return (lit & 1) if (lit & ~1) in lits else lit

    return Aig(
        aig.inputs,
        [sub(x) for x in aig.latches],
        list(aig.init),
        [sub(x) for x in aig.outputs],
        [(sub(a), sub(b)) for a, b in aig.ands],
    )


def simulate(aig: Aig, state: list[int], steps: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """Run ``steps`` (per step, one 0/1 value per input) from latch values ``state``: returns
    the output values of every step (evaluated on that step's inputs and state, before its
    clock edge) and the latch values after the last step."""
    step = _compiled(aig)
    current = list(state)
    seen: list[list[int]] = []
    for inputs in steps:
        outputs, current = step(inputs, current, 1)
        seen.append(outputs)
    return seen, current


_COMPILED: dict[int, tuple[Aig, object]] = {}


def _compiled(aig: Aig):
    """``aig`` as one Python function ``step(inputs, state, mask) -> (outputs, next state)``
    over ints (bit-parallel lanes under ``mask``; 1 for one lane): straight-line code, an order
    of magnitude faster than interpreting the gate list. Kept for the last few graphs."""
    kept = _COMPILED.get(id(aig))
    if kept is not None and kept[0] is aig:
        return kept[1]
    n_in, n_latch = aig.inputs, len(aig.latches)

    def lit(x: int) -> str:
        return f"(v{x >> 1} ^ M)" if x & 1 else f"v{x >> 1}"

    lines = ["def step(ins, st, M):", "  v0 = 0"]
    lines += [f"  v{k + 1} = ins[{k}]" for k in range(n_in)]
    lines += [f"  v{n_in + 1 + k} = st[{k}]" for k in range(n_latch)]
    base = n_in + n_latch + 1
    lines += [f"  v{base + k} = {lit(a)} & {lit(b)}" for k, (a, b) in enumerate(aig.ands)]
    lines.append(f"  return [{', '.join(map(lit, aig.outputs))}], [{', '.join(map(lit, aig.latches))}]")
    namespace: dict = {}
    # the code is made of the graph's integers and fixed names only (no text of the design)
    exec(compile("\n".join(lines), "<aig>", "exec"), namespace)
    if len(_COMPILED) >= 4:
        _COMPILED.clear()
    _COMPILED[id(aig)] = (aig, namespace["step"])
    return namespace["step"]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _encode(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
