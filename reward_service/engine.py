"""The composition root of scoring: :class:`Engine` is the scoring pipeline's engine
(:mod:`reward_service.scoring`) with its two plug-ins given to it, the fast path
(:mod:`reward_service.fastcov.routing`) and the prover (:mod:`reward_service.formal.reachable`).
The scoring layer never imports either; every place that makes an engine (CLI, API, workers,
rescoring, tests, benches) makes this one.

Both plug-ins load on first use: the fast path imports pyslang (~0.3 s), the prover z3/yosys
glue; a process that never scores ``engine=fast``/``auto`` or asks for proved points never
pays for them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reward_service.coverage.points import CoveragePoint
from reward_service.models import CoverageReport, ScoreRequest, ScoreResult, UncoveredPoint
from reward_service.sandbox import Sandbox
from reward_service.scoring import engine as scoring_engine
from reward_service.scoring.measure import COVERGROUPS_UNMEASURED
from reward_service.scoring.types import InvalidInput, Plugins, Prepared, Reachable, Scored, Simulate
from reward_service.settings import Settings

__all__ = ["COVERGROUPS_UNMEASURED", "PLUGINS", "Engine", "InvalidInput", "Prepared", "Scored", "score"]


def fast_path(prepared: Prepared, timings: dict[str, float], run: Simulate, settings: Settings) -> Scored:
    """The fast path plug-in (:data:`~reward_service.scoring.types.FastPath`):
    :func:`reward_service.fastcov.routing.simulate`, imported on the first fast sample of the
    process (its import time goes to ``timings["fast_import"]``)."""
    first = "reward_service.fastcov.routing" not in sys.modules
    t0 = time.perf_counter()
    from reward_service.fastcov import routing

    if first:  # the first fast sample of a process imports pyslang (~0.3 s)
        timings["fast_import"] = (time.perf_counter() - t0) * 1000
    return routing.simulate(prepared, timings, run, settings)


def prover(
    prepared: Prepared,
    points: list[CoveragePoint],
    report: CoverageReport,
    unavailable: dict[str, str],
    uncovered: list[UncoveredPoint],
    sandbox: Sandbox,
    verdict_dir: Path,
) -> Reachable:
    """The prover plug-in (:data:`~reward_service.scoring.types.Prover`):
    :func:`reward_service.formal.reachable.reachable`, imported on the first request that asks
    for proved-unreachable points."""
    from reward_service.formal.reachable import reachable

    return reachable(prepared, points, report, unavailable, uncovered, sandbox, verdict_dir)


#: The plug-ins every engine of the service is given.
PLUGINS = Plugins(fast_path=fast_path, prover=prover)


class Engine(scoring_engine.Engine):
    """:class:`reward_service.scoring.engine.Engine` with :data:`PLUGINS` (``plugins`` None),
    same arguments."""

    def __init__(
        self,
        settings: Settings | None = None,
        sandbox: Sandbox | None = None,
        problems: Mapping[str, Any] | None = None,
        reraise: tuple[type[BaseException], ...] = (),
        plugins: Plugins | None = None,
    ) -> None:
        super().__init__(settings, sandbox, problems, reraise, plugins or PLUGINS)


_DEFAULT: Engine | None = None


def score(request: ScoreRequest | Mapping[str, Any], problems: Mapping[str, Any] | None = None) -> ScoreResult:
    """Score one request with a process-wide default :class:`Engine` (``problems`` are added to
    its problems)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Engine()
    if problems:
        _DEFAULT.problems.update(problems)
    return _DEFAULT.score(request)
