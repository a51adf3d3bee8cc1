"""Reading files that a sandboxed simulation wrote (untrusted): regular files only, no symlinks
followed, bounded size. A sample could otherwise point ``coverage.dat`` at a host file (its
content would leak into the result) or at ``/dev/zero`` (the host would hang)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reward_service.errors import RewardServiceError

#: Largest simulator output file the host reads (coverage.dat of a big design is a few MB).
MAX_OUTPUT_BYTES = 256 << 20


class UnsafeOutput(RewardServiceError, ValueError):
    """An output file is a symlink, not a regular file, or larger than allowed."""


def read_output(path: Path, max_bytes: int = MAX_OUTPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (not following a symlink in its last component).

    Raises :class:`UnsafeOutput` for a link, device, FIFO or a file over ``max_bytes``, and
    ``FileNotFoundError`` when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the last component is a symlink
            raise UnsafeOutput(f"{path.name} is a symbolic link; refused") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeOutput(f"{path.name} is not a regular file; refused")
        if info.st_size > max_bytes:
            raise UnsafeOutput(f"{path.name} is {info.st_size} bytes, over the {max_bytes} byte limit")
        # reads sized by the file, not by the limit: a read of max_bytes + 1 allocates that much
        # first (a 256 MiB limit for a 20 kB flag file), ~10x the cost of the read itself
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            want = min(max(info.st_size + 1 - size, 1 << 16), max_bytes + 1 - size)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UnsafeOutput(f"{path.name} grew over the {max_bytes} byte limit while read")
    return data


def read_output_head_tail(path: Path, keep_bytes: int, max_bytes: int = MAX_OUTPUT_BYTES) -> str:
    """The first and last ``keep_bytes / 2`` bytes of the regular file ``path`` as text, with a
    note of how much was dropped between them (a log may be long; its ends say the most).

    Raises :class:`UnsafeOutput` for a link, device or FIFO, or a file over ``max_bytes``."""
    from reward_service.sandbox.output import BoundedOutput

    data = read_output(path, max_bytes)
    out = BoundedOutput(keep_bytes)
    out.feed(data)
    return out.text()


def read_output_text(path: Path, max_bytes: int = MAX_OUTPUT_BYTES) -> str:
    """:func:`read_output` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_output(path, max_bytes).decode("utf-8", errors="replace")


def output_file(path: Path) -> Path | None:
    """``path`` if it is a regular file and not a symlink, else None (for existence checks)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISREG(info.st_mode) else None
