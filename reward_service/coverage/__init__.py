"""Coverage measurement: parsing simulator outputs into coverage points, and summarising them."""

from reward_service.coverage.functional import parse_functional_yaml
from reward_service.coverage.points import CoveragePoint, summarise
from reward_service.coverage.verilator_dat import parse_coverage_dat

__all__ = ["CoveragePoint", "summarise", "parse_coverage_dat", "parse_functional_yaml"]
