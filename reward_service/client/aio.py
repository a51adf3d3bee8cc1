"""The asynchronous client (httpx.AsyncClient): the same methods as :class:`RewardClient`,
awaited. One instance belongs to one event loop (httpx pools connections per loop)."""

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


class AsyncRewardClient(ClientBase):
    """Async twin of :class:`~reward_service.client.RewardClient` (same arguments, errors and
    retry policy; see its docstrings). Close it with ``await client.aclose()`` or ``async with``."""

    http_class = httpx.AsyncClient

    async def _send(self, call: Call) -> httpx.Response:
        try:
            async for attempt in self._policy.asynchronous(call):
                with attempt:
                    try:
                        response = await self._http.request(**request_options(call, self.timeout))
                    except httpx.TransportError as exc:
                        raise transport_failure(exc) from exc
                    return check(call, response)
        except RetryError as exc:
            raise self._policy.unavailable(exc) from exc.last_attempt.exception()
        raise AssertionError("unreachable: tenacity ended without a result")

    async def _drive(self, flow: Flow[T]) -> T:
        try:
            call = next(flow)
            while True:
                call = flow.send(await self._send(call))
        except StopIteration as stop:
            return stop.value

    async def aclose(self) -> None:
        await self._http.aclose()

    async def close(self) -> None:
        """Same as :meth:`aclose`."""
        await self.aclose()

    async def __aenter__(self) -> AsyncRewardClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def score(
        self,
        request: ScoreRequest | Mapping[str, Any],
        *,
        wait: float = 60.0,
        timeout: float | None = None,
        raise_on_infra: bool = False,
        sample_id: str | None = None,
        infra_retries: int = 0,
    ) -> ScoreResult:
        """See :meth:`RewardClient.score`."""
        return await self._drive(
            _flows.score(
                request,
                wait=wait,
                timeout=timeout,
                raise_on_infra=raise_on_infra,
                sample_id=sample_id,
                infra_retries=infra_retries,
            )
        )

    async def score_batch(
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
        """See :meth:`RewardClient.score_batch`."""
        return await self._drive(
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

    async def health(self) -> bool:
        """See :meth:`RewardClient.health`."""
        try:
            return await self._drive(_flows.health())
        except RewardServiceError:
            return False

    async def limits(self) -> dict[str, Any] | None:
        """``GET /v1/limits``: the service's bounds (``batch_limit``, ``queue_bound``,
        ``queue_depth``, body and file limits; docs/api.md), None from a service without it."""
        return await self._drive(_flows.limits())

    async def register_problem(self, problem: ProblemSpec | Mapping[str, Any]) -> ProblemSpec:
        return await self._drive(_flows.register_problem(problem))

    async def get_problem(self, problem_id: str) -> ProblemSpec:
        return await self._drive(_flows.get_problem(problem_id))

    async def list_problems(self) -> list[dict[str, Any]]:
        return await self._drive(_flows.list_problems())

    async def delete_problem(self, problem_id: str) -> None:
        await self._drive(_flows.delete_problem(problem_id))

    async def load_problems_jsonl(self, source: str | Path | bytes) -> dict[str, Any]:
        return await self._drive(_flows.load_problems_jsonl(source))

    async def create_episode(self, body: EpisodeCreate | Mapping[str, Any]) -> StepAnswer:
        """See :meth:`RewardClient.create_episode`."""
        return await self._drive(_flows.create_episode(body))

    async def episode_step(
        self, episode_id: str, step: StepRequest | Mapping[str, Any], *, wait: float = 60.0
    ) -> StepAnswer:
        """See :meth:`RewardClient.episode_step`."""
        return await self._drive(_flows.episode_step(episode_id, step, wait=wait))

    async def get_episode(self, episode_id: str) -> EpisodeState:
        return await self._drive(_flows.get_episode(episode_id))
