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
    """A pair of memory + pids cgroups named after one run."""

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

    @staticmethod
    def available() -> bool:
        """Whether the cgroup v1 memory and pids hierarchies are writable here."""
        return all(os.access(ROOT / c, os.W_OK) for c in ("memory", "pids"))

    def enter(self) -> None:
        """Move the calling process in (called in the child before exec)."""
        pid = str(os.getpid())
        (self.memory / "cgroup.procs").write_text(pid)
        (self.pids / "cgroup.procs").write_text(pid)

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
        """SIGKILL every process still in the group until it is empty (bounded)."""
        for _ in range(50):
            pids = [int(p) for p in (self.pids / "cgroup.procs").read_text().split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove both groups (retrying briefly while they drain)."""
        self.kill_all()
        for path in (self.memory, self.pids):
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
