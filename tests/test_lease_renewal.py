"""A heartbeat that was late (its thread starved past the lease: the GIL held by a long C call
such as a pyslang elaboration, or a paused Redis whose clock jumped) with a real redis-server:
the lapsed lease is taken back, so the copy the reaper requeued meanwhile is dropped as a
duplicate instead of running the job a second time."""

from __future__ import annotations

import time

import redis
from test_workers import redis_server as redis_server  # a module fixture (private redis-server), re-exported for pytest

from reward_service.dispatch.contract import JobKeys
from reward_service.dispatch.leases import Leases

JOB = "ab" * 32


def test_a_late_heartbeat_takes_back_its_lapsed_lease(redis_server):
    client = redis.Redis.from_url(redis_server)
    leases = Leases(client, JobKeys("t:", lambda job_id: f"t:meta:{job_id}"), 0.2)
    token = leases.claim(JOB)
    assert token is not None
    time.sleep(0.4)  # no renewal within the lease: it lapses while the job still runs
    [lapsed] = leases.reap(60)  # the reaper requeues it once
    assert lapsed.job_id == JOB and lapsed.requeues == 1
    assert leases.renew(JOB, token)  # the late heartbeat: nobody took the lease yet
    assert client.get(leases.keys.lease(JOB)).decode() == token
    assert client.sismember(leases.keys.running, JOB)  # watched again: its death would requeue it
    assert leases.claim(JOB) is None  # the requeued delivery is a duplicate and is dropped


def test_a_lease_another_process_took_is_not_taken_back(redis_server):
    client = redis.Redis.from_url(redis_server)
    leases = Leases(client, JobKeys("u:", lambda job_id: f"u:meta:{job_id}"), 0.2)
    token = leases.claim(JOB)
    time.sleep(0.4)
    leases.reap(60)
    client.set(leases.keys.lease(JOB), "otherhost 1 x", px=5000)  # the requeued copy runs elsewhere
    assert not leases.renew(JOB, token)
    assert client.get(leases.keys.lease(JOB)) == b"otherhost 1 x"


def test_a_retried_job_whose_worker_dies_is_requeued(redis_server):
    """A job that retried once (Celery stored its RETRY state) and whose worker then died
    mid-run: RETRY is no result, so the lapsed lease requeues it (not the visibility timeout)."""
    from reward_service.dispatch.celery import CeleryDispatcher
    from reward_service.settings import Settings

    d = CeleryDispatcher(Settings(broker_url=f"{redis_server}/3", lease_s=0.2), reaper=False)
    try:
        job = "cd" * 32
        d.app.backend.store_result(job, RuntimeError("sandbox_error: retry 1 of 2"), "RETRY")
        assert d.results.get(d._meta_key(job)) is not None
        assert d.leases.claim(job) is not None  # the retry's delivery runs; its worker is killed
        time.sleep(0.4)
        assert [(x.job_id, x.requeues) for x in d.leases.reap(60)] == [(job, 1)]

        done = "ef" * 32  # a job with its final result is only forgotten, not requeued
        d.app.backend.store_result(done, {"status": "ok"}, "SUCCESS")
        assert d.leases.claim(done) is not None
        time.sleep(0.4)
        assert d.leases.reap(60) == []
    finally:
        d.close()
