"""The two JSONL files of a rescoring run: the completions to score and the results written.

Completions (``C.jsonl``): one sample a line, ``{"problem_id": str, "sample_id": str | int,
"completion": str}`` — the model's raw text (for agentic CVDP rows: the testbench file the row's
``patch`` names, bare or in a code block). A repeated ``(problem_id, sample_id)`` is a duplicate:
the first line is scored, the others are reported and ignored.

Results (``R.jsonl``): one line per scored sample (:func:`result_record`), appended and flushed
as each sample finishes, so an interrupted run keeps everything finished. Reading it back
(:meth:`ResultStore.load`) keeps the last line of each sample (a ``sandbox_error`` line is
superseded by the retry's line), and repairs a last line torn by a kill (no final newline).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import filelock

from reward_service.models import ScoreResult, Status

__all__ = ["Sample", "CompletionSet", "read_completions", "ResultStore", "result_record", "is_final", "SampleKey"]

#: ``(problem_id, str(sample_id))``: sample ids 3 and "3" name the same sample.
SampleKey = tuple[str, str]

_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class Sample:
    """One completion to score; ``line`` is its 1-based line in the completions file."""

    problem_id: str
    sample_id: str | int
    completion: str
    line: int

    @property
    def key(self) -> SampleKey:
        return (self.problem_id, str(self.sample_id))

    @property
    def digest(self) -> str:
        """SHA-256 (hex, first 16 digits) of the completion text: ties a result to its text."""
        return hashlib.sha256(self.completion.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class CompletionSet:
    """The unique samples of a completions file, in file order, and the duplicate lines dropped
    (``"<file>:<line>: ..."`` messages)."""

    samples: list[Sample] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


def read_completions(path: str | os.PathLike[str], problems: Mapping[str, Any]) -> CompletionSet:
    """Read a completions JSONL file; every ``problem_id`` must be in ``problems``.

    Raises ``ValueError("<file>:<line>: ...")`` for a line that is not a JSON object with a
    string ``problem_id``, a string or integer ``sample_id`` and a string ``completion``, and
    one ``ValueError`` naming the unknown problem ids (nothing is scored then); ``OSError``
    when the file cannot be read.
    """
    path = Path(path)
    out = CompletionSet()
    seen: dict[SampleKey, Sample] = {}
    unknown: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{where}: not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
            pid, sid, completion = row.get("problem_id"), row.get("sample_id"), row.get("completion")
            if not isinstance(pid, str) or not pid:
                raise ValueError(f"{where}: `problem_id` must be a non-empty string")
            if isinstance(sid, bool) or not isinstance(sid, (str, int)) or sid == "":
                raise ValueError(f"{where}: `sample_id` must be a string or an integer")
            if not isinstance(completion, str):
                raise ValueError(f"{where}: `completion` must be a string (the model's raw text)")
            if pid not in problems:
                unknown.setdefault(pid, lineno)
                continue
            sample = Sample(pid, sid, completion, lineno)
            first = seen.get(sample.key)
            if first is not None:
                out.duplicates.append(
                    f"{where}: sample {sid!r} of {pid} repeats line {first.line}"
                    f"{'' if first.completion == completion else ' with a different completion'} (ignored)"
                )
                continue
            seen[sample.key] = sample
            out.samples.append(sample)
    if unknown:
        listed = ", ".join(f"{pid!r} (line {line})" for pid, line in list(unknown.items())[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValueError(f"{path}: {len(unknown)} problem id(s) are not in the problems file: {listed}{more}")
    return out


def is_final(record: Mapping[str, Any]) -> bool:
    """A result that stands: anything but an infrastructure failure (``sandbox_error``),
    which is re-tried by the next run."""
    return record.get("status") != Status.sandbox_error.value


def problem_digest(problem: Any) -> str:
    """16 hex digits of SHA-256 over a problem's JSON (design, targets, engine, limits, ...):
    a result written for another version of the problem is not reused on resume."""
    text = problem.model_dump_json() if hasattr(problem, "model_dump_json") else json.dumps(problem, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def result_record(sample: Sample, result: ScoreResult, problem_sha256: str | None = None) -> dict[str, Any]:
    """The ``R.jsonl`` line of one scored sample.

    Keys: ``problem_id``, ``sample_id``, ``status``, ``passed``, ``reward`` (None only for
    ``sandbox_error``), ``coverage`` (``overall`` and each measured metric's ratio in [0, 1],
    None when the metric has no points or is unavailable), ``points`` (metric -> ``[covered,
    total]``), ``overall_reachable`` (overall without proved-unreachable points, None when not
    proved), ``unreachable`` (metric -> points proved unreachable, the metrics with any), ``undecided``
    (metric -> points neither proved, covered nor witnessed, where a proof applied), ``message`` (at most 500 characters), ``engine``, ``versions``,
    ``completion_sha256`` (:attr:`Sample.digest`) and ``problem_sha256`` (:func:`problem_digest`).
    """
    metrics = result.coverage.metrics
    return {
        "problem_id": sample.problem_id,
        "sample_id": sample.sample_id,
        "status": result.status.value,
        "passed": result.passed,
        "reward": result.reward,
        "coverage": {
            "overall": result.coverage.overall,
            **{name: (m.ratio if m.available else None) for name, m in metrics.items()},
        },
        "points": {name: [m.covered, m.total] for name, m in metrics.items() if m.available},
        "overall_reachable": result.coverage.overall_reachable,  # proved points excluded (docs/formal.md)
        "unreachable": {name: m.unreachable for name, m in metrics.items() if m.unreachable},
        "undecided": {name: m.undecided for name, m in metrics.items() if m.undecided is not None},
        "message": result.message[:_MESSAGE_CHARS],
        "engine": result.engine,
        "versions": result.versions,
        "completion_sha256": sample.digest,
        "problem_sha256": problem_sha256,
    }


class ResultStore:
    """Append-only ``R.jsonl``: :meth:`load` what an earlier run wrote, :meth:`append` new
    records (one ``write`` + flush per line, so a kill loses at most the line being written)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fh: TextIO | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``<out>.lock`` (an OS file lock, released if the process dies) for the block:
        two runs appending to one file would each score what the other is scoring. Raises
        ``ValueError`` at once when another process holds it, ``OSError`` when the lock file
        cannot be made (a read-only directory). The lock file stays (removing it would race
        with a run that is opening it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(f"{self.path}.lock")
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            raise ValueError(
                f"another run is writing {self.path} (it holds {lock.lock_file}); wait for it or use another --out"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def load(self) -> dict[SampleKey, dict[str, Any]]:
        """The last record of each sample. A last line without its newline (torn by a kill) is
        cut off the file if it is not valid JSON, completed with the newline if it is.

        Raises ``ValueError("<file>:<line>: ...")`` for any other line that is not a result
        record (the file is then left untouched).
        """
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        records: dict[SampleKey, dict[str, Any]] = {}
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        for lineno, raw in enumerate(lines, start=1):
            if raw.strip():
                record = self._parse(raw, lineno)
                records[(record["problem_id"], str(record["sample_id"]))] = record
        if tail.strip():
            try:
                record = self._parse(tail, len(lines) + 1)
            except ValueError:
                with self.path.open("r+b") as fh:  # torn by a kill mid-write: drop it
                    fh.truncate(len(data) - len(tail))
            else:
                records[(record["problem_id"], str(record["sample_id"]))] = record
                with self.path.open("ab") as fh:
                    fh.write(b"\n")
        return records

    def _parse(self, raw: bytes, lineno: int) -> dict[str, Any]:
        where = f"{self.path}:{lineno}"
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise ValueError(
                f"{where}: not a JSON line ({exc}); this file was not written by "
                "`rescore` or was edited: fix the line or use another --out"
            ) from None
        if not isinstance(record, dict) or not {"problem_id", "sample_id", "status"} <= record.keys():
            raise ValueError(f"{where}: not a result record (needs problem_id, sample_id, status)")
        return record

    def open(self) -> None:
        """Open the file for appending (creating it and its directory); raises ``OSError``.
        Called by :meth:`append`; call it first to fail before any work is done."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as a line and flush it to the OS."""
        self.open()
        assert self._fh is not None
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
