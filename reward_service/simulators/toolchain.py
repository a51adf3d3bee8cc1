"""Re-export of :mod:`reward_service.sandbox.toolchain` (the one toolchain module) for importers
that have not moved to it yet; removed once none is left."""

from reward_service.sandbox.toolchain import ToolMissing, versions

__all__ = ["ToolMissing", "versions"]
