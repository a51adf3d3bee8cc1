"""Helpers shared by tests: processes left behind, files under a directory, the time a scoring
spent before its simulation ran."""

from __future__ import annotations

import os
from pathlib import Path


def sandbox_processes(marker: Path) -> list[str]:
    """Processes that belong to sandboxes whose work dirs live under ``marker``: every process
    inside has it in its mount table (and a Docker sandbox's command line may name it; bwrap's
    options come through a memfd). Scoped this way so parallel test workers do not see each
    other's sandboxes."""
    found = []
    needle = str(marker)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            mounts = Path(f"/proc/{pid}/mountinfo").read_text(errors="replace")
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if needle in cmdline or needle in mounts:
            found.append(f"{pid}:{name}")
    return found


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


#: A scoring's timed steps before its simulation runs (ScoreResult.timings, ms): the request's
#: checks, the toolchain probe (once per process: seconds on a loaded machine, so it falls to
#: whichever test of an xdist worker scores first) and the build.
BEFORE_RUN = ("prepare", "toolchain", "build")


def seconds_before_run(result) -> float:
    """Seconds ``result``'s scoring spent before its simulation started: a run time limit
    does not bound them."""
    return sum(result.timings.get(step, 0.0) for step in BEFORE_RUN) / 1000


def point_key(name: str, point: tuple[int, str, str]) -> tuple[str, int, str, str]:
    """A coverage point's key as the prover lists it (``ProofResult.unreachable``): the file
    ``name`` and the point's (line, metric, detail)."""
    return (name, *point)


def score_one_file(engine, name: str, rtl: str, tb: str, engine_name: str):
    """``engine.scored`` (the result and its points) of the SV testbench ``tb`` against the
    one-file design ``{name: rtl}`` on the Verilator flow with engine ``engine_name`` (``fast``
    or ``verilator``), coverage of the instance ``dut``."""
    return engine.scored(
        {
            "design": {"files": {name: rtl}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "simulator": "verilator",
            "engine": engine_name,
            "coverage": {"scope": "dut"},
        }
    )


def covered_keys(scored) -> set[tuple[str, int, str, str]]:
    """The (file, line, metric, detail) of every covered point of a scored sample."""
    return {(p.file, p.line, p.metric, p.detail) for p in scored.points if p.covered}


def pulse_dut(module: str, ports: str, process: str, reg: str = "q") -> str:
    """A DUT for zero-width pulse tests (the ``seen``/``hit`` idiom): ``module <module>(<ports>)``
    with ``process`` (the process under test, line 3 when one line) and a register ``seen`` set
    by the first clock edge; ``hit`` (the ``if`` on line 7 for a one-line ``process``) is 1 when
    ``reg`` is set before any clock edge, which only a process run on a pulse (no edge) reaches.
    ``ports`` must declare ``clk``, ``reg`` and ``output reg hit``."""
    return f"""module {module}({ports});
  reg seen = 1'b0;
{process}
  always @(posedge clk) seen <= 1'b1;
  always @(*) begin
    hit = 1'b0;
    if ({reg} && !seen) hit = 1'b1;
  end
endmodule
"""


def pulse_tb(module: str, regs: str, wires: str, stimulus: str, pre: str = "") -> str:
    """The testbench of a :func:`pulse_dut`: top ``tb`` with ``reg <regs>;`` and ``wire
    <wires>;`` (the DUT's inputs and outputs, connected by name to the instance ``dut``),
    ``pre`` (declarations and processes before the instance, each line ending in a newline) and
    ``initial begin <stimulus> #5 $finish; end``."""
    names = [r.split("=")[0].strip() for r in regs.split(",")] + [w.strip() for w in wires.split(",")]
    conns = ", ".join(f".{n}({n})" for n in names)
    return (
        f"module tb; reg {regs}; wire {wires};\n{pre}  {module} dut({conns});\n"
        f"  initial begin {stimulus} #5 $finish; end\nendmodule\n"
    )
