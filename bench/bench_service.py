#!/usr/bin/env python
"""Throughput and latency of the HTTP service (embedded and Celery) against the bare simulator.

One run takes N samples from the stimulus cases (``../shared/cases/stimulus``: problem RTL from
``cvdp/cid012.jsonl``, testbenches weak/good/best) and measures, on the same samples:

* bare: the simulator commands of ``bench_stimulus.py`` run directly (Icarus ``iverilog`` +
  ``vvp``; Verilator ``--binary`` + the binary with a warm ccache), sequentially and from C
  parallel threads (one process tree each);
* embedded: ``reward-service serve`` (in-process pool, bubblewrap) as a subprocess on a free
  127.0.0.1 port with a temporary cache dir and the result cache off; N ``POST /v1/score?wait=600``
  from C client threads, then one ``POST /v1/batches`` of all N;
* celery: a private ``redis-server``, ``python -m workers`` (one process per core) and the API
  with ``REWARD_SERVICE_BROKER_URL``; the same load;
* compose: the docker-compose.yml stack (Redis, API and ``--compose-workers`` worker
  containers; every simulation step in a fresh bubblewrap sandbox inside its worker container), images
  from ``scripts/build_images.sh``; the same load.

Every mode first runs untimed warm-up passes of the same N samples (``--warmup``, default 2:
ccache, page cache, the engine's first-use costs; with Verilator the service's first pass after
the cold one still has a few slower ccache preprocessor-mode hits, so one is not enough).
It prints p50/p90 latency, throughput, the time added per sample and the throughput ratio
against bare parallel, checks every result (status ``ok``; with Verilator the coverage of
``expected.json``), and stops every process it started.
See bench/README.md.

    python bench/bench_service.py --mode both --samples 12 --simulator icarus
    python bench/bench_service.py --mode embedded --samples 6 --simulator verilator --json /tmp/svc.json
    python bench/bench_service.py --mode compose --samples 12 --simulator icarus

``--mode compare`` scores one batch in the embedded server and in the compose stack in
one run and compares them: every case × testbench × ``--seeds`` seeds (8 × 3 × 4 = 96 on the
stimulus cases), ``engine: auto``, Verilator as the reference; both services up at once,
per mode ``--warmup`` untimed batches, then ``--rounds`` rounds of one timed batch each (the
order alternating; throughput over all of them, each round's ratio printed too: one batch takes
~3 s here, and a single one varied by ±5 %), then single requests alternating between the two,
sample by sample (paired latency per sample). It reports compose throughput / embedded throughput and the per-sample overhead of
compose over embedded (median over the fast-path samples of the paired latency differences):

    python bench/bench_service.py --mode compare --seeds 4 --json /tmp/compare.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_stimulus, also when imported
from bench_stimulus import (
    DEFAULT_CASES,
    REPO,
    TESTBENCHES,
    Case,
    bare_icarus,
    bare_verilator,
    ccache_stats,
    ccache_zero,
    console,
    load_cases,
    request_for,
)

from reward_service import hdl
from reward_service.sandbox.toolchain import verilator_root, versions
from reward_service.settings import Settings

WAIT_S = 600  # ?wait= of POST /v1/score (the API's maximum)
LOG_KB = 256  # Limits.output_kb default; the bench adds a per-request offset (see tag_request)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------------------------
# samples and requests
def pick_samples(cases: list[Case], n: int, tbs: list[str]) -> list[Case]:
    """N samples, spread over the problems: every problem's first testbench (in ``tbs`` order),
    then every problem's second, ...; cycled when N exceeds the cases."""
    order = [c for tb in tbs for c in cases if c.tb == tb]
    return [order[i % len(order)] for i in range(n)]


def tag_request(case: Case, simulator: str, args, tag: int) -> dict:
    """The request of bench_stimulus (tests/test_stimulus_cases.py) with ``limits.output_kb`` =
    256 + tag. The tag makes every request of a run distinct: Celery job ids are content
    hashes, so a repeated identical request would be answered from the earlier job without a
    simulation. ``output_kb`` only bounds the kept log tail (these logs are far smaller), so it
    does not change what runs."""
    request = request_for(case, simulator, args.build_timeout, args.run_timeout)
    request["limits"]["output_kb"] = LOG_KB + tag
    return request


#: A testbench drawing random numbers (docs/fastcov.md, "$random policy").
_RANDOM = re.compile(r"\$(urandom_range|urandom|random)\b")
#: Percentage points per metric a fast-path result of such a testbench may differ from
#: Verilator's: Icarus and Verilator draw different sequences (tests/test_fastcov_cases.py).
RANDOM_PP = 2.0


