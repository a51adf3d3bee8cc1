"""Chaos suite on the compose stack: no RL step stalled, lost or answered wrongly (docs/chaos.md).

One stack (docker-compose.yml + tests/compose.test.yml + tests/compose.chaos.yml: two worker
containers of one process each, the Celery limits at their deployed defaults, so only the
leases bring back a dead worker's jobs) serves every fault. The same 48-sample batch of real
CVDP cid012 samples (../shared/cases/stimulus on the fast engine, four broken ones among them)
is scored through the project's client once without a fault (the reference, timed) and once per
fault, each time under new seeds (job ids are content hashes: the same seeds would be answered
from the stored results; Icarus and the fast engine do not use the seed, so the results must be
equal). A fault is injected once a quarter of the batch is done. Per fault: every result present
once, in request order, equal to the reference (status, reward, passed, coverage, tests, engine);
completion within the reference time + 60 s; ``/readyz`` 200 afterwards; no container of the
project other than its four running services, no new volume, no sim container or volume.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from compose_fixtures import Stack, busy_worker, compose_stack, essence, kill_mid_job, wait_healthy
from conftest import ALLOW_DUT_WRITES, STIMULUS, needs_cases, stimulus_dirs
from samples import ARBITER, problems

from reward_service.client import RewardClient
from reward_service.models import ScoreRequest, SvTestbench

REPO = Path(__file__).resolve().parents[1]
CHAOS_OVERRIDE = REPO / "tests" / "compose.chaos.yml"
CASES = [d.name for d in stimulus_dirs() if (d / "good.sv").is_file()]
BATCH = 48
#: Completion under a fault may take this much longer than the fault-free run.
GRACE_S = 60.0
#: The fault is injected once this many samples are done.
FAULT_AT = BATCH // 4
#: How long /readyz may take to answer 200 after a fault, at the batch's end, and with the worker back.
READY_S = 60.0

pytestmark = [
    needs_cases,
    pytest.mark.chaos,
    pytest.mark.slow,
    pytest.mark.xdist_group("compose-stack"),
    pytest.mark.timeout(900),
]


def _cvdp(pid: str, tb_text: str, seed: int, **overrides) -> ScoreRequest:
    # fault tolerance is the subject: ring_token's forcing cases (FORCING_CASES) are scored too
    overrides.setdefault("stimulus_policy", ALLOW_DUT_WRITES)
    return problems()[pid].request(
        SvTestbench(files={"tb.sv": tb_text}), simulator="icarus", engine="fast", seed=seed, **overrides
    )


def chaos_batch(run: int) -> list[ScoreRequest]:
    """The 48 samples of run ``run`` (seeds 2·run and 2·run + 1): the 8 problems of
    ../shared/cases/stimulus x good/weak/best x both seeds, the last four replaced by broken
    samples (a syntax error, no code, a wrong DUT instance, a hang stopped by ``run_s``)."""
    reqs = [
        _cvdp(pid, (STIMULUS / pid / f"{tb}.sv").read_text(), seed)
        for seed in (2 * run, 2 * run + 1)
        for pid in CASES
        for tb in ("good", "weak", "best")
    ]
    arbiter, good = problems()[ARBITER], (STIMULUS / ARBITER / "good.sv").read_text()
    seed = 2 * run
    reqs[-4:] = [
        _cvdp(ARBITER, good.replace("initial begin", "initial begin x = ;", 1), seed),
        arbiter.request("I cannot write a testbench for this.", simulator="icarus", engine="fast", seed=seed),
        _cvdp(ARBITER, good.replace(" dut (", " u0 ("), seed),
        _cvdp(ARBITER, good.replace("$finish;", ""), seed, limits={"run_s": 3}),
    ]
    assert len(reqs) == BATCH and len(CASES) == 8
    return reqs


@dataclass
class Run:
    """One scoring of the batch through the client, in a thread of its own."""

    requests: list[ScoreRequest]
    url: str
    done: int = 0
    results: list | None = None
    error: BaseException | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> Run:
        handler = _Collect(self.warnings)

        def body() -> None:
            client_log = logging.getLogger("reward_service.client")
            client_log.addHandler(handler)
            started = time.monotonic()
            try:
                # max_retries 8: about a minute of backoff, beyond an API restart or a paused Redis.
                # poll_interval 0.5: a long poll returns only when its batch is done, and the fault
                # is injected from the progress it reports; the default (5 s) would report nothing
                # until the batch of about 10 s is half done, or done.
                with RewardClient(self.url, timeout=60, max_retries=8) as client:
                    self.results = client.score_batch(
                        self.requests, timeout=900, poll_interval=0.5, on_progress=self._progress
                    )
            except BaseException as exc:  # the test reports it
                self.error = exc
            finally:
                self.seconds = time.monotonic() - started
                client_log.removeHandler(handler)

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()
        return self

    def _progress(self, done: int, total: int) -> None:
        self.done = done

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@dataclass
class Reference:
    results: list
    seconds: float


@pytest.fixture(scope="module")
def chaos_stack(tmp_path_factory):
    with compose_stack(tmp_path_factory.getbasetemp(), overrides=[CHAOS_OVERRIDE]) as st:
        yield st


@pytest.fixture(scope="module")
def reference(chaos_stack) -> Reference:
    """The fault-free run (run 1), timed, after a warm-up run (run 0: the problems' builds,
    unreachability proofs and instrumented designs go into the workers' cache volume)."""
    warm = Run(chaos_batch(0), chaos_stack.url).start()
    warm.join(600)
    assert warm.results is not None, f"warm-up run failed: {warm.error!r}"
    ref = Run(chaos_batch(1), chaos_stack.url).start()
    ref.join(600)
    assert ref.results is not None, f"fault-free run failed: {ref.error!r}"
    statuses = [r.status for r in ref.results]
    assert statuses[:-4] == ["ok"] * (BATCH - 4), statuses
    assert statuses[-4:] == ["compile_error", "invalid_input", "invalid_input", "timeout"], [
        (r.status, r.message) for r in ref.results[-4:]
    ]
    assert all(r.reward > 1 for r in ref.results[:-4]), [r.reward for r in ref.results]
    assert [essence(r) for r in warm.results] == [essence(r) for r in ref.results]
    _REPORT["fault-free"] = {"samples": BATCH, "correct": BATCH, "missing": 0, "seconds": round(ref.seconds, 1)}
    return Reference(ref.results, ref.seconds)


#: Per fault: what the closing note needs (printed at the end of the module, docs/chaos.md).
_REPORT: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_report():
    yield
    if _REPORT:
        print("\nchaos suite:")
        print(
            f"  {'fault':28s} {'samples':>7s} {'correct':>7s} {'missing':>7s} {'dup.sims':>8s} "
            f"{'redeliv.':>8s} {'seconds':>7s} {'vs ref':>7s} {'ready s':>7s}  client"
        )
        for name, row in _REPORT.items():
            print(
                f"  {name:28s} {row['samples']:7d} {row['correct']:7d} {row['missing']:7d} "
                f"{row.get('duplicated', 0):8d} {row.get('redelivered', 0):8d} {row['seconds']:7.1f} "
                f"{row.get('extra_s', 0.0):+7.1f} {row.get('ready_after_fault_s', 0.0):7.1f}  {row.get('client', '')}"
            )
        print(json.dumps(_REPORT))


# -- the faults ----------------------------------------------------------------------------------
def _sigkill_worker(st: Stack, run: Run) -> Callable[[], None]:
    import redis

    rc = redis.Redis.from_url(st.redis_url)
    victim = None
    while victim is None and run.done < BATCH and run.thread.is_alive():
        victim = kill_mid_job(st, rc)
        time.sleep(0.05)
    assert victim is not None, "no worker was seen running a job mid-batch"

    def restore() -> None:
        victim.reload()
        if victim.status != "running":  # docker kill counts as a manual stop: no restart policy
            victim.start()
        wait_healthy(victim)

    return restore


def _stop_start_worker(st: Stack, run: Run) -> Callable[[], None]:
    victim = st.containers("worker")[0]
    victim.stop(timeout=60)  # SIGTERM: a warm shutdown finishes the running job
    victim.start()
    return lambda: wait_healthy(victim)


def _restart_redis(st: Stack, run: Run) -> Callable[[], None]:
    st.containers("redis")[0].restart(timeout=10)
    return lambda: None


def _pause_redis(st: Stack, run: Run) -> Callable[[], None]:
    redis_container = st.containers("redis")[0]
    redis_container.pause()
    try:
        time.sleep(20)
    finally:
        redis_container.unpause()
    return lambda: None


def _restart_api(st: Stack, run: Run) -> Callable[[], None]:
    st.containers("api")[0].restart(timeout=10)
    return lambda: None


def _cut_worker(st: Stack, run: Run) -> Callable[[], None]:
    """The busy worker (else the first) off the project network for 30 s, then back under
    the aliases Compose gave it."""
    import redis

    found = None
    deadline = time.monotonic() + 10
    while found is None and time.monotonic() < deadline:
        found = busy_worker(st, redis.Redis.from_url(st.redis_url))
    victim = found[0] if found else st.containers("worker")[0]
    ((name, settings),) = victim.attrs["NetworkSettings"]["Networks"].items()
    network = st.docker.networks.get(name)
    network.disconnect(victim)
    try:
        time.sleep(30)
    finally:
        network.connect(victim, aliases=settings.get("Aliases") or None)
    return lambda: wait_healthy(victim)


FAULTS: dict[str, Callable[[Stack, Run], Callable[[], None]]] = {
    "worker SIGKILL": _sigkill_worker,
    "worker stop/start": _stop_start_worker,
    "Redis restart": _restart_redis,
    "Redis paused 20 s": _pause_redis,
    "API restart": _restart_api,
    "worker cut off 30 s": _cut_worker,
}


def _ready_within(st: Stack, timeout: float) -> float | None:
    """Seconds until ``/readyz`` answers 200 (polled twice a second), None after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if httpx.get(f"{st.url}/readyz", timeout=10).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return None


def _project_objects(st: Stack) -> tuple[list[str], set[str]]:
    """The project's containers ("name status") and the volumes they mount or Compose made."""
    containers = st.docker.containers.list(all=True, filters={"label": f"com.docker.compose.project={st.project}"})
    names = sorted(f"{c.name} {c.status}" for c in containers)
    volumes = {m["Name"] for c in containers for m in c.attrs["Mounts"] if m.get("Type") == "volume"}
    volumes |= {v.name for v in st.docker.volumes.list(filters={"label": f"com.docker.compose.project={st.project}"})}
    return names, volumes


@pytest.fixture(scope="module")
def baseline(chaos_stack, reference) -> tuple[list[str], set[str]]:
    names, volumes = _project_objects(chaos_stack)
    assert len(names) == 4 and all(n.endswith(" running") for n in names), names
    return names, volumes


class JobCounters:
    """The workers' per-job counters (``<prefix>job:<id>:sims``, ``:deliveries``) and totals
    (``<prefix>workers:stats``) of the jobs that appear after :meth:`__init__`: the stack serves
    one run at a time, so they are that run's jobs (the ids are the service's own)."""

    PREFIX = "reward-service:"

    def __init__(self, st: Stack) -> None:
        import redis

        self.rc = redis.Redis.from_url(st.redis_url)
        self.before = set(self.rc.scan_iter(f"{self.PREFIX}job:*:deliveries", count=1000))
        self.stats = self._stats()

    def _stats(self) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.rc.hgetall(f"{self.PREFIX}workers:stats").items()}

    def read(self) -> dict[str, int]:
        """jobs: delivered at least once; simulated: with one simulation or more; duplicated:
        simulated more than once; redelivered: delivered more than once; plus the changes of
        the workers' totals (lease_requeues, duplicates_dropped, ...)."""
        new = sorted(set(self.rc.scan_iter(f"{self.PREFIX}job:*:deliveries", count=1000)) - self.before)
        deliveries = [int(v or 0) for v in self.rc.mget(new)] if new else []
        sims = [int(v or 0) for v in self.rc.mget([k[: -len(b"deliveries")] + b"sims" for k in new])] if new else []
        now = self._stats()
        out = {
            "jobs": len(new),
            "simulated": sum(s >= 1 for s in sims),
            "duplicated": sum(s > 1 for s in sims),
            "redelivered": sum(d > 1 for d in deliveries),
        }
        out.update({k: v - self.stats.get(k, 0) for k, v in now.items() if v != self.stats.get(k, 0)})
        return out


