"""Redis restarted under a running batch (issue 11 point 2), with a real redis-server, a real
Celery worker process, the API served by uvicorn and the project's client:

- with an append-only file (as docker-compose.yml runs Redis): problems, the batch and its jobs
  survive; the batch completes without being resubmitted;
- without persistence: everything is forgotten; the client gets 404 for its batch, resubmits
  it (content-addressed job ids) within its timeout, and logs what was lost.

Either way every result is present once, in request order, equal to a bare engine run."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import threading
import time

import pytest
import redis
from conftest import CID012, free_port, live_server
from samples import comparable
from test_workers import Service, slow_tb

from reward_service.api import create_app
from reward_service.client import RewardClient
from reward_service.dispatch.contract import job_id_for

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")

SAMPLES = 6
CYCLES = 150_000


class RedisProc:
    """A redis-server on a fixed port that can be restarted (``aof``: appendonly everysec)."""

    def __init__(self, data_dir, aof: bool) -> None:
        self.port, self.data_dir, self.aof = free_port(), data_dir, aof
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *persistence,
                "--dir",
                str(self.data_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def restart(self) -> None:
        """SIGTERM (what `docker restart` sends), then start again on the same port and dir."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)


@pytest.fixture
def stack(tmp_path, shared_cache_dir, request):
    """(redis, service with one worker, API url) around a Redis with or without AOF."""
    server = RedisProc(tmp_path, aof=request.param)
    server.start()
    svc = Service(
        server.url,
        shared_cache_dir,
        tmp_path,
        lease_s=3,
        task_soft_time_limit_s=60,
        task_time_limit_s=70,
        visibility_timeout_s=600,
        warm_on_register="false",
    )
    try:
        svc.start("w", concurrency=1)
        app = create_app(settings=svc.settings)
        with live_server(app) as url:
            yield server, svc, url
    finally:
        svc.close()
        server.stop()


@pytest.mark.parametrize("stack", [True, False], ids=["aof", "no-persistence"], indirect=True)
def test_a_batch_survives_a_redis_restart(stack, engine, caplog):
    server, svc, url = stack
    aof = server.aof
    reqs = [slow_tb(i, cycles=CYCLES) for i in range(SAMPLES)]
    expected = [comparable(engine.score(r)) for r in reqs]
    ids = [job_id_for(r) for r in reqs]
    with RewardClient(url, max_retries=10, backoff_s=0.5) as client:
        loaded = client.load_problems_jsonl(CID012)
        before = sorted(p["id"] for p in client.list_problems())
        assert before == sorted(loaded["ids"])
        out: dict = {}

        def run():
            try:
                out["results"] = client.score_batch(reqs, timeout=300, poll_interval=1.0)
            except Exception as exc:
                out["error"] = exc

        caplog.set_level(logging.WARNING, logger="reward_service.client")
        runner = threading.Thread(target=run)
        started = time.monotonic()
        runner.start()
        deadline = time.monotonic() + 120
        while sum(v is not None and v.state == "done" for v in map(svc.dispatcher.get, ids)) < 2:
            assert time.monotonic() < deadline, svc.logs()
            time.sleep(0.1)
        server.restart()
        restarted = time.monotonic() - started
        runner.join(320)
        assert "error" not in out, (out.get("error"), svc.logs())
        results = out["results"]
        after = sorted(p["id"] for p in client.list_problems())
    elapsed = time.monotonic() - started
    assert [comparable(r) for r in results] == expected  # all, once each, in order, correct
    lost = [r.getMessage() for r in caplog.records if "lost batch" in r.getMessage()]
    if aof:
        assert after == before  # the problems survived
        assert lost == []  # so did the batch: no resubmission
    else:
        assert after == []  # nothing survived ...
        assert lost and "resubmitting" in lost[0]  # ... and the client said what it resubmitted
    print(
        f"{'aof' if aof else 'no-persistence'}: {SAMPLES}/{SAMPLES} correct, restart at {restarted:.1f} s, "
        f"done at {elapsed:.1f} s, {len(lost)} batch resubmission(s)"
    )


