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
        self.memory.mkdir(parents=True)
        self.pids.mkdir(parents=True)
        limit = str(memory_mb * 1024 * 1024)
        (self.memory / "memory.limit_in_bytes").write_text(limit)
        memsw = self.memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            try:
                memsw.write_text(limit)
            except OSError:
                pass  # swap accounting off: memory.limit_in_bytes alone holds (no swap here)
        (self.pids / "pids.max").write_text(str(processes))
        self.cpuacct: Path | None = None
        if os.access(ROOT / "cpuacct", os.W_OK):
            self.cpuacct = ROOT / "cpuacct" / PARENT / name
            self.cpuacct.mkdir(parents=True)

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
            return int((self.cpuacct / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def charged(self) -> bool:
        """Whether any process was ever charged memory here, i.e. the step entered the group
        (it cannot run without touching a page)."""
        try:
            return int((self.memory / "memory.max_usage_in_bytes").read_text()) > 0
        except (OSError, ValueError):
            return False

    def oom(self) -> bool:
        """Whether the memory limit was hit (an OOM kill or a failed charge)."""
        try:
            control = (self.memory / "memory.oom_control").read_text()
            killed = any(row.startswith("oom_kill ") and row.split()[1] != "0" for row in control.splitlines())
            return killed or int((self.memory / "memory.failcnt").read_text()) > 0
        except OSError:
            return False

    def pids_exhausted(self) -> bool:
        """Whether a fork/clone failed on ``pids.max``."""
        try:
            return int((self.pids / "pids.events").read_text().split()[-1]) > 0
        except (OSError, ValueError, IndexError):
            return False

    def kill_all(self) -> None:
        """SIGKILL every process still in the group until it is empty (bounded: ~1 s). Polled
        from 1 ms up: after a normal end the group usually holds only the sandbox's init on its
        way out, gone within a millisecond or two (a fixed 20 ms sleep cost ~9 ms per step)."""
        pause = 0.001
        for _ in range(60):
            pids = [int(p) for p in (self.pids / "cgroup.procs").read_text().split()]
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