@pytest.mark.parametrize("fault", list(FAULTS), ids=lambda name: name.lower().replace("/", "-").replace(" ", "-"))
def test_a_batch_survives(chaos_stack, reference, baseline, fault):
    st = chaos_stack
    run_index = 2 + list(FAULTS).index(fault)
    requests = chaos_batch(run_index)
    counters = JobCounters(st)
    run = Run(requests, st.url).start()
    while run.done < FAULT_AT and run.thread.is_alive():
        time.sleep(0.05)
    assert run.thread.is_alive() and run.done < BATCH, "the batch ended before the fault"
    injected_at = run.done
    restore = FAULTS[fault](st, run)
    # /readyz from the end of the fault (Redis back, the API restarted, the worker reconnected)
    ready_after_fault = _ready_within(st, READY_S)
    run.join(reference.seconds + GRACE_S + 600)
    # ... and once the batch is done, before the killed or stopped worker is back
    ready_at_end = _ready_within(st, READY_S)
    restore()
    ready_restored = _ready_within(st, READY_S)

    results = run.results or []
    correct = sum(essence(got) == essence(want) for got, want in zip(results, reference.results))
    jobs = counters.read()
    _REPORT[fault] = {
        "samples": BATCH,
        "correct": correct,
        "missing": BATCH - len(results),
        **jobs,
        "injected_at": injected_at,
        "seconds": round(run.seconds, 1),
        "extra_s": round(run.seconds - reference.seconds, 1),
        "ready_after_fault_s": -1.0 if ready_after_fault is None else round(ready_after_fault, 1),
        "ready_at_end": ready_at_end is not None,
        "client": f"{len(run.warnings)} warnings" + (f", e.g. {run.warnings[0][:120]}" if run.warnings else ""),
    }
    assert run.error is None and len(results) == BATCH, f"{fault}: {run.error!r}\n{st.logs('api', tail=80)[-8000:]}"
    for i, (got, want) in enumerate(zip(results, reference.results)):
        assert essence(got) == essence(want), f"{fault}: sample {i}: {got.status} {got.message} != {want.status}"
    # each sample was a job of its own and really simulated (none answered from an earlier run)
    assert jobs["jobs"] == jobs["simulated"] == BATCH, f"{fault}: {jobs}"
    assert run.seconds <= reference.seconds + GRACE_S, (
        f"{fault}: {run.seconds:.1f} s, fault-free {reference.seconds:.1f} s + {GRACE_S:g} s"
    )
    assert None not in (ready_after_fault, ready_at_end, ready_restored), (
        f"{fault}: /readyz not 200 within {READY_S:g} s: {httpx.get(f'{st.url}/readyz', timeout=30).text}"
    )
    names, volumes = _project_objects(st)
    assert names == baseline[0], f"{fault}: containers {names} (before: {baseline[0]})"
    assert volumes == baseline[1], f"{fault}: volumes {sorted(volumes - baseline[1])} appeared"
    assert st.sim_leftovers() == [], f"{fault}: sim containers or volumes left behind"
