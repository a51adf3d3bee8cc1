"""Job leases (issue 11 point 1) with a real redis-server and real Celery worker processes
(the infrastructure of test_workers.py): a worker SIGKILLed as a whole mid-job has its job
finished by another worker within seconds, long before the visibility timeout; a job whose
worker dies every time ends as sandbox_error after the requeue cap; the FAILURE of a stalled
copy does not replace the SUCCESS the requeued copy stored."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from test_workers import Worker, alive, slow_tb
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


def kill_mid_job(svc, worker: Worker, job: str) -> None:
    """SIGKILL ``worker`` as a whole while it runs ``job``. The worker is frozen first (SIGSTOP
    to its process group) and killed only if the job is still running on it then (its marker
    names one of the worker's pool processes and no result is stored), so the kill cannot land
    just after the job finished, which would leave nothing for the lease to recover."""
    d = svc.dispatcher
    os.killpg(worker.proc.pid, signal.SIGSTOP)
    marker = d.results.get(d.keys.marker(job)) or b""
    stored = d.results.get(d.keys.meta_key(job))
    if marker.startswith(b"running") and int(marker.split()[-1]) in worker.children() and stored is None:
        worker.kill()
        return
    os.killpg(worker.proc.pid, signal.SIGCONT)
    pytest.fail(f"job {job} finished on {worker.name} before it could be killed (marker {marker!r})")


def test_a_sigkilled_workers_job_completes_on_another_within_seconds(make_service):
    svc = make_service(**leased())
    d = svc.dispatcher
    workers = [svc.start("a"), svc.start("b")]
    reqs = [slow_tb(i, cycles=1_000_000) for i in range(2)]
    ids = d.submit_many(reqs)
    kill_mid_job(svc, worker_running(svc, workers, ids[0]), ids[0])
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
        kill_mid_job(svc, victim, job)
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


class HoldingProxy:
    """A TCP proxy in front of a redis-server that holds the first client write containing every
    one of ``needles`` until ``release()`` is true (or ``hold_s`` passed), then forwards it: a
    client whose command reaches Redis late (a busy machine, a slow network) after reading
    what it decided on. ``held`` counts the writes that matched, ``answered`` is set once
    Redis's reply to the held write went back to its client."""

    def __init__(self, redis_url: str, needles: list[bytes], release: Callable[[], bool], hold_s: float = 60) -> None:
        target = urlsplit(redis_url)
        self.target = (target.hostname, target.port)
        self.needles, self.release, self.hold_s = needles, release, hold_s
        self.held = 0
        self.answered = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, db: str) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            pending = threading.Event()  # a held write was forwarded; its reply is the next read
            threading.Thread(target=self._pump, args=(client, server, True, pending), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False, pending), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool, pending: threading.Event) -> None:
        try:
            while data := src.recv(1 << 20):
                if upstream and all(n in data for n in self.needles):
                    self.held += 1
                    if self.held == 1:
                        self._hold()
                        pending.set()
                elif not upstream and pending.is_set():
                    pending.clear()
                    self.answered.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _hold(self) -> None:
        deadline = time.monotonic() + self.hold_s
        while time.monotonic() < deadline:
            try:
                if self.release():
                    return
            except Exception:  # the test is over (its Redis client closed): let it through
                return
            time.sleep(0.05)

    def close(self) -> None:
        self._closed = True
        self.listener.close()


def test_a_stalled_copys_failure_does_not_replace_the_requeued_copys_success(make_service):
    """Worker a runs the job and stalls (SIGSTOP: a frozen VM, a swapping machine); its lease
    lapses and the reaper requeues the job, which worker b runs. a's hard time limit fires
    meanwhile: Celery's main process reads the result (none yet: b still runs), then stores
    the FAILURE. That write reaches Redis only after b stored its SUCCESS (the proxy holds
    it: the read-then-write of Celery's own "keep a SUCCESS" check is not atomic). The stored
    result stays b's SUCCESS."""
    svc = make_service(**leased())
    d = svc.dispatcher
    meta_key = d._meta_key

    job_holder: list[str] = []

    def success_stored() -> bool:
        raw = d.results.get(meta_key(job_holder[0])) if job_holder else None
        return raw is not None and d._decode(raw)["status"] == "SUCCESS"

    proxy = HoldingProxy(svc.settings.broker_url, [b"celery-task-meta-", b'"FAILURE"'], success_stored)
    try:
        db = urlsplit(svc.settings.broker_url).path.lstrip("/")
        a = svc.start("a", broker_url=proxy.url(db), task_soft_time_limit_s=3, task_time_limit_s=4)
        req = slow_tb(5, cycles=1_500_000)  # a few seconds on b, far beyond a's hard limit
        job = d.submit(req)
        job_holder.append(job)
        worker_running(svc, [a], job)
        pid = int(d.results.get(d.keys.marker(job)).split()[-1])
        os.kill(pid, signal.SIGSTOP)
        try:
            svc.start("b")
            assert proxy.answered.wait(90), f"a's FAILURE was not written:\n{svc.logs()}"
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        # Celery stores the FAILURE twice (on_failure, then on_timeout), then kills the process
        deadline = time.monotonic() + 30
        while alive(pid) or "Hard time limit (4" not in a.log.read_text(errors="replace"):
            assert time.monotonic() < deadline, f"a's hard time limit did not end the copy:\n{a.tail()}"
            time.sleep(0.1)
        assert proxy.held >= 1
        meta = d._decode(d.results.get(meta_key(job)))
        assert meta["status"] == "SUCCESS", (meta["status"], meta.get("result"), svc.logs())
        view = d.wait(job, 10)
        assert view is not None and view.state == JobState.done
        assert view.result.status == "ok" and "SAMPLE 5\n" in view.result.log, view.result
    finally:
        proxy.close()
