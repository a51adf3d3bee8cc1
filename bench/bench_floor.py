#!/usr/bin/env python
"""The fast path against the simulator's floor (issue 20): per sample, in one process and one run,
plain ``iverilog -g2012`` + ``vvp -n`` (no coverage, no sandbox) against the engine's fast path
(``engine=fast``, result cache off, the design's instrumentation warm after the warm-up pass).

Samples (``--set``): ``stimulus``, the stimulus cases (``../shared/cases/stimulus``, 8 problems x
weak/good/best); ``others``, 24 other cid012 problems (their golden testbenches are withheld), each
with a model-style testbench (``bench/model_tb.py``: reset, then ``$urandom`` through every input
port for 500 cycles; the first 24 in id order, stimulus-case problems left out, that the fast path
scores ``ok``; the ones skipped are printed); ``both``. Each sample is made *new* per pass (an unreachable ``$display`` of a fresh id), as an RL step's samples are.
Bare and fast alternate within a sample, so load on the shared machine hits both alike. Per
sample the bench keeps the minimum of ``--repeat`` passes of each. Prints the fast-vs-bare table
(sum, median, per sample), the engine's stage timings (``timings``: prepare, integrity, run,
measure, ...) and the ratio bars of issue 20 (sum <= 1.5x, no sample > 3x).

    python bench/bench_floor.py                         # 24 samples x 3 passes, ~1 min
    python bench/bench_floor.py --repeat 5 --json /tmp/floor.json
    python bench/bench_floor.py --set both
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_stimulus
from bench_stimulus import DEFAULT_CASES, REPO, Case, load_cases, run_cmd
from model_tb import CannotDrive, model_testbench

sys.path.insert(0, str(REPO))
from reward_service.engine import Engine
from reward_service.settings import Settings


def fresh(case: Case) -> str:
    """The case's testbench with an unreachable ``$display`` of a fresh id: a new sample."""
    at = case.tb_text.rindex("endmodule")
    return f'{case.tb_text[:at]}  initial if (1\'b0) $display("rs-bench {uuid.uuid4().hex}");\n{case.tb_text[at:]}'


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bare(case: Case, tb_text: str, root: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``iverilog -g2012 -o x.vvp -s <top> <rtl> <tb>`` + ``vvp -n x.vvp``."""
    src, run = root / "src", root / "run"
    for name, text in {**case.design, case.tb_file: tb_text}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text, encoding="utf-8")
    run.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    c0, t0 = _children_cpu(), time.perf_counter()
    rc, out, _ = run_cmd(
        ["iverilog", "-g2012", "-o", str(root / "x.vvp"), "-s", case.top, *case.design, case.tb_file], src, env, 120
    )
    if rc != 0:
        raise SystemExit(f"{case.short} {case.tb}: bare iverilog failed: {out}")
    run_cmd(["vvp", "-n", str(root / "x.vvp")], run, env, 120)
    return time.perf_counter() - t0, _children_cpu() - c0


def request(case: Case, tb_text: str) -> dict:
    return {
        "design": {"files": case.design},
        "stimulus": {"kind": "sv_testbench", "files": {case.tb_file: tb_text}},
        "coverage": {"scope": case.scope},
        "engine": "fast",
        "limits": {"compile_s": 120, "run_s": 120},
        # ring_token's case testbenches force DUT signals; the model-style ones face the default check
        **({} if case.tb == "model" else {"stimulus_policy": {"dut_writes": "allow"}}),
    }


def other_candidates(cases_dir: Path) -> list[Case]:
    """Every cid012 problem but the stimulus-case ones, in id order, with its model-style
    testbench (module ``tb``, the DUT under the prompt's instance name); problems the generator
    cannot drive are printed and left out."""
    from reward_service.problems.cvdp import load_problems

    problems = load_problems(cases_dir.parent / "cvdp" / "cid012.jsonl")
    stimulus = {d.name for d in cases_dir.iterdir()}
    out = []
    for pid in sorted(set(problems) - stimulus):
        p = problems[pid]
        try:
            text = model_testbench(p.design.files, p.toplevel or "", p.dut_instance)
        except CannotDrive as exc:
            print(f"others: {pid} skipped: {exc}", flush=True)
            continue
        out.append(
            Case(pid, "model", dict(p.design.files), "tb_model.sv", text, "tb", p.dut_instance, p.target_percent, {})
        )
    return out


def pick_others(engine: Engine, candidates: list[Case], n: int) -> list[Case]:
    """The first ``n`` candidates whose testbench the fast path scores ``ok`` (no fallback);
    the scoring is also their warm-up."""
    picked = []
    for case in candidates:
        if len(picked) == n:
            break
        res = engine.score(request(case, fresh(case)))
        if res.status == "ok" and res.engine == "fast":
            picked.append(case)
        else:
            print(f"others: {case.problem} skipped: {res.status}/{res.engine}: {(res.fallback or res.message)[:120]}")
    return picked


def summary(name: str, rows: list[dict]) -> None:
    """The fast-vs-bare table of one sample set, its samples over 3x and the bars of issue 20."""
    print(f"\n{name}:\n| | bare Icarus | fast path | ratio |\n|---|---|---|---|")
    for what, key, ratio in (("wall", "_s", "ratio"), ("CPU", "_cpu", "cpu_ratio")):
        sb, sf = sum(r["bare" + key] for r in rows), sum(r["fast" + key] for r in rows)
        mb, mf = statistics.median(r["bare" + key] for r in rows), statistics.median(r["fast" + key] for r in rows)
        worst = max(rows, key=lambda r: r[ratio])
        print(f"| {what}: sum of {len(rows)} samples | {sb:.2f} s | {sf:.2f} s | **{sf / sb:.2f}x** |")
        print(f"| {what}: median sample | {mb * 1000:.0f} ms | {mf * 1000:.0f} ms | {mf / mb:.2f}x |")
        print(f"| {what}: median ratio | | | {statistics.median(r[ratio] for r in rows):.2f}x |")
        print(
            f"| {what}: worst ({worst['sample']}) | {worst['bare' + key] * 1000:.0f} ms | "
            f"{worst['fast' + key] * 1000:.0f} ms | {worst[ratio]:.2f}x |"
        )
        over = sorted((r for r in rows if r[ratio] > 3), key=lambda r: -r[ratio])
        print(f"{what} samples > 3x: " + (", ".join(f"{r['sample']} {r[ratio]:.2f}x" for r in over) or "none"))
        print(
            f"{what} bars: sum <= 1.5x {'met' if sf / sb <= 1.5 else 'NOT met'}; "
            f"no sample > 3x {'met' if worst[ratio] <= 3 else 'NOT met'}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--problems", type=int, default=None)
    ap.add_argument("--tb", default="weak,good,best")
    ap.add_argument("--set", default="stimulus", choices=("stimulus", "others", "both"), help="sample set (above)")
    ap.add_argument("--others", type=int, default=24, help="how many other cid012 problems")
    ap.add_argument("--repeat", type=int, default=3, help="passes per sample (the minimum is kept)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    engine = Engine(Settings(cache_dir=work / "cache", result_cache=False))
    cases = []
    if args.set in ("stimulus", "both"):
        cases = load_cases(args.cases, args.cases.parent / "cvdp" / "cid012.jsonl", args.problems, args.tb.split(","))
        for case in cases:  # warm-up: the design's instrumentation, imports, toolchain probe
            engine.score(request(case, fresh(case)))
    if args.set in ("others", "both"):
        others = pick_others(engine, other_candidates(args.cases), args.others)
        print("others: " + ", ".join(c.short for c in others), flush=True)
        cases += others
    rows = []
    for i, case in enumerate(cases):
        row: dict = {"sample": f"{case.short} {case.tb}", "tb": case.tb, "bare": [], "fast": [], "stages": []}
        for r in range(args.repeat):
            text = fresh(case)
            row["bare"].append(bare(case, text, work / f"bare-{i}-{r}"))
            p0, t0 = time.process_time(), time.perf_counter()
            res = engine.score(request(case, text))
            wall, own = time.perf_counter() - t0, time.process_time() - p0
            row["fast"].append((wall, own + res.timings.get("run_cpu", 0.0) / 1000))
            row["stages"].append(res.timings)
            if res.status != "ok" or res.engine != "fast":
                row["note"] = f"{res.status}/{res.engine}: {res.fallback or res.message}"[:160]
        for key in ("bare", "fast"):  # the least disturbed pass
            row[f"{key}_s"] = min(w for w, _ in row[key])
            row[f"{key}_cpu"] = min(c for _, c in row[key])
        row["ratio"] = row["fast_s"] / row["bare_s"]
        row["cpu_ratio"] = row["fast_cpu"] / row["bare_cpu"]
        best = row["stages"][[w for w, _ in row["fast"]].index(row["fast_s"])]
        print(
            f"{row['sample']:<48} wall bare {row['bare_s'] * 1000:6.1f} fast {row['fast_s'] * 1000:6.1f} ms "
            f"{row['ratio']:5.2f}x | CPU bare {row['bare_cpu'] * 1000:6.1f} fast {row['fast_cpu'] * 1000:6.1f} ms "
            f"{row['cpu_ratio']:5.2f}x | "
            + " ".join(f"{k}={v:.0f}" for k, v in best.items() if k not in ("total", "toolchain", "build"))
            + (f"  {row['note']}" if "note" in row else ""),
            flush=True,
        )
        rows.append(row)
    sets = {"all": rows}
    if args.set == "both":
        sets = {"stimulus": [r for r in rows if r["tb"] != "model"], "others": [r for r in rows if r["tb"] == "model"]}
        sets["all"] = rows
    for name, part in sets.items():
        summary(name, part)
    stages = sorted({k for r in rows for k in r["stages"][0]} - {"total"})
    print(
        "engine stages, ms summed over the samples' fastest passes: "
        + ", ".join(
            f"{k} {sum(r['stages'][[w for w, _ in r['fast']].index(r['fast_s'])].get(k, 0) for r in rows):.0f}"
            for k in stages
        )
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
