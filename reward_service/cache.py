"""Result cache: identical requests (same design, stimulus, settings and tool versions) give
identical results, so a repeat is answered from disk. Keys are SHA-256 content hashes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import diskcache

from reward_service.models import Design, ScoreRequest, ScoreResult
from reward_service.revisions import results_revision


def content_hash(obj: object) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def request_key(request: ScoreRequest, design: Design, stimulus, tool_versions: dict[str, str]) -> str:
    """The key of everything that determines a result: resolved design and stimulus files,
    simulator, coverage spec, reward spec, limits, seed, tool versions, engine revision."""
    return content_hash(
        {
            "rev": results_revision(),
            "design": design.model_dump(mode="json"),
            "stimulus": stimulus.model_dump(mode="json"),
            # `report` only when it asks for points: keys of requests without it stay as before
            "request": request.model_dump(
                mode="json",
                exclude={"design", "stimulus", "problem_id"} | (set() if request.report.points else {"report"}),
            ),
            "versions": tool_versions,
        }
    )


class ResultCache:
    """A disk cache of :class:`ScoreResult` s (diskcache, safe across processes)."""

    def __init__(self, directory: Path, size_limit: int = 2 << 30) -> None:
        self._cache = diskcache.Cache(str(directory), size_limit=size_limit)

    def get(self, key: str) -> ScoreResult | None:
        """The cached result for ``key`` (a :func:`request_key`), or None."""
        raw = self._cache.get(key)
        return ScoreResult.model_validate_json(raw) if raw is not None else None

    def put(self, key: str, result: ScoreResult) -> None:
        """Store ``result`` under ``key`` (evicted least-recently-stored past the size limit)."""
        self._cache.set(key, result.model_dump_json())
