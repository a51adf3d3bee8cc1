"""Which engine scores a request: the one rule for the request's ``engine`` field, a problem's
default, and where the fast path falls back to (docs/fastcov.md).

A bottom-layer module: it imports nothing of the service, so the wire models (a problem's
``request()``), the scoring pipeline and the fast path all apply the same rule, and a trainer
node that installs only the client loads it without the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FALLBACK", "EngineChoice", "EngineName", "Path", "choose_engine"]

#: A request's ``engine`` field.
EngineName = Literal["verilator", "fast", "auto"]
#: What scores a request first: a simulator as given, or the fast path (``fast``, or ``auto``'s
#: per-design decision) with its fallback.
Path = Literal["verilator", "icarus", "fast", "auto"]

#: The simulator a sample goes to when the fast path cannot score it: the reference.
FALLBACK = "verilator"


@dataclass(frozen=True)
class EngineChoice:
    """``engine``: the request's engine field; ``path``: what scores the request first."""

    engine: EngineName | None
    path: Path

    @property
    def fast_path(self) -> bool:
        """The fast path scores it (``fast``, ``auto``), falling back to :data:`FALLBACK`."""
        return self.path in ("fast", "auto")

    @property
    def on_icarus(self) -> bool:
        """The run is on Icarus (plain, or the fast path's ``fast``): the cocotb 1.9 runtime runs
        there only. ``auto`` may go to Verilator, so it is not."""
        return self.path in ("icarus", "fast")


def choose_engine(
    simulator: str, engine: EngineName | None = None, *, given: bool = True, problem_engine: EngineName | None = None
) -> EngineChoice:
    """The engine choice of a request on ``simulator`` ("verilator" or "icarus"; a
    :class:`~reward_service.models.Simulator` is a str).

    ``engine``: the engine the request names (``None``: ``simulator`` decides). ``given=False``:
    the request is built from a problem and names none; the problem's ``problem_engine`` then
    applies, but only on Verilator (a problem's engine replaces the Verilator path only: a
    request for Icarus gets Icarus).
    """
    simulator = str(simulator)
    if not given:
        engine = problem_engine if simulator == "verilator" else None
    path: Path = "icarus" if simulator == "icarus" else "verilator"
    return EngineChoice(engine=engine, path=engine if engine is not None else path)
