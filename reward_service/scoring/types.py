"""The types the scoring stages and the fast path share: a prepared request, a scored run with
its coverage points, and the run callable the fast path is given (:data:`Simulate`).

No stage lives here, so :mod:`reward_service.fastcov` can import these without importing the
engine that drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reward_service.completion import Extraction
from reward_service.coverage.points import CoveragePoint
from reward_service.errors import RewardServiceError
from reward_service.models import CocotbStimulus, Design, ScoreRequest, ScoreResult, SvTestbench
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
