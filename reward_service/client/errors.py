"""The client's exception tree. Every error of :mod:`reward_service.client` is a
:class:`RewardServiceError`; third-party errors (httpx) are translated at the boundary
(``raise ... from exc``), so callers catch one family.

- :class:`ServiceUnavailable`: the service could not be reached or kept answering
  429/502/503/504 (or dropped connections) through every retry;
- :class:`RequestFailed`: the service refused the request (4xx: malformed, unknown problem,
  over a limit, bad API key) or failed on it (500); never retried, ``detail`` is the server's
  message;
- :class:`InvalidRequest`: the request was rejected before sending (it does not validate
  against the wire schema);
- :class:`ScoreTimeout`: the caller's overall ``timeout`` ran out while jobs were still running;
- :class:`InfrastructureFailure`: a sample ended with status ``sandbox_error`` and the caller
  asked for an exception (``raise_on_infra=True``) instead of the result.
"""

from __future__ import annotations

from reward_service.models import ScoreResult


class RewardServiceError(Exception):
    """Base class of every error raised by the reward-service client."""


class ServiceUnavailable(RewardServiceError):
    """The service at ``url`` did not answer usefully after ``attempts`` attempts (connection
    errors, timeouts, or 429/502/503/504 answers); ``reason`` is the last failure."""

    def __init__(self, url: str, attempts: int, reason: str) -> None:
        super().__init__(f"reward service at {url} unavailable after {attempts} attempt(s): {reason}")
        self.url = url
        self.attempts = attempts
        self.reason = reason


class RequestFailed(RewardServiceError):
    """The service answered ``status_code`` (a 4xx, or 500) to ``method path``; ``detail`` is
    its message (e.g. ``unknown problem_id 'x': register it with POST /v1/problems ...``)."""

    def __init__(self, method: str, path: str, status_code: int, detail: str) -> None:
        super().__init__(f"{method} {path} -> {status_code}: {detail}")
        self.method = method
        self.path = path
        self.status_code = status_code
        self.detail = detail


class InvalidRequest(RewardServiceError, ValueError):
    """A request does not validate against the wire schema (checked before sending)."""


class ScoreTimeout(RewardServiceError):
    """The overall ``timeout`` of a call ran out; ``done`` of ``total`` samples had finished."""

    def __init__(self, message: str, done: int = 0, total: int = 0) -> None:
        super().__init__(message)
        self.done = done
        self.total = total


class InfrastructureFailure(RewardServiceError):
    """Sample ``index`` (of a batch; None for a single score) with id ``sample_id`` ended with
    status ``sandbox_error``: the service broke, the model is not at fault, and no reward
    exists (never 0). ``result`` is the full :class:`ScoreResult` (its ``message`` says what broke)."""

    def __init__(
        self, result: ScoreResult, index: int | None = None, sample_id: str | None = None, attempts: int = 1
    ) -> None:
        where = []
        if index is not None:
            where.append(f"index {index}")
        if sample_id is not None:
            where.append(f"id {sample_id!r}")
        name = f"sample {' '.join(where)}" if where else "the sample"
        super().__init__(
            f"infrastructure failure scoring {name} (after {attempts} attempt(s)): "
            f"{result.message or 'sandbox_error'}; no reward was given (not 0)"
        )
        self.result = result
        self.index = index
        self.sample_id = sample_id
        self.attempts = attempts
