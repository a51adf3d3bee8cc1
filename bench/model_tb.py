"""Model-style testbenches for cid012 problems whose golden testbench is withheld (issue 20's
"24 others of cid012" sample set for bench_floor / bench_rl_step).

:func:`model_testbench` writes, for a problem's DUT module (default parameters), the testbench a
model typically answers the prompt with: a ``tb`` module declaring a variable per input and a
wire per output, the DUT instantiated under the name the prompt requires, a free-running clock
per clock-named input (``always #5``), reset-named inputs active for the first 3 cycles (and 2
cycles again half-way), every other input set from ``$urandom`` once per cycle at the falling
edge (blocking ``=``: no race with the DUT's rising edge), ``CYCLES`` cycles, then ``$finish``.
A design without a clock input gets a new input vector every 10 time units. Only port driving:
honest stimulus, which the integrity check accepts.

:func:`others` picks the problems: cid012 rows in id order, the 8 stimulus-case problems left
out, the first 24 whose testbench the fast path scores ``ok`` (``engine: fast``, no fallback);
the ones skipped on the way and why are returned too (deterministic for one version of the
fast path and of the data).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pyslang import ast  # noqa: E402

from reward_service import hdl  # noqa: E402
from reward_service.fastcov.instrument import headers_of, parse  # noqa: E402

CYCLES = 500
_CLOCK = re.compile(r"(?i)(^|_)(clk|clock)(_|$)|^clk|clk$")
_RESET = re.compile(r"(?i)(rst|reset)")


class CannotDrive(Exception):
    """The generator cannot write a testbench for this design (no such top, a non-integral port)."""


def model_testbench(files: dict[str, str], toplevel: str, instance: str, cycles: int = CYCLES) -> str:
    """A model-style SV testbench of ``toplevel`` instantiated as ``instance`` (module ``tb``)."""
    _, compilation = parse({n: t for n, t in files.items() if hdl.is_hdl_source(n)}, headers=headers_of(files))
    top = next((i for i in compilation.getRoot().topInstances if i.name == toplevel), None)
    if top is None:
        raise CannotDrive(f"{toplevel} is not a top module of the design")
    decls, conns, data, clocks, resets = [], [], [], [], []
    for port in top.body.portList:
        if port.kind != ast.SymbolKind.Port or not port.type.canonicalType.isIntegral:
            raise CannotDrive(f"port {port.name}: {port.type}")
        width = port.type.canonicalType.bitWidth
        dims = f" [{width - 1}:0]" if width > 1 else ""
        conns.append(f".{port.name}({port.name})")
        if str(port.direction).split(".")[-1].lower() != "in":
            decls.append(f"  wire{dims} {port.name};")
            continue
        decls.append(f"  logic{dims} {port.name};")
        if width == 1 and _CLOCK.search(port.name):
            clocks.append(port.name)
        elif width == 1 and _RESET.search(port.name):
            resets.append((port.name, port.name.lower().endswith(("_n", "n", "_b", "_l"))))
        else:
            reps = (width + 31) // 32
            rnd = "$urandom" if reps == 1 else "{" + ", ".join(["$urandom"] * reps) + "}"
            data.append(f"{port.name} = {rnd};")
    wait = f"@(negedge {clocks[0]});" if clocks else "#10;"

    def reset(active: bool) -> str:
        return " ".join(f"{n} = 1'b{int(active != low)};" for n, low in resets)

    lines = ["`timescale 1ns/1ps", "module tb;", *decls]
    lines.append(f"  {toplevel} {instance} ({', '.join(conns)});")
    lines += [f"  always #5 {c} = ~{c};" for c in clocks]
    lines.append("  initial begin")
    lines += [f"    {c} = 1'b0;" for c in clocks]
    lines += [f"    {d.split(' = ')[0]} = '0;" for d in data]
    if resets:
        lines.append(f"    {reset(True)}")
        lines.append(f"    repeat (3) {wait}")
        lines.append(f"    {reset(False)}")
    lines.append(f"    for (int i = 0; i < {cycles}; i++) begin")
    if resets:
        lines.append(f"      if (i == {cycles // 2}) {reset(True)}")
        lines.append(f"      if (i == {cycles // 2 + 2}) {reset(False)}")
    lines += [f"      {d}" for d in data]
    lines.append(f"      {wait}")
    lines += ["    end", "    $finish;", "  end", "endmodule", ""]
    return "\n".join(lines)
