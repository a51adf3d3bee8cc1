"""A seeded generator of testbench idioms with the trace IEEE 1800 expects (docs/semantics.md).

Every idiom drives the same accumulator DUT (the issue 19 table's: reset, enable and data
sampled by an ``always_ff``) with the same seeded values, each value meant for one rising edge;
the idioms differ only in how and when the testbench writes them: nonblocking or blocking, at
the rising or the falling edge, after ``#0`` or ``#1``, in a task, in a ``fork``, from an
``always @(posedge clk)`` of the testbench, after ``wait``, through a clocking block. The DUT
prints what it samples at each edge, so a run is compared line by line with the expectation:
value ``i`` sampled at rising edge ``i + 1``. Where IEEE leaves the order open (a blocking write
at the edge the DUT samples: a race), the expectation is the order we chose (the testbench after
the DUT's edge processes), which the race analysis enforces
(:mod:`reward_service.integrity.races`).

One batch puts every idiom in one simulation (a sub-testbench per idiom, each with its own
clock and DUT instance), so a Verilator build serves them all. The runners compile a batch
with Icarus (``iverilog -g2012``) or a Verilator (``--binary --timing``) directly: the trace,
not the coverage, is what the standard defines. Used by tests/test_semantics_diff.py (a few
seeds) and bench/semantics_diff.py (many, with rates per idiom).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reward_service.simulators.verilator import VERILATOR_PCH_MAKE_VAR

DUT_FILE = "acc.sv"
DUT = """\
module acc(input logic clk, input logic rst, input logic en, input logic [3:0] din, output logic [7:0] sum);
  always_ff @(posedge clk) begin
    $display("S %m %0t %0d %0d %0d", $time, rst, en, din);
    if (rst) sum <= 0;
    else if (en) sum <= sum + din;
  end
endmodule
"""

#: How one idiom writes value ``i`` (for rising edge ``i + 1``); ``{drive}`` is
#: ``rst = R[i]; en = E[i]; din = D[i];`` with the idiom's assignment operator.
_LOOPS: dict[str, tuple[str, str]] = {
    # name: (operator, statement of loop iteration i >= 1)
    "nba_posedge": ("<=", "@(posedge clk); {drive}"),
    "blocking_posedge": ("=", "@(posedge clk); {drive}"),
    "nba_negedge": ("<=", "@(negedge clk); {drive}"),
    "blocking_negedge": ("=", "@(negedge clk); {drive}"),
    "zero_delay_posedge": ("=", "@(posedge clk); #0 {drive}"),
    "delay1_posedge": ("=", "@(posedge clk); #1 {drive}"),
    "repeat_posedge": ("=", "repeat (1) @(posedge clk); {drive}"),
    "task_blocking": ("=", "drive(i);"),
    "task_nba": ("<=", "drive(i);"),
    "fork_posedge": ("=", "@(posedge clk); fork {drive} join"),
    "wait_counter": ("=", "wait (cyc == i); {drive}"),
    "clocking_block": ("<=", "@(cb); {cb_drive}"),
}

#: Idioms written as an ``always @(posedge clk)`` of the testbench (no loop).
_ALWAYS: dict[str, str] = {
    "tb_always_blocking": "=",
    "tb_always_nba": "<=",
}

IDIOMS: tuple[str, ...] = (*_LOOPS, *_ALWAYS)

#: Idioms Icarus 11 cannot compile (no clocking blocks): the fast path routes them to Verilator.
ICARUS_UNSUPPORTED = frozenset({"clocking_block"})

#: Idioms whose order IEEE 1800 leaves open (a race); their expectation is our documented order.
RACY = frozenset({"blocking_posedge", "repeat_posedge", "task_blocking", "fork_posedge", "tb_always_blocking"})


@dataclass(frozen=True)
class Batch:
    """One simulation: ``design`` and ``stimulus`` files (name -> text), the testbench ``top``,
    and ``expected``: per sample (``<idiom>@<seed>``), the lines its DUT instance must print
    (``S <path> <time> <rst> <en> <din>``)."""

    design: dict[str, str]
    stimulus: dict[str, str]
    top: str
    expected: dict[str, list[str]]


def _values(rng: random.Random, cycles: int) -> list[tuple[int, int, int]]:
    reset_cycles = rng.randint(1, 3)
    return [(int(i < reset_cycles), rng.randint(0, 1), rng.randint(0, 15)) for i in range(cycles)]


def _sub_testbench(idiom: str, seed: int, values: list[tuple[int, int, int]]) -> str:
    n = len(values)
    table = "\n".join(f"    R[{i}] = {r}; E[{i}] = {e}; D[{i}] = {d};" for i, (r, e, d) in enumerate(values))
    head = f"""\
module t_{idiom}_s{seed};
  logic clk = 0; logic rst, en; logic [3:0] din; wire [7:0] sum;
  logic R [0:{n - 1}]; logic E [0:{n - 1}]; logic [3:0] D [0:{n - 1}];
  integer cyc = 0;
  acc dut(.clk(clk), .rst(rst), .en(en), .din(din), .sum(sum));
  initial repeat ({2 * n}) #5 clk = ~clk;
  always @(posedge clk) cyc <= cyc + 1;
  initial begin
{table}
  end
"""
    if idiom in _ALWAYS:
        op = _ALWAYS[idiom]
        return (
            head
            + f"""\
  integer k = 1;
  initial begin #0 rst = R[0]; en = E[0]; din = D[0]; end
  always @(posedge clk) if (k < {n}) begin rst {op} R[k]; en {op} E[k]; din {op} D[k]; k = k + 1; end
