"""cgroup v1 memory and pids limits for one sandboxed run, where the hierarchy is writable.

The kernel's process-count rlimit does not bind root, and RLIMIT_AS counts address space rather
than memory; cgroups give real limits. Where cgroups are not writable, callers fall back to
rlimits (see :mod:`reward_service.sandbox.bwrap`).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "reward_service"


class CgroupV1:
    """A pair of memory + pids cgroups named after one run, and a ``cpuacct`` group where that
    hierarchy is writable (the run's CPU time)."""

    def __init__(self, memory_mb: int, processes: int) -> None:
        name = uuid.uuid4().hex[:16]
        self.memory = ROOT / "memory" / PARENT / name
        self.pids = ROOT / "pids" / PARENT / name
        _mkdir(self.memory)
        _mkdir(self.pids)
        limit = str(memory_mb * 1024 * 1024)
        _write(self.memory / "memory.limit_in_bytes", limit)
        try:
            _write(self.memory / "memory.memsw.limit_in_bytes", limit)
        except OSError:
            pass  # no such file, or swap accounting off: memory.limit_in_bytes alone holds (no swap here)
        _write(self.pids / "pids.max", str(processes))
        self.cpuacct: Path | None = None
        #: ``cpuacct.usage`` kept open: read several times a step (a look every
        #: ``proctree.INTERVAL_S``), a ``pread`` costs a twentieth of an open and read
        self._usage_fd: int | None = None
        if os.access(ROOT / "cpuacct", os.W_OK):
            self.cpuacct = ROOT / "cpuacct" / PARENT / name
            _mkdir(self.cpuacct)

    @staticmethod
    def available() -> bool:
        """Whether the cgroup v1 memory and pids hierarchies are writable here."""
        return all(os.access(ROOT / c, os.W_OK) for c in ("memory", "pids"))

    def procs_files(self) -> tuple[str, ...]:
        """The ``cgroup.procs`` files a process writes its pid to, to move in: pids first (the
        step's shell enters each before it execs the sandbox, see ``bwrap._ENTER_CGROUP``)."""
        cpu = () if self.cpuacct is None else (str(self.cpuacct / "cgroup.procs"),)
        return str(self.pids / "cgroup.procs"), str(self.memory / "cgroup.procs"), *cpu

    def cpu_s(self) -> float | None:
        """CPU seconds used by every process that was in the group (``cpuacct.usage``, exited
        ones included); None without a ``cpuacct`` group."""
        if self.cpuacct is None:
            return None
        try:
            if self._usage_fd is None:
                self._usage_fd = os.open(self.cpuacct / "cpuacct.usage", os.O_RDONLY | os.O_CLOEXEC)
            return int(os.pread(self._usage_fd, 64, 0)) / 1e9
        except (OSError, ValueError):
            return None

    def charged(self) -> bool:
        """Whether any process was ever charged memory here, i.e. the step entered the group
        (it cannot run without touching a page)."""
        try:
            return int(_read(self.memory / "memory.max_usage_in_bytes")) > 0
        except (OSError, ValueError):
            return False

    def oom(self) -> bool:
        """Whether the memory limit was hit (an OOM kill or a failed charge)."""
        try:
            control = _read(self.memory / "memory.oom_control")
            killed = any(row.startswith("oom_kill ") and row.split()[1] != "0" for row in control.splitlines())
            return killed or int(_read(self.memory / "memory.failcnt")) > 0
        except OSError:
            return False

    def pids_exhausted(self) -> bool:
        """Whether a fork/clone failed on ``pids.max``."""
        try:
            return int(_read(self.pids / "pids.events").split()[-1]) > 0
        except (OSError, ValueError, IndexError):
            return False

    def kill_all(self) -> None:
        """SIGKILL every process still in the group until it is empty (bounded: ~1 s). Polled
        from 1 ms up: after a normal end the group usually holds only the sandbox's init on its
        way out, gone within a millisecond or two (a fixed 20 ms sleep cost ~9 ms per step)."""
        pause = 0.001
        for _ in range(60):
            pids = [int(p) for p in _read(self.pids / "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(0.02, pause * 2)

    def remove(self) -> None:
        """Kill what is left and remove both groups (retrying briefly while they drain)."""
        if self._usage_fd is not None:
            os.close(self._usage_fd)
            self._usage_fd = None
        self.kill_all()
        for path in (self.memory, self.pids, *([self.cpuacct] if self.cpuacct else [])):
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


# Plain system calls for the few small control files of a step's groups: pathlib's
# read_text/write_text/mkdir(parents=True) cost several times as much (an io stack, a codec),
# and a step touches about a dozen of them.
def _mkdir(path: Path) -> None:
    try:
        os.mkdir(path)
    except FileNotFoundError:  # the parent group, once per hierarchy
        os.makedirs(path)


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)
