"""The dispatcher interface: submit requests, look jobs up, wait for them."""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass

from reward_service.errors import RewardServiceError
from reward_service.models import ScoreRequest, ScoreResult


class QueueFull(RewardServiceError, RuntimeError):
    """The queue holds its maximum number of pending jobs (HTTP 429); ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BatchTooLarge(RewardServiceError, ValueError):
    """More new jobs in one submission than the queue can ever hold (``bound``): waiting cannot
    help, so this is not :class:`QueueFull` (HTTP 413, not retried)."""

    def __init__(self, count: int, bound: int) -> None:
        super().__init__(
            f"{count} new jobs in one submission exceed the queue bound of {bound} "
            f"(queued + running jobs); split the batch into parts of at most {bound} "
            "(GET /v1/limits: batch_limit)"
        )
        self.count = count
        self.bound = bound


class BrokerUnavailable(RewardServiceError):
    """The job queue (broker or result store) cannot be reached (HTTP 503, retried): raised by a
    dispatcher in place of its client library's own errors (Redis, kombu), which the API does
    not import."""


class JobState(enum.StrEnum):
    queued = "queued"
    running = "running"
    done = "done"


@dataclass
class JobView:
    """A job as the API shows it: ``result`` is set once ``state`` is done."""

    id: str
    state: JobState
    result: ScoreResult | None = None


class Dispatcher(abc.ABC):
    """Runs score requests somewhere and keeps their results for a while.

    Job ids are opaque strings. Implementations must be safe to call from many threads.
    ``max_queue``: the bound on queued + running jobs (:class:`QueueFull` beyond it,
    :class:`BatchTooLarge` for one submission larger than it)."""

    max_queue: int

    @abc.abstractmethod
    def submit(self, request: ScoreRequest) -> str:
        """Queue one request; returns its job id. Raises :class:`QueueFull`, and
        :class:`BrokerUnavailable` (as every method here that talks to a broker) when the job
        queue cannot be reached."""

    def submit_background(self, request: ScoreRequest) -> str:
        """Queue work nobody waits for (a warm-up build) behind every scoring job, and only
        while the queue is under half its bound, so that registering many problems never delays
        scoring nor fills the queue against it. Raises :class:`QueueFull`."""
        return self.submit(request)

    def submit_many(self, requests: list[ScoreRequest]) -> list[str]:
        """Queue several requests (one RL step); ids in request order. All or nothing:
        raises :class:`QueueFull` before queueing any when they do not fit now, and
        :class:`BatchTooLarge` when they never could (more than ``max_queue``)."""
        return [self.submit(r) for r in requests]

    @abc.abstractmethod
    def get(self, job_id: str) -> JobView | None:
        """The job's state and, when done, its result; None for an unknown id."""

    @abc.abstractmethod
    def wait(self, job_id: str, timeout: float) -> JobView | None:
        """Like :meth:`get`, but waits up to ``timeout`` seconds for the job to finish."""

    def get_many(self, job_ids: list[str]) -> list[JobView | None]:
        """:meth:`get` of each id, in order. A dispatcher with a remote store overrides it with one
        round trip for all (a long poll of a batch reads every job still open)."""
        return [self.get(job_id) for job_id in job_ids]

    def resend(self, job_id: str) -> bool:
        """Queue again a job the dispatcher lost (e.g. a broker restart forgot its marker and
        result) from its kept request copy; False when nothing is left to resend it from."""
        return False

    @abc.abstractmethod
    def queue_depth(self) -> int:
        """Jobs submitted and not yet finished."""

    def ready(self) -> dict[str, str]:
        """Readiness checks: name -> "ok" or the reason it is not ready."""
        return {}

    def close(self) -> None:
        """Release threads/connections; by default there are none to release."""
        return None
