"""The types the scoring stages and the fast path share: a prepared request, a scored run with
its coverage points, the run callable the fast path is given (:data:`Simulate`), and the
plug-ins the engine is given (:class:`Plugins`: the fast path, the prover).

No stage lives here, so :mod:`reward_service.fastcov` and :mod:`reward_service.formal` can
import these without importing the engine that drives them; the engine never imports them
(the composition root, :mod:`reward_service.engine`, plugs them in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reward_service.completion import Extraction
from reward_service.coverage.points import CoveragePoint
from reward_service.errors import RewardServiceError
from reward_service.models import (
    CocotbStimulus,
    CoverageReport,
    Design,
    ScoreRequest,
    ScoreResult,
    SvTestbench,
    UncoveredPoint,
)
from reward_service.sandbox import Sandbox
from reward_service.settings import Settings
from reward_service.simulators.base import SimulatorBackend


class InvalidInput(RewardServiceError, ValueError):
    """The request cannot be simulated as given (reported as ``invalid_input``).
    ``stimulus_block``: the part of a completion that was checked, when there was one."""

    stimulus_block: str | None = None


@dataclass
class Prepared:
    """A request resolved to concrete files: design, stimulus, and what to measure."""

    request: ScoreRequest
    design: Design
    stimulus: SvTestbench | CocotbStimulus
    #: where a completion's stimulus came from (None for stimulus given as files)
    extraction: Extraction | None = None
    #: what preparing decided that the result's message says (e.g. a cocotb 1.x test moved
    #: to the fast path, where the cocotb 1.9 runtime runs)
    notes: list[str] = field(default_factory=list)


@dataclass
class Scored:
    """A result and the DUT-instance coverage points behind its ``coverage`` (merged as
    Verilator merges instances; empty when nothing was measured). Shadow checks, the
    ``auto`` self-check, reports and agreement tests diff or read the points; the wire model
    never carries them."""

    result: ScoreResult
    points: list[CoveragePoint] = field(default_factory=list)
    #: False when the result rests on something of the moment rather than on its inputs (an
    #: unreachability proof that could not run): the engine does not keep it in its result cache.
    cacheable: bool = True
    #: the points proved unreachable that apply to this sample, (file, line, metric, detail) ->
    #: how each was proved (:data:`~reward_service.formal.prover.PROOF_KINDS`); reports mark them
    unreachable: dict[tuple[str, int, str, str], str] = field(default_factory=dict)


#: Simulate a prepared request with a simulator (None: the request's own) into a
#: :class:`Scored`; the dict collects stage timings in milliseconds. The engine gives the fast
#: path this callable (bound to its sandbox and settings); it never raises for the sample's faults.
Simulate = Callable[[Prepared, dict[str, float], SimulatorBackend | None], Scored]

#: The fast path as the engine is given it: score ``prepared`` on it, or on its fallback
#: simulator with the reason in the result's ``fallback`` (``engine=fast``/``auto``;
#: docs/fastcov.md). Arguments: the prepared request, the stage timings (ms) to fill, the
#: engine's :data:`Simulate`, the engine's settings. Raises what :data:`Simulate` raises.
FastPath = Callable[[Prepared, dict[str, float], Simulate, Settings], Scored]

#: What the prover returns for one sample: the report its targets are judged on (the measured
#: one unless proved points were excluded), the uncovered points, the proved points that apply
#: with how each was proved (keyed as :attr:`Scored.unreachable`), and whether the proof is the design's own verdict (False: a
#: prover that could not run; the result is then not cached).
Reachable = tuple[CoverageReport, list[UncoveredPoint], dict[tuple[str, int, str, str], str], bool]

#: The prover as the measure stage is given it (docs/formal.md): the points of ``report``
#: proved unreachable, counted in it, and excluded from the judged figure when the request's
#: ``exclude_unreachable`` says so. Arguments: the prepared request, the DUT instance's points,
#: the measured report (its ``unreachable`` counts and note are filled in), the unavailable
#: metrics with their reasons, the uncovered points, the sandbox to run the proof in, the
#: verdict cache dir. Raises ``SandboxError``/``OSError`` for infrastructure failures.
Prover = Callable[
    [Prepared, list[CoveragePoint], CoverageReport, dict[str, str], list[UncoveredPoint], Sandbox, Path],
    Reachable,
]


@dataclass(frozen=True)
class Plugins:
    """What the engine is given from above the scoring layer (the composition root,
    :mod:`reward_service.engine`, wires both): ``fast_path`` scores ``engine=fast``/``auto``
    requests, ``prover`` proves points unreachable for requests with ``exclude_unreachable``.
    None: this engine has none, and a request that needs it is our fault (``sandbox_error``)."""

    fast_path: FastPath | None = None
    prover: Prover | None = None
