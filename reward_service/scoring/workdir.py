"""Removal of per-sample work dirs off the scoring thread.

Every simulation writes its files into a fresh work dir under ``Settings.work_root``
(:func:`reward_service.scoring.run.simulate`). Removing it is disk work that can cost as much
as the sample's own fast-path simulation: on an ext4 mounted with ``discard`` (this project's
VMs) each unlink trims, and a fast-path sample's ten files took 5-30 ms to remove against its
~40 ms of scoring (measured 2026-12-04; the embedded server's scoring threads spent a quarter of
an RL step in ``rmtree``). One background thread per process removes the dirs handed to
:func:`remove_later`, so a scoring thread takes its next sample at once. Nothing reads a work
dir after its sample was measured; the removal only frees disk.

Bounded: past :data:`MAX_PENDING` dirs waiting, the caller removes its own (a disk slower than
the scoring cannot pile up dirs). :func:`drain` waits for the removals handed over so far
(tests that check a work root is empty; a normal interpreter exit runs it, and the Celery
worker's pool processes run it at their shutdown, ``workers/``: they end with ``os._exit``). A
forked child (Celery's prefork pool) starts with no thread and nothing pending of its parent's.
A process killed outright (SIGKILL, a hard time limit) leaves the dirs still pending, as it
leaves the one it was scoring.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import threading
from pathlib import Path

#: Work dirs waiting for removal beyond which :func:`remove_later` removes in the caller.
MAX_PENDING = 64


class _Remover:
    """This process's removal thread, its queue and the count of dirs not yet removed."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.queue: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self.done = threading.Condition()
        self.pending = 0
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="rs-workdir-remover", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while True:
            path = self.queue.get()
            try:
                shutil.rmtree(path, ignore_errors=True)
            finally:
                with self.done:
                    self.pending -= 1
                    self.done.notify_all()


_remover = _Remover()
_start_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # the parent's thread does not exist here, and its queue is the parent's to empty
    global _remover, _start_lock
    _remover = _Remover()
    _start_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def remove_later(path: Path) -> None:
    """Remove the work dir ``path`` (a tree of files this process may delete) in the background;
    errors are ignored as ``shutil.rmtree(ignore_errors=True)`` does. Removes it at once, in the
    caller, when :data:`MAX_PENDING` dirs are already waiting."""
    remover = _remover
    with remover.done:
        if remover.pending >= MAX_PENDING:
            busy = True
        else:
            busy = False
            remover.pending += 1
    if busy:
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        with _start_lock:
            remover.start()
    except RuntimeError:  # no thread to be had (a pids limit): remove it here, count it done
        with remover.done:
            remover.pending -= 1
            remover.done.notify_all()
        shutil.rmtree(path, ignore_errors=True)
        return
    remover.queue.put(path)


def drain(timeout_s: float | None = None) -> bool:
    """Wait until every work dir handed to :func:`remove_later` in this process is removed;
    False when ``timeout_s`` seconds passed first."""
    remover = _remover
    with remover.done:
        return remover.done.wait_for(lambda: remover.pending == 0, timeout_s)


atexit.register(drain, 30.0)
