"""Soak (docs/chaos.md): one RL step of 2048 samples at CodeV-R1 scale through
the compose stack and through the embedded server (``reward-service serve`` without a broker),
each with the project's client.

The step: two registered CVDP cid012 problems sent as ``problem_id`` + testbench (what a trainer
sends), their short weak.sv testbenches on the fast engine, under 1024 seeds each: 2048 distinct
jobs, each simulated (no result cache; the fast engine does not use the seed, so every result
must equal that problem's single-call result). Measured: wall time and throughput, the memory of
the API, the workers and Redis before and after (RSS now and peak: /proc of the host for the
containers' processes and the embedded server, the containers' memory cgroups, Redis INFO).
Checked: every result present, in order, equal to its reference; afterwards no Redis key of the
finished work lives longer than docs/workers.md and docs/api.md say (results and job counters
RESULT_EXPIRES_S, job ids (markers) as long as their results, batches BATCH_TTL_S, "done"
notifications 300 s; leases and request copies deleted), and no per-job key lives for ever.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from compose_fixtures import Stack, compose_stack, essence
from conftest import CID012, STIMULUS, free_port

from reward_service.client import RewardClient

REPO = Path(__file__).resolve().parents[1]
CHAOS_OVERRIDE = REPO / "tests" / "compose.chaos.yml"
#: The two problems whose weak.sv is quickest on the fast engine (about 50 ms a sample on an idle core).
PIDS = ["cvdp_copilot_fixed_arbiter_0004", "cvdp_copilot_Attenuator_0011"]
STEP = 2048
RESULT_EXPIRES_S = 86400  # docs/workers.md, RESULT_EXPIRES_S
BATCH_TTL_S = 7 * 24 * 3600  # docs/api.md, BATCH_TTL_S
NOTIFY_TTL_S = 300  # reward_service.dispatch.celery.NOTIFY_TTL_S
PREFIX = "reward-service:"

pytestmark = [pytest.mark.soak, pytest.mark.slow, pytest.mark.xdist_group("compose-stack"), pytest.mark.timeout(1200)]

_REPORT: dict[str, dict] = {}


def _rows() -> bytes:
    rows = [line for line in CID012.read_text().splitlines() if json.loads(line)["id"] in PIDS]
    assert len(rows) == len(PIDS)
    return ("\n".join(rows) + "\n").encode()


def soak_step(n: int = STEP, seed0: int = 1000) -> list[dict]:
    """``n`` problem_id requests: PIDS' weak.sv in turn, seeds seed0 + i // len(PIDS)."""
    return [
        {
            "problem_id": pid,
            "simulator": "icarus",
            "engine": "fast",
            "seed": seed0 + i // len(PIDS),
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": (STIMULUS / pid / "weak.sv").read_text()}},
        }
        for i, pid in ((i, PIDS[i % len(PIDS)]) for i in range(n))
    ]


def _score_step(url: str) -> tuple[list, list, float]:
    """Register PIDS, score each once (seed 0: the references), then the step; returns
    (references, results, seconds of the step)."""
    with RewardClient(url, timeout=60) as client:
        assert sorted(client.load_problems_jsonl(_rows())["ids"]) == sorted(PIDS)
        references = [client.score(r, wait=300) for r in soak_step(len(PIDS), seed0=0)]
        assert [r.status for r in references] == ["ok"] * len(PIDS), [r.message for r in references]
        started = time.monotonic()
        results = client.score_batch(soak_step(), timeout=900)
        return references, results, time.monotonic() - started


def _check(references: list, results: list) -> None:
    assert len(results) == STEP
    want = [essence(r) for r in references]
    wrong = [i for i, r in enumerate(results) if essence(r) != want[i % len(PIDS)]]
    assert not wrong, (
        f"{len(wrong)} results differ from their reference, e.g. sample {wrong[0]}: "
        f"{results[wrong[0]].status} {results[wrong[0]].message}"
    )


# -- memory --------------------------------------------------------------------------------------
def _proc_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a host process in KiB; (0, 0) when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    values = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M))
    return int(values.get("VmRSS", 0)), int(values.get("VmHWM", 0))


