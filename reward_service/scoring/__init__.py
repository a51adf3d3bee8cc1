"""Scoring: one request through prepare -> run -> measure -> classify -> finish.

Modules, in the order a request meets them:

- :mod:`.types`: :class:`Prepared`, :class:`Scored` (a result and its points),
  :class:`InvalidInput`, and :data:`Simulate`, the run callable the fast path is given;
- :mod:`.prepare`: problem resolution, completion extraction, input checks, testbench top;
- :mod:`.run`: the work dir, the simulator backend's build and run in the sandbox;
- :mod:`.measure`: coverage points, per-metric summary, proved-unreachable points, targets;
- :mod:`.classify`: status and message of a run;
- :mod:`.finish`: reward, tool versions, total time, naming of a completion's scored block;
- :mod:`.engine`: :class:`Engine`, which strings them together with the result cache and
  hands ``engine=fast``/``auto`` to the fast path plug-in it is given (:class:`~.types.Plugins`;
  :mod:`reward_service.engine` is the engine with the fast path and the prover plugged in).

The names below are imported on first use, so importing a light submodule (``choice``) does
not load the engine and its simulators. Which engine scores a request is
:mod:`reward_service.engine_choice` (the wire models use it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reward_service.scoring.engine import Engine
    from reward_service.scoring.types import InvalidInput, Plugins, Prepared, Scored, Simulate

__all__ = ["Engine", "InvalidInput", "Plugins", "Prepared", "Scored", "Simulate"]

_HOMES = {
    "Engine": "engine",
    "Plugins": "types",
    "InvalidInput": "types",
    "Prepared": "types",
    "Scored": "types",
    "Simulate": "types",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
