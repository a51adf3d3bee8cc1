#!/usr/bin/env python
"""An RL step through the service against the bare simulator floor, in one run (issue 20).

One RL step scores N *distinct* completions in one ``POST /v1/batches``: the bench draws N
samples from the stimulus cases (``../shared/cases/stimulus``, 8 problems x weak/good/best),
each made distinct as a step's completions are (an unreachable ``$display`` of a fresh id in
the testbench: a new sample for every cache), and measures on the same N samples:

* **bare floor**: ``iverilog -g2012`` + ``vvp -n`` of every sample (no coverage, no sandbox),
  ``--concurrency`` at a time (bench_stimulus's commands);
* **embedded**: ``reward-service serve`` (in-process pool, bubblewrap), result cache off,
  ``engine: auto`` as CVDP problems default to; one untimed warm-up batch of one distinct
  sample per testbench (imports, the designs' instrumentation and self-check), then the
  timed batch of all N;
* **compose** (``--modes embedded,compose``): the docker-compose.yml stack
  (bench_service.py's), the same warm-up and batch.

Every result is checked as bench_service.py checks it (status ok, coverage as expected.json).
Prints the wall times, samples/s, the ratio to the floor and the engines that scored the
samples; the bar of issue 20 is a 2048-sample step in <= 90 s embedded and <= 95 s compose.

    python bench/bench_rl_step.py --samples 2048                       # embedded, ~5 min
    python bench/bench_rl_step.py --samples 2048 --modes embedded,compose --json /tmp/rl.json
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_stimulus, bench_service, bench_floor
from bench_floor import fresh
from bench_service import (
    bare_pass,
    batch_pass,
    cores,
    pick_samples,
    service_env,
    start_api,
    start_compose,
    stop_all,
)
from bench_stimulus import DEFAULT_CASES, TESTBENCHES, Case, load_cases, request_for


def distinct(cases: list[Case]) -> list[Case]:
    """Each case with a testbench no cache has seen (:func:`bench_floor.fresh`)."""
    return [dataclasses.replace(c, tb_text=fresh(c)) for c in cases]


def rl_request(case: Case, args) -> dict:
    """The stimulus-case request (bench_stimulus) on the fast path's default for CVDP problems
    (``engine: auto``); ring_token's testbenches force DUT signals, as its expected.json allows."""
    request = request_for(case, "verilator", args.build_timeout, args.run_timeout)
    return {**request, "engine": args.engine, "stimulus_policy": {"dut_writes": "allow"}}


def one_batch(url: str, samples: list[Case], args, label: str) -> tuple[float, list[str], dict[str, int]]:
    """One timed ``POST /v1/batches`` of ``samples`` (bench_service's batch pass, results
    checked): (seconds, failures, how many results each engine scored: ``fast``,
    ``verilator`` for a fallback, ...)."""
    requests = [rl_request(c, args) for c in samples]
    with httpx.Client(timeout=httpx.Timeout(900.0)) as client:
        out = batch_pass(label, client, url, samples, requests, "verilator", args.concurrency, lambda done: None)
    return out.wall_s, out.failures, dict(collections.Counter(e or "none" for e in out.engines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--modes", default="embedded", help="comma-separated: embedded, compose")
    ap.add_argument("--engine", default="auto", choices=("auto", "fast", "verilator"))
    ap.add_argument("--concurrency", type=int, default=cores(), help="parallel bare processes (default: the cores)")
    ap.add_argument("--compose-workers", type=int, default=1)
    ap.add_argument("--tb", default=",".join(TESTBENCHES))
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--build-timeout", type=float, default=120.0)
    ap.add_argument("--run-timeout", type=float, default=120.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    tbs = args.tb.split(",")
    cases = load_cases(args.cases, args.cases.parent / "cvdp" / "cid012.jsonl", None, tbs)
    samples = distinct(pick_samples(cases, args.samples, tbs))
    base = Path(tempfile.mkdtemp(prefix="rs-bench-rl-"))
    logs = base / "logs"
    logs.mkdir()

    def _terminate(signum, frame):  # SIGTERM: stop what was started, as Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    report: dict = {"samples": len(samples), "cores": cores(), "loadavg_start": os.getloadavg(), "modes": {}}
    try:
        t0 = time.perf_counter()
        bare = bare_pass(
            "bare", samples, "icarus", base / "bare", base / "ccache", args, args.concurrency, lambda: None
        )
        report["bare_s"] = bare.wall_s
        print(f"bare floor: {len(samples)} samples in {bare.wall_s:.1f} s ({len(bare.failures)} failed)", flush=True)
        for mode in modes:
            if mode == "embedded":
                url = start_api(service_env(base / "cache-embedded", None), logs, "embedded")
            elif mode == "compose":
                url = start_compose(logs, args.compose_workers)
            else:
                raise SystemExit(f"unknown mode {mode}")
            one_batch(url, distinct(cases), args, f"{mode} warm-up")
            wall, failures, engines = one_batch(url, samples, args, mode)
            report["modes"][mode] = {
                "wall_s": wall,
                "ratio_to_bare": wall / bare.wall_s,
                "engines": engines,
                "failures": failures[:20],
                "n_failed": len(failures),
            }
            print(
                f"{mode}: {len(samples)} samples in {wall:.1f} s ({len(samples) / wall:.1f} samples/s), "
                f"{wall / bare.wall_s:.2f}x the bare floor; engines {engines}; {len(failures)} failed"
                + (f" (first: {failures[0]})" if failures else ""),
                flush=True,
            )
            stop_all()
        report["total_s"] = time.perf_counter() - t0
    finally:
        stop_all()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 1 if any(m["n_failed"] for m in report["modes"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
