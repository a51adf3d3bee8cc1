"""The scoring engine: prepare -> (result cache) -> run -> measure -> classify -> finish.

Plain Python with no web or queue code inside, so it runs the same in the CLI, a worker and
tests. The fast path and the prover are plug-ins it is given (:class:`~.types.Plugins`), never
imports: :mod:`reward_service.engine`, the composition root, wires them. :meth:`Engine.score` never raises for bad input: every outcome is a :class:`ScoreResult`
with its status (``sandbox_error`` for infrastructure failures, ``reward=None``); only the
exceptions the caller names in ``reraise`` (its runtime's time limit) leave it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from reward_service.cache import ResultCache, request_key
from reward_service.completion import ExtractionError
from reward_service.engine_choice import choose_engine
from reward_service.integrity.policy import check_stimulus, refusal
from reward_service.models import ScoreRequest, ScoreResult, Status
from reward_service.sandbox import Sandbox, SandboxError, get_sandbox
from reward_service.sandbox.toolchain import ToolMissing, versions
from reward_service.scoring import run
from reward_service.scoring.finish import finish, name_block, validation_message
from reward_service.scoring.prepare import prepare
from reward_service.scoring.types import InvalidInput, Plugins, Prepared, Scored
from reward_service.settings import Settings, get_settings
from reward_service.simulators import get_simulator
from reward_service.simulators.base import SimulatorBackend

log = logging.getLogger(__name__)


#: Outcomes that depend on the machine (load, infrastructure), not only on the inputs.
_NOT_CACHED = {Status.sandbox_error, Status.timeout, Status.resource_limit}


class Engine:
    """Scores :class:`ScoreRequest` s. ``problems`` maps problem ids to problems
    (:class:`~reward_service.models.ProblemSpec` or CVDP
    :class:`~reward_service.problems.cvdp.Problem`). ``reraise``: exception classes the
    catch-all lets through instead of reporting them as an internal error (a worker's time
    limit, e.g. Celery's ``SoftTimeLimitExceeded``, handled where it is raised). ``plugins``:
    the fast path and the prover (none by default: :class:`reward_service.engine.Engine` is
    this engine with both plugged in)."""

    def __init__(
        self,
        settings: Settings | None = None,
        sandbox: Sandbox | None = None,
        problems: Mapping[str, Any] | None = None,
        reraise: tuple[type[BaseException], ...] = (),
        plugins: Plugins | None = None,
    ) -> None:
        self.plugins = plugins or Plugins()
        self.settings = settings or get_settings()
        self.sandbox = sandbox or get_sandbox(self.settings.sandbox, self.settings)
        self.problems = dict(problems or {})
        self.reraise = tuple(reraise)
        self.results = ResultCache(self.settings.cache_dir / "results") if self.settings.result_cache else None

    # -- public -----------------------------------------------------------------------------
    def score(self, request: ScoreRequest | Mapping[str, Any]) -> ScoreResult:
        """Score one sample. Bad input -> ``invalid_input``; infrastructure failure ->
        ``sandbox_error`` (reward None); never raises for either (only ``reraise``'s classes)."""
        return self.scored(request).result

    def scored(self, request: ScoreRequest | Mapping[str, Any]) -> Scored:
        """:meth:`score` with the coverage points behind the result (none for a result served
        from the result cache or refused before simulating)."""
        start = time.perf_counter()
        try:
            if not isinstance(request, ScoreRequest):
                request = ScoreRequest.model_validate(request)
            prepared = self.prepare(request)
        except ValidationError as exc:
            return Scored(
                self._finish(ScoreResult(status=Status.invalid_input, message=validation_message(exc)), None, start)
            )
        except (InvalidInput, ExtractionError) as exc:
            return Scored(
                self._finish(
                    ScoreResult(
                        status=Status.invalid_input,
                        message=str(exc),
                        stimulus_block=getattr(exc, "stimulus_block", None),
                    ),
                    request if isinstance(request, ScoreRequest) else None,
                    start,
                )
            )
        timings = {"prepare": (time.perf_counter() - start) * 1000}
        try:
            t0 = time.perf_counter()
            tool_versions = versions(self.sandbox)  # probed once per process (seconds), then cached
            timings["toolchain"] = (time.perf_counter() - t0) * 1000
            # the key only where there is a cache to look it up in (a hash of every file: ~0.2 ms)
            key = (
                request_key(prepared.request, prepared.design, prepared.stimulus, tool_versions)
                if self.results is not None
                else ""
            )
            cached = self.results.get(key) if self.results is not None else None
            if cached is not None:
                cached.cache.result = True
                cached.timings = {**timings, "total": (time.perf_counter() - start) * 1000}
                return Scored(name_block(cached, prepared.extraction))
            scored = self._score_checked(prepared, timings)
            result = scored.result
            if prepared.request.report.points:  # asked for: lcov/HTML reports (reward_service.reports)
                from reward_service.reports.detail import coverage_detail

                result.detail = coverage_detail(
                    scored.points,
                    prepared.design.files,
                    [m for m, c in result.coverage.metrics.items() if c.available],
                    scored.unreachable,
                )
        except self.reraise:
            raise
        except (SandboxError, ToolMissing, OSError) as exc:
            # the result's message says what failed; the traceback is for whoever debugs the
            # sandbox (a CLI user would get it before the status line that says the same)
            log.warning("sandbox failure: %s: %s", type(exc).__name__, exc)
            log.debug("sandbox failure", exc_info=True)
            scored = Scored(ScoreResult.infrastructure_failure(f"{type(exc).__name__}: {exc}", timings=timings))
        except Exception as exc:  # a bug of ours must not look like the model's fault
            log.exception("internal error while scoring")
            scored = Scored(
                ScoreResult.infrastructure_failure(f"internal error: {type(exc).__name__}", timings=timings)
            )
        result = self._finish(scored.result, prepared.request, start)
        if self.results is not None and result.status not in _NOT_CACHED and scored.cacheable:
            self.results.put(key, result)
        # after the cache: another completion holding the same code keeps its own block name
        return Scored(name_block(result, prepared.extraction), scored.points, unreachable=scored.unreachable)

    def prepare(self, request: ScoreRequest) -> Prepared:
        """Resolve problem id (:attr:`problems`), completion text and the testbench top; check
        the inputs (:func:`reward_service.scoring.prepare.prepare`). Raises
        :class:`InvalidInput`, ``ExtractionError`` or ``pydantic.ValidationError``."""
        return prepare(request, self.problems)

    def simulate(
        self, prepared: Prepared, timings: dict[str, float], simulator: SimulatorBackend | None = None
    ) -> Scored:
        """Simulate and measure ``prepared`` with ``simulator`` (None: the request's) in this
        engine's sandbox (:func:`reward_service.scoring.run.simulate`; a
        :data:`~reward_service.scoring.types.Simulate`)."""
        return run.simulate(prepared, timings, simulator, self.sandbox, self.settings, self.plugins.prover)

    # -- internals ----------------------------------------------------------------------------
    def _score_checked(self, prepared: Prepared, timings: dict[str, float]) -> Scored:
        """Score ``prepared`` unless its stimulus breaks its policy (:mod:`reward_service.integrity`,
        checked once here for every engine, before any simulator): then its ``refused`` result.
        The DUT parameter overrides of SV stimulus go on the result either way."""
        t0 = time.perf_counter()
        check = check_stimulus(prepared.request, prepared.design, prepared.stimulus)
        timings["integrity"] = (time.perf_counter() - t0) * 1000
        if check.violations:
            result = refusal(check.violations)
            result.timings = timings
            scored = Scored(result)
        else:
            if check.scheduled is not None:  # testbench-DUT races decided the documented way (docs/semantics.md)
                stimulus = prepared.stimulus.model_copy(update={"files": check.scheduled})
                prepared = dataclasses.replace(prepared, stimulus=stimulus)
            scored = self._score_with_engine(prepared, timings)
        scored.result.parameter_overrides = check.parameter_overrides
        scored.result.races = check.races
        return scored

    def _score_with_engine(self, prepared: Prepared, timings: dict[str, float]) -> Scored:
        """The request's engine choice (:func:`~reward_service.engine_choice.choose_engine`):
        the fast path plug-in with its fallback (docs/fastcov.md), else the chosen simulator.
        Raises ``SandboxError`` when the request needs the fast path and the engine has none."""
        request = prepared.request
        choice = choose_engine(request.simulator, request.engine)
        if choice.fast_path:
            if self.plugins.fast_path is None:
                raise SandboxError(f"engine={request.engine} needs the fast path and this engine was given none")
            return self.plugins.fast_path(prepared, timings, self.simulate, self.settings)
        return self.simulate(prepared, timings, get_simulator(choice.path))

    def _finish(self, result: ScoreResult, request: ScoreRequest | None, start: float) -> ScoreResult:
        return finish(result, request, start, self.sandbox)
