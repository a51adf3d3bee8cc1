"""The synchronous client (httpx.Client: pooled connections, thread-safe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from tenacity import RetryError

from reward_service.client import _flows
from reward_service.client._flows import DEFAULT_CHUNK, Flow, ProgressFn
from reward_service.client._transport import (
    Call,
    ClientBase,
    check,
    request_options,
    transport_failure,
)
from reward_service.client.errors import RewardServiceError
from reward_service.episodes import EpisodeCreate, EpisodeState, StepAnswer, StepRequest
from reward_service.models import ProblemSpec, ScoreRequest, ScoreResult

T = TypeVar("T")


class RewardClient(ClientBase):
    """Client of a reward-service (``reward-service serve``; endpoints in docs/api.md).

    ``base_url``: e.g. ``http://127.0.0.1:8000``. ``api_key``: sent as ``Authorization: Bearer``.
    ``timeout``: seconds to connect and to read an answer, on top of the time the server is
    asked to hold a long-poll (``wait``). ``max_retries``: retries after the first attempt of
    each HTTP call on connection errors, timeouts, 429, 502, 503 and 504 (exponential backoff
    from ``backoff_s`` with jitter, or the server's ``Retry-After``); other 4xx and 500 are not
    retried. ``max_connections``: size of the connection pool. ``transport``: an httpx
    transport (tests, proxies).

    Usable from many threads at once; close it (or use ``with``) to release the connections.
    """

    http_class = httpx.Client

    # -- plumbing ---------------------------------------------------------------------------------
    def _send(self, call: Call) -> httpx.Response:
        try:
            for attempt in self._policy.sync(call):
                with attempt:
                    try:
                        response = self._http.request(**request_options(call, self.timeout))
                    except httpx.TransportError as exc:
                        raise transport_failure(exc) from exc
                    return check(call, response)
        except RetryError as exc:
            raise self._policy.unavailable(exc) from exc.last_attempt.exception()
        raise AssertionError("unreachable: tenacity ended without a result")

    def _drive(self, flow: Flow[T]) -> T:
        try:
            call = next(flow)
            while True:
                call = flow.send(self._send(call))
        except StopIteration as stop:
            return stop.value

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- scoring ----------------------------------------------------------------------------------
    def score(
        self,
        request: ScoreRequest | Mapping[str, Any],
        *,
        wait: float = 60.0,
        timeout: float | None = None,
        raise_on_infra: bool = False,
        sample_id: str | None = None,
        infra_retries: int = 0,
    ) -> ScoreResult:
        """Score one sample. The server holds the call up to ``wait`` seconds (at most its
        ``max_wait_s``, 600 by default); when it answers 202 the job is long-polled until done,
        or until ``timeout`` seconds in all (:class:`ScoreTimeout`). A result with status
        ``sandbox_error`` (``reward`` None) is resubmitted up to ``infra_retries`` times, then
        returned as is, or raised as :class:`InfrastructureFailure` when ``raise_on_infra``.

        ``request``: a :class:`ScoreRequest` or its dict (validated here: :class:`InvalidRequest`).
        Raises :class:`ServiceUnavailable`, :class:`RequestFailed` (4xx/500, e.g. 404 unknown
        ``problem_id``)."""
        return self._drive(
            _flows.score(
                request,
                wait=wait,
                timeout=timeout,
                raise_on_infra=raise_on_infra,
                sample_id=sample_id,
                infra_retries=infra_retries,
            )
        )

    def score_batch(
        self,
        requests: Sequence[ScoreRequest | Mapping[str, Any]],
        *,
        groups: Sequence[str | None] | None = None,
        timeout: float | None = None,
        poll_interval: float = 5.0,
        on_progress: ProgressFn | None = None,
        raise_on_infra: bool = False,
        sample_ids: Sequence[str] | None = None,
        infra_retries: int = 0,
        chunk_size: int = DEFAULT_CHUNK,
    ) -> list[ScoreResult]:
        """Score many samples (one RL step) through ``POST /v1/batches``; results in request
        order. ``groups[i]``: the GRPO group label of request i (None: ungrouped); a group is
        never split across batches of ``chunk_size`` requests (lowered to the service's
        ``batch_limit`` and body limit from ``GET /v1/limits``; a later batch answered 429 waits
        for the earlier ones instead of failing; a batch the service lost, 404, is submitted
        again and logged). Progress is polled every
        ``poll_interval`` seconds (a long poll: the server answers as soon as a batch finishes,
        so a longer interval costs no latency; each poll carries every finished result, about
        4 KiB each, so a short one costs the API a lot on big batches) and reported as
        ``on_progress(done, total)``. ``timeout``: seconds in all (:class:`ScoreTimeout`).

        Samples ending in ``sandbox_error`` are resubmitted up to ``infra_retries`` times; then
        their results (``reward`` None) are returned as they are, or the first is raised as
        :class:`InfrastructureFailure` (naming its index and ``sample_ids[i]``) when
        ``raise_on_infra``. Raises :class:`ServiceUnavailable`, :class:`RequestFailed` (e.g. 404
        naming ``requests[i]`` for an unknown problem: the whole batch is refused),
        :class:`InvalidRequest`."""
        return self._drive(
            _flows.score_batch(
                requests,
                groups=groups,
                timeout=timeout,
                poll_interval=poll_interval,
                on_progress=on_progress,
                raise_on_infra=raise_on_infra,
                sample_ids=sample_ids,
                infra_retries=infra_retries,
                chunk_size=chunk_size,
            )
        )

    # -- service ----------------------------------------------------------------------------------
    def health(self) -> bool:
        """True when ``GET /healthz`` answers ok (one attempt, no retries); never raises."""
        try:
            return self._drive(_flows.health())
        except RewardServiceError:
            return False

    def limits(self) -> dict[str, Any] | None:
        """``GET /v1/limits``: the service's bounds (``batch_limit``, ``queue_bound``,
        ``queue_depth``, body and file limits; docs/api.md), None from a service without it."""
        return self._drive(_flows.limits())

    def register_problem(self, problem: ProblemSpec | Mapping[str, Any]) -> ProblemSpec:
        """``POST /v1/problems``: register or replace a problem; returns it as stored (DUT module found)."""
        return self._drive(_flows.register_problem(problem))

    def get_problem(self, problem_id: str) -> ProblemSpec:
        """``GET /v1/problems/{id}`` (:class:`RequestFailed` 404 when unknown)."""
        return self._drive(_flows.get_problem(problem_id))

    def list_problems(self) -> list[dict[str, Any]]:
        """``GET /v1/problems``: summaries (id, DUT module and instance, simulator, metrics, targets, files)."""
        return self._drive(_flows.list_problems())

    def delete_problem(self, problem_id: str) -> None:
        """``DELETE /v1/problems/{id}`` (:class:`RequestFailed` 404 when unknown)."""
        self._drive(_flows.delete_problem(problem_id))

    def load_problems_jsonl(self, source: str | Path | bytes) -> dict[str, Any]:
        """``POST /v1/problems:load``: register every row of a CVDP cid012 JSONL file (a path,
        or its bytes); returns ``{"loaded", "new", "ids"}``."""
        return self._drive(_flows.load_problems_jsonl(source))

    # -- episodes (docs/episodes.md) --------------------------------------------------------------
    def create_episode(self, body: EpisodeCreate | Mapping[str, Any]) -> StepAnswer:
        """``POST /v1/episodes``: a new episode (``{"problem_id" or "problem", "options"}``);
        its first answer (``observation.episode_id`` names it)."""
        return self._drive(_flows.create_episode(body))

    def episode_step(self, episode_id: str, step: StepRequest | Mapping[str, Any], *, wait: float = 60.0) -> StepAnswer:
        """``POST /v1/episodes/{id}/step`` (``{"step_id", "action"}``), sent again with the same
        step id until it is answered (202 while scoring; retried 503s): scored at most once."""
        return self._drive(_flows.episode_step(episode_id, step, wait=wait))

    def get_episode(self, episode_id: str) -> EpisodeState:
        """``GET /v1/episodes/{id}``: the episode's progress."""
        return self._drive(_flows.get_episode(episode_id))