def check_result(case: Case, simulator: str, result: dict | None) -> str:
    """'' when the result is right: status ok and, for Verilator, every metric's covered/total
    and the overall percent as in expected.json; for a fast-path result of a testbench calling
    ``$random``/``$urandom*`` the same totals and covered within :data:`RANDOM_PP` points."""
    if result is None:
        return "no result"
    if result.get("status") != "ok":
        return f"status {result.get('status')}: {str(result.get('message'))[:120]}"
    if simulator != "verilator":
        return "" if case.expected.get("icarus_compiles_and_runs", True) else "ok, but expected.json says Icarus fails"
    random_ok = result.get("engine") == "fast" and bool(_RANDOM.search(hdl.strip_comments(case.tb_text)))
    cov = result.get("coverage") or {}
    metrics = cov.get("metrics") or {}
    for metric, want in case.expected["coverage"].items():
        got = metrics.get(metric) or {}
        if (got.get("covered"), got.get("total")) == (want["covered"], want["total"]):
            continue
        total = want["total"]
        if random_ok and got.get("total") == total and total and got.get("covered") is not None:
            if 100 * abs(got["covered"] - want["covered"]) / total <= RANDOM_PP:
                continue
        return f"{metric} {got.get('covered')}/{got.get('total')} != expected {want['covered']}/{want['total']}"
    overall = cov.get("overall")
    percent = None if overall is None else round(100 * overall, 2)
    if percent != case.expected["overall_percent"] and not (
        random_ok and percent is not None and abs(percent - case.expected["overall_percent"]) <= RANDOM_PP
    ):
        return f"overall {percent} != expected {case.expected['overall_percent']}"
    return ""


# --------------------------------------------------------------------------------------------
# processes the bench starts (all stopped in main's finally)
STARTED: list[tuple[str, subprocess.Popen]] = []
COMPOSE: list[tuple[list[str], dict[str, str], Path]] = []  # (command, env, log) of stacks up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A subprocess in its own session (stopped as a whole), output into ``log``."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    STARTED.append((name, proc))
    return proc


def stop(name: str, proc: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM to the process group (Celery: warm shutdown), SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            console.print(f"[yellow]{name} did not stop within {grace:g} s: SIGKILL[/yellow]")
    try:  # leftovers of the group (pool processes, sandboxes) and a process that did not stop
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if (name, proc) in STARTED:
        STARTED.remove((name, proc))


def stop_all() -> None:
    for name, proc in reversed(list(STARTED)):
        stop(name, proc)
    while COMPOSE:  # compose stacks: keep their logs, then remove containers and volumes
        cmd, env, log = COMPOSE.pop()
        with open(log, "w") as fh:
            subprocess.run([*cmd, "logs", "--no-color"], env=env, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
        subprocess.run([*cmd, "down", "-v", "--remove-orphans", "-t", "30"], env=env, cwd=REPO, capture_output=True)


def tail(log: Path, n: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def service_env(cache_dir: Path, broker: str | None) -> dict[str, str]:
    """This environment without REWARD_SERVICE_*/CELERY_* settings, plus the bench's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REWARD_SERVICE_", "CELERY_"))}
    env.update(
        {
            "REWARD_SERVICE_CACHE_DIR": str(cache_dir),
            "REWARD_SERVICE_RESULT_CACHE": "false",
            "REWARD_SERVICE_BUILD_JOBS": str(Settings().build_jobs),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
    )
    if broker:
        env["REWARD_SERVICE_BROKER_URL"] = broker
    return env


def start_api(env: dict[str, str], logs: Path, name: str) -> str:
    """``reward-service serve`` (as ``python -m reward_service serve``: the same command) on a free
    port; waits for ``/readyz``. Returns the base URL."""
    port = free_port()
    log = logs / f"{name}.log"
    proc = start(
        name,
        [
            sys.executable,
            "-m",
            "reward_service",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env,
        log,
    )
    return wait_ready(f"http://127.0.0.1:{port}", name, log, alive=lambda: proc.poll() is None)


def wait_ready(
    url: str, name: str, log: Path | None, alive: Callable[[], bool] = lambda: True, timeout: float = 90.0
) -> str:
    """Poll ``url``/readyz until 200; RuntimeError with the log tail if the service dies or
    is not ready within ``timeout`` seconds. Returns ``url``."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{name} exited:\n{tail(log) if log else ''}")
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200:
                return url
            last = r.text
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{name} not ready within {timeout:g} s ({last[:300]}):\n{tail(log) if log else ''}")


def compose_command() -> list[str]:
    """``docker compose`` (v2) when present, else ``docker-compose`` (v1.29)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise RuntimeError("Docker Compose is not installed (scripts/install.sh installs it)")


def start_compose(logs: Path, workers: int, cache_volume: str | None = None) -> str:
    """docker-compose.yml under a private project name on a free port, ``workers`` worker
    containers (the images of scripts/build_images.sh), the result cache off as in the other
    modes (``cache_volume``: the workers' cache on that named volume, kept). Returns the API's
    base URL; the stack is taken down (``down -v``) by :func:`stop_all`."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REWARD_SERVICE_", "CELERY_"))}
    env.update({"REWARD_SERVICE_PORT": str(port), "REWARD_SERVICE_BIND": "127.0.0.1"})
    override = logs / "compose.bench.yml"
    worker: dict[str, Any] = {"environment": {"REWARD_SERVICE_RESULT_CACHE": "false"}}
    volumes: dict[str, Any] = {}
    if cache_volume:
        if subprocess.run(["docker", "volume", "inspect", cache_volume], capture_output=True).returncode != 0:
            subprocess.run(["docker", "volume", "create", cache_volume], capture_output=True, check=True)
        worker["volumes"] = ["bench-cache:/var/cache/reward-service"]
        volumes = {"volumes": {"bench-cache": {"external": True, "name": cache_volume}}}
    override.write_text(json.dumps({"services": {"worker": worker}, **volumes}))  # JSON is YAML
    cmd = [
        *compose_command(),
        "-p",
        f"rsbench{os.getpid()}",
        "-f",
        str(REPO / "docker-compose.yml"),
        "-f",
        str(override),
    ]
    COMPOSE.append((cmd, env, logs / "compose.log"))
    up = subprocess.run(
        [*cmd, "up", "-d", "--scale", f"worker={workers}"], env=env, cwd=REPO, capture_output=True, text=True
    )
    if up.returncode != 0:
        raise RuntimeError(f"compose up failed:\n{up.stderr[-2000:]}")
    return wait_ready(f"http://127.0.0.1:{port}", "compose stack", None, timeout=180)


