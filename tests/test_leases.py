"""Job leases (issue 11 point 1) with a real redis-server and real Celery worker processes
(the infrastructure of test_workers.py): a worker SIGKILLed as a whole mid-job has its job
finished by another worker within seconds, long before the visibility timeout; a job whose
worker dies every time ends as sandbox_error after the requeue cap."""

from __future__ import annotations

import time

import pytest
from test_workers import Worker, slow_tb
from test_workers import make_service as make_service  # a fixture, re-exported for pytest
from test_workers import redis_server as redis_server  # a module fixture (private redis-server), re-exported for pytest

from reward_service.dispatch.base import JobState

LEASE_S = 3.0
#: Far beyond every wait below: a job that comes back came back through its lease.
VISIBILITY_S = 900


def leased(**extra):
    return dict(
        lease_s=LEASE_S, task_soft_time_limit_s=120, task_time_limit_s=130, visibility_timeout_s=VISIBILITY_S, **extra
    )


def worker_running(svc, workers: list[Worker], job: str, timeout: float = 60) -> Worker:
    """The worker one of whose pool processes runs ``job`` (its marker names the pid)."""
    d = svc.dispatcher
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        marker = d.results.get(d.keys.marker(job))
        if marker and marker.startswith(b"running"):
            pid = int(marker.split()[-1])
            for worker in workers:
                if worker.proc.poll() is None and pid in worker.children():
                    return worker
        time.sleep(0.05)
    pytest.fail(f"job {job} not seen running on {[w.name for w in workers]}:\n{svc.logs()}")


def test_a_sigkilled_workers_job_completes_on_another_within_seconds(make_service):
    svc = make_service(**leased())
    d = svc.dispatcher
    workers = [svc.start("a"), svc.start("b")]
    reqs = [slow_tb(i, cycles=300_000) for i in range(2)]
    ids = d.submit_many(reqs)
    victim = worker_running(svc, workers, ids[0])
    time.sleep(0.5)  # well into the job
    victim.kill()
    killed_at = time.monotonic()

    view = d.wait(ids[0], 120)
    recovered_s = time.monotonic() - killed_at
    assert view is not None and view.state == JobState.done, svc.logs()
    assert view.result.status == "ok" and "SAMPLE 0\n" in view.result.log, view.result
    other = d.wait(ids[1], 120)
    assert other.result.status == "ok" and "SAMPLE 1\n" in other.result.log
    # lease (3 s) + one reaper round (1 s) + waiting for the survivor's own job + the rerun:
    # seconds, not the visibility timeout of 900 s
    assert recovered_s < 60, (recovered_s, svc.logs())
    assert d.worker_stats().get("lease_requeues") == 1, d.worker_stats()
    assert d.job_stats(ids[0]) == {"deliveries": 2, "simulations": 1}
    assert d.job_stats(ids[1]) == {"deliveries": 1, "simulations": 1}
    print(f"recovered {recovered_s:.1f} s after the SIGKILL (lease {LEASE_S:g} s, visibility {VISIBILITY_S} s)")


def test_a_job_that_kills_its_worker_every_time_ends_as_sandbox_error_after_the_cap(make_service):
    svc = make_service(**leased(lease_max_requeues=2))
    d = svc.dispatcher
    workers = [svc.start("a"), svc.start("b"), svc.start("c")]
    job = d.submit(slow_tb(7, cycles=3_000_000))
    killed = []
    for _ in range(3):  # the first run and both requeues die with their worker
        victim = worker_running(svc, workers, job)
        assert victim.name not in killed
        victim.kill()
        killed.append(victim.name)
    started = time.monotonic()
    view = d.wait(job, 60)
    assert view is not None and view.state == JobState.done, svc.logs()
    result = view.result
    assert result.status == "sandbox_error" and result.reward is None, result
    assert "died 3 times" in result.message and "at most 2 requeues" in result.message, result.message
    assert time.monotonic() - started < LEASE_S + 10
    assert d.job_stats(job)["deliveries"] == 3 and d.worker_stats().get("lease_requeues") == 2
    # the outcome is a re-runnable infrastructure failure: submitting it again runs it again
    assert d.submit(slow_tb(7, cycles=3_000_000)) == job and d.get(job).state != JobState.done
