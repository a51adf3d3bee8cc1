"""Functional coverage from cocotb-coverage's YAML export (``coverage_db.export_to_yaml``).

Each bin of a coverpoint or cross is one point of metric ``functional``, covered when its hits
reach the item's ``at_least`` (cocotb-coverage's own rule, see its ``CoverPoint`` docs).
Coverage groups (``CoverItem``) hold no bins of their own and are skipped.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from reward_service.coverage.points import CoveragePoint


def parse_functional_yaml(path: Path) -> list[CoveragePoint]:
    """Read one cocotb-coverage YAML export into points (``file`` is the export's name).

    Raises ``yaml.YAMLError`` on malformed YAML and ``ValueError`` on an unexpected shape.
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8", errors="replace")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of coverage items")
    points: list[CoveragePoint] = []
    for name, item in data.items():
        if not isinstance(item, dict) or "bins:_hits" not in item:
            continue
        at_least = int(item.get("at_least") or 1)
        for bin_name, hits in (item.get("bins:_hits") or {}).items():
            points.append(CoveragePoint(
                metric="functional", file=Path(path).name, line=0,
                detail=f"{name} bin {bin_name}", hier=str(name), count=int(hits or 0),
                at_least=at_least,
            ))
    return points
