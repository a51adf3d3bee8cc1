"""Bounded capture of a command's output: keeps the head and the tail, counts what was dropped."""

from __future__ import annotations

import collections


class BoundedOutput:
    """Accumulates bytes, keeping the first ``limit/2`` and the last ``limit/2`` bytes."""

    def __init__(self, limit_bytes: int) -> None:
        self.head_limit = limit_bytes // 2
        self.tail_limit = limit_bytes - self.head_limit
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_limit:
            self.tail_size -= len(self.tail.popleft())

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self.head) - min(self.tail_size, self.tail_limit))

    def text(self) -> str:
        tail = b"".join(self.tail)[-self.tail_limit :] if self.tail else b""
        middle = f"\n... [{self.dropped} bytes of output dropped] ...\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + tail).decode("utf-8", errors="replace")
