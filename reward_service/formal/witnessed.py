"""The cache of a design's closure: the points its replayed witness covered, and the summary
``reward_service.ceiling`` made of it, per design (files, top, prover and fast-path revisions:
the prover's design key) under ``<cache_dir>/ceiling/``. Written by the closure run
(``reward-service problems --ceiling``, bench/formal_cid012.py ``--witness``), read by the
scoring engine to count a sample's ``undecided`` points."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from reward_service import hdl
from reward_service.formal.model import PointKey
from reward_service.formal.prover import design_key
from reward_service.revisions import ENGINE_REVISION


def _path(cache_dir: Path, design: dict[str, str], top: str | None) -> Path:
    # the prover's key (its HDL files, as the engine proves them) without time limits: a
    # witnessed point is reachable whatever they were; and the engine's revision: the points are
    # what the engine's replays covered
    design = {n: t for n, t in design.items() if hdl.is_hdl_source(n)}
    return cache_dir / "ceiling" / f"{design_key(design, top, (0.0, 0))}-e{ENGINE_REVISION}.json"


def store(
    cache_dir: Path,
    design: dict[str, str],
    top: str | None,
    witnessed: list[PointKey],
    summary: dict[str, Any],
) -> None:
    """Keep a design's closure: the witnessed keys (covered by every replay) and its summary."""
    path = _path(cache_dir, design, top)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a temporary file of its own: two closure runs of one design (CLI, bench, test workers)
    # must not write into each other's file before the atomic replace
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps({"witnessed": [list(k) for k in witnessed], "summary": summary}))
    os.replace(tmp, path)


def load(cache_dir: Path, design: dict[str, str], top: str | None) -> tuple[set[PointKey], dict[str, Any]] | None:
    """(witnessed keys, summary) of a kept closure, None when none was run for the design
    (or the file cannot be read: the closure is run again)."""
    path = _path(cache_dir, design, top)
    try:
        data = json.loads(path.read_text())
        return {tuple(k) for k in data["witnessed"]}, data["summary"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
