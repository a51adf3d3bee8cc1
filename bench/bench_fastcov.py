#!/usr/bin/env python
"""The fast coverage path against Verilator, per sample, on the stimulus cases (issue 5).

For each testbench of ``../shared/cases/stimulus`` (8 problems x weak/good/best) this scores
the same request, in one process and sample by sample, three ways through the engine (sandbox
start, build, simulation, coverage reading all included; wall clock):

* **cold Verilator**: ``engine=verilator`` on an engine with a fresh cache dir (empty ccache);
* **warm Verilator**: ``engine=verilator`` on one long-lived engine whose ccache already holds the
  Verilator runtime and every earlier sample, with the testbench made *new* (an unreachable
  ``$display`` of a fresh id is added), as every sample of an RL step is: the verilated model is
  compiled again, the runtime objects are ccache hits;
* **fast**: ``engine=fast`` (Icarus + instrumented DUT) on one long-lived engine, as in the
  service, on that same new testbench; the first sample of a design also instruments it
  (pyslang), later ones reuse that.

Metrics: line, branch, toggle (what both measure; ``--metrics`` changes it). The result cache is
off, so every call really simulates. Prints a row per sample, the medians and the ratios; the
bar of issue 5 is fast >= 20x faster than warm-ccache Verilator, the aim a median <= 0.1 s.

    python bench/bench_fastcov.py                       # all 24 samples, ~10 min on 2 cores
    python bench/bench_fastcov.py --problems 2 --no-cold --json /tmp/fastcov.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from reward_service.engine import Engine  # noqa: E402
from reward_service.fastcov.compare import diff_points  # noqa: E402
from reward_service.settings import Settings  # noqa: E402

CASES = Path(os.environ.get("REWARD_SERVICE_CASES", REPO.parent / "shared" / "cases"))
console = Console(width=None if sys.stdout.isatty() else 150)


def load_cases(problems: int | None, tbs: list[str]) -> list[tuple[str, str, dict]]:
    rows = {}
    with open(CASES / "cvdp" / "cid012.jsonl", encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            rows[row["id"]] = row
    out = []
    dirs = sorted(d for d in (CASES / "stimulus").iterdir() if (d / "expected.json").exists())
    for d in dirs[:problems]:
        expected = json.loads((d / "expected.json").read_text())
        files = rows[d.name]["harness"].get("files", rows[d.name]["harness"])
        rtl = {k[4:]: v for k, v in files.items() if k.startswith("src/") and k.endswith((".sv", ".v"))}
        for tb in tbs:
            tb_file = expected["testbenches"][tb]["file"]
            out.append(
                (
                    d.name,
                    tb,
                    {
                        "design": {"files": rtl},
                        "coverage": {"scope": expected["dut_instance"]},
                        "stimulus": {"kind": "sv_testbench", "files": {tb_file: (d / tb_file).read_text()}},
                    },
                )
            )
    return out


def new_testbench(request: dict) -> dict:
    """The request with a testbench no build has seen (an unreachable ``$display`` of a fresh id
    before its last ``endmodule``): a new sample, as every sample of an RL step is."""
    name, text = next(iter(request["stimulus"]["files"].items()))
    at = text.rindex("endmodule")
    text = f'{text[:at]}  initial if (1\'b0) $display("rs-bench {uuid.uuid4().hex}");\n{text[at:]}'
    return {**request, "stimulus": {**request["stimulus"], "files": {name: text}}}


def timed(engine: Engine, request: dict):
    start = time.perf_counter()
    scored = engine.scored(request)  # the result and its points
    return time.perf_counter() - start, scored


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=None, help="first N problems (sorted ids)")
    ap.add_argument("--tb", default="weak,good,best", help="testbenches per problem")
    ap.add_argument("--metrics", default="line,branch,toggle")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold Verilator builds")
    ap.add_argument("--json", type=Path, help="write the samples as JSON")
    ap.add_argument("--work-dir", type=Path, default=None, help="where the fresh cache dirs go")
    args = ap.parse_args()
    metrics = args.metrics.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-fastcov-", dir=args.work_dir))
    fast_engine = Engine(Settings(cache_dir=work / "fast", result_cache=False))
    warm_engine = Engine(Settings(cache_dir=work / "warm", result_cache=False))
    cases = load_cases(args.problems, args.tb.split(","))
    warm_engine.score({**cases[0][2], "engine": "verilator"})  # the runtime objects into its ccache
    samples, failures = [], 0
    for problem, tb, base in cases:
        request = {**base, "coverage": {**base["coverage"], "metrics": metrics}}
        row = {"problem": problem, "tb": tb}
        if not args.no_cold:
            cold_engine = Engine(Settings(cache_dir=work / f"cold-{problem}-{tb}", result_cache=False))
            row["cold_s"], _ = timed(cold_engine, {**request, "engine": "verilator"})
        fresh = new_testbench(request)
        row["warm_s"], warm = timed(warm_engine, {**fresh, "engine": "verilator"})
        row["fast_s"], fast = timed(fast_engine, {**fresh, "engine": "fast"})
        diff = diff_points(fast.points, warm.points, set(metrics))
        fast, warm = fast.result, warm.result
        row["fast_sim_ms"] = fast.timings.get("simulate")
        row["ok"] = warm.status == "ok" and fast.status == "ok" and fast.engine == "fast"
        row["points_equal"] = diff.equal
        if not row["ok"]:
            failures += 1
            row["note"] = f"{fast.status.value}/{fast.engine}: {fast.fallback or fast.message}"[:200]
        samples.append(row)
        console.print(
            f"{problem.removeprefix('cvdp_copilot_')} {tb}: "
            + " ".join(f"{k}={v:.3f}" for k, v in row.items() if k.endswith("_s"))
            + ("" if row["ok"] else f"  FAILED {row.get('note')}"),
            highlight=False,
        )

    table = Table(title="seconds per sample (wall clock, sandbox included)")
    for col in ("sample", "cold VL", "warm VL", "fast", "warm/fast", "cold/fast", "points equal"):
        table.add_column(col, justify="left" if col == "sample" else "right")
    for r in samples:
        table.add_row(
            f"{r['problem'].removeprefix('cvdp_copilot_')} {r['tb']}",
            f"{r['cold_s']:.2f}" if "cold_s" in r else "-",
            f"{r['warm_s']:.2f}",
            f"{r['fast_s']:.3f}",
            f"{r['warm_s'] / r['fast_s']:.0f}x",
            f"{r['cold_s'] / r['fast_s']:.0f}x" if "cold_s" in r else "-",
            str(r["points_equal"]),
        )
    console.print(table)
    med = {k: statistics.median(r[k] for r in samples) for k in ("cold_s", "warm_s", "fast_s") if k in samples[0]}
    console.print("medians: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in med.items()))
    console.print(
        f"median ratio warm Verilator / fast: {statistics.median(r['warm_s'] / r['fast_s'] for r in samples):.0f}x"
        + (
            f"; cold Verilator / fast: {statistics.median(r['cold_s'] / r['fast_s'] for r in samples):.0f}x"
            if "cold_s" in med
            else ""
        )
    )
    console.print(
        f"fast path: median {med['fast_s'] * 1000:.0f} ms per sample (aim <= 100 ms); "
        f"bar >= 20x warm Verilator: {'met' if med['warm_s'] / med['fast_s'] >= 20 else 'NOT met'}"
    )
    if args.json:
        args.json.write_text(json.dumps({"samples": samples, "medians": med}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