def start_redis(logs: Path) -> str:
    import redis

    port = free_port()
    data = logs / "redis"
    data.mkdir()
    proc = start(
        "redis-server",
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(data),
        ],
        dict(os.environ),
        logs / "redis.log",
    )
    client = redis.Redis(port=port)
    for _ in range(200):
        if proc.poll() is not None:
            break
        try:
            client.ping()
            return f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server did not start:\n{tail(logs / 'redis.log')}")


# --------------------------------------------------------------------------------------------
# passes
@dataclass
class Pass:
    """One timed pass of the N samples."""

    label: str
    kind: str  # bare | score | batch
    concurrency: int
    wall_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)  # per sample (bare: build+run; score: HTTP)
    engine_ms: list[float] = field(default_factory=list)  # ScoreResult.timings.total
    timings: list[dict] = field(default_factory=list)  # ScoreResult.timings (ms per stage), for the JSON
    failures: list[str] = field(default_factory=list)
    outcomes: list[tuple] = field(default_factory=list)  # batch: (status, coverage) per sample, in order
    engines: list[str | None] = field(default_factory=list)  # batch: the result's engine per sample, in order

    @property
    def n(self) -> int:
        return len(self.latencies_s) if self.kind != "batch" else len(self.engine_ms)


def bare_pass(
    label: str,
    samples: list[Case],
    simulator: str,
    root: Path,
    ccache_dir: Path,
    args,
    concurrency: int,
    advance: Callable[[], None],
) -> Pass:
    """The bare commands of bench_stimulus for every sample, ``concurrency`` at a time, each in a
    fresh dir (Verilator: sharing ``ccache_dir``)."""
    root.mkdir(parents=True)
    out = Pass(label, "bare", concurrency)
    times: list[float | None] = [None] * len(samples)

    def one(i: int) -> None:
        case, d = samples[i], root / f"{i:03d}"
        step = bare_verilator(case, d, ccache_dir, args) if simulator == "verilator" else bare_icarus(case, d, args)
        times[i] = step.seconds
        bad = step.note if not step.ok else ""
        if simulator == "verilator" and not step.detail.get("coverage_dat"):
            bad = bad or "no coverage.dat"
        if bad:
            out.failures.append(f"{case.short} {case.tb}: {bad}")
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
        advance()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(len(samples))))
    out.wall_s = time.perf_counter() - t0
    out.latencies_s = [t for t in times if t is not None]
    return out


def _score_one(client: httpx.Client, url: str, request: dict) -> tuple[dict | None, str]:
    """POST /v1/score?wait=600, following a 202 through GET /v1/jobs/{id}?wait=600."""
    try:
        r = client.post(f"{url}/v1/score", params={"wait": WAIT_S}, json=request)
        if r.status_code == 202:
            job = r.json()["job_id"]
            while True:
                g = client.get(f"{url}/v1/jobs/{job}", params={"wait": WAIT_S})
                if g.status_code != 200:
                    return None, f"GET /v1/jobs: HTTP {g.status_code}: {g.text[:200]}"
                body = g.json()
                if body["state"] == "done":
                    return body["result"], ""
        if r.status_code != 200:
            return None, f"POST /v1/score: HTTP {r.status_code}: {r.text[:200]}"
        return r.json(), ""
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"


def score_pass(
    label: str,
    client: httpx.Client,
    url: str,
    samples: list[Case],
    requests: list[dict],
    simulator: str,
    concurrency: int,
    advance: Callable[[], None],
) -> Pass:
    out = Pass(label, "score", concurrency)
    lat: list[float | None] = [None] * len(samples)
    eng: list[float | None] = [None] * len(samples)
    stages: list[dict] = [{} for _ in samples]
    lock = threading.Lock()

    def one(i: int) -> None:
        t = time.perf_counter()
        result, error = _score_one(client, url, requests[i])
        lat[i] = time.perf_counter() - t
        if result is not None:
            eng[i] = (result.get("timings") or {}).get("total")
            stages[i] = result.get("timings") or {}
        bad = error or check_result(samples[i], simulator, result)
        if bad:
            with lock:
                out.failures.append(f"{samples[i].short} {samples[i].tb}: {bad}")
        advance()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(len(samples))))
    out.wall_s = time.perf_counter() - t0
    out.latencies_s = [x for x in lat if x is not None]
    out.engine_ms = [x for x in eng if x is not None]
    out.timings = stages
    return out


