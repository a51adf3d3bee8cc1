#!/usr/bin/env python
"""Overhead of the Docker sandbox against bubblewrap and the bare simulator, in one run.

Two parts, both on this machine's Docker daemon and the simulation image
(``scripts/build_images.sh``):

* **per step**: one sandbox step (``ExecSpec``) of a trivial command, ``true``, and of a small
  job (a 1 MiB input file copied in, a 1 KiB output declared and brought back), run directly
  (``subprocess``), under bwrap and in Docker; median milliseconds of ``--steps`` repetitions.
* **per sample**: the stimulus cases (``../shared/cases/stimulus``, RTL from
  ``cvdp/cid012.jsonl``; SV testbench ``--tb``, and the problem's cocotb test where it has one)
  scored by ``Engine.score`` with ``sandbox=bwrap`` and ``sandbox=docker`` (result cache off,
  warm: ccache and the cocotb model cache filled by an untimed first pass), and the bare
  simulator commands of ``bench_stimulus.py`` (SV only; Verilator with a warm ccache).
  Repetitions are interleaved (bare, bwrap, docker) and the median kept. Both engines must give
  the same status and coverage (checked).

It prints both tables, the ratios docker/bwrap and docker/bare, and the seconds Docker adds per
step and per sample; the numbers of one run are in docs/sandbox.md ("Overhead").

    python bench/bench_docker.py --simulator both --reps 3
    python bench/bench_docker.py --steps 20 --problems ''          # per-step part only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stimulus import (
    DEFAULT_CASES,
    Case,
    bare_icarus,
    bare_verilator,
    console,
    load_cases,
    request_for,
)

from reward_service.engine import Engine
from reward_service.sandbox import BwrapSandbox, ExecSpec
from reward_service.sandbox.docker import DockerSandbox
from reward_service.settings import Settings

PREFIX = "reward-service-bench"  # its own ccache volume (kept: later runs start warm)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --------------------------------------------------------------------------------------------
# per step
def step_bench(reps: int, image: str) -> list[dict]:
    """Median ms of one step, bare / bwrap / docker, for a trivial and a small-files step."""
    sandboxes = {"bwrap": BwrapSandbox(), "docker": DockerSandbox(image, volume_prefix=PREFIX)}
    sandboxes["docker"].toolchain()  # the one-time image probe is not a per-step cost
    rows = []
    for label, argv, files in [
        ("true", ["true"], False),
        (
            "1 MiB in, 1 KiB out",
            ["python3", "-c", "open('/work/out.txt', 'w').write(open('/work/in.bin', 'rb').read(1024).hex()[:1024])"],
            True,
        ),
    ]:
        times: dict[str, list[float]] = {"bare": [], "bwrap": [], "docker": []}
        for _ in range(reps):
            for name in times:
                work = Path(tempfile.mkdtemp(prefix="rs-bench-step-"))
                try:
                    if files:
                        (work / "in.bin").write_bytes(os.urandom(1 << 20))
                    t0 = time.perf_counter()
                    if name == "bare":
                        bare_argv = [a.replace("/work/", f"{work}/") for a in argv]
                        ok = subprocess.run(bare_argv, cwd=work, capture_output=True).returncode == 0
                    else:
                        res = sandboxes[name].run(ExecSpec(argv=argv, workdir=work, outputs=("/work/out.txt",)))
                        ok = res.exit_code == 0
                    elapsed = (time.perf_counter() - t0) * 1000
                    if not ok or (files and not (work / "out.txt").exists()):
                        raise SystemExit(f"step {label!r} failed under {name}")
                    times[name].append(elapsed)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        med = {k: median(v) for k, v in times.items()}
        rows.append(
            {
                "step": label,
                **{f"{k}_ms": round(v, 1) for k, v in med.items()},
                "docker_minus_bwrap_ms": round(med["docker"] - med["bwrap"], 1),
                "docker_over_bwrap": round(med["docker"] / med["bwrap"], 2),
                "docker_over_bare": round(med["docker"] / med["bare"], 2),
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# per sample
def cocotb_request(case: Case, cases_dir: Path, simulator: str, args) -> dict | None:
    cocotb = json.loads((cases_dir / case.problem / "expected.json").read_text()).get("cocotb")
    if not cocotb:
        return None
    return {
        "design": {"files": case.design, "toplevel": cocotb["hdl_toplevel"]},
        "stimulus": {
            "kind": "cocotb",
            "test_module": cocotb["test_module"],
            "files": {cocotb["file"]: (cases_dir / case.problem / cocotb["file"]).read_text()},
        },
        "simulator": simulator,
        "limits": {"compile_s": args.build_timeout, "run_s": args.run_timeout},
    }


def outcome(result) -> tuple:
    return (
        result.status.value,
        tuple(sorted((m, c.covered, c.total) for m, c in result.coverage.metrics.items())),
        tuple((t.name, t.passed) for t in result.tests),
    )


def sample_bench(cases: list[Case], sims: list[str], args, base: Path) -> list[dict]:
    cache = base / "cache"
    engines = {
        name: Engine(
            Settings(
                cache_dir=cache, result_cache=False, sandbox=name, sim_image=args.image, docker_volume_prefix=PREFIX
            )
        )
        for name in ("bwrap", "docker")
    }
    ccache = base / "bare-ccache"
    jobs = []
    for case in cases:
        for sim in sims:
            jobs.append(
                (
                    f"{case.short}/{case.tb} sv {sim}",
                    case,
                    sim,
                    request_for(case, sim, args.build_timeout, args.run_timeout),
                )
            )
            if args.cocotb and (req := cocotb_request(case, args.cases, sim, args)) is not None:
                jobs.append((f"{case.short} cocotb {sim}", None, sim, req))

    def bare(label: str, case: Case | None, sim: str) -> float | None:
        """Seconds of the sample's bare run (no service); None for a cocotb sample (no bare run)."""
        if case is None:
            return None
        root = Path(tempfile.mkdtemp(prefix="rs-bench-bare-", dir=base))
        step = bare_verilator(case, root, ccache, args) if sim == "verilator" else bare_icarus(case, root, args)
        shutil.rmtree(root, ignore_errors=True)
        if not step.ok:
            raise SystemExit(f"{label}: bare run failed: {step.note}")
        return step.seconds

    def engine(name: str, request: dict) -> tuple[float, object]:
        """Seconds and result of scoring ``request`` on the engine of sandbox ``name``."""
        t0 = time.perf_counter()
        result = engines[name].score(request)
        return time.perf_counter() - t0, result

    rows = []
    for label, case, sim, request in jobs:
        console.print(f"[dim]{label}: warm-up[/dim]")
        bare(label, case, sim)
        first = {name: engine(name, request)[1] for name in engines}
        if outcome(first["docker"]) != outcome(first["bwrap"]):
            raise SystemExit(
                f"{label}: docker and bwrap differ: {outcome(first['docker'])} vs "
                f"{outcome(first['bwrap'])}: {first['docker'].message}"
            )
        times: dict[str, list[float]] = {"bare": [], "bwrap": [], "docker": []}
        steps: dict[str, list[dict]] = {"bwrap": [], "docker": []}
        for _ in range(args.reps):
            seconds = bare(label, case, sim)
            if seconds is not None:
                times["bare"].append(seconds)
            for name in engines:
                seconds, result = engine(name, request)
                times[name].append(seconds)
                steps[name].append(result.timings)
        med = {k: median(v) if v else None for k, v in times.items()}
        row = {
            "sample": label,
            "status": first["docker"].status.value,
            **{f"{k}_s": None if v is None else round(v, 3) for k, v in med.items()},
            "docker_minus_bwrap_s": round(med["docker"] - med["bwrap"], 3),
            "docker_over_bwrap": round(med["docker"] / med["bwrap"], 2),
            "docker_over_bare": None if med["bare"] is None else round(med["docker"] / med["bare"], 2),
            "bwrap_over_bare": None if med["bare"] is None else round(med["bwrap"] / med["bare"], 2),
            **{
                f"{name}_{stage}_ms": round(median([t.get(stage, 0) for t in steps[name]]))
                for name in steps
                for stage in ("build", "run")
            },
        }
        rows.append(row)
        console.print(f"{label}: bare {row['bare_s']} s, bwrap {row['bwrap_s']} s, docker {row['docker_s']} s")
    return rows