def test_queued_jobs_whose_messages_a_restart_lost_are_resent(tmp_path, shared_cache_dir):
    """The last second of an append-only file can hold a job's ``queued`` marker but not its
    message. Simulated exactly: the queue is emptied, then Redis restarts; the reaper notices
    the restart (run_id) and resends every queued job without a message from its request copy.
    The restart may come at any time after the submit, before or after the reaper's rounds."""
    from reward_service.dispatch.contract import QUEUE

    server = RedisProc(tmp_path, aof=True)
    server.start()
    svc = Service(
        server.url,
        shared_cache_dir,
        tmp_path,
        lease_s=3,
        task_soft_time_limit_s=60,
        task_time_limit_s=70,
        visibility_timeout_s=600,
    )
    try:
        d = svc.dispatcher
        reqs = [slow_tb(i, cycles=20_000) for i in range(3)]
        ids = d.submit_many(reqs)  # no worker yet: they stay queued
        assert d.broker.llen(QUEUE) == 3
        d.broker.delete(QUEUE)  # the messages are lost, the markers and request copies are not
        server.restart()
        svc.start("w")
        views = [d.wait(i, 60) for i in ids]
        assert [v.state if v else None for v in views] == ["done"] * 3, svc.logs()
        assert [v.result.status for v in views] == ["ok"] * 3
        assert all(f"SAMPLE {i}\n" in v.result.log for i, v in enumerate(views))
        assert d.worker_stats().get("resent_lost") == 3
    finally:
        svc.close()
        server.stop()


def test_a_restart_before_the_first_reaper_round_is_noticed(tmp_path, shared_cache_dir):
    """A process that submits and sees Redis restart before its reaper's first round still
    resends the queued jobs whose messages the restart lost: the run_id it compares against was
    recorded when it sent them. The submitter runs no reaper thread, so its first round comes
    exactly after the restart (called here); the service that then runs the jobs is started
    after the restart, so its own reaper never saw the old run_id and cannot do it instead."""
    from reward_service.dispatch.celery import CeleryDispatcher
    from reward_service.dispatch.contract import QUEUE
    from reward_service.settings import Settings

    server = RedisProc(tmp_path, aof=True)
    server.start()
    limits = dict(lease_s=3, task_soft_time_limit_s=60, task_time_limit_s=70, visibility_timeout_s=600)
    submitter = CeleryDispatcher(Settings(broker_url=server.url, **limits), reaper=False)
    svc = None
    try:
        ids = submitter.submit_many([slow_tb(i, cycles=20_000) for i in range(3)])
        before = submitter.broker.info("server")["run_id"]
        assert submitter.broker.llen(QUEUE) == 3
        submitter.broker.delete(QUEUE)  # lost with the restart; markers and request copies kept
        server.restart()
        assert submitter.broker.info("server")["run_id"] != before  # a real restart
        assert sorted(submitter.reconcile_after_restart()) == sorted(ids)  # its first round
        assert submitter.broker.llen(QUEUE) == 3
        assert submitter.reconcile_after_restart() == []  # the next round: no restart since
        svc = Service(server.url, shared_cache_dir, tmp_path, **limits)
        svc.start("w")
        views = [svc.dispatcher.wait(i, 60) for i in ids]
        assert [v.state if v else None for v in views] == ["done"] * 3, svc.logs()
        assert all(v.result.status == "ok" and f"SAMPLE {i}\n" in v.result.log for i, v in enumerate(views))
        assert submitter.worker_stats().get("resent_lost") == 3
        assert [submitter.job_stats(i) for i in ids] == [{"deliveries": 1, "simulations": 1}] * 3
    finally:
        if svc is not None:
            svc.close()
        submitter.close()
        server.stop()
