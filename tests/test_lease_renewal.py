"""A heartbeat that was late (its thread starved past the lease: the GIL held by a long C call
such as a pyslang elaboration, or a paused Redis whose clock jumped) with a real redis-server:
the lapsed lease is taken back, so the copy the reaper requeued meanwhile is dropped as a
duplicate instead of running the job a second time."""

from __future__ import annotations

import time

import redis

from reward_service.dispatch.leases import Leases
from test_workers import redis_server  # noqa: F401 - fixture

JOB = "ab" * 32


def test_a_late_heartbeat_takes_back_its_lapsed_lease(redis_server):
    client = redis.Redis.from_url(redis_server)
    leases = Leases(client, "t:", 0.2, lambda job_id: f"t:meta:{job_id}")
    token = leases.claim(JOB)
    assert token is not None
    time.sleep(0.4)  # no renewal within the lease: it lapses while the job still runs
    [lapsed] = leases.reap(60)  # the reaper requeues it once
    assert lapsed.job_id == JOB and lapsed.requeues == 1
    assert leases.renew(JOB, token)  # the late heartbeat: nobody took the lease yet
    assert client.get(leases.lease(JOB)).decode() == token
    assert client.sismember(leases.running, JOB)  # watched again: its death would requeue it
    assert leases.claim(JOB) is None  # the requeued delivery is a duplicate and is dropped


def test_a_lease_another_process_took_is_not_taken_back(redis_server):
    client = redis.Redis.from_url(redis_server)
    leases = Leases(client, "u:", 0.2, lambda job_id: f"u:meta:{job_id}")
    token = leases.claim(JOB)
    time.sleep(0.4)
    leases.reap(60)
    client.set(leases.lease(JOB), "otherhost 1 x", px=5000)  # the requeued copy runs elsewhere
    assert not leases.renew(JOB, token)
    assert client.get(leases.lease(JOB)) == b"otherhost 1 x"
