"""The one problem-resolution rule: how a request naming a ``problem_id`` combines with the
problem. The API (before dispatch), the engine (CLI, ``rescore``, embedded scoring) and every
other caller resolve through :func:`resolve_request`, so a problem request gets the same full
request wherever it is scored.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from reward_service.models import CocotbStimulus, Completion, ScoreRequest, SvTestbench

__all__ = ["MERGED_FIELDS", "Problem", "resolve_request"]

#: Request fields merged field by field with the problem's (``{"coverage": {"metrics":
#: ["line"]}}`` keeps the problem's scope and targets); every other field the request sets
#: replaces the problem's.
MERGED_FIELDS = ("coverage", "limits", "reward")


class Problem(Protocol):
    """What resolution needs of a problem (:class:`~reward_service.models.ProblemSpec`, a CVDP
    :class:`~reward_service.problems.cvdp.Problem`)."""

    def request(self, stimulus: SvTestbench | CocotbStimulus | Completion | str, **overrides: Any) -> ScoreRequest: ...


_M = TypeVar("_M", bound=BaseModel)


def _merge(base: _M, given: _M) -> _M:
    """``base`` with the fields explicitly set in ``given`` replaced (validated)."""
    update = given.model_dump(include=given.model_fields_set)
    return type(base).model_validate({**base.model_dump(), **update})


def resolve_request(request: ScoreRequest, problem: Problem) -> ScoreRequest:
    """The full request for a ``problem_id`` request: the problem's fields, with every field the
    request sets overriding them; :data:`MERGED_FIELDS` merge field by field. Raises
    ``pydantic.ValidationError`` when they do not combine."""
    given = request.model_fields_set
    overrides: dict[str, Any] = {
        k: getattr(request, k) for k in given if k not in ("problem_id", "design", "stimulus", *MERGED_FIELDS)
    }
    base = problem.request(request.stimulus, **overrides)
    merged = [n for n in MERGED_FIELDS if n in given]
    if not merged:
        return base
    for name in merged:
        overrides[name] = _merge(getattr(base, name), getattr(request, name))
    return problem.request(request.stimulus, **overrides)
