"""Functional coverage from cocotb-coverage's YAML export (``coverage_db.export_to_yaml``).

Each bin of a coverpoint or cross is one point of metric ``functional``, covered when its hits
reach the item's ``at_least`` (cocotb-coverage's own rule, see its ``CoverPoint`` docs).
Coverage groups (``CoverItem``) hold no bins of their own and are skipped.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from reward_service.coverage.points import CoveragePoint
from reward_service.safe_io import read_output_text


def parse_functional_yaml(path: Path) -> list[CoveragePoint]:
    """Read one cocotb-coverage YAML export into points (``file`` is the export's name).

    Raises ``ValueError`` on malformed YAML or an unexpected shape (``yaml.YAMLError`` is
    translated), :class:`~reward_service.safe_io.UnsafeOutput` on a link or oversized file.
    """
    try:
        data = yaml.safe_load(read_output_text(Path(path), max_bytes=64 << 20)) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{Path(path).name}: malformed YAML") from exc
    except RecursionError:  # PyYAML composes nested collections recursively: "[[[[..." bombs
        raise ValueError(f"{Path(path).name}: YAML nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of coverage items")
    points: list[CoveragePoint] = []
    for name, item in data.items():
        if not isinstance(item, dict) or "bins:_hits" not in item:
            continue
        bins = item.get("bins:_hits") or {}
        try:
            at_least = int(item.get("at_least") or 1)
            counts = [(bin_name, int(hits or 0)) for bin_name, hits in dict(bins).items()]
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(.inf)
            raise ValueError(f"{Path(path).name}: coverage item {str(name)[:80]!r} has a bad shape") from exc
        points.extend(
            CoveragePoint(
                metric="functional",
                file=Path(path).name,
                line=0,
                detail=f"{name} bin {bin_name}",
                hier=str(name),
                count=hits,
                at_least=at_least,
            )
            for bin_name, hits in counts
        )
    return points