def batch_pass(
    label: str,
    client: httpx.Client,
    url: str,
    samples: list[Case],
    requests: list[dict],
    simulator: str,
    concurrency: int,
    progress_to: Callable[[int], None],
) -> Pass:
    """One POST /v1/batches of all requests (wait 0), then GET /v1/batches/{id}?wait=5 until done
    (the long poll answers as soon as the last job is done; 5 s as the client's default
    poll_interval: each poll carries every finished result, and 2 s polls cost the embedded
    server 13 % of its CPU in a 600-sample step, py-spy)."""
    out = Pass(label, "batch", concurrency)
    t0 = time.perf_counter()
    try:
        r = client.post(f"{url}/v1/batches", json={"requests": requests, "wait": 0})
        while r.status_code == 202:
            progress_to(r.json()["done"])
            r = client.get(f"{url}/v1/batches/{r.json()['batch_id']}", params={"wait": 5})
        out.wall_s = time.perf_counter() - t0
        if r.status_code != 200:
            out.failures.append(f"batch: HTTP {r.status_code}: {r.text[:200]}")
            return out
    except httpx.HTTPError as exc:
        out.wall_s = time.perf_counter() - t0
        out.failures.append(f"batch: {type(exc).__name__}: {exc}")
        return out
    results = r.json()["results"]
    progress_to(len(results))
    out.timings = [(r or {}).get("timings") or {} for r in results]
    out.outcomes = [((r or {}).get("status"), json.dumps((r or {}).get("coverage"), sort_keys=True)) for r in results]
    out.engines = [(r or {}).get("engine") for r in results]
    for case, request, result in zip(samples, requests, results):
        if result is not None and (result.get("timings") or {}).get("total") is not None:
            out.engine_ms.append(result["timings"]["total"])
        # expected.json holds seed 0's coverage; other seeds are checked against the other mode (compare)
        bad = (
            check_result(case, simulator, result)
            if request.get("seed", 0) == 0
            else ("" if (result or {}).get("status") == "ok" else f"status {(result or {}).get('status')}")
        )
        if bad:
            out.failures.append(f"{case.short} {case.tb}: {bad}")
    if len(results) != len(samples):
        out.failures.append(f"batch answered {len(results)} results for {len(samples)} requests")
    return out


# --------------------------------------------------------------------------------------------
# reporting
def pct(values: list[float], q: float) -> float | None:
    """Percentile with linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarise(passes: list[Pass], n: int) -> list[dict]:
    """One row per pass. ``added_ms_per_sample`` = C × (wall − wall of bare parallel) / N: the
    extra time each of the C slots spent per sample; ``added_p50_ms`` = p50 latency − p50 of bare
    parallel (same concurrency); ``throughput_ratio`` = throughput / throughput of bare parallel."""
    ref = next((p for p in passes if p.label == "bare parallel"), None)
    ref_tp = n / ref.wall_s if ref and ref.wall_s > 0 else None
    ref_p50 = pct(ref.latencies_s, 0.5) if ref else None
    rows = []
    for p in passes:
        tp = n / p.wall_s if p.wall_s > 0 else None
        p50, p90 = (None, None) if p.kind == "batch" else (pct(p.latencies_s, 0.5), pct(p.latencies_s, 0.9))
        service = p.kind != "bare"
        rows.append(
            {
                "mode": p.label,
                "kind": p.kind,
                "samples": n,
                "concurrency": p.concurrency,
                "wall_s": round(p.wall_s, 3),
                "p50_ms": None if p50 is None else round(1000 * p50, 1),
                "p90_ms": None if p90 is None else round(1000 * p90, 1),
                "engine_p50_ms": round(pct(p.engine_ms, 0.5), 1) if p.engine_ms else None,
                "throughput_per_s": None if tp is None else round(tp, 3),
                "added_ms_per_sample": (
                    round(1000 * p.concurrency * (p.wall_s - ref.wall_s) / n, 1) if service and ref else None
                ),
                "added_p50_ms": (
                    round(1000 * (p50 - ref_p50), 1) if service and p50 is not None and ref_p50 is not None else None
                ),
                "throughput_ratio": None if tp is None or not ref_tp else round(tp / ref_tp, 3),
                "ok": not p.failures and (p.kind == "batch" or len(p.latencies_s) == n),
                "failures": p.failures,
            }
        )
    return rows


def _f(value: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{suffix}"


def print_report(rows: list[dict], title: str) -> None:
    table = Table(title=title)
    for col in (
        "mode",
        "C",
        "wall s",
        "p50 ms",
        "p90 ms",
        "engine p50 ms",
        "samples/s",
        "+ms/sample",
        "+p50 ms",
        "× bare par",
        "ok",
    ):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for r in rows:
        table.add_row(
            r["mode"],
            str(r["concurrency"]),
            _f(r["wall_s"], ".2f"),
            _f(r["p50_ms"], ".0f"),
            _f(r["p90_ms"], ".0f"),
            _f(r["engine_p50_ms"], ".0f"),
            _f(r["throughput_per_s"], ".2f"),
            _f(r["added_ms_per_sample"], "+.0f"),
            _f(r["added_p50_ms"], "+.0f"),
            _f(r["throughput_ratio"], ".2f", "×"),
            "yes" if r["ok"] else "[red]NO[/red]",
        )
    console.print(table)
    for r in rows:
        for f in r["failures"][:10]:
            console.print(f"  [red]{r['mode']}[/red]: {f}")
    console.print(
        "  +ms/sample = C × (wall − bare parallel wall) / N; +p50 = p50 latency − bare parallel p50; "
        "× bare par = throughput / bare parallel throughput; engine p50 = ScoreResult.timings.total"
    )


# --------------------------------------------------------------------------------------------
# compare: embedded vs compose on one batch
@dataclass
class ModeRun:
    """The compare mode's measurements of one service mode."""

    mode: str
    batches: list[Pass]  # the timed batches, one per round
    single: Pass  # sequential POST /v1/score, one sample at a time
    engines: list[str | None] = field(default_factory=list)  # ScoreResult.engine per sample (single pass)

    @property
    def batch_s(self) -> float:
        """Wall time of every timed batch together (s)."""
        return sum(b.wall_s for b in self.batches)


