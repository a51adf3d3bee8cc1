"""Helpers shared by tests: processes left behind, files under a directory."""

from __future__ import annotations

import os
from pathlib import Path


def sandbox_processes(marker: Path) -> list[str]:
    """Processes that belong to sandboxes whose work dirs live under ``marker``: every process
    inside has it in its mount table (and a Docker sandbox's command line may name it; bwrap's
    options come through a memfd). Scoped this way so parallel test workers do not see each
    other's sandboxes."""
    found = []
    needle = str(marker)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            mounts = Path(f"/proc/{pid}/mountinfo").read_text(errors="replace")
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if needle in cmdline or needle in mounts:
            found.append(f"{pid}:{name}")
    return found


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}
