#!/usr/bin/env python
"""Overhead of the engine + sandbox against the bare simulator, on the stimulus cases.

For each problem of ``../shared/cases/stimulus`` and each of its testbenches (weak/good/best)
this runs, in one process and interleaved sample by sample:

* bare: the simulator commands the engine would run, directly (no engine, no bwrap):
  Verilator ``--binary`` build + the binary, cold (fresh, empty ccache dir) and warm (same ccache
  dir, fresh obj dir); Icarus ``iverilog -g2012`` + ``vvp -n`` (first and second run);
* engine: ``Engine(Settings(cache_dir=<fresh>, result_cache=False)).score(request)`` cold (fresh
  cache dir, so empty ccache) and warm (second identical request, same engine: ccache warm), then
  a result-cache hit (``result_cache=True`` on the same cache dir, second identical request).

It prints one row per sample with the wall-clock seconds and the engine/bare ratios, a summary
(median and mean per column, overall ratios) and optionally writes everything as JSON.
See bench/README.md.

    python bench/bench_stimulus.py --problems 3 --simulator both --json /tmp/bench.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "tests"))  # case_numbers: the expected numbers that moved

from case_numbers import current_numbers  # noqa: E402

from reward_service import hdl  # noqa: E402
from reward_service.engine import Engine  # noqa: E402
from reward_service.sandbox.toolchain import verilator_root, versions  # noqa: E402
from reward_service.settings import Settings  # noqa: E402

DEFAULT_CASES = Path(os.environ.get("REWARD_SERVICE_CASES", REPO.parent / "shared" / "cases")) / "stimulus"
TESTBENCHES = ("weak", "good", "best")

#: The bare Verilator command (the engine's flags, with Verilator's own --binary main).
VERILATOR_FLAGS = [
    "--binary",
    "--timing",
    "--coverage-line",
    "--coverage-toggle",
    "--coverage-expr",
    "--coverage-user",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-CFLAGS",
    "-std=c++20",
    "-MAKEFLAGS",
    "CFG_CXXFLAGS_PCH_I=-include",
]

console = Console(width=None if sys.stdout.isatty() else 150)


# --------------------------------------------------------------------------------------------
# cases
@dataclass
class Case:
    problem: str
    tb: str
    design: dict[str, str]
    tb_file: str
    tb_text: str
    top: str
    scope: str
    target: float
    expected: dict[str, Any]

    @property
    def short(self) -> str:
        return self.problem.removeprefix("cvdp_copilot_")


def rtl_files(row: dict) -> dict[str, str]:
    """The RTL of a cid012 row (harness src/*.sv|*.v), as tests/conftest.py reads it."""
    files = row["harness"].get("files", row["harness"])
    return {k[4:]: v for k, v in files.items() if k.startswith("src/") and k.endswith((".sv", ".v"))}


def load_cases(cases: Path, cid012: Path, problems: int | None, tbs: list[str]) -> list[Case]:
    dirs = sorted(d for d in cases.iterdir() if (d / "expected.json").exists())
    if problems is not None:
        dirs = dirs[:problems]
    wanted = {d.name for d in dirs}
    rows: dict[str, dict] = {}
    with open(cid012, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["id"] in wanted:
                rows[row["id"]] = row
    out = []
    for d in dirs:
        # the numbers our engines give now (tests/case_numbers.py: the time-0 rule, Verilator 5.052)
        expected = current_numbers(d.name, json.loads((d / "expected.json").read_text()))
        if d.name not in rows:
            raise SystemExit(f"{d.name}: no row in {cid012}")
        design = rtl_files(rows[d.name])
        design_modules = {m for text in design.values() for m in hdl.module_names(text)}
        for tb in tbs:
            spec = expected["testbenches"].get(tb)
            if spec is None:
                continue
            text = (d / spec["file"]).read_text()
            top = hdl.choose_top([text], design_modules)  # the top the engine picks
            if top is None:
                raise SystemExit(f"{d.name}/{spec['file']}: no testbench top module")
            out.append(
                Case(
                    d.name,
                    tb,
                    design,
                    spec["file"],
                    text,
                    top,
                    expected["dut_instance"],
                    expected["target_percent"],
                    spec,
                )
            )
    return out


def request_for(case: Case, simulator: str, build_timeout: float, run_timeout: float) -> dict:
    """The request tests/test_stimulus_cases.py sends, with the bench's time limits."""
    return {
        "design": {"files": case.design},
        "stimulus": {"kind": "sv_testbench", "files": {case.tb_file: case.tb_text}},
        "simulator": simulator,
        "coverage": {"scope": case.scope, "targets": [{"metric": "overall", "percent": case.target}]},
        "limits": {"compile_s": build_timeout, "run_s": run_timeout},
    }


# --------------------------------------------------------------------------------------------
# measuring
class CpuMeter:
    """CPU seconds (user+sys) used by this process and everything it starts.

    ``getrusage(RUSAGE_CHILDREN)`` misses what runs in bwrap's pid namespace (bwrap exits
    without reaping its init), so where the cgroup v1 ``cpuacct`` hierarchy is writable the bench
    moves itself into a cpuacct cgroup of its own (only CPU accounting, no limits; children
    inherit it, the engine's sandbox only moves them in memory/pids cgroups) and reads
    ``cpuacct.usage``. Otherwise CPU is not reported (``None``)."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = None
        self.origin: Path | None = None
        try:
            current = next(
                line.split(":", 2)[2]
                for line in Path("/proc/self/cgroup").read_text().splitlines()
                if "cpuacct" in line.split(":", 2)[1].split(",")
            )
            self.origin = self.ROOT / current.lstrip("/")
            group = self.origin / f"rs-bench-{os.getpid()}"
            group.mkdir()
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except (OSError, StopIteration, IndexError):
            self.group = None

    def read(self) -> float | None:
        if self.group is None:
            return None
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.group is None or self.origin is None:
            return
        try:
            (self.origin / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):  # children may take a moment to leave
                try:
                    self.group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        except OSError:
            pass
        self.group = None


CPU: CpuMeter | None = None


def _cpu() -> float | None:
    return CPU.read() if CPU is not None else None


def _delta(start: float | None) -> float | None:
    now = _cpu()
    return None if start is None or now is None else now - start


@dataclass
class Step:
    """One timed command (or engine call)."""

    seconds: float
    cpu: float | None = None  # user+sys CPU seconds of the bench process and its children
    ok: bool = True
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_cmd(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str, float]:
    """Run argv (own process group, stdin /dev/null); kill the group on timeout.
    Returns (exit code or None on timeout, output tail, seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _killpg(proc)
        out, _ = proc.communicate()
        rc = None
    except BaseException:  # interrupted: leave no build behind
        _killpg(proc)
        proc.wait()
        raise
    return rc, out.decode(errors="replace")[-2000:], time.perf_counter() - t0


def _layout(case: Case, root: Path) -> Path:
    src = root / "src"
    for name, text in {**case.design, case.tb_file: case.tb_text}.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "run").mkdir()
    return src


def ccache_stats(ccache_dir: Path) -> dict[str, int]:
    try:
        text = subprocess.run(
            ["ccache", "--print-stats"],
            env={**os.environ, "CCACHE_DIR": str(ccache_dir)},
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    stats = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    hits = sum(int(stats.get(k, 0)) for k in ("direct_cache_hit", "preprocessed_cache_hit"))
    return {"hits": hits, "misses": int(stats.get("cache_miss", 0))}


def ccache_zero(ccache_dir: Path) -> None:
    if ccache_dir.exists():
        subprocess.run(
            ["ccache", "-z"], env={**os.environ, "CCACHE_DIR": str(ccache_dir)}, capture_output=True, timeout=30
        )


def bare_verilator(case: Case, root: Path, ccache_dir: Path, args) -> Step:
    """``verilator --binary ...`` then the binary, from a fresh dir, through ccache."""
    src = _layout(case, root)
    vroot = verilator_root()
    env = {
        **os.environ,
        "VERILATOR_ROOT": str(vroot),
        "OBJCACHE": "ccache",
        "CCACHE_DIR": str(ccache_dir),
        # as the engine's build step (paths under the work dir are hashed relative to it)
        "CCACHE_BASEDIR": str(root),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_MAXSIZE": "5G",
    }
    argv = [str(vroot / "bin" / "verilator"), *VERILATOR_FLAGS]
    if args.bare_build_jobs != "default":
        jobs = Settings().build_jobs if args.bare_build_jobs == "engine" else int(args.bare_build_jobs)
        argv += ["--build-jobs", str(jobs)]
    argv += ["--top-module", case.top, "-Mdir", str(root / "obj"), *case.design, case.tb_file]
    cpu0 = _cpu()
    rc, out, build_s = run_cmd(argv, src, env, args.build_timeout)
    binary = root / "obj" / f"V{case.top}"
    if rc != 0 or not binary.exists():
        return Step(
            build_s,
            _delta(cpu0),
            ok=False,
            note="build timeout" if rc is None else f"build failed (exit {rc})",
            detail={"build_s": build_s, "log": out},
        )
    rc2, out2, run_s = run_cmd([str(binary)], root / "run", env, args.run_timeout)
    cov = (root / "run" / "coverage.dat").exists()
    note = "run timeout" if rc2 is None else ("" if rc2 == 0 else f"run exit {rc2}")
    if not cov:
        note = (note + "; " if note else "") + "no coverage.dat"
    return Step(
        build_s + run_s,
        _delta(cpu0),
        ok=rc2 is not None,
        note=note,
        detail={"build_s": build_s, "run_s": run_s, "exit": rc2, "coverage_dat": cov},
    )


def bare_icarus(case: Case, root: Path, args) -> Step:
    """``iverilog -g2012 -o x.vvp -s <top> ...`` then ``vvp -n x.vvp </dev/null``."""
    src = _layout(case, root)
    vvp = root / "x.vvp"
    env = dict(os.environ)
    cpu0 = _cpu()
    rc, out, build_s = run_cmd(
        ["iverilog", "-g2012", "-o", str(vvp), "-s", case.top, *case.design, case.tb_file], src, env, args.build_timeout
    )
    if rc != 0 or not vvp.exists():
        return Step(
            build_s,
            _delta(cpu0),
            ok=False,
            note="build timeout" if rc is None else f"iverilog failed (exit {rc})",
            detail={"build_s": build_s, "log": out},
        )
    rc2, out2, run_s = run_cmd(["vvp", "-n", str(vvp)], root / "run", env, args.run_timeout)
    return Step(
        build_s + run_s,
        _delta(cpu0),
        ok=rc2 is not None,
        note="run timeout" if rc2 is None else ("" if rc2 == 0 else f"vvp exit {rc2}"),
        detail={"build_s": build_s, "run_s": run_s, "exit": rc2},
    )


def engine_step(engine_factory, request: dict) -> Step:
    cpu0 = _cpu()
    t0 = time.perf_counter()
    engine = engine_factory()
    result = engine.score(request)
    seconds = time.perf_counter() - t0
    overall = result.coverage.overall
    return Step(
        seconds,
        _delta(cpu0),
        ok=result.status.value == "ok",
        note="" if result.status.value == "ok" else f"{result.status.value}: {result.message[:120]}",
        detail={
            "status": result.status.value,
            "timings_ms": result.timings,
            "overall_percent": None if overall is None else round(100 * overall, 2),
            "cache_result": result.cache.result,
            "engine": engine,
        },
    )


def run_sample(case: Case, simulator: str, base: Path, args, bare_first: bool, phase) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"{case.short[:20]}-{case.tb}-{simulator}-", dir=base))
    request = request_for(case, simulator, args.build_timeout, args.run_timeout)
    res: dict[str, Step] = {}
    ccache: dict[str, dict] = {}

    def bare() -> None:
        if simulator == "verilator":
            cc = root / "bare-ccache"
            cc.mkdir()
            phase("bare cold")
            res["bare_cold"] = bare_verilator(case, root / "bare-cold", cc, args)
            ccache_zero(cc)
            phase("bare warm")
            res["bare_warm"] = bare_verilator(case, root / "bare-warm", cc, args)
            ccache["bare_warm"] = ccache_stats(cc)
        else:
            phase("bare cold")
            res["bare_cold"] = bare_icarus(case, root / "bare-cold", args)
            phase("bare warm")
            res["bare_warm"] = bare_icarus(case, root / "bare-warm", args)

    def engine() -> None:
        cache = root / "engine-cache"
        work = root / "engine-work"
        work.mkdir()
        phase("engine cold")
        res["engine_cold"] = engine_step(
            lambda: Engine(Settings(cache_dir=cache, work_root=work, result_cache=False)), request
        )
        same = res["engine_cold"].detail.pop("engine")
        ccache_zero(cache / "ccache")
        phase("engine warm")
        res["engine_warm"] = engine_step(lambda: same, request)
        res["engine_warm"].detail.pop("engine")
        if simulator == "verilator":
            ccache["engine_warm"] = ccache_stats(cache / "ccache")
        phase("result cache")
        rc_engine = Engine(Settings(cache_dir=cache, work_root=work, result_cache=True))
        fill = engine_step(lambda: rc_engine, request)  # fills the result cache (a third, warm run)
        fill.detail.pop("engine")
        hit = engine_step(lambda: rc_engine, request)
        hit.detail.pop("engine")
        if not hit.detail["cache_result"]:
            hit.ok, hit.note = False, "second identical request was not a result-cache hit"
        res["engine_fill"], res["engine_hit"] = fill, hit

    for part in (bare, engine) if bare_first else (engine, bare):
        part()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)

    def ratio(a: str, b: str) -> float | None:
        return res[a].seconds / res[b].seconds if res[b].seconds > 0 else None

    # Sanity: the engine reports what expected.json says (Verilator) / runs what it says (Icarus).
    if simulator == "verilator":
        consistent = res["engine_cold"].detail["overall_percent"] == case.expected["overall_percent"]
    else:
        consistent = res["engine_cold"].ok == case.expected["icarus_compiles_and_runs"]
    notes = [f"{k}: {s.note}" for k, s in res.items() if s.note]
    if not consistent:
        notes.append("engine result differs from expected.json")
    return {
        "problem": case.problem,
        "tb": case.tb,
        "simulator": simulator,
        "top": case.top,
        "order": "bare,engine" if bare_first else "engine,bare",
        **{f"{k}_s": round(s.seconds, 4) for k, s in res.items()},
        **{f"{k}_cpu_s": None if s.cpu is None else round(s.cpu, 3) for k, s in res.items()},
        "ratio_cold": ratio("engine_cold", "bare_cold"),
        "ratio_warm": ratio("engine_warm", "bare_warm"),
        "ok": all(s.ok for k, s in res.items()) and consistent,
        "consistent_with_expected": consistent,
        "ccache_warm": ccache,
        "notes": notes,
        "detail": {k: s.detail for k, s in res.items()},
    }


# --------------------------------------------------------------------------------------------
# reporting
COLUMNS = [
    ("bare_cold_s", "bare cold"),
    ("bare_warm_s", "bare warm"),
    ("engine_cold_s", "engine cold"),
    ("engine_warm_s", "engine warm"),
    ("engine_hit_s", "rc hit"),
    ("ratio_cold", "ratio cold"),
    ("ratio_warm", "ratio warm"),
]


def _fmt(key: str, value: float | None) -> str:
    if value is None:
        return "-"
    if key.startswith("ratio"):
        return f"{value:.2f}×"
    if key == "engine_hit_s":
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f}"


def _total(rows: list[dict], key: str) -> float | None:
    """Sum of ``key`` over ``rows``; None when a row has no value for it."""
    vals = [r.get(key) for r in rows]
    return None if any(v is None for v in vals) else sum(vals)


def _ratio_of_totals(rows: list[dict], a: str, b: str) -> float | None:
    """Total of ``a`` over total of ``b`` (None when either is missing or ``b``'s is 0)."""
    num, den = _total(rows, a), _total(rows, b)
    return None if num is None or not den else num / den


def summarise(samples: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for sim in dict.fromkeys(s["simulator"] for s in samples):
        rows = [s for s in samples if s["simulator"] == sim]
        cols = {}
        for key, _ in COLUMNS + [
            (k, k) for k in ("bare_cold_cpu_s", "bare_warm_cpu_s", "engine_cold_cpu_s", "engine_warm_cpu_s")
        ]:
            vals = [r[key] for r in rows if r.get(key) is not None]
            if vals:
                cols[key] = {
                    "median": statistics.median(vals),
                    "mean": statistics.fmean(vals),
                    "min": min(vals),
                    "max": max(vals),
                }
        overall = {
            "cold": _ratio_of_totals(rows, "engine_cold_s", "bare_cold_s"),
            "warm": _ratio_of_totals(rows, "engine_warm_s", "bare_warm_s"),
            "cold_cpu": _ratio_of_totals(rows, "engine_cold_cpu_s", "bare_cold_cpu_s"),
            "warm_cpu": _ratio_of_totals(rows, "engine_warm_cpu_s", "bare_warm_cpu_s"),
            "overhead_cold_s_median": statistics.median(r["engine_cold_s"] - r["bare_cold_s"] for r in rows),
            "overhead_warm_s_median": statistics.median(r["engine_warm_s"] - r["bare_warm_s"] for r in rows),
        }
        out[sim] = {
            "samples": len(rows),
            "all_ok": all(r["ok"] for r in rows),
            "columns": cols,
            "overall_ratio": overall,
        }
    return out


def print_report(samples: list[dict], summary: dict) -> None:
    for sim in summary:
        table = Table(title=f"{sim}: seconds per sample (wall clock)", show_lines=False)
        table.add_column("problem")
        table.add_column("tb")
        for _, title in COLUMNS:
            table.add_column(title, justify="right")
        table.add_column("ok")
        for r in (s for s in samples if s["simulator"] == sim):
            table.add_row(
                r["problem"].removeprefix("cvdp_copilot_"),
                r["tb"],
                *[_fmt(k, r.get(k)) for k, _ in COLUMNS],
                "yes" if r["ok"] else "[red]NO[/red]",
            )
        console.print(table)
        bad = [(r["problem"], r["tb"], r["notes"]) for r in samples if r["simulator"] == sim and r["notes"]]
        for p, tb, notes in bad:
            console.print(f"  [yellow]{p} {tb}[/yellow]: {'; '.join(notes)}")

        s = summary[sim]
        tab = Table(title=f"{sim}: summary over {s['samples']} samples")
        tab.add_column("")
        for _, title in COLUMNS:
            tab.add_column(title, justify="right")
        for stat in ("median", "mean"):
            tab.add_row(stat, *[_fmt(k, s["columns"].get(k, {}).get(stat)) for k, _ in COLUMNS])
        console.print(tab)
        o = s["overall_ratio"]
        cpu = (
            f"; CPU time (user+sys) engine/bare: cold {o['cold_cpu']:.2f}×, warm {o['warm_cpu']:.2f}×"
            if o["cold_cpu"] and o["warm_cpu"]
            else ""
        )
        console.print(
            f"  overall engine/bare (sum of times): cold {o['cold']:.2f}×, warm {o['warm']:.2f}×{cpu}; "
            f"median added seconds: cold {o['overhead_cold_s_median']:+.2f}, "
            f"warm {o['overhead_warm_s_median']:+.2f}\n"
        )


# --------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench_stimulus.py",
        description="Time the engine (bwrap sandbox + reward-service) against the bare simulator commands "
        "on the stimulus cases (problems x weak/good/best testbenches), cold and warm, in one run, "
        "and report the engine/bare ratios.",
        epilog="Columns: bare cold/warm = the simulator commands run directly (Verilator: fresh vs. reused "
        "ccache dir; Icarus: first vs. second run); engine cold/warm = Engine.score with a fresh cache "
        "dir vs. a second identical request (ccache warm), result cache off; rc hit = a result-cache "
        "hit; ratio = engine/bare. See bench/README.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--problems", type=int, default=None, metavar="N", help="only the first N problems (sorted by id); default: all"
    )
    p.add_argument("--tb", default=",".join(TESTBENCHES), help="comma-separated testbenches to run")
    p.add_argument("--simulator", choices=("verilator", "icarus", "both"), default="verilator")
    p.add_argument(
        "--cases",
        type=Path,
        default=DEFAULT_CASES,
        help="the stimulus cases dir (<problem>/expected.json + testbenches)",
    )
    p.add_argument(
        "--cid012",
        type=Path,
        default=None,
        help="CVDP cid012 jsonl holding the RTL (default: <cases>/../cvdp/cid012.jsonl)",
    )
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write all results as JSON")
    p.add_argument(
        "--build-timeout", type=float, default=600.0, help="seconds per bare build (also the engine's limits.compile_s)"
    )
    p.add_argument(
        "--run-timeout",
        type=float,
        default=60.0,
        help="seconds per bare simulation run (also the engine's limits.run_s)",
    )
    p.add_argument(
        "--bare-build-jobs",
        default="engine",
        metavar="J",
        help="parallel C++ jobs of the bare Verilator build: 'engine' adds --build-jobs "
        "<Settings.build_jobs> (what the engine passes, so both compile with the same "
        "parallelism), 'default' leaves the flag out (Verilator then runs make -j 1), "
        "or a number",
    )
    p.add_argument("--work-dir", type=Path, default=None, help="where to put the temporary dirs")
    p.add_argument("--keep", action="store_true", help="keep the per-sample dirs (obj dirs, ccache, logs)")
    p.add_argument(
        "--order",
        choices=("alternate", "bare-first", "engine-first"),
        default="alternate",
        help="which of bare/engine runs first within a sample (alternate cancels drift)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cid012 = args.cid012 or args.cases.parent / "cvdp" / "cid012.jsonl"
    tbs = [t.strip() for t in args.tb.split(",") if t.strip()]
    sims = ["verilator", "icarus"] if args.simulator == "both" else [args.simulator]
    cases = load_cases(args.cases, cid012, args.problems, tbs)
    if not cases:
        console.print("[red]no cases found[/red]")
        return 2
    for tool in ("bwrap", "ccache") + (("iverilog", "vvp") if "icarus" in sims else ()):
        if not shutil.which(tool):
            console.print(f"[red]{tool} not found on PATH[/red]")
            return 2

    # Untimed warm-up: tool versions (cached by the engine), binaries into the page cache.
    tool_versions = versions()
    subprocess.run(
        [str(verilator_root() / "bin" / "verilator"), "--version"],
        capture_output=True,
        env={**os.environ, "VERILATOR_ROOT": str(verilator_root())},
    )
    if args.bare_build_jobs not in ("engine", "default") and not args.bare_build_jobs.isdigit():
        console.print("[red]--bare-build-jobs must be 'engine', 'default' or a number[/red]")
        return 2

    def _terminate(signum, frame):  # SIGTERM/SIGHUP: clean up like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    global CPU
    CPU = CpuMeter()
    base = Path(tempfile.mkdtemp(prefix="rs-bench-", dir=args.work_dir))
    meta = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "versions": tool_versions,
        "args": vars(args)
        | {
            "cases": str(args.cases),
            "cid012": str(cid012),
            "json": str(args.json) if args.json else None,
            "work_dir": str(base),
        },
        "engine_build_jobs": Settings().build_jobs,
        "bare_build_jobs": args.bare_build_jobs,
        "cpu_accounting": "cgroup v1 cpuacct" if CPU.group is not None else None,
        "bare_verilator_cmd": ["verilator", *VERILATOR_FLAGS, "--top-module", "<tb top>", "<rtl>", "<tb>"],
        "bare_icarus_cmd": [
            "iverilog",
            "-g2012",
            "-o",
            "x.vvp",
            "-s",
            "<tb top>",
            "<rtl>",
            "<tb>",
            "&&",
            "vvp",
            "-n",
            "x.vvp",
        ],
    }
    console.print(
        f"{len(cases)} testbenches × {', '.join(sims)} ({os.cpu_count()} CPUs, "
        f"load {meta['loadavg_start'][0]:.2f}); work dir {base}"
    )

    samples: list[dict] = []
    started = time.perf_counter()
    try:
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("starting", total=len(cases) * len(sims))
            index = dict.fromkeys(sims, 0)  # alternation counted per simulator
            for case in cases:
                for sim in sims:
                    label = f"{case.short} {case.tb} {sim}"

                    def phase(what: str, label: str = label) -> None:
                        progress.update(task, description=f"{label}: {what}")

                    bare_first = {"alternate": index[sim] % 2 == 0, "bare-first": True, "engine-first": False}[
                        args.order
                    ]
                    sample = run_sample(case, sim, base, args, bare_first, phase)
                    samples.append(sample)
                    index[sim] += 1
                    progress.console.print(
                        f"{label}: bare {sample['bare_cold_s']:.2f}/{sample['bare_warm_s']:.2f} s, "
                        f"engine {sample['engine_cold_s']:.2f}/{sample['engine_warm_s']:.2f} s "
                        f"(cold/warm), ratio {sample['ratio_cold']:.2f}×/{sample['ratio_warm']:.2f}×"
                        + ("" if sample["ok"] else "  [red]" + "; ".join(sample["notes"]) + "[/red]")
                    )
                    progress.advance(task)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        CPU.close()

    meta["loadavg_end"] = os.getloadavg()
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    summary = summarise(samples)
    print_report(samples, summary)
    console.print(
        f"elapsed {meta['elapsed_s']} s; load average start {meta['loadavg_start'][0]:.2f}, "
        f"end {meta['loadavg_end'][0]:.2f}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "samples": samples}, indent=1, default=str))
        console.print(f"wrote {args.json}")
    return 0 if all(s["ok"] for s in samples) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]")
        sys.exit(130)