def compare_requests(cases: list[Case], seeds: int, args, tag_base: int) -> list[dict]:
    """Every case (problem × testbench) × seed 0..seeds-1, ``engine: auto`` with Verilator as the
    reference, each made distinct by :func:`tag_request` (tags from ``tag_base``)."""
    out = []
    for seed in range(seeds):
        for case in cases:
            request = tag_request(case, "verilator", args, tag_base + len(out))
            request.update({"engine": "auto", "seed": seed})
            out.append(request)
    return out


def single_pass(
    label: str, client: httpx.Client, url: str, case: Case, request: dict, out: Pass, engines: list[str | None]
) -> None:
    """One request alone (nothing queued beside it): its latency, appended to ``out``."""
    t = time.perf_counter()
    result, error = _score_one(client, url, request)
    out.latencies_s.append(time.perf_counter() - t)
    out.wall_s += out.latencies_s[-1]
    engines.append((result or {}).get("engine"))
    out.timings.append((result or {}).get("timings") or {})
    if result is not None and (result.get("timings") or {}).get("total") is not None:
        out.engine_ms.append(result["timings"]["total"])
    bad = error or (
        check_result(case, "verilator", result)
        if request.get("seed", 0) == 0
        else ""
        if (result or {}).get("status") == "ok"
        else f"status {(result or {}).get('status')}"
    )
    if bad:
        out.failures.append(f"{label} {case.short} {case.tb}: {bad}")


def compare_summary(runs: dict[str, ModeRun], n: int) -> dict[str, Any]:
    """Throughput ratio (compose / embedded: every timed batch of a mode together, so one slow
    moment of the machine weighs one batch of several) with the ratio of each round, and the
    per-sample overhead: for each sample both modes answered through the fast path, compose
    latency − embedded latency (sequential pass); the median of those, and of all samples."""
    emb, com = runs["embedded"], runs["compose"]
    rounds = len(emb.batches)
    tp = {m: rounds * n / r.batch_s if r.batch_s > 0 else None for m, r in runs.items()}
    paired = list(zip(emb.single.latencies_s, com.single.latencies_s, emb.engines, com.engines))
    fast = [1000 * (c - e) for e, c, ee, ce in paired if ee == "fast" and ce == "fast"]
    every = [1000 * (c - e) for e, c, _, _ in paired]
    # Every sample (all seeds, every round) must get the same status and coverage from both modes.
    differ = sorted(
        {
            i
            for eb, cb in zip(emb.batches, com.batches)
            for i, (a, b) in enumerate(zip(eb.outcomes, cb.outcomes))
            if a != b
        }
    )
    return {
        "samples": n,
        "rounds": rounds,
        "fast_path_samples": len(fast),
        "embedded_batch_s": [round(b.wall_s, 2) for b in emb.batches],
        "compose_batch_s": [round(b.wall_s, 2) for b in com.batches],
        "round_ratios": [
            round(e.wall_s / c.wall_s, 3) if c.wall_s > 0 else None for e, c in zip(emb.batches, com.batches)
        ],
        "embedded_throughput_per_s": tp["embedded"] and round(tp["embedded"], 2),
        "compose_throughput_per_s": tp["compose"] and round(tp["compose"], 2),
        "throughput_ratio": round(tp["compose"] / tp["embedded"], 3) if tp["compose"] and tp["embedded"] else None,
        "overhead_fast_p50_ms": round(pct(fast, 0.5), 1) if fast else None,
        "overhead_fast_p90_ms": round(pct(fast, 0.9), 1) if fast else None,
        "overhead_all_p50_ms": round(pct(every, 0.5), 1) if every else None,
        "embedded_single_p50_ms": round(1000 * pct(emb.single.latencies_s, 0.5), 1),
        "compose_single_p50_ms": round(1000 * pct(com.single.latencies_s, 0.5), 1),
        "embedded_engine_p50_ms": round(pct(emb.single.engine_ms, 0.5), 1) if emb.single.engine_ms else None,
        "compose_engine_p50_ms": round(pct(com.single.engine_ms, 0.5), 1) if com.single.engine_ms else None,
        "results_differ": differ,
        "ok": not differ
        and all(len(b.outcomes) == n for r in runs.values() for b in r.batches)
        and not any(b.failures for r in runs.values() for b in r.batches)
        and not any(r.single.failures for r in runs.values()),
        "failures": {m: ([f for b in r.batches for f in b.failures] + r.single.failures)[:10] for m, r in runs.items()},
    }


