"""Time the SystemVerilog stimulus-integrity check (docs/integrity.md) per sample.

Over the stimulus cases of ../shared/cases/stimulus with their cid012 problems (design +
testbench, the problem's policy), and with ``--references`` the CVDP reference testbench of
every cid012 problem too: the check of a new sample (pyslang loaded, nothing cached) and of a
repeated one (the per-process cache). Not part of the test suite.

    python bench/bench_integrity.py [--cases DIR] [--repeat N] [--references]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from reward_service.integrity import sv
from reward_service.integrity.policy import check_stimulus
from reward_service.models import SvTestbench
from reward_service.problems import load_problems

CASES = Path(__file__).resolve().parents[2] / "shared" / "cases" / "stimulus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=CASES, help="stimulus cases dir (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the cases, each with an empty cache")
    parser.add_argument("--references", action="store_true", help="add each cid012 problem's reference testbench")
    args = parser.parse_args()
    cid012 = args.cases.parent / "cvdp" / "cid012.jsonl"
    problems = load_problems(cid012)
    requests = [
        problems[d.name].request(SvTestbench(files={"tb.sv": (d / f"{tb}.sv").read_text()}))
        for d in sorted(p for p in args.cases.iterdir() if (p / "expected.json").exists())
        for tb in ("weak", "good", "best")
    ]
    if args.references:
        with open(cid012, encoding="utf-8") as fh:
            for row in map(json.loads, fh):
                ((path, text),) = (row["output"]["context"] if "output" in row else row["patch"]).items()
                requests.append(problems[row["id"]].request(SvTestbench(files={Path(path).name: text})))
    t0 = time.perf_counter()
    check_stimulus(requests[0], requests[0].design, requests[0].stimulus)  # imports pyslang
    print(f"first check of the process (pyslang import included): {(time.perf_counter() - t0) * 1000:.0f} ms")
    new: list[float] = []
    cached: list[float] = []
    refused = 0
    for _ in range(args.repeat):
        sv._CACHE.clear()
        for r in requests:
            t = time.perf_counter()
            found = check_stimulus(r, r.design, r.stimulus)
            new.append((time.perf_counter() - t) * 1000)
            refused += bool(found.violations)
            t = time.perf_counter()
            check_stimulus(r, r.design, r.stimulus)
            cached.append((time.perf_counter() - t) * 1000)
    q = statistics.quantiles(new, n=10)
    print(
        f"{len(requests)} samples x {args.repeat}: new sample median {statistics.median(new):.2f} ms, "
        f"p90 {q[-1]:.2f} ms, max {max(new):.2f} ms; cached median {statistics.median(cached):.3f} ms; "
        f"refused {refused // args.repeat} per pass"
    )


if __name__ == "__main__":
    main()
