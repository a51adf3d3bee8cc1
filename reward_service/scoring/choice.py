"""Which engine scores a request, for the scoring layer: the pure rule (request, problem
default, the fast path's fallback) from :mod:`reward_service.engine_choice`, and the CVDP
default, which reads the settings.
"""

from __future__ import annotations

from reward_service.engine_choice import FALLBACK, EngineChoice, EngineName, Path, choose_engine

__all__ = ["FALLBACK", "EngineChoice", "EngineName", "Path", "choose_engine", "cvdp_engine"]


def cvdp_engine() -> EngineName | None:
    """The engine of loaded CVDP problems: ``settings.cvdp_engine`` (default ``auto``: the fast
    path for designs whose self-check agrees with Verilator)."""
    from reward_service.settings import get_settings

    return get_settings().cvdp_engine