def print_compare(summary: dict[str, Any]) -> None:
    table = Table(
        title=f"compose vs embedded, {summary['samples']} samples (engine auto), {summary['rounds']} timed batch(es) each"
    )
    for col in ("mode", "batch s", "samples/s", "single p50 ms", "engine p50 ms"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for m in ("embedded", "compose"):
        table.add_row(
            m,
            " ".join(f"{b:.2f}" for b in summary[f"{m}_batch_s"]),
            _f(summary[f"{m}_throughput_per_s"], ".2f"),
            _f(summary[f"{m}_single_p50_ms"], ".0f"),
            _f(summary[f"{m}_engine_p50_ms"], ".0f"),
        )
    console.print(table)
    console.print(
        f"  throughput compose / embedded = {_f(summary['throughput_ratio'], '.3f')} (target ≥ 0.8; rounds: "
        + ", ".join(_f(r, ".3f") for r in summary["round_ratios"])
        + ")"
    )
    console.print(
        f"  per-sample overhead compose − embedded, fast-path samples ({summary['fast_path_samples']}): "
        f"median {_f(summary['overhead_fast_p50_ms'], '+.1f', ' ms')} (target ≤ 30 ms), "
        f"p90 {_f(summary['overhead_fast_p90_ms'], '+.1f', ' ms')}; all samples median "
        f"{_f(summary['overhead_all_p50_ms'], '+.1f', ' ms')}"
    )
    console.print(
        f"  status and coverage equal in both modes: {summary['samples'] - len(summary['results_differ'])}"
        f"/{summary['samples']} samples"
        + (f" [red](differ: {summary['results_differ'][:10]})[/red]" if summary["results_differ"] else "")
    )
    for mode, failures in summary["failures"].items():
        for f in failures:
            console.print(f"  [red]{mode}[/red]: {f}")


def run_compare(args, cases: list[Case], base: Path, logs: Path, meta: dict[str, Any]) -> int:
    """The compare mode (see the module doc). Both services run at once, so that what else loads
    the machine loads both alike: warm-up batches of each, then ``--rounds`` rounds of one timed
    batch of each (embedded first in odd rounds, compose first in even ones: a drift of the
    machine over the rounds weighs on both), then the single requests alternating sample by
    sample (paired latencies). Every batch has requests of its own (no result is reused)."""
    samples = [c for _ in range(args.seeds) for c in cases]
    n = len(samples)
    modes = ("embedded", "compose")
    lists = args.warmup + args.rounds + 1  # warm-ups, the timed batches, the single requests
    reqs = {
        m: [compare_requests(cases, args.seeds, args, (k * lists + w) * n) for w in range(lists)]
        for k, m in enumerate(modes)
    }
    console.print("starting the embedded service and the compose stack")
    urls = {
        "embedded": start_api(service_env(base / "service-cache", None), logs, "api-embedded"),
        "compose": start_compose(logs, args.compose_workers, cache_volume=args.compose_cache_volume),
    }
    meta.update({f"{m}_url": u for m, u in urls.items()})
    runs: dict[str, ModeRun] = {}
    with (
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
        httpx.Client(
            timeout=httpx.Timeout(WAIT_S + 60, connect=10), limits=httpx.Limits(max_connections=args.concurrency + 4)
        ) as client,
    ):

        def phase(what: str) -> tuple[Callable[[], None], Callable[[int], None]]:
            task = progress.add_task(what, total=n)
            return (lambda: progress.advance(task)), (lambda done: progress.update(task, completed=done))

        for mode in modes:
            for w in range(args.warmup):
                warm = batch_pass(
                    f"{mode} warm-up",
                    client,
                    urls[mode],
                    samples,
                    reqs[mode][w],
                    "verilator",
                    args.concurrency,
                    phase(f"{mode}: warm-up batch {w + 1} (untimed)")[1],
                )
                if warm.failures:
                    console.print(f"[yellow]{mode} warm-up: {'; '.join(warm.failures[:5])}[/yellow]")
        batches: dict[str, list[Pass]] = {m: [] for m in modes}
        for r in range(args.rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                b = batch_pass(
                    f"{mode} batch {r + 1}",
                    client,
                    urls[mode],
                    samples,
                    reqs[mode][args.warmup + r],
                    "verilator",
                    args.concurrency,
                    phase(f"{mode}: POST /v1/batches (round {r + 1})")[1],
                )
                batches[mode].append(b)
                progress.console.print(
                    f"{mode} batch {r + 1}: {b.wall_s:.2f} s, {n / b.wall_s:.2f} samples/s"
                    + (f"  [red]{len(b.failures)} failed[/red]" if b.failures else "")
                )
        singles = {m: Pass(f"{m} single", "score", 1) for m in modes}
        engines: dict[str, list[str | None]] = {m: [] for m in modes}
        advance = phase("one request at a time, embedded and compose in turn")[0]
        for i, case in enumerate(samples):
            for mode in modes:
                single_pass(mode, client, urls[mode], case, reqs[mode][-1][i], singles[mode], engines[mode])
            advance()
        runs = {m: ModeRun(m, batches[m], singles[m], engines[m]) for m in modes}
    stop_all()
    summary = compare_summary(runs, n)
    meta["loadavg_end"] = os.getloadavg()
    print_compare(summary)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "meta": meta,
                    "summary": summary,
                    "samples": [f"{c.problem}/{c.tb}" for c in samples],
                    "runs": {
                        m: {
                            "batch_wall_s": [b.wall_s for b in r.batches],
                            "batch_timings_ms": [b.timings for b in r.batches],
                            "single_latencies_s": r.single.latencies_s,
                            "single_timings_ms": r.single.timings,
                            "engines": r.engines,
                        }
                        for m, r in runs.items()
                    },
                },
                indent=1,
                default=str,
            )
        )
        console.print(f"wrote {args.json}")
    return 0 if summary["ok"] else 1