def _cpu_s(pid: int) -> float:
    """CPU seconds of a host process and its reaped children (utime + stime + cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _container_memory(container) -> dict[str, float]:
    """MiB: rss (sum of its processes' RSS now), peak_rss (sum of their peaks, VmHWM), cgroup
    (the container's memory cgroup now, page cache and tmpfs included) and cgroup_peak; and
    cpu_s, the CPU seconds its processes and their children used so far."""
    pids = (
        [int(row[1]) for row in container.top(ps_args="-eo user,pid")["Processes"]]
        if container.status == "running"
        else []
    )
    rss = [_proc_kib(pid) for pid in pids]
    stats = container.stats(stream=False)["memory_stats"]
    return {
        "rss": round(sum(r for r, _ in rss) / 1024, 1),
        "peak_rss": round(sum(p for _, p in rss) / 1024, 1),
        "cgroup": round(stats.get("usage", 0) / 2**20, 1),
        "cgroup_peak": round(stats.get("max_usage", 0) / 2**20, 1),
        "cpu_s": round(sum(_cpu_s(pid) for pid in pids), 1),
    }


def _stack_memory(st: Stack) -> dict[str, dict]:
    import redis

    out = {}
    for service in ("api", "worker", "redis"):
        for i, container in enumerate(st.containers(service)):
            container.reload()
            out[f"{service}_{i + 1}" if service == "worker" else service] = _container_memory(container)
    info = redis.Redis.from_url(st.redis_url).info("memory")
    out["redis"].update(
        used=round(info["used_memory"] / 2**20, 1), used_peak=round(info["used_memory_peak"] / 2**20, 1)
    )
    return out


# -- Redis keys ----------------------------------------------------------------------------------
def _key_family(key: str) -> str:
    key = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", key)
    return re.sub(r"[0-9a-f]{32,64}", "<id>", key)


def _key_ttls(redis_url: str) -> dict[str, dict]:
    """Per key family (ids replaced by <id>): count, and the least and largest TTL in seconds
    (-1: no expiry) of the keys still there when their TTL is read."""
    import redis

    rc = redis.Redis.from_url(redis_url, decode_responses=True)
    families: dict[str, dict] = {}
    keys = list(rc.scan_iter(count=2000))
    pipe = rc.pipeline(transaction=False)
    for key in keys:
        pipe.ttl(key)
    for key, ttl in zip(keys, pipe.execute()):
        if ttl == -2:  # expired between SCAN and TTL (the step's first "done" notifications expire meanwhile)
            continue
        row = families.setdefault(_key_family(key), {"count": 0, "min_ttl": ttl, "max_ttl": ttl})
        row["count"] += 1
        row["min_ttl"], row["max_ttl"] = min(row["min_ttl"], ttl), max(row["max_ttl"], ttl)
    return families


#: Key families of finished work and the longest TTL the documents give them.
_FINISHED_TTL = {
    "celery-task-meta-<id>": RESULT_EXPIRES_S,
    f"{PREFIX}job:<id>": RESULT_EXPIRES_S,  # "job ids are kept" with their results
    f"{PREFIX}job:<id>:deliveries": RESULT_EXPIRES_S,
    f"{PREFIX}job:<id>:sims": RESULT_EXPIRES_S,
    f"{PREFIX}job:<id>:done": NOTIFY_TTL_S,
    f"{PREFIX}batch:<id>": BATCH_TTL_S,
}
#: Keys that stay (no expiry) but do not grow with the work done: one each.
_PERMANENT = re.compile(
    r"^(_kombu\.binding.*|unacked.*|"
    + re.escape(PREFIX)
    + r"(workers:stats|leases|problem:.*|problems.*|problem_index.*|run_id.*))$"
)


#: Control reply lists (``<oid>.reply.celery.pidbox``): /readyz takes the first worker's answer
#: (``limit=1``), and another worker's answer can land in the list after the call left it (kombu
#: deletes the queue after each call; a worker may look the binding up just before). The oid is
#: per mailbox and thread, so there is one list per API thread that served /readyz, each read
#: off by that thread's next call: a few keys of at most a few answers, not one per job.
_REPLY_LISTS = "<uuid>.reply.celery.pidbox"
_REPLY_LISTS_MAX = 64


def _check_reply_lists(redis_url: str, workers: int) -> None:
    import redis

    rc = redis.Redis.from_url(redis_url)
    lengths = [rc.llen(key) for key in rc.scan_iter(match="*.reply.celery.pidbox", count=1000)]
    assert len(lengths) <= _REPLY_LISTS_MAX and all(n <= workers for n in lengths), lengths


def _check_ttls(families: dict[str, dict]) -> None:
    for family, row in families.items():
        if family == _REPLY_LISTS:  # bounded by _check_reply_lists
            assert row["count"] <= _REPLY_LISTS_MAX, row
            continue
        if family in _FINISHED_TTL:
            # TTL 0: less than a second left
            assert 0 <= row["min_ttl"] and row["max_ttl"] <= _FINISHED_TTL[family], (family, row)
        elif family.startswith(f"{PREFIX}job:"):  # lease, request copy: gone once a job is done
            raise AssertionError(f"{row['count']} keys {family} of finished jobs remain: {row}")
        elif row["min_ttl"] == -1:
            assert _PERMANENT.match(family) and "<id>" not in family, f"{family} never expires: {row}"


# -- the two services ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def soak_stack(tmp_path_factory):
    with compose_stack(tmp_path_factory.getbasetemp(), overrides=[CHAOS_OVERRIDE]) as st:
        yield st


@pytest.fixture(scope="module", autouse=True)
def _print_report():
    yield
    for name, row in _REPORT.items():
        print(
            f"\nsoak, {name}: {row['samples']} samples in {row['seconds']:.1f} s "
            f"({row['samples_per_s']:.1f} samples/s), all correct: {row['correct']}"
        )
        print(
            f"  {'MiB':10s} {'RSS before':>10s} {'RSS after':>10s} {'peak RSS':>10s} {'cgroup':>8s} "
            f"{'cgroup peak':>11s} {'Redis used':>10s} {'used peak':>9s} {'CPU s':>6s}"
        )
        for proc, after in row["after"].items():
            before = row["before"].get(proc, {})
            extra = " ".join(
                f"{after[k]:{w}.1f}" if k in after else f"{'-':>{w}s}"
                for k, w in (("cgroup", 8), ("cgroup_peak", 11), ("used", 10), ("used_peak", 9), ("cpu_s", 6))
            )
            print(f"  {proc:10s} {before.get('rss', 0):10.1f} {after['rss']:10.1f} {after['peak_rss']:10.1f} {extra}")
        for family, ttl in row.get("keys", {}).items():
            print(f"  key {family:48s} {ttl['count']:6d} ttl {ttl['min_ttl']}..{ttl['max_ttl']} s")
    if _REPORT:
        print(json.dumps(_REPORT))


def test_a_2048_sample_step_through_the_compose_stack(soak_stack):
    before = _stack_memory(soak_stack)
    references, results, seconds = _score_step(soak_stack.url)
    _check(references, results)
    after = _stack_memory(soak_stack)
    families = _key_ttls(soak_stack.redis_url)
    _REPORT["compose stack"] = {
        "samples": STEP,
        "seconds": round(seconds, 1),
        "samples_per_s": round(STEP / seconds, 2),
        "correct": True,
        "before": before,
        "after": after,
        "keys": families,
    }
    _check_ttls(families)
    _check_reply_lists(soak_stack.redis_url, workers=len(soak_stack.containers("worker")))
    assert httpx.get(f"{soak_stack.url}/readyz", timeout=30).status_code == 200


def test_a_2048_sample_step_through_the_embedded_server(shared_cache_dir, tmp_path):
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("REWARD_SERVICE_")},
        "REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir),
        "REWARD_SERVICE_RESULT_CACHE": "false",
    }
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reward_service",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        rss, peak = _proc_kib(server.pid)
        before = {
            "server": {
                "rss": round(rss / 1024, 1),
                "peak_rss": round(peak / 1024, 1),
                "cpu_s": round(_cpu_s(server.pid), 1),
            }
        }
        references, results, seconds = _score_step(url)
        _check(references, results)
        rss, peak = _proc_kib(server.pid)
        after = {
            "server": {
                "rss": round(rss / 1024, 1),
                "peak_rss": round(peak / 1024, 1),
                "cpu_s": round(_cpu_s(server.pid), 1),
            }
        }
        _REPORT["embedded server"] = {
            "samples": STEP,
            "seconds": round(seconds, 1),
            "samples_per_s": round(STEP / seconds, 2),
            "correct": True,
            "before": before,
            "after": after,
        }
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
