"""Registered problems: what the service knows by ``problem_id``.

A :class:`ProblemSpec` is a problem as the API registers it (design, DUT module and instance,
metrics, targets, simulator, limits, reward shaping; CVDP metadata such as the prompt when it
came from a cid012 row). A :class:`ProblemStore` keeps them:

* :class:`InMemoryProblemStore` — embedded mode (one process);
* :class:`RedisProblemStore` — the service with a broker: one JSON document per problem under
  ``<prefix>problem:<id>`` plus the id set ``<prefix>problems``, shared by every API process.

:func:`resolve_request` turns a request that names a ``problem_id`` into a full
:class:`~reward_service.models.ScoreRequest` (the API does this before dispatch, so workers need
no problem store). Store failures (Redis unreachable, corrupt entry) raise
:class:`ProblemStoreError`.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward_service.redis_backed import RedisBacked
from reward_service.models import (
    DEFAULT_METRICS, CocotbStimulus, Completion, CoverageSpec, Design, Limits, Metric, RewardSpec,
    ScoreRequest, Simulator, SvTestbench, Target,
)
from reward_service.problems.cvdp import Problem

__all__ = [
    "PROBLEM_ID_PATTERN", "ProblemSpec", "ProblemStore", "ProblemStoreError", "InMemoryProblemStore",
    "RedisProblemStore", "resolve_request",
]

#: Problem ids: letters, digits and ``_ . - :`` (CVDP ids such as ``cvdp_copilot_Attenuator_0011``).
PROBLEM_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,200}$"


class ProblemStoreError(RuntimeError):
    """The problem store cannot answer (backend down, corrupt entry)."""


class ProblemSpec(BaseModel):
    """A registered problem. Requests naming its ``id`` get its design, coverage spec
    (scope = ``dut_instance``, ``metrics``, ``targets``), simulator, limits and reward shaping;
    fields given in the request override them."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=PROBLEM_ID_PATTERN)
    design: Design = Field(description="RTL files and the DUT module (design.toplevel)")
    dut_instance: str | None = Field(None, description="DUT instance name the testbench must use (coverage scope)")
    metrics: list[Metric] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    targets: list[Target] = Field(default_factory=list)
    simulator: Simulator = Simulator.verilator
    engine: Literal["verilator", "fast", "auto"] | None = Field(
        None, description="code-coverage engine of its samples (unset: `simulator` decides; CVDP problems: auto)")
    limits: Limits = Field(default_factory=Limits)
    reward: RewardSpec = Field(default_factory=RewardSpec)
    exclude_unreachable: bool | None = Field(
        None, description="coverage.exclude_unreachable of its samples (docs/formal.md; CVDP problems: true)")
    # metadata (CVDP rows bring them; informational for clients)
    difficulty: str | None = None
    prompt: str | None = None
    context: dict[str, str] = Field(default_factory=dict)
    testbench_path: str | None = None

    @property
    def toplevel(self) -> str | None:
        return self.design.toplevel

    @classmethod
    def from_cvdp(cls, problem: Problem) -> "ProblemSpec":
        """The spec of a CVDP cid012 :class:`~reward_service.problems.cvdp.Problem`
        (one ``overall >= TARGET`` target, as :meth:`Problem.request` builds)."""
        return cls(
            id=problem.id, design=problem.design, dut_instance=problem.dut_instance,
            metrics=list(problem.metrics), targets=[Target(metric="overall", percent=problem.target_percent)],
            simulator=problem.simulator, engine=problem.engine, difficulty=problem.difficulty, prompt=problem.prompt,
            # as Problem.request: the same CVDP problem is judged alike by the CLI, rescore and the API
            exclude_unreachable=problem.request("").coverage.exclude_unreachable,
            context=dict(problem.context), testbench_path=problem.testbench_path,
        )

    def request(self, stimulus: SvTestbench | CocotbStimulus | Completion | str, **overrides: Any) -> ScoreRequest:
        """A :class:`ScoreRequest` scoring ``stimulus`` on this problem; ``overrides`` replace
        top-level fields (as :meth:`Problem.request`)."""
        if isinstance(stimulus, str):
            stimulus = Completion(text=stimulus)
        fields: dict[str, Any] = {
            "design": self.design, "stimulus": stimulus, "simulator": self.simulator, "engine": self.engine,
            "coverage": CoverageSpec(scope=self.dut_instance, metrics=list(self.metrics), targets=list(self.targets),
                                     exclude_unreachable=self.exclude_unreachable),
            "limits": self.limits, "reward": self.reward,
        }
        fields.update(overrides)
        if "engine" not in overrides and Simulator(fields["simulator"]) != Simulator.verilator:
            fields["engine"] = None  # the problem's engine replaces the Verilator path only
        return ScoreRequest(**fields)


def _merge(base: BaseModel, given: BaseModel) -> BaseModel:
    """``base`` with the fields explicitly set in ``given`` replaced (validated)."""
    update = given.model_dump(include=given.model_fields_set)
    return type(base).model_validate({**base.model_dump(), **update})