# --------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench_service.py",
        description="Latency and throughput of the HTTP service (embedded pool and/or Celery workers) against "
        "the bare simulator commands, on N samples of the stimulus cases, in one run. Starts "
        "(and stops) its own service, redis-server and workers on free 127.0.0.1 ports, with a "
        "temporary cache dir and the result cache off.",
        epilog="Rows: bare sequential / bare parallel (the bench_stimulus.py commands, Verilator with a warm "
        "ccache), <mode> score (N POST /v1/score?wait=600 from C threads), <mode> batch (one POST "
        "/v1/batches of all N). Every mode runs --warmup untimed passes first. Exit status 0 when every "
        "result is ok (Verilator: coverage as in expected.json), 1 otherwise, 2 usage/setup error. "
        "See bench/README.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--mode",
        choices=("embedded", "celery", "compose", "both", "all", "compare"),
        default="both",
        help="which service modes to measure (bare is always measured, except by compare); both = "
        "embedded + celery, all = embedded + celery + compose (the docker-compose.yml stack); "
        "compare = embedded vs compose on every case x --seeds seeds, engine auto (no bare rows)",
    )
    p.add_argument("--seeds", type=int, default=4, metavar="S", help="compare mode: seeds per case and testbench")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        metavar="R",
        help="compare mode: timed batches per mode, alternating which mode goes first; the ratio is of "
        "all of them together, each round's is printed too",
    )
    p.add_argument(
        "--compose-cache-volume",
        default=None,
        metavar="VOLUME",
        help="compose modes: a named volume kept between runs for the workers' cache (ccache, "
        "built models, self-checks; created if missing) instead of the stack's own",
    )
    p.add_argument(
        "--compose-workers",
        type=int,
        default=1,
        metavar="W",
        help="compose mode: worker containers (each runs one process per core)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=12,
        metavar="N",
        help="samples to score: each problem's weak testbench, then good, then best (cycled past 24)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=cores(),
        metavar="C",
        help="client threads, and parallel bare processes (the default is the number of cores)",
    )
    p.add_argument("--simulator", choices=("icarus", "verilator"), default="icarus")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write all results as JSON")
    p.add_argument(
        "--warmup",
        type=int,
        default=2,
        metavar="K",
        help="untimed passes of the N samples before each mode's timed ones (bare: C parallel; "
        "services: one batch each)",
    )
    p.add_argument("--tb", default=",".join(TESTBENCHES), help="comma-separated testbenches to draw from")
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
    p.add_argument(
        "--build-timeout",
        type=float,
        default=600.0,
        help="seconds per bare build (also the requests' limits.compile_s)",
    )
    p.add_argument(
        "--run-timeout", type=float, default=60.0, help="seconds per bare run (also the requests' limits.run_s)"
    )
    p.add_argument(
        "--bare-build-jobs",
        default="engine",
        metavar="J",
        help="parallel C++ jobs of a bare Verilator build, as in bench_stimulus.py: 'engine' "
        "(Settings.build_jobs, what the service uses), 'default' or a number",
    )
    p.add_argument("--work-dir", type=Path, default=None, help="where to put the temporary dir")
    p.add_argument("--keep", action="store_true", help="keep the temporary dir (service logs, bare dirs)")
    args = p.parse_args(argv)
    if args.samples < 1 or args.concurrency < 1 or args.warmup < 0 or args.rounds < 1:
        p.error("--samples, --concurrency and --rounds must be at least 1, --warmup at least 0")
    if args.bare_build_jobs not in ("engine", "default") and not args.bare_build_jobs.isdigit():
        p.error("--bare-build-jobs must be 'engine', 'default' or a number")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = {
        "both": ["embedded", "celery"],
        "all": ["embedded", "celery", "compose"],
        "compare": ["embedded", "compose"],
    }.get(args.mode, [args.mode])
    sim = args.simulator
    cid012 = args.cid012 or args.cases.parent / "cvdp" / "cid012.jsonl"
    tbs = [t.strip() for t in args.tb.split(",") if t.strip()]
    cases = load_cases(args.cases, cid012, None, tbs)
    if not cases:
        console.print("[red]no cases found[/red]")
        return 2
    samples = pick_samples(cases, args.samples, tbs)
    n, conc = len(samples), args.concurrency
    needed = (
        ["bwrap", "ccache"]
        + (["iverilog", "vvp"] if sim == "icarus" else [])
        + (["redis-server"] if "celery" in modes else [])
    )
    missing = [t for t in needed if not shutil.which(t)]
    if missing:
        console.print(f"[red]not on PATH: {', '.join(missing)}[/red]")
        return 2

    def _terminate(signum, frame):  # SIGTERM/SIGHUP: clean up like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)

    tool_versions = versions()
    if sim == "verilator":  # binaries into the page cache (untimed)
        subprocess.run(
            [str(verilator_root() / "bin" / "verilator"), "--version"],
            capture_output=True,
            env={**os.environ, "VERILATOR_ROOT": str(verilator_root())},
        )
    base = Path(tempfile.mkdtemp(prefix="rs-bench-service-", dir=args.work_dir))
    logs = base / "logs"
    logs.mkdir()
    meta: dict[str, Any] = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cores": cores(),
        "loadavg_start": os.getloadavg(),
        "versions": tool_versions,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "samples": [f"{c.problem}/{c.tb}" for c in samples],
        "work_dir": str(base),
        "engine_build_jobs": Settings().build_jobs,
        "celery_worker_concurrency": cores(),
    }
    if args.mode == "compare":
        console.print(
            f"{len(cases)} cases × {args.seeds} seeds, engine auto, embedded vs compose, concurrency {conc} "
            f"({cores()} cores, load {meta['loadavg_start'][0]:.2f}); work dir {base}"
        )
        try:
            return run_compare(args, cases, base, logs, meta)
        except RuntimeError as exc:
            console.print(f"[red]{exc}[/red]")
            return 2
        finally:
            stop_all()
            if args.keep:
                console.print(f"kept {base}")
            else:
                shutil.rmtree(base, ignore_errors=True)
    console.print(
        f"{n} samples × {sim}, modes bare + {', '.join(modes)}, concurrency {conc} "
        f"({cores()} cores, load {meta['loadavg_start'][0]:.2f}); work dir {base}"
    )

    passes: list[Pass] = []
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

            def phase(what: str) -> tuple[Callable[[], None], Callable[[int], None]]:
                task = progress.add_task(what, total=n)
                return (lambda: progress.advance(task)), (lambda done: progress.update(task, completed=done))

            def keep(p: Pass) -> None:
                passes.append(p)
                tp = n / p.wall_s if p.wall_s > 0 else 0.0
                lat = "" if p.kind == "batch" else f", p50 {1000 * (pct(p.latencies_s, 0.5) or 0):.0f} ms"
                progress.console.print(
                    f"{p.label}: {p.wall_s:.2f} s, {tp:.2f} samples/s{lat}"
                    + (f"  [red]{len(p.failures)} failed[/red]" if p.failures else "")
                )

            # bare: untimed warm-up (fills the ccache for Verilator), then sequential and parallel
            cc = base / "bare-ccache"
            cc.mkdir()
            for w in range(args.warmup):
                warm = bare_pass(
                    "bare warm-up",
                    samples,
                    sim,
                    base / f"bare-warmup{w}",
                    cc,
                    args,
                    conc,
                    phase(f"bare warm-up {w + 1} (untimed)")[0],
                )
                if warm.failures:
                    console.print(f"[yellow]bare warm-up: {'; '.join(warm.failures[:5])}[/yellow]")
            ccache_zero(cc)
            keep(
                bare_pass("bare sequential", samples, sim, base / "bare-seq", cc, args, 1, phase("bare sequential")[0])
            )
            keep(
                bare_pass(
                    "bare parallel", samples, sim, base / "bare-par", cc, args, conc, phase(f"bare parallel ×{conc}")[0]
                )
            )
            if sim == "verilator":  # the timed builds only (zeroed after the warm-up)
                meta["bare_ccache_timed"] = ccache_stats(cc)

            # services: one cache dir for all modes (as workers of one machine share it)
            cache_dir = base / "service-cache"
            for mode in modes:
                reqs = [
                    [tag_request(c, sim, args, k * n + i) for i, c in enumerate(samples)]
                    for k in range(args.warmup + 2)
                ]  # warm-ups, score, batch: all distinct
                progress.console.print(f"starting the {mode} service")
                if mode == "embedded":
                    url = start_api(service_env(cache_dir, None), logs, "api-embedded")
                elif mode == "compose":
                    url = start_compose(logs, args.compose_workers, cache_volume=args.compose_cache_volume)
                else:
                    broker = start_redis(logs)
                    env = service_env(cache_dir, broker)
                    start("workers", [sys.executable, "-m", "workers", "--loglevel=INFO"], env, logs / "workers.log")
                    url = start_api(env, logs, "api-celery")
                meta[f"{mode}_url"] = url
                with httpx.Client(
                    timeout=httpx.Timeout(WAIT_S + 60, connect=10), limits=httpx.Limits(max_connections=conc + 4)
                ) as client:
                    for w in range(args.warmup):
                        warm = batch_pass(
                            f"{mode} warm-up",
                            client,
                            url,
                            samples,
                            reqs[w],
                            sim,
                            conc,
                            phase(f"{mode}: warm-up batch {w + 1} (untimed)")[1],
                        )
                        if warm.failures:
                            console.print(f"[yellow]{mode} warm-up: {'; '.join(warm.failures[:5])}[/yellow]")
                    keep(
                        score_pass(
                            f"{mode} score",
                            client,
                            url,
                            samples,
                            reqs[-2],
                            sim,
                            conc,
                            phase(f"{mode}: POST /v1/score ×{conc} threads")[0],
                        )
                    )
                    keep(
                        batch_pass(
                            f"{mode} batch",
                            client,
                            url,
                            samples,
                            reqs[-1],
                            sim,
                            conc,
                            phase(f"{mode}: POST /v1/batches")[1],
                        )
                    )
                    meta[f"{mode}_results_total"] = [
                        line
                        for line in client.get(f"{url}/metrics").text.splitlines()
                        if line.startswith("reward_service_results_total")
                    ]
                stop_all()  # this mode's API, workers, redis
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/red]")
        return 2
    finally:
        stop_all()
        if args.keep:
            console.print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    meta["loadavg_end"] = os.getloadavg()
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    rows = summarise(passes, n)
    print_report(rows, f"{sim}, {n} samples, concurrency {conc} ({cores()} cores)")
    console.print(
        f"elapsed {meta['elapsed_s']} s; load average start {meta['loadavg_start'][0]:.2f}, "
        f"end {meta['loadavg_end'][0]:.2f}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "meta": meta,
                    "rows": rows,
                    "passes": [
                        {
                            "mode": p.label,
                            "wall_s": p.wall_s,
                            "latencies_s": p.latencies_s,
                            "engine_ms": p.engine_ms,
                            "timings_ms": p.timings,
                            "failures": p.failures,
                        }
                        for p in passes
                    ],
                },
                indent=1,
                default=str,
            )
        )
        console.print(f"wrote {args.json}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        console.print("[red]interrupted[/red]")
        sys.exit(130)
