"""Compatibility shim: the engine lives in :mod:`reward_service.scoring`; existing imports of
``reward_service.engine`` keep working."""

from reward_service.scoring.engine import Engine, score
from reward_service.scoring.measure import COVERGROUPS_UNMEASURED
from reward_service.scoring.types import InvalidInput, Prepared, Scored

__all__ = ["COVERGROUPS_UNMEASURED", "Engine", "InvalidInput", "Prepared", "Scored", "score"]