def resolve_request(request: ScoreRequest, problem: ProblemSpec | Problem) -> ScoreRequest:
    """The full request for a ``problem_id`` request: the problem's fields, with every field the
    request sets overriding them. ``coverage``, ``limits`` and ``reward`` merge field by field
    (``{"coverage": {"metrics": ["line"]}}`` keeps the problem's scope and targets), as
    ``Engine.prepare`` does for coverage. Raises ``pydantic.ValidationError``."""
    given = request.model_fields_set
    overrides: dict[str, Any] = {k: getattr(request, k) for k in given
                                 if k not in ("problem_id", "design", "stimulus", "coverage", "limits", "reward")}
    base = problem.request(request.stimulus, **overrides)
    merged = [n for n in ("coverage", "limits", "reward") if n in given]
    if not merged:
        return base
    for name in merged:
        overrides[name] = _merge(getattr(base, name), getattr(request, name))
    return problem.request(request.stimulus, **overrides)


class ProblemStore(abc.ABC):
    """Problems by id. Implementations are safe to call from many threads."""

    @abc.abstractmethod
    def get(self, problem_id: str) -> ProblemSpec | None:
        """The problem, or None when unknown."""

    @abc.abstractmethod
    def put(self, problem: ProblemSpec) -> bool:
        """Register (or replace) a problem; True when it was new."""

    def put_many(self, problems: list[ProblemSpec]) -> int:
        """Register several problems; returns how many were new."""
        return sum(self.put(p) for p in problems)

    @abc.abstractmethod
    def delete(self, problem_id: str) -> bool:
        """Forget a problem; True when it existed."""

    @abc.abstractmethod
    def ids(self) -> list[str]:
        """Every registered id, sorted."""

    def list(self) -> list[ProblemSpec]:
        """Every registered problem, sorted by id."""
        return [p for p in (self.get(i) for i in self.ids()) if p is not None]

    def ping(self) -> str:
        """Readiness: "ok" or why the store cannot answer."""
        return "ok"

    def close(self) -> None:
        """Release connections."""


class InMemoryProblemStore(ProblemStore):
    """A dict in this process (embedded mode, tests)."""

    def __init__(self, problems: dict[str, ProblemSpec] | None = None) -> None:
        self._problems: dict[str, ProblemSpec] = dict(problems or {})
        self._lock = threading.Lock()

    def get(self, problem_id: str) -> ProblemSpec | None:
        with self._lock:
            return self._problems.get(problem_id)

    def put(self, problem: ProblemSpec) -> bool:
        with self._lock:
            new = problem.id not in self._problems
            self._problems[problem.id] = problem
            return new

    def delete(self, problem_id: str) -> bool:
        with self._lock:
            return self._problems.pop(problem_id, None) is not None

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._problems)


class RedisProblemStore(RedisBacked, ProblemStore):
    """Problems in Redis: ``<prefix>problem:<id>`` holds the JSON of the :class:`ProblemSpec`,
    ``<prefix>problems`` the set of ids. ``client`` may be given (tests, shared pools)."""

    error = ProblemStoreError
    what = "problem store"

    def _key(self, problem_id: str) -> str:
        return f"{self.prefix}problem:{problem_id}"

    @property
    def _index(self) -> str:
        return f"{self.prefix}problems"

    def get(self, problem_id: str) -> ProblemSpec | None:
        raw = self._call(self.client.get, self._key(problem_id))
        if raw is None:
            return None
        try:
            return ProblemSpec.model_validate_json(raw)
        except ValidationError as exc:
            raise ProblemStoreError(f"stored problem {problem_id!r} is unreadable: {exc.error_count()} error(s)") from exc

    def put(self, problem: ProblemSpec) -> bool:
        return self.put_many([problem]) == 1

    def put_many(self, problems: list[ProblemSpec]) -> int:
        def run() -> int:
            pipe = self.client.pipeline()
            for p in problems:
                pipe.set(self._key(p.id), p.model_dump_json())
                pipe.sadd(self._index, p.id)
            replies = pipe.execute()
            return sum(int(r) for r in replies[1::2])

        return self._call(run)

    def delete(self, problem_id: str) -> bool:
        def run() -> bool:
            pipe = self.client.pipeline()
            pipe.delete(self._key(problem_id))
            pipe.srem(self._index, problem_id)
            return bool(pipe.execute()[0])

        return self._call(run)

    def ids(self) -> list[str]:
        raw = self._call(self.client.smembers, self._index)
        return sorted(i.decode() if isinstance(i, bytes) else i for i in raw)

    def list(self) -> list[ProblemSpec]:
        ids = self.ids()
        if not ids:
            return []
        raws = self._call(self.client.mget, [self._key(i) for i in ids])
        out = []
        for pid, raw in zip(ids, raws):
            if raw is None:
                continue
            try:
                out.append(ProblemSpec.model_validate_json(raw))
            except ValidationError as exc:
                raise ProblemStoreError(f"stored problem {pid!r} is unreadable") from exc
        return out
