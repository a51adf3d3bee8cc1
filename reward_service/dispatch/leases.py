"""Job leases: prompt recovery of the jobs of a worker that died (Redis has no consumer
acknowledgements: without leases such a job waits for the visibility timeout, ~97 minutes).

- A worker process that starts a job **claims its lease** (:meth:`Leases.claim`):
  (:meth:`~reward_service.dispatch.contract.JobKeys.lease`) = ``<host> <pid> <nonce>`` with a
  TTL of ``Settings.lease_s`` (a few seconds), and adds the id to
  :attr:`~reward_service.dispatch.contract.JobKeys.running` (the jobs being run). A thread of that
  process **renews** the lease every ``lease_s / 4`` while the job runs (:class:`Heartbeat`);
  the lease is **released** once the result is stored.
- A delivery of a job whose lease is held by a live process is a duplicate (the same job sent
  again while it runs): it is dropped. A lease of a process of this host that no longer exists
  (a pool process killed and its job requeued at once by Celery) is taken over at once.
- The **reaper** (:meth:`Leases.reap`, every second: :class:`Reaper` threads run it in every
  worker's main process and in every API process) finds ids in the running set whose lease
  lapsed; one Lua call removes the id from the set, so exactly one reaper requeues each lapsed
  lease, and counts the requeue (``JobKeys.requeues``). The job is sent again with its
  own content-addressed id (a copy of the first message, kept at ``JobKeys.request``
  while the job is not done): a job that finished meanwhile is answered from its stored result.
- After ``Settings.lease_max_requeues`` requeues (a job that kills its worker each time), the
  reaper stores a ``sandbox_error`` result naming the reason instead of requeueing.

Celery's visibility timeout stays as the backstop (all workers and API processes gone): the
original message of a dead worker is restored then, and answered from the stored result.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from reward_service.dispatch.base import BrokerUnavailable
from reward_service.dispatch.contract import READY_STATES, JobKeys, reply_text

log = logging.getLogger(__name__)

#: Mark of a lease parked between attempts (a retry with a countdown): the next delivery may take it.
PARKED = "parked"

#: KEYS: lease, running set; ARGV: our token, TTL ms, job id, token we may replace ("" none).
_CLAIM = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[4] and string.sub(cur, 1, 7) ~= 'parked ' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""
#: KEYS: lease, running set; ARGV: our token, TTL ms, job id. Renews only our own lease; one
#: that lapsed and that no other process took (our renewals were late: the GIL held by a long
#: C call, a paused Redis whose clock jumped) is taken back, so a requeued copy is dropped as a
#: duplicate instead of running the job twice.
_RENEW = """
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""
#: KEYS: lease, running set, request copy; ARGV: our token, job id, drop the request copy (1/0).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SREM', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[1])
end
if ARGV[3] == '1' then redis.call('DEL', KEYS[3]) end
return 1
"""
#: KEYS: lease; ARGV: our token, TTL ms. Parks our lease (no renewals until the next delivery).
_PARK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'parked ' .. ARGV[1], 'PX', ARGV[2])
return 1
"""
#: Lua: the result meta ``meta`` holds a state of READY_STATES.
_FINAL = " or ".join(f'string.find(meta, \'"status": *"{state}"\')' for state in READY_STATES)
#: KEYS: lease, running set, result meta, requeues; ARGV: job id, requeues TTL s.
#: -1: the job has its final result (a state of READY_STATES: only forgotten; a RETRY meta, a
#: job between attempts, and a REVOKED one, a job Celery cancelled on a lost broker connection,
#: are no result); 0: someone else took it or the lease is live; n > 0: this caller requeues
#: it, for the n-th time.
_REAP = f"""
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('SREM', KEYS[2], ARGV[1]) == 0 then return 0 end
local meta = redis.call('GET', KEYS[3])
if meta and ({_FINAL}) then
  return -1
end
local n = redis.call('INCR', KEYS[4])
redis.call('EXPIRE', KEYS[4], ARGV[2])
return n
"""


@dataclass
class Lapsed:
    """A job whose lease lapsed and that this reaper claimed: ``requeues`` counts this one."""

    job_id: str
    requeues: int
    request: dict[str, Any] | None


