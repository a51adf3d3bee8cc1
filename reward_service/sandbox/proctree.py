"""Per-step memory and process limits where no cgroup can be made (a non-root worker container,
a host without a writable cgroup hierarchy): rlimits bound each step, and a watcher samples the
step's process tree to tell which limit ended it.

- Processes: ``RLIMIT_NPROC`` is set *inside* the step's own user namespace (``prlimit`` in
  front of the command). Since Linux 5.14 the kernel counts it per user namespace, so the
  count is this step's tasks alone; were it set on bwrap outside, every process of the worker's
  uid (its other steps, Celery itself, other containers of that uid) would share one budget and a
  fork bomb in one sample would make a neighbour's fork fail.
- Memory: the watcher sums the resident memory of the tree every :data:`INTERVAL_S` and kills the
  tree past the step's ``memory_mb`` (what a cgroup's OOM kill does); ``RLIMIT_AS`` at
  :func:`address_space_mb` bounds how far a fast allocator overshoots between two samples.
  The container's own memory and pids limits stay the backstop.

The tree is found through ``/proc/<pid>/task/*/children`` where the kernel has those files, else
from ``/proc/<pid>/stat`` of every process; each process of the tree gives its ``stat`` (a live
thread's where the leader thread has exited and shows no memory), counted once per walk.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

#: Seconds between two samples of a step's process tree.
INTERVAL_S = 0.025
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def address_space_mb(memory_mb: int) -> int:
    """``RLIMIT_AS`` (MiB) of one process of a step whose memory limit is ``memory_mb``: room for
    the address space a runtime reserves beyond what it touches (thread stacks, malloc arenas),
    and for the growth between two watcher samples."""
    return max(2 * memory_mb, memory_mb + 1024)


def rlimit_prefix(
    processes: int | None, memory_mb: int | None, file_mb: int, nofile: int, prlimit: str = "prlimit"
) -> list[str]:
    """The argv prefix that sets a step's rlimits inside the sandbox before its command
    (``prlimit`` of util-linux, an essential package of every Debian system): no core files,
    ``RLIMIT_FSIZE`` of ``file_mb`` MiB, ``nofile`` descriptors, and unless None (cgroup mode:
    the cgroup holds memory and processes) ``RLIMIT_AS`` of :func:`address_space_mb` of
    ``memory_mb`` and ``RLIMIT_NPROC`` of ``processes``; soft = hard (the step cannot raise
    them: it has no capabilities in its namespace).

    Set there rather than in a ``preexec_fn`` of the worker: a ``preexec_fn`` makes Python fork
    the whole worker process instead of ``vfork``-ing it and run Python code in the child,
    whose reference-count writes copy-on-write fault its pages: ~10–17 ms per step on this
    machine against ~1 ms (bench/README.md, "per-step costs")."""
    file_bytes = file_mb * 1024 * 1024
    argv = [prlimit, "--core=0:0", f"--fsize={file_bytes}:{file_bytes}", f"--nofile={nofile}:{nofile}"]
    if memory_mb is not None:
        mem = address_space_mb(memory_mb) * 1024 * 1024
        argv.append(f"--as={mem}:{mem}")
    if processes is not None:
        argv.append(f"--nproc={processes}:{processes}")
    return [*argv, "--"]


_PROC_FD: tuple[int, int] | None = None  # (pid that opened it, descriptor)


def _proc_fd() -> int:
    """A descriptor of ``/proc``, opened once per process (again after a fork: a forked pool
    process may have closed its parent's descriptors): the watcher opens its files relative to
    it. In a container whose root is fuse-overlayfs every absolute path costs a FUSE
    revalidation of its first component (``/proc``): 43 µs per ``/proc/<pid>/stat`` read there
    against 13 µs relative to this descriptor (11 µs on the host). Only ``openat`` uses it,
    never a listing (threads would share its offset)."""
    global _PROC_FD
    if _PROC_FD is None or _PROC_FD[0] != os.getpid():
        _PROC_FD = (os.getpid(), os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    return _PROC_FD[1]


def _open(rel: str, flags: int) -> int | None:
    """A descriptor of ``/proc/<rel>``, or None when it is gone (the process ended). Were our
    ``/proc`` descriptor closed under us (EBADF, or ENOTDIR when its number now names a file),
    every read would look like an ended process and the limits would go unenforced without a
    word: it is opened again, once."""
    global _PROC_FD
    for attempt in range(2):
        try:
            return os.open(rel, flags | os.O_CLOEXEC, dir_fd=_proc_fd())
        except OSError as exc:
            if attempt == 0 and exc.errno in (errno.EBADF, errno.ENOTDIR):
                _PROC_FD = None
                continue
            return None
    return None


def _read(rel: str) -> bytes | None:
    """The contents of ``/proc/<rel>``; None when it cannot be read (the process ended)."""
    fd = _open(rel, os.O_RDONLY)
    if fd is None:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _listdir(rel: str) -> list[str] | None:
    """The names in ``/proc/<rel>``; None when it cannot be listed (the process ended)."""
    fd = _open(rel, os.O_RDONLY | os.O_DIRECTORY)
    if fd is None:
        return None
    try:
        return os.listdir(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_stat(rel: str) -> tuple[int, int, int, int] | None:
    """(parent pid, threads, resident pages, CPU ticks) from the ``stat`` file at
    ``/proc/<rel>`` (a process's or one thread's); None when it ended meanwhile. The CPU ticks
    are utime + stime + cutime + cstime: the process's own (all its threads) and that of the
    children it has waited for."""
    stat = _read(rel)
    if stat is None:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
    try:
        return int(fields[1]), int(fields[17]), int(fields[21]), sum(int(f) for f in fields[11:15])
    except (IndexError, ValueError):
        return None


def _live_thread_pages(pid: int | str) -> int:
    """Resident pages of ``pid`` as one of its threads other than the leader reports them (the
    count is of the memory all threads share, so any live one gives it); 0 when none is left."""
    for tid in _listdir(f"{pid}/task") or ():  # none: it ended meanwhile
        if tid != str(pid) and (row := _read_stat(f"{pid}/task/{tid}/stat")) is not None and row[2] > 0:
            return row[2]
    return 0


def _stat(pid: int | str) -> tuple[int, int, int, int] | None:
    """(parent pid, threads, resident pages, CPU ticks) of ``pid`` from ``/proc/<pid>/stat``
    (:func:`_read_stat`); None when it ended meanwhile.

    A leader thread that has exited while others live on (``pthread_exit`` in ``main``) is a
    zombie whose ``stat`` shows 0 resident pages: it no longer holds the memory, its threads do.
    Such a process was invisible to the memory limit (a step could allocate without bound from
    a second thread); its pages are then read from a live thread's ``stat``. Only a process with
    more than one thread and no pages of its own costs that extra read."""
    row = _read_stat(f"{pid}/stat")
    if row is not None and row[2] == 0 and row[1] > 1:
        return row[0], row[1], _live_thread_pages(pid), row[3]
    return row


def _table() -> dict[int, tuple[int, int, int, int]]:
    """pid -> :func:`_stat` of every process this pid namespace shows."""
    table: dict[int, tuple[int, int, int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (row := _stat(name)) is not None:
            table[int(name)] = row
    return table


@functools.lru_cache(maxsize=1)
def _have_children_files() -> bool:
    """Whether the kernel lists a thread's children in ``/proc/<pid>/task/<tid>/children``
    (CONFIG_PROC_CHILDREN: Debian's, Ubuntu's and most distribution kernels)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children(pid: int, threads: int | None = None) -> list[int]:
    """The children of ``pid`` (those of every thread of it). ``threads``: its thread count when
    known (from its ``stat``); a single-threaded process (most of a step's) has one children
    file, read without listing its threads."""
    out: list[int] = []
    tids = [str(pid)] if threads == 1 else _listdir(f"{pid}/task") or []  # none: it ended meanwhile
    for tid in tids:
        text = _read(f"{pid}/task/{tid}/children")
        if text:
            out.extend(int(c) for c in text.split())
    return out


@dataclass
class TreeSample:
    """One look at a process tree below (not including) its root process."""

    tasks: int = 0  # threads of every descendant
    rss_bytes: int = 0  # resident memory of every descendant
    #: CPU seconds of every live descendant and of the children they waited for. A child's time
    #: moves to its parent when it is reaped; a walk that reads the child just before and the
    #: parent just after counts it twice (callers that judge on it look twice).
    cpu_s: float = 0.0


def _descendants(root: int) -> Iterator[tuple[int, tuple[int, int, int, int]]]:
    """(pid, :func:`_stat` row) of each live descendant of ``root``.

    Walks down from ``root`` through the kernel's children lists where it has them: a few reads
    per process of the step, whatever else the pid namespace holds. Otherwise one pass over
    every process of ``/proc`` (whose cost grows with all of them: a worker container whose
    PID 1 reaped nothing showed 392 and spent most of its CPU here)."""
    if _have_children_files():
        children, stat = _children, _stat
    else:
        table = _table()
        index: dict[int, list[int]] = {}
        for pid, (ppid, *_) in table.items():
            index.setdefault(ppid, []).append(pid)
        children, stat = (lambda pid, threads=None: index.get(pid, [])), (lambda pid: table.get(int(pid)))
    todo = children(root)
    # A pid met twice in one walk (reused between two children files read at different moments,
    # or listed by both an exiting parent's and the reaper's file) is counted once.
    seen = {root}
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        row = stat(pid)
        if row is None:  # it ended meanwhile
            continue
        yield pid, row
        todo.extend(children(pid, row[1]))


def sample_tree(root: int) -> TreeSample:
    """Tasks, resident memory and CPU time of the descendants of ``root`` (one walk,
    :func:`_descendants`)."""
    out = TreeSample()
    for _, row in _descendants(root):
        out.tasks += row[1]
        out.rss_bytes += row[2] * _PAGE
        out.cpu_s += row[3] * _TICK_S
    return out


class TreeWatch:
    """Samples a step's tree (``sample``) and remembers which limit it reached: ``oom`` once the
    resident memory passed ``memory_mb`` (the caller then kills the tree), ``pids_exhausted``
    once the tasks reached ``processes`` (the kernel then refuses the next fork)."""

    def __init__(self, root: int, memory_mb: int, processes: int) -> None:
        self.root = root
        self.memory_bytes = memory_mb * 1024 * 1024
        self.processes = processes
        self.oom = False
        self.pids_exhausted = False
        #: More tasks than ``processes``: RLIMIT_NPROC did not hold (it does not bind when the
        #: user namespace's owner is root outside, e.g. root on a cgroup v2 host); the tree is killed.
        self.over_processes = False
        self.peak = TreeSample()
        self.last = TreeSample()

    def sample(self) -> bool:
        """One sample (kept in ``last``); True when the tree must be killed now: memory past
        ``memory_mb``, or more tasks than ``processes`` (the kernel limit did not hold)."""
        now = self.last = sample_tree(self.root)
        self.peak = TreeSample(max(self.peak.tasks, now.tasks), max(self.peak.rss_bytes, now.rss_bytes), now.cpu_s)
        # The tree holds bwrap's own init processes besides the step's tasks: one task of slack.
        if now.tasks >= self.processes:
            self.pids_exhausted = True
        if now.tasks > self.processes:
            self.over_processes = True
        if now.rss_bytes > self.memory_bytes:
            self.oom = True
        return self.oom or self.over_processes


def tree_states(root: int) -> str:
    """The scheduler states (``R``, ``S``, ``D``, ``T``, ``t``, ``Z``...: the letters of
    ``/proc/<pid>/task/<tid>/stat``) of every thread of every descendant of ``root``, one
    letter each; "" when none is left. Read per thread: a process's own line shows only its
    leader's."""
    states: list[str] = []
    for pid, _ in _descendants(root):
        for tid in _listdir(f"{pid}/task") or ():
            stat = _read(f"{pid}/task/{tid}/stat")
            if stat:
                states.append(chr(stat[stat.rfind(b")") + 2]))
    return "".join(states)


def children(pid: int) -> list[int]:
    """The children of ``pid`` (those of every thread of it); [] when it ended."""
    return _children(pid)


def descendants(root: int) -> list[int]:
    """The pids of every live descendant of ``root`` (:func:`_descendants`)."""
    return [pid for pid, _ in _descendants(root)]