# --------------------------------------------------------------------------------------------
def print_table(title: str, rows: list[dict], columns: list[tuple[str, str]]) -> None:
    table = Table(title=title)
    for _, head in columns:
        table.add_column(head, justify="right")
    for row in rows:
        table.add_row(*("—" if row.get(k) is None else str(row[k]) for k, _ in columns))
    console.print(table)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench_docker.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--steps", type=int, default=10, help="repetitions of each per-step measurement (0: skip)")
    p.add_argument(
        "--problems",
        default="Attenuator_0011,fixed_arbiter_0004",
        help="comma-separated stimulus problems (id without cvdp_copilot_; fixed_arbiter_0004 and "
        "gray_to_binary_0014 have cocotb tests); empty: skip the per-sample part",
    )
    p.add_argument("--tb", default="good", help="SV testbench of each problem (weak/good/best)")
    p.add_argument("--simulator", choices=("verilator", "icarus", "both"), default="both")
    p.add_argument("--no-cocotb", dest="cocotb", action="store_false", help="leave out the cocotb samples")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions per sample (median kept)")
    p.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    p.add_argument("--image", default=Settings().sim_image, help="the simulation image")
    p.add_argument("--build-timeout", type=float, default=600.0)
    p.add_argument("--run-timeout", type=float, default=60.0)
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write the results as JSON")
    args = p.parse_args(argv)
    args.bare_build_jobs = "engine"  # bare Verilator compiles with the engine's --build-jobs
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    DockerSandbox(args.image).check()
    out: dict = {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "docker_cpus": Settings().docker_cpus}
    if args.steps:
        out["steps"] = step_bench(args.steps, args.image)
        print_table(
            "per step (median ms)",
            out["steps"],
            [
                ("step", "step"),
                ("bare_ms", "bare"),
                ("bwrap_ms", "bwrap"),
                ("docker_ms", "docker"),
                ("docker_minus_bwrap_ms", "docker − bwrap"),
                ("docker_over_bwrap", "docker/bwrap"),
                ("docker_over_bare", "docker/bare"),
            ],
        )
    if args.problems:
        sims = ["verilator", "icarus"] if args.simulator == "both" else [args.simulator]
        wanted = [p.strip().removeprefix("cvdp_copilot_") for p in args.problems.split(",")]
        cases = [
            c
            for c in load_cases(args.cases, args.cases.parent / "cvdp" / "cid012.jsonl", None, [args.tb])
            if c.short in wanted
        ]
        if len(cases) != len(wanted):
            raise SystemExit(f"unknown problem(s) in {args.problems!r}")
        base = Path(tempfile.mkdtemp(prefix="rs-bench-docker-"))
        try:
            rows = sample_bench(cases, sims, args, base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        out["samples"] = rows
        print_table(
            "per sample (median s, warm caches)",
            rows,
            [
                ("sample", "sample"),
                ("status", "status"),
                ("bare_s", "bare"),
                ("bwrap_s", "bwrap"),
                ("docker_s", "docker"),
                ("docker_minus_bwrap_s", "docker − bwrap"),
                ("docker_over_bwrap", "docker/bwrap"),
                ("docker_over_bare", "docker/bare"),
                ("bwrap_over_bare", "bwrap/bare"),
            ],
        )
        added = [r["docker_minus_bwrap_s"] for r in rows]
        out["summary"] = {
            "median_docker_minus_bwrap_s": round(median(added), 3),
            "docker_over_bwrap_total": round(sum(r["docker_s"] for r in rows) / sum(r["bwrap_s"] for r in rows), 2),
        }
        console.print(
            f"Docker adds {out['summary']['median_docker_minus_bwrap_s']} s per sample (median); "
            f"sum docker / sum bwrap = {out['summary']['docker_over_bwrap_total']}"
        )
    out["loadavg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
