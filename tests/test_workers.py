"""Celery workers and the Celery dispatcher against a real Redis and real worker processes.

Each scenario gets its own Redis database on one redis-server started by this module, and its
own ``celery -A workers.celery_app worker`` subprocesses; the engine cache dir is the shared
one, the engine's result cache is off in the workers (so simulations can be counted).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files
from samples import ARBITER, PIDS, cocotb_case, comparable, icarus_case, problems

from reward_service.dispatch.base import BatchTooLarge, JobState, QueueFull
from reward_service.models import ScoreRequest, SvTestbench
from reward_service.settings import Settings

REPO = Path(__file__).resolve().parents[1]
NO_IMAGE = "reward-service-sim:no-such-tag"

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")


# ---------------------------------------------------------------------------------------------
# infrastructure: redis-server, celery worker subprocesses
# ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A private redis-server (no persistence) on a free port; yields its base URL."""
    import redis

    port = _free_port()
    proc = subprocess.Popen(
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
            str(tmp_path_factory.mktemp("redis")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def children_of(parents: set[int]) -> set[int]:
    """PIDs of the live processes whose parent is one of ``parents``."""
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) in parents:
                out.add(int(entry))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Worker:
    """One ``celery worker`` subprocess in its own session (so it can be killed as a whole)."""

    def __init__(self, name: str, env: dict[str, str], log_dir: Path, concurrency: int = 1) -> None:
        from reward_service.dispatch.contract import QUEUE

        self.name = name
        self.log = log_dir / f"{name}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.celery_app",
                "worker",
                "-n",
                f"{name}@%h",
                f"--concurrency={concurrency}",
                "-O",
                "fair",
                "-Q",
                QUEUE,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=REPO,
            env=env,
            start_new_session=True,
            stdout=open(self.log, "wb"),
            stderr=subprocess.STDOUT,
        )

    def children(self) -> set[int]:
        """PIDs of the worker's pool processes."""
        return children_of({self.proc.pid})

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool), like a lost machine or container."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class Service:
    """A Redis database, its dispatcher, and worker processes started on demand."""

    def __init__(self, url: str, cache_dir: Path, log_dir: Path, **settings) -> None:
        from reward_service.dispatch.celery import CeleryDispatcher

        self.env_settings = {
            "broker_url": url,
            "cache_dir": str(cache_dir),
            "result_cache": "false",
            "task_soft_time_limit_s": "60",
            "task_time_limit_s": "70",
            "visibility_timeout_s": "80",
            **{k: str(v) for k, v in settings.items()},
        }
        self.settings = Settings(**self.env_settings)
        self.dispatcher = CeleryDispatcher(self.settings)
        self.log_dir = log_dir
        self.workers: list[Worker] = []

    def env(self, **settings) -> dict[str, str]:
        """The environment of a worker: the service's settings, ``settings`` overriding them."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REWARD_SERVICE_", "CELERY_"))}
        for var in ("REWARD_SERVICE_CASES", "REWARD_SERVICE_COCOTB19_VENV"):
            if var in os.environ:
                env[var] = os.environ[var]
        merged = {**self.env_settings, **{k: str(v) for k, v in settings.items()}}
        env.update({f"REWARD_SERVICE_{k.upper()}": v for k, v in merged.items()})
        return env

    def start(self, name: str, concurrency: int = 1, **settings) -> Worker:
        """Start a worker and wait for its ping; ``settings`` are this worker's own (e.g. its
        time limits, or a broker URL that reaches Redis another way)."""
        worker = Worker(name, self.env(**settings), self.log_dir, concurrency)
        self.workers.append(worker)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if worker.proc.poll() is not None:
                pytest.fail(f"worker {name} exited:\n{worker.tail()}")
            replies = self.dispatcher.app.control.ping(timeout=0.5)
            if any(node.startswith(f"{name}@") for reply in replies for node in reply):
                return worker
        pytest.fail(f"worker {name} did not answer a ping within 60 s:\n{worker.tail()}")

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.dispatcher.close()

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.tail()}" for w in self.workers)


_DB = iter(range(1, 16))


@pytest.fixture
def make_service(redis_server, shared_cache_dir, tmp_path):
    services: list[Service] = []

    def make(**settings) -> Service:
        svc = Service(f"{redis_server}/{next(_DB)}", shared_cache_dir, tmp_path, **settings)
        services.append(svc)
        return svc

    yield make
    for svc in services:
        svc.close()


@pytest.fixture(scope="module")
def service(redis_server, shared_cache_dir, tmp_path_factory):
    """One worker with two processes (one per core) on its own database."""
    svc = Service(f"{redis_server}/{next(_DB)}", shared_cache_dir, tmp_path_factory.mktemp("workers"))
    try:
        svc.start("main", concurrency=2)
        yield svc
    finally:
        svc.close()


# ---------------------------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------------------------
def slow_tb(i: int, cycles: int = 700_000) -> ScoreRequest:
    """An Icarus sample that runs about ``cycles`` microseconds and prints ``SAMPLE i``."""
    tb = f"""`timescale 1ns / 1ps
module tb;
  reg clk = 0, reset = 1; reg [7:0] req = 0; wire [7:0] grant; integer n;
  fixed_priority_arbiter dut (.clk(clk), .reset(reset), .req(req), .grant(grant));
  always #5 clk = ~clk;
  initial begin
    $display("SAMPLE {i}");
    #12 reset = 0;
    for (n = 0; n < {cycles}; n = n + 1) begin @(negedge clk); req = $random; end
    $finish;
  end
endmodule
"""
    return ScoreRequest.model_validate(
        {
            "design": {"files": rtl_files(cid012_rows()[ARBITER])},
            "simulator": "icarus",
            "seed": i,
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "coverage": {"scope": "dut"},
        }
    )


def wait_all(dispatcher, ids: list[str], timeout: float):
    deadline = time.monotonic() + timeout
    views = [dispatcher.wait(i, max(0.0, deadline - time.monotonic())) for i in ids]
    return views


# ---------------------------------------------------------------------------------------------
# configuration and wire format (no Redis)
# ---------------------------------------------------------------------------------------------
def test_time_limits_derive_from_request_maxima_and_visibility_exceeds_hard_limit():
    from reward_service.dispatch.contract import celery_config, time_limits
    from reward_service.models import Limits

    soft, hard, vis = time_limits(Settings())
    largest = Limits.model_fields["compile_s"].metadata[-1].le + Limits.model_fields["run_s"].metadata[-1].le
    assert largest < soft < hard < vis
    conf = celery_config(Settings(broker_url="redis://h:1/2"))
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["broker_transport_options"]["visibility_timeout"] == vis
    assert conf["broker_url"] == "redis://h:1/2"
    assert conf["result_backend"] == "reward_service.dispatch.contract:ResultBackend+redis://h:1/2"
    assert conf["task_serializer"] == conf["result_serializer"] == "json"
    with pytest.raises(ValueError, match="visibility_timeout_s"):
        time_limits(Settings(task_soft_time_limit_s=10, task_time_limit_s=20, visibility_timeout_s=15))


def test_wire_payload_round_trips_and_job_id_is_a_content_hash():
    from reward_service.dispatch.contract import job_id_for, wire_payload

    req = icarus_case(ARBITER)
    assert "kind" not in req.stimulus.model_fields_set  # built in Python: kind is a default
    again = ScoreRequest.model_validate(wire_payload(req))
    assert again == req
    assert job_id_for(again) == job_id_for(req) == job_id_for(icarus_case(ARBITER))
    assert job_id_for(icarus_case(ARBITER, seed=1)) != job_id_for(req)
    # a problem request keeps which fields were given
    preq = ScoreRequest.model_validate(
        {"problem_id": ARBITER, "stimulus": {"kind": "completion", "text": "x"}, "seed": 3}
    )
    assert ScoreRequest.model_validate(wire_payload(preq)).model_fields_set == preq.model_fields_set


def test_failed_task_meta_is_a_sandbox_error_not_reward_zero():
    from reward_service.dispatch.contract import rerunnable, result_from_meta

    meta = {"status": "FAILURE", "result": {"exc_type": "TimeLimitExceeded", "exc_message": ["5490"]}}
    result = result_from_meta(meta)
    assert result.status == "sandbox_error" and result.reward is None
    assert "TimeLimitExceeded" in result.message
    assert rerunnable(meta)
    assert result_from_meta({"status": "STARTED", "result": {}}) is None
    assert not rerunnable({"status": "SUCCESS", "result": {"status": "compile_error"}})


def test_a_failed_tasks_message_names_its_exception_and_arguments():
    """Celery stores a failed task's exception as its ``args`` (a JSON list): the message reads
    one argument as itself, not as a one-element list."""
    from billiard.exceptions import TimeLimitExceeded

    from reward_service.dispatch.contract import make_app, result_from_meta

    backend = make_app(Settings(broker_url="redis://127.0.0.1:1/0"), set_as_current=False).backend
    cases = {
        TimeLimitExceeded(70.0): "TimeLimitExceeded: 70.0",
        KeyError("payload"): "KeyError: payload",
        ValueError("a", 2): "ValueError: ('a', 2)",
        RuntimeError(): "RuntimeError",
    }
    for exc, what in cases.items():
        result = result_from_meta({"status": "FAILURE", "result": backend.prepare_exception(exc)})
        assert result.status == "sandbox_error" and result.reward is None
        assert result.message == f"the worker task failed: {what}"


def test_the_result_backend_never_replaces_a_success(redis_server):
    """Both apps' result backend (a real Redis): a FAILURE, a RETRY or another SUCCESS stored
    over a SUCCESS leaves it, each write checked in Redis itself (the guard Celery runs before
    writing is a separate read); over anything else a write lands, with its own expiry, and is
    published as Celery's Redis backend publishes it."""
    import redis

    from reward_service.dispatch.celery import ClientRedisBackend
    from reward_service.dispatch.contract import ResultBackend, backend_spec, make_app

    url = f"{redis_server}/14"
    settings = Settings(broker_url=url, result_expires_s=600)
    worker_app = make_app(settings, set_as_current=False)
    assert type(worker_app.backend) is ResultBackend
    client = redis.Redis.from_url(url)
    client_app = make_app(settings, set_as_current=False, backend=backend_spec(settings, ClientRedisBackend))
    for backend in (worker_app.backend, client_app.backend):
        job = f"{type(backend).__name__}-job"
        key = backend.get_key_for_task(job)
        listener = client.pubsub()
        listener.subscribe(key)
        backend._set(key, backend.encode({"status": "RETRY", "result": None}), None)
        assert backend.decode(client.get(key))["status"] == "RETRY" and 0 < client.ttl(key) <= 600
        backend._set(key, backend.encode({"status": "SUCCESS", "result": {"status": "ok"}}), None)
        for state in ("FAILURE", "RETRY", "SUCCESS"):
            backend._set(key, backend.encode({"status": state, "result": {"status": "sandbox_error"}}), 5)
        assert backend.decode(client.get(key)) == {"status": "SUCCESS", "result": {"status": "ok"}}
        assert client.ttl(key) > 5
        published = []
        while (message := listener.get_message(timeout=1)) is not None:
            if message["type"] == "message":
                published.append(backend.decode(message["data"])["status"])
        assert published == ["RETRY", "SUCCESS"]  # only what was stored
        listener.close()
        client.delete(key)  # deleted (a sandbox_error re-run): the next write lands
        backend.store_result(job, {"status": "ok"}, "SUCCESS")
        assert backend.get_task_meta(job)["status"] == "SUCCESS"


@pytest.mark.parametrize("other_copy", ["ok", "sandbox_error", None])
def test_a_failed_copy_retries_only_when_no_copy_stored_a_real_result(redis_server, monkeypatch, other_copy):
    """The task's retry decision against a real Redis: a delivery whose simulation ended as a
    sandbox_error while another copy of the job (sent again when this one's lease lapsed) stored
    its result returns that result and sends no retry; with nothing stored, or only a
    sandbox_error (the reaper's give-up), it retries."""
    import types

    import redis

    import workers.tasks as tasks
    from reward_service.dispatch.contract import JobKeys, make_app
    from reward_service.models import ScoreResult

    url = f"{redis_server}/12"
    settings = Settings(broker_url=url, result_expires_s=600)
    backend = make_app(settings, set_as_current=False).backend
    r = redis.Redis.from_url(url)
    names = JobKeys(settings.redis_prefix, backend.get_key_for_task)
    job = f"lapsed-copy-{other_copy}"
    real = {"status": "ok", "reward": 0.75}

    class Engine:
        def score(self, payload):  # the other copy finishes while this one's sandbox fails
            if other_copy is not None:
                backend.store_result(job, real if other_copy == "ok" else {"status": other_copy}, "SUCCESS")
            return ScoreResult.infrastructure_failure("the sandbox could not start")

    class Retried(Exception):
        pass

    def retry(**kwargs):
        raise Retried()

    parked = []
    monkeypatch.setattr(tasks, "engine", Engine)
    task = types.SimpleNamespace(request=types.SimpleNamespace(retries=0), backend=backend, retry=retry)
    lease = types.SimpleNamespace(park=lambda *args: parked.append(args))
    args = (task, job, {}, None, settings, names, r, lease, "token", time.monotonic(), time.time())
    if other_copy == "ok":
        assert tasks._score(*args) == real
        assert parked == [] and r.hget(names.stats, "retries") is None
    else:
        with pytest.raises(Retried):
            tasks._score(*args)
        assert len(parked) == 1 and int(r.hget(names.stats, "retries")) == 1
    r.flushdb()


# ---------------------------------------------------------------------------------------------
# through real workers
# ---------------------------------------------------------------------------------------------
def test_round_trip_equals_engine_score(service, engine):
    d = service.dispatcher
    assert d.ready() == {"redis": "ok", "workers": "ok", "sandbox": "ok"}
    req = icarus_case(ARBITER)
    direct = engine.score(req)
    job = d.submit(req)
    assert d.get(job).state in (JobState.queued, JobState.running, JobState.done)
    view = d.wait(job, 60)
    assert view is not None and view.state == JobState.done, service.logs()
    assert view.result.status == "ok" and view.result.engine == "icarus"
    assert comparable(view.result) == comparable(direct)
    assert "queue" in view.result.timings
    # the same request again is the same job: nothing is queued, the result is there
    assert d.submit(req) == job
    assert d.get(job).state == JobState.done
    assert d.job_stats(job) == {"deliveries": 1, "simulations": 1}
    assert d.get("0" * 64) is None and d.get("not-a-job") is None


def test_dispatcher_is_safe_from_many_threads(service):
    from concurrent.futures import ThreadPoolExecutor

    d = service.dispatcher
    reqs = [icarus_case(PIDS[i % 3], seed=100 + i) for i in range(12)]

    def one(req):
        job = d.submit(req)
        return job, d.wait(job, 90)

    with ThreadPoolExecutor(12) as pool:
        out = list(pool.map(one, reqs))
    assert all(v is not None and v.state == JobState.done and v.result.status == "ok" for _, v in out), service.logs()
    assert len({job for job, _ in out}) == 12


@pytest.mark.slow
def test_verilator_round_trip_carries_coverage_and_reward(service, engine):
    req = problems()[ARBITER].request(SvTestbench(files={"tb.sv": (STIMULUS / ARBITER / "good.sv").read_text()}))
    assert req.simulator == "verilator"
    direct = engine.score(req)
    view = service.dispatcher.wait(service.dispatcher.submit(req), 300)
    assert view is not None and view.state == JobState.done, service.logs()
    assert view.result.status == "ok" and view.result.coverage.overall == 1.0 and view.result.reward == 2.0
    assert comparable(view.result) == comparable(direct)


def test_batch_of_mixed_samples_completes_in_order(service, engine):
    d = service.dispatcher
    reqs = [icarus_case(pid, tb, seed=s) for s in (11, 12) for pid in PIDS for tb in ("good", "weak", "best")]
    broken = ScoreRequest.model_validate(
        {
            "design": {"files": rtl_files(cid012_rows()[ARBITER])},
            "simulator": "icarus",
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; initial begin x = ; end endmodule"}},
        }
    )
    no_code = problems()[ARBITER].request("I cannot write a testbench for this.", simulator="icarus")
    wrong_instance = problems()[ARBITER].request(
        SvTestbench(files={"tb.sv": (STIMULUS / ARBITER / "good.sv").read_text().replace(" dut (", " u0 (")}),
        simulator="icarus",
    )
    reqs[3:3] = [broken, cocotb_case()]
    reqs += [no_code, wrong_instance, reqs[0]]  # the last one repeats the first
    assert len(reqs) == 23

    ids = d.submit_many(reqs)
    assert ids[-1] == ids[0] and len(set(ids)) == 22
    views = wait_all(d, ids, 120)
    assert all(v is not None and v.state == JobState.done for v in views), service.logs()
    got = [v.result for v in views]
    statuses = [r.status for r in got]
    assert statuses[3] == "compile_error" and statuses[4] == "ok" and got[4].tests[0].passed
    assert statuses[-3:] == ["invalid_input", "invalid_input", "ok"]
    assert statuses.count("ok") == 20
    for req, result in zip(reqs, got):
        log = req.stimulus.kind != "cocotb"
        assert comparable(result, log) == comparable(engine.score(req), log)
    # only infrastructure failures are retried: every job ran once
    assert all(d.job_stats(i) == {"deliveries": 1, "simulations": 1} for i in set(ids))


def test_redelivered_job_whose_result_exists_is_not_simulated_again(service):
    """A worker that dies after storing the result but before acknowledging gets the same
    message delivered again; re-sending the message with the same task id does exactly that."""
    from reward_service.dispatch.contract import QUEUE, TASK_NAME, wire_payload

    d = service.dispatcher
    req = icarus_case("cvdp_copilot_gray_to_binary_0014", seed=21)
    job = d.submit(req)
    first = d.wait(job, 60).result
    assert d.job_stats(job) == {"deliveries": 1, "simulations": 1}
    hits = d.worker_stats().get("idempotent_hits", 0)

    def redeliver(expected_deliveries: int) -> None:
        d.app.send_task(TASK_NAME, args=[wire_payload(req)], task_id=job, queue=QUEUE)
        deadline = time.monotonic() + 60
        while d.job_stats(job)["deliveries"] < expected_deliveries or d.queue_depth():
            assert time.monotonic() < deadline, service.logs()
            time.sleep(0.05)

    redeliver(2)
    assert d.job_stats(job) == {"deliveries": 2, "simulations": 1}
    assert d.worker_stats()["idempotent_hits"] == hits + 1
    assert comparable(d.wait(job, 10).result) == comparable(first)
    # control: without a stored result the redelivered job does simulate
    d.results.delete(d.app.backend.get_key_for_task(job))
    redeliver(3)
    assert d.wait(job, 60).result is not None
    assert d.job_stats(job) == {"deliveries": 3, "simulations": 2}


def test_queue_bound_readiness_and_unknown_jobs_without_workers(make_service):
    svc = make_service(celery_max_queue=3)
    d = svc.dispatcher
    checks = d.ready()
    assert checks["redis"] == "ok" and checks["workers"] == "no worker answered within 1 s"
    reqs = [icarus_case(ARBITER, seed=s) for s in range(4)]
    with pytest.raises(BatchTooLarge) as too_large:  # can never fit: not a retryable QueueFull
        d.submit_many(reqs)
    assert (too_large.value.count, too_large.value.bound) == (4, 3)
    assert d.queue_depth() == 0  # all or nothing
    ids = d.submit_many(reqs[:3])
    assert d.queue_depth() == 3
    assert d.submit_many(reqs[:3]) == ids  # already queued: nothing new, no QueueFull
    with pytest.raises(QueueFull) as exc:
        d.submit(reqs[3])
    assert exc.value.retry_after > 0
    t0 = time.monotonic()
    view = d.wait(ids[0], 0.3)
    waited = time.monotonic() - t0
    # It waited its timeout and returned by itself, not at the Redis client's 30 s socket
    # timeout (a sub-second BLMOVE timeout rounded to 0 blocks); 10 s leaves room for a thread
    # starved on a loaded machine.
    assert view.state == JobState.queued and 0.25 <= waited < 10, waited


def test_sandbox_errors_are_retried_with_backoff_then_reported(make_service):
    # a sandbox that cannot run anything: the docker backend with an image that does not exist
    svc = make_service(sandbox="docker", sim_image=NO_IMAGE, task_max_retries=2, task_retry_backoff_s=0.2)
    d = svc.dispatcher
    svc.start("broken")
    checks = d.ready()
    assert checks["workers"] == "ok" and NO_IMAGE in checks["sandbox"]
    req = icarus_case(ARBITER, seed=31)
    job = d.submit(req)
    view = d.wait(job, 60)
    assert view.state == JobState.done, svc.logs()
    assert view.result.status == "sandbox_error" and view.result.reward is None
    assert "after 3 attempts" in view.result.message and NO_IMAGE in view.result.message
    assert d.job_stats(job) == {"deliveries": 3, "simulations": 0}
    assert d.worker_stats()["retries"] == 2
    # a sandbox_error is not an answer about the sample: submitting it again runs it again
    assert d.submit(req) == job
    assert d.get(job).state != JobState.done
    assert d.wait(job, 60).result.status == "sandbox_error"
    assert d.job_stats(job)["deliveries"] == 3


def test_background_jobs_run_after_every_queued_scoring_job(make_service):
    """Warm-up builds (submit_background) queued first still run after the scoring jobs queued
    behind them: registering many problems never delays scoring."""
    svc = make_service()
    d = svc.dispatcher
    warm = d.submit_background(icarus_case(ARBITER, seed=51))
    scores = d.submit_many([icarus_case(pid, seed=52) for pid in PIDS])
    assert d.queue_depth() == 4  # the background list counts too (bounded by the same limit)
    svc.start("one", concurrency=1)
    views = wait_all(d, [warm, *scores], 120)
    assert all(v.state == JobState.done and v.result.status == "ok" for v in views), svc.logs()

    def finished(job_id: str) -> str:
        return d._decode(d.results.get(d._meta_key(job_id)))["date_done"]

    assert max(finished(j) for j in scores) < finished(warm)


def test_two_api_processes_resubmitting_a_failed_job_send_it_once(make_service):
    """A sandbox_error result may be re-run by submitting it again; when two API processes
    (two dispatchers) do that at the same moment, the job is queued once, not twice."""
    import threading

    from reward_service.dispatch.celery import CeleryDispatcher

    svc = make_service(sandbox="docker", sim_image=NO_IMAGE, task_max_retries=0)
    worker = svc.start("broken")
    req = icarus_case(ARBITER, seed=41)
    job = svc.dispatcher.submit(req)
    assert svc.dispatcher.wait(job, 60).result.status == "sandbox_error", svc.logs()
    worker.stop()  # nothing consumes now: the queue shows what was sent
    assert svc.dispatcher.queue_depth() == 0
    apis = [CeleryDispatcher(svc.settings) for _ in range(8)]
    barrier = threading.Barrier(len(apis))

    def resubmit(d):
        barrier.wait()
        return d.submit(req)

    threads = [threading.Thread(target=lambda d=d: resubmit(d)) for d in apis]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert svc.dispatcher.queue_depth() == 1
    assert svc.dispatcher.get(job).state == JobState.queued
    for d in apis:
        d.close()


@pytest.mark.slow
def test_sigkilled_workers_lose_no_job_and_each_request_is_answered_once(make_service):
    """Two workers; one is SIGKILLed as a whole while it runs a job (its job comes back after the
    visibility timeout), then the pool process of the other is SIGKILLed mid-job (requeued at
    once: task_reject_on_worker_lost). Every request still gets exactly one result, in order."""
    svc = make_service(task_soft_time_limit_s=8, task_time_limit_s=10, visibility_timeout_s=12)
    d = svc.dispatcher
    a, b = svc.start("a"), svc.start("b")
    reqs = [slow_tb(i) for i in range(14)]
    ids = d.submit_many(reqs)
    assert len(set(ids)) == len(ids)

    def running_on(worker: Worker, avoid: set[str]) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = worker.children()
            for job, marker in zip(ids, d.results.mget([d.keys.marker(i) for i in ids])):
                if job not in avoid and marker and marker.startswith(b"running") and int(marker.split()[-1]) in pids:
                    if d.get(job).state == JobState.running:
                        return job
            time.sleep(0.02)
        pytest.fail(f"no job seen running on {worker.name}:\n{svc.logs()}")

    time.sleep(0.3)
    killed_a = running_on(a, set())
    a.kill()
    killed_b = running_on(b, {killed_a})
    child = int(d.results.get(d.keys.marker(killed_b)).split()[-1])
    os.kill(child, signal.SIGKILL)

    views = wait_all(d, ids, 150)
    assert all(v is not None and v.state == JobState.done for v in views), svc.logs()
    results = [v.result for v in views]
    assert [r.status for r in results] == ["ok"] * len(reqs), [r.message for r in results]
    for i, result in enumerate(results):  # in request order
        assert f"SAMPLE {i}\n" in result.log
    stats = {job: d.job_stats(job) for job in ids}
    assert stats[killed_a]["deliveries"] >= 2 and stats[killed_b]["deliveries"] >= 2, stats
    assert all(s["simulations"] >= 1 for s in stats.values())
    # jobs nobody killed ran once
    assert all(
        s == {"deliveries": 1, "simulations": 1} for job, s in stats.items() if job not in (killed_a, killed_b)
    ), stats
    assert b.proc.poll() is None
    deadline = time.monotonic() + 10
    while d.queue_depth():  # the last acknowledgements follow the stored results
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_soft_time_limit_ends_the_job_as_sandbox_error_without_retry(make_service):
    """Celery's soft time limit, raised inside the pool process mid-simulation, is handled by
    the task where it is raised: the engine lets it through (``reraise``), the result says the
    service's limit stopped the job (sandbox_error, not the sample's fault), stored by the task
    itself before the hard limit, not retried, no "internal error" in the worker's log, and the
    simulation it interrupted does not outlive it."""
    from workers.tasks import soft_limit_message

    # The soft limit leaves room for the delivery and the prepare step before the run step
    # starts (seconds on a loaded machine); the simulation outlasts it on any machine.
    soft = 10
    svc = make_service(
        task_soft_time_limit_s=soft, task_time_limit_s=2 * soft, visibility_timeout_s=3 * soft, task_retry_backoff_s=0.1
    )
    d = svc.dispatcher
    worker = svc.start("limited")
    warm = d.wait(d.submit(slow_tb(1, cycles=10)), 30)  # the toolchain probe, before the clock runs
    assert warm.state == JobState.done and warm.result.status == "ok", svc.logs()
    job = d.submit(slow_tb(0, cycles=200_000_000))  # minutes of simulation; run_s 30 > the soft limit
    steps: set[int] = set()
    # the run step's sandbox, under the pool process, seen before the job ends
    while not steps and d.get(job).state != JobState.done:
        steps = children_of(worker.children())
        time.sleep(0.05)
    assert steps, f"the job ended before its run step was seen: {d.get(job).result}\n{svc.logs()}"
    view = d.wait(job, 6 * soft)
    assert view.state == JobState.done, svc.logs()
    assert view.result.status == "sandbox_error" and view.result.reward is None, view.result
    # stored by the task itself: a result Celery's main process stores at the hard limit is a
    # TimeLimitExceeded failure with another message
    assert view.result.message == soft_limit_message(soft) + " (after 1 attempt)"
    assert f"soft time limit ({soft} s)" in view.result.message
    assert d.job_stats(job) == {"deliveries": 1, "simulations": 0}
    assert d.worker_stats().get("retries", 0) == 0
    log = worker.log.read_text(errors="replace")
    assert f"stopped at the soft time limit ({soft} s)" in log and "internal error" not in log, worker.tail()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in steps):
        assert time.monotonic() < deadline, f"the interrupted step {steps} still runs"
        time.sleep(0.1)


def test_a_worker_keeps_its_liveness_file_fresh_while_it_runs(make_service, tmp_path):
    """The liveness bootstep (workers/liveness.py) touches the file from the consumer's timer
    while the worker takes jobs, and removes it on a warm shutdown; the health check of
    docker-compose.yml passes while it runs and fails after."""
    from workers.liveness import CHECK, INTERVAL_S

    alive = tmp_path / "worker.alive"
    svc = make_service()
    worker = svc.start("alive", worker_heartbeat_file=alive)
    deadline = time.monotonic() + 10
    while not alive.exists():
        assert time.monotonic() < deadline, f"no liveness file 10 s after the ping:\n{worker.tail()}"
        time.sleep(0.1)
    first = alive.stat().st_mtime
    time.sleep(INTERVAL_S + 1.5)
    assert alive.stat().st_mtime > first  # touched again by the timer
    job = svc.dispatcher.submit(icarus_case("cvdp_copilot_fixed_arbiter_0004", "good"))
    assert svc.dispatcher.wait(job, 60).state == JobState.done  # the worker takes jobs meanwhile
    health = ["sh", "-c", CHECK, "rs-health", str(alive)]
    assert subprocess.run(health).returncode == 0
    worker.stop()
    assert not alive.exists()
    assert subprocess.run(health).returncode == 1


def test_a_job_left_with_only_a_retry_state_is_queued_again_when_resubmitted(make_service):
    """Redis restarted without persistence while an attempt of the job failed: the attempt
    stored Celery's RETRY state in the empty Redis; the job's marker and request copy were lost.
    The client resubmits the lost batch: the job must be queued and run, not stay "unknown to
    the dispatcher" (a sandbox_error in the batch: CI's test_redis_restart[no-persistence],
    1 run in 6 to 30 here)."""
    from reward_service.dispatch.contract import job_id_for

    svc = make_service()
    d = svc.dispatcher
    req = slow_tb(3, cycles=10)
    job = job_id_for(req)
    d.app.backend.store_result(job, {"exc_type": "Retry", "exc_message": ["Retry in 2s"]}, "RETRY")
    assert d.get(job) is None  # what the batch view called unknown
    assert d.submit(req) == job
    assert d.get(job).state == JobState.queued
    svc.start("w")
    view = d.wait(job, 60)
    assert view.state == JobState.done and view.result.status == "ok" and "SAMPLE 3\n" in view.result.log, svc.logs()
    assert d.job_stats(job) == {"deliveries": 1, "simulations": 1}