endmodule
"""
        )
    op, stmt = _LOOPS[idiom]
    drive = f"rst {op} R[i]; en {op} E[i]; din {op} D[i];"
    extra = ""
    if idiom.startswith("task_"):
        extra = f"  task drive(input integer j); @(posedge clk); rst {op} R[j]; en {op} E[j]; din {op} D[j]; endtask\n"
    if idiom == "clocking_block":
        extra = "  clocking cb @(posedge clk); output rst, en, din; endclocking\n"
    body = stmt.format(drive=drive, cb_drive="cb.rst <= R[i]; cb.en <= E[i]; cb.din <= D[i];")
    return (
        head
        + extra
        + f"""\
  integer i;
  initial begin
    #0 rst = R[0]; en = E[0]; din = D[0];
    for (i = 1; i < {n}; i = i + 1) begin
      {body}
    end
  end
endmodule
"""
    )


def generate(seeds: int | Sequence[int], cycles: int = 8, idioms: Sequence[str] = IDIOMS) -> Batch:
    """One batch holding each of ``idioms`` for each of ``seeds`` (a sample: ``<idiom>@<seed>``),
    each driving ``cycles`` (>= 2) values drawn from its seed."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    subs: list[str] = []
    insts: list[str] = []
    expected: dict[str, list[str]] = {}
    for seed in seeds:
        values = _values(random.Random(seed), cycles)
        for idiom in idioms:
            subs.append(_sub_testbench(idiom, seed, values))
            insts.append(f"  t_{idiom}_s{seed} u_{idiom}_s{seed}();")
            expected[f"{idiom}@{seed}"] = [
                f"S tb.u_{idiom}_s{seed}.dut {10 * k + 5} {r} {e} {d}" for k, (r, e, d) in enumerate(values)
            ]
    top = "module tb;\n" + "\n".join(insts) + f"\n  initial #{10 * cycles + 20} $finish;\nendmodule\n"
    return Batch({DUT_FILE: DUT}, {"tb.sv": "\n".join([*subs, top])}, "tb", expected)


def scheduled(batch: Batch) -> Batch:
    """``batch`` as the scoring engine compiles it: its races ordered the documented way (the
    ``#0`` insertions of the race analysis), then its clocking-block output drives lowered
    (:mod:`reward_service.simulators.clocking`, which the engine applies before a Verilator
    build; Icarus compiles no clocking block, lowered or not)."""
    from reward_service.integrity import races, sv
    from reward_service.simulators import clocking

    found = sv.check(sv.SvSources(design=batch.design, stimulus=batch.stimulus, defines={}))
    files = races.scheduled_files(batch.stimulus, found.schedule_edits)
    return Batch(batch.design, clocking.lower(files).files, batch.top, batch.expected)


_LINE = re.compile(r"^S tb\.u_(\w+)_s(\d+)\.dut .*$", re.M)


def traces(output: str) -> dict[str, list[str]]:
    """The DUT lines of a run's output by sample (``<idiom>@<seed>``)."""
    out: dict[str, list[str]] = {}
    for m in _LINE.finditer(output):
        out.setdefault(f"{m.group(1)}@{m.group(2)}", []).append(m.group(0).strip())
    return out


def _write(batch: Batch, where: Path) -> list[str]:
    names = []
    for name, text in {**batch.design, **batch.stimulus}.items():
        (where / name).write_text(text)
        names.append(str(where / name))
    return names


def run_icarus(batch: Batch, timeout: float = 300) -> str:
    """``iverilog -g2012`` + ``vvp -n``: the run's output (raises CalledProcessError on a
    compile error)."""
    with tempfile.TemporaryDirectory(prefix="rs-sem-") as tmp:
        files = _write(batch, Path(tmp))
        subprocess.run(
            ["iverilog", "-g2012", "-s", batch.top, "-o", f"{tmp}/a.vvp", *files],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        return subprocess.run(
            ["vvp", "-n", f"{tmp}/a.vvp"], capture_output=True, text=True, timeout=timeout, check=False
        ).stdout


def run_verilator(batch: Batch, root: Path, binary: Path | None = None, timeout: float = 900) -> str:
    """A Verilator build (``VERILATOR_ROOT=root``; ``binary``: its ``verilator_bin`` when the
    root has no ``bin/verilator``) with ``--binary --timing``, then the run: its output."""
    with tempfile.TemporaryDirectory(prefix="rs-sem-") as tmp:
        files = _write(batch, Path(tmp))
        env = {**os.environ, "VERILATOR_ROOT": str(root)}
        exe = str(binary or root / "bin" / "verilator")
        build = subprocess.run(
            [exe, "--binary", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++20"]
            + ["-MAKEFLAGS", VERILATOR_PCH_MAKE_VAR]  # as the engine: no stale precompiled header
            + ["--top-module", batch.top, "-Mdir", f"{tmp}/obj", *files],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if build.returncode != 0:
            raise RuntimeError(f"verilator build failed: {build.stderr[-2000:]}")
        return subprocess.run(
            [f"{tmp}/obj/V{batch.top}"], capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False
        ).stdout


def mismatches(batch: Batch, output: str) -> dict[str, int]:
    """Per sample (``<idiom>@<seed>``), how many edges of the run differ from the expectation
    (a missing or extra line counts)."""
    got = traces(output)
    out = {}
    for sample, expected in batch.expected.items():
        lines = got.get(sample, [])
        out[sample] = sum(a != b for a, b in zip(lines, expected, strict=False)) + abs(len(lines) - len(expected))
    return out


def per_idiom(found: dict[str, int]) -> dict[str, int]:
    """:func:`mismatches` summed into samples that differ, per idiom."""
    out: dict[str, int] = {}
    for sample, diff in found.items():
        idiom = sample.partition("@")[0]
        out[idiom] = out.get(idiom, 0) + bool(diff)
    return out


Runner = Callable[[Batch], str]