class Leases:
    """The leases of the jobs under ``keys`` (``client``: the result-backend Redis; ``lease_s``:
    a lease's TTL in seconds)."""

    def __init__(self, client: redis.Redis, keys: JobKeys, lease_s: float) -> None:
        self.client, self.keys, self.lease_s = client, keys, lease_s
        self._claim = client.register_script(_CLAIM)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._park = client.register_script(_PARK)
        self._reap = client.register_script(_REAP)

    @property
    def ttl_ms(self) -> int:
        return max(100, int(self.lease_s * 1000))

    # -- the worker's side ------------------------------------------------------------------
    def claim(self, job_id: str) -> str | None:
        """Take the job's lease for this process; returns its token, or None when a live
        process holds it (this delivery is a duplicate). A lease of a dead process of this host
        is taken over (compare-and-set on the token read)."""
        token = f"{socket.gethostname()} {os.getpid()} {uuid.uuid4().hex[:12]}"
        keys = [self.keys.lease(job_id), self.keys.running]
        # The common case first, in one round trip: no lease (or a parked one). Only when a
        # lease is there is it read, to take over that of a dead process of this host.
        if self._claim(keys=keys, args=[token, self.ttl_ms, job_id, ""]):
            return token
        current = self.client.get(self.keys.lease(job_id))
        replaceable = reply_text(current) if current is not None and _dead_here(reply_text(current)) else ""
        return token if self._claim(keys=keys, args=[token, self.ttl_ms, job_id, replaceable]) else None

    def renew(self, job_id: str, token: str) -> bool:
        """Extend our lease by ``lease_s`` (taking it back when it lapsed and nobody took it);
        False when another process holds it now (the job was requeued and runs there)."""
        return bool(self._renew(keys=[self.keys.lease(job_id), self.keys.running], args=[token, self.ttl_ms, job_id]))

    def release(self, job_id: str, token: str, finished: bool) -> None:
        """Drop our lease once the result is stored (``finished``: also the request copy)."""
        self._release(
            keys=[self.keys.lease(job_id), self.keys.running, self.keys.request(job_id)],
            args=[token, job_id, "1" if finished else "0"],
        )

    def park(self, job_id: str, token: str, seconds: float) -> None:
        """Between attempts (a retry due in ``seconds``): keep the lease without renewals, for
        ``seconds + lease_s``; the retry's delivery takes it, a lapse requeues the job."""
        self._park(keys=[self.keys.lease(job_id)], args=[token, int((seconds + self.lease_s) * 1000)])

    # -- the reaper's side ------------------------------------------------------------------
    def reap(self, requeues_ttl_s: int) -> list[Lapsed]:
        """Claim every job whose lease lapsed (each claimed by exactly one caller)."""
        ids = [reply_text(i) for i in self.client.smembers(self.keys.running)]
        if not ids:
            return []
        alive = self.client.pipeline(transaction=False)
        for job_id in ids:
            alive.exists(self.keys.lease(job_id))
        lapsed = []
        for job_id, live in zip(ids, alive.execute()):
            if live:
                continue
            keys = [self.keys.lease(job_id), self.keys.running, self.keys.meta_key(job_id), self.keys.requeues(job_id)]
            n = self._reap(keys=keys, args=[job_id, requeues_ttl_s])
            if n > 0:
                raw = self.client.get(self.keys.request(job_id))
                lapsed.append(Lapsed(job_id, int(n), json.loads(raw) if raw is not None else None))
        return lapsed


def _dead_here(token: str) -> bool:
    """Whether ``token`` names a process of this host that no longer exists."""
    parts = token.split()
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # A zombie (killed, not yet reaped by the worker's main process) is dead too.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


class Heartbeat:
    """Renews a lease every ``lease_s / 4`` seconds in a daemon thread until stopped."""

    def __init__(self, leases: Leases, job_id: str, token: str) -> None:
        self.leases, self.job_id, self.token = leases, job_id, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{job_id[:8]}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.leases.lease_s / 4):
            try:
                if not self.leases.renew(self.job_id, self.token):
                    log.warning("job %s: lease lost (it lapsed and a requeued copy runs elsewhere)", self.job_id)
                    return
            except redis.RedisError:  # Redis away for a moment: keep trying until the lease lapses
                log.warning("job %s: could not renew the lease", self.job_id, exc_info=True)


class Reaper:
    """Calls ``reap_once`` every ``interval_s`` seconds in a daemon thread (errors are logged)."""

    def __init__(self, reap_once: Callable[[], Any], interval_s: float = 1.0, name: str = "lease-reaper") -> None:
        self.reap_once, self.interval_s = reap_once, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Reaper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.reap_once()
            except BrokerUnavailable as exc:  # Redis away: one line per round, not a traceback
                log.warning("lease reaper round failed: %s", exc)
            except Exception:
                log.warning("lease reaper round failed", exc_info=True)
