"""The JSON of finished jobs' results, kept in the API process so that a long poll of a big batch
reads and serialises each result once instead of once per poll.

A finished result does not change (the client keeps the first one it sees), with one exception:
a ``sandbox_error`` can be replaced by a re-run of the job, so those are never kept here. Bounded by
the total length of the kept texts; the least recently used go first."""

from __future__ import annotations

import collections
import threading


class FinishedResults:
    """``job_id -> result JSON`` (``ScoreResult.model_dump_json()``), at most ``max_chars`` in all.

    Safe to use from many threads. ``max_chars=0`` keeps nothing."""

    def __init__(self, max_chars: int = 64 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._texts: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, job_id: str) -> str | None:
        """The kept JSON of ``job_id``'s result, or None."""
        with self._lock:
            text = self._texts.get(job_id)
            if text is not None:
                self._texts.move_to_end(job_id)
            return text

    def put(self, job_id: str, text: str) -> None:
        """Keep ``text`` as ``job_id``'s result JSON (a text longer than the bound is not kept)."""
        if len(text) > self.max_chars:
            return
        with self._lock:
            old = self._texts.pop(job_id, None)
            if old is not None:
                self._chars -= len(old)
            self._texts[job_id] = text
            self._chars += len(text)
            while self._chars > self.max_chars:
                _, dropped = self._texts.popitem(last=False)
                self._chars -= len(dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._texts)
