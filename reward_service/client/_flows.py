"""What each client method does, written once for the sync and the async client.

A flow is a generator that yields :class:`~._transport.Call` s and is sent back each
``httpx.Response`` (already checked against ``Call.ok`` and retried by the driver); its return
value is the method's result. The drivers (:class:`RewardClient`, :class:`AsyncRewardClient`)
only perform the calls, so polling, chunking, ordering and infrastructure-failure handling
cannot differ between them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from reward_service.client._transport import Call, parse_json
from reward_service.client.errors import InfrastructureFailure, InvalidRequest, RewardServiceError, ScoreTimeout
from reward_service.episodes import EpisodeCreate, EpisodeState, StepAnswer, StepRequest
from reward_service.models import ProblemSpec, ScoreRequest, ScoreResult, Status

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Flow = Generator[Call, httpx.Response, T]
log = logging.getLogger("reward_service.client")
ProgressFn = Callable[[int, int], None]

#: Requests per ``POST /v1/batches`` at most; the service's ``GET /v1/limits`` may lower it.
DEFAULT_CHUNK = 1024

#: Shortest long-poll of a job that is not done yet (s): ``wait=0`` still waits this long per GET.
MIN_POLL_S = 0.5


def request_body(request: ScoreRequest | Mapping[str, Any], where: str = "request") -> dict[str, Any]:
    """The JSON of a request as the server should see it: only the fields the caller set (so a
    ``problem_id`` request keeps the problem's simulator, coverage, limits and reward for the
    fields it does not give), the stimulus whole. Raises :class:`InvalidRequest`."""
    request = _validated(ScoreRequest, request, where)
    body = request.model_dump(mode="json", exclude_unset=True)
    body["stimulus"] = request.stimulus.model_dump(mode="json")  # `kind` is the union's discriminator
    return body


def _validated(model: type[M], value: M | Mapping[str, Any], where: str) -> M:
    """``value`` as a ``model`` (a model instance as is, a mapping validated); raises
    :class:`InvalidRequest` naming ``where`` and the first bad field."""
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where}: expected a {model.__name__} or a dict, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ())) or where
        raise InvalidRequest(f"{where}: {loc}: {first.get('msg', 'invalid value')}") from None


def _answer(model: type[M], data: Any, where: str) -> M:
    """A model of the service's answer; :class:`RewardServiceError` when it does not validate."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RewardServiceError(
            f"{where}: the service answered a {model.__name__} that does not validate: {exc}"
        ) from exc


def _result(data: Any, where: str) -> ScoreResult:
    return _answer(ScoreResult, data, where)


def _deadline(timeout: float | None) -> float | None:
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds (or None), got {timeout}")
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None, cap: float) -> float:
    return cap if deadline is None else max(0.0, min(cap, deadline - time.monotonic()))


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


# -- one sample ----------------------------------------------------------------------------------
def score(
    request: ScoreRequest | Mapping[str, Any],
    *,
    wait: float,
    timeout: float | None,
    raise_on_infra: bool,
    sample_id: str | None,
    infra_retries: int,
) -> Flow[ScoreResult]:
    body = request_body(request)
    if wait < 0:
        raise ValueError(f"wait must be >= 0 seconds, got {wait}")
    deadline = _deadline(timeout)
    attempt, lost = 1, 0
    while True:
        hold = _remaining(deadline, wait)
        response = yield Call("POST", "/v1/score", params={"wait": hold}, json=body, hold=hold, ok=(200, 202))
        data = parse_json(Call("POST", "/v1/score"), response)
        if response.status_code == 202:
            job_id = data["job_id"]
            while data.get("state") != "done" or data.get("result") is None:
                if _expired(deadline):
                    raise ScoreTimeout(f"job {job_id} not finished within the timeout of {timeout:g} s", 0, 1)
                # a long poll of at least MIN_POLL_S: wait=0 must not turn into a busy loop
                hold = _remaining(deadline, max(wait, MIN_POLL_S))
                path = f"/v1/jobs/{quote(job_id, safe='')}"
                response = yield Call("GET", path, params={"wait": hold}, hold=hold, ok=(200, 202, 404))
                data = parse_json(Call("GET", path), response)
                if response.status_code == 404:
                    break
            if response.status_code == 404:
                lost += 1
                if lost > MAX_LOST:
                    raise RewardServiceError(
                        f"the service lost job {job_id} {lost} times (404: {data.get('detail')}); giving up"
                    )
                log.warning("the service lost job %s (404: %s): resubmitting the sample", job_id, data.get("detail"))
                continue
            data = data["result"]
        result = _result(data, "POST /v1/score")
        if result.status != Status.sandbox_error or attempt > infra_retries:
            break
        attempt += 1
    if result.status == Status.sandbox_error and raise_on_infra:
        raise InfrastructureFailure(result, None, sample_id, attempt)
    return result


# -- many samples --------------------------------------------------------------------------------
def chunks(
    indices: Sequence[int],
    groups: Sequence[str | None] | None,
    size: int,
    weights: Sequence[int] | None = None,
    max_weight: int | None = None,
) -> list[list[int]]:
    """``indices`` split into batches of about ``size`` requests, never splitting a group (the
    samples of one GRPO group must share a batch for its diversity term). Order inside a
    batch follows ``indices``; a group larger than ``size`` is a batch of its own. With
    ``weights`` (e.g. body bytes per request, indexed like the requests) a batch also stays
    under ``max_weight`` in all, unless one group alone is heavier."""
    if size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {size}")
    units: dict[Any, list[int]] = {}
    for i in indices:
        label = groups[i] if groups is not None else None
        units.setdefault(("g", label) if label is not None else ("i", i), []).append(i)
    out: list[list[int]] = []
    current: list[int] = []
    weight = 0
    for unit in units.values():
        unit_weight = sum(weights[i] for i in unit) if weights is not None else 0
        heavy = max_weight is not None and weight + unit_weight > max_weight
        if current and (len(current) + len(unit) > size or heavy):
            out.append(current)
            current, weight = [], 0
        current.extend(unit)
        weight += unit_weight
    if current:
        out.append(current)
    return out


def _check_aligned(name: str, values: Sequence[Any] | None, n: int) -> None:
    if values is not None and len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries for {n} requests (one per request, in order)")


#: Share of the service's bulk body limit a batch body may use (JSON framing, headers).
BODY_SHARE = 0.9
#: Times one batch (or job) the service lost (404) is submitted again before giving up.
MAX_LOST = 5


def limits() -> Flow[dict[str, Any] | None]:
    """``GET /v1/limits``; None from a service that does not advertise its bounds (404)."""
    response = yield Call("GET", "/v1/limits", ok=(200, 404))
    return parse_json(Call("GET", "/v1/limits"), response) if response.status_code == 200 else None


def score_batch(
    requests: Sequence[ScoreRequest | Mapping[str, Any]],
    *,
    groups: Sequence[str | None] | None,
    timeout: float | None,
    poll_interval: float,
    on_progress: ProgressFn | None,
    raise_on_infra: bool,
    sample_ids: Sequence[str] | None,
    infra_retries: int,
    chunk_size: int,
) -> Flow[list[ScoreResult]]:
    """Chunks sized from the service's ``GET /v1/limits`` (at most ``batch_limit`` requests
    and ``BODY_SHARE`` of ``max_bulk_body_mb`` per batch). All chunks are submitted at once;
    a later chunk answered 429 (the queue holds the earlier ones) waits for them to progress
    instead of burning retries. A batch the service lost (404, e.g. a Redis restart without
    persistence) is submitted again (job ids are content hashes: nothing runs twice) and
    logged as a warning naming it and its samples."""
    n = len(requests)
    _check_aligned("groups", groups, n)
    _check_aligned("sample_ids", sample_ids, n)
    if poll_interval <= 0:
        raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
    bodies = [request_body(r, f"requests[{i}]") for i, r in enumerate(requests)]
    deadline = _deadline(timeout)
    bounds = yield from limits()
    size, max_bytes, weights = chunk_size, None, None
    if bounds is not None:
        size = max(1, min(chunk_size, int(bounds["batch_limit"])))
        max_bytes = int(float(bounds["max_bulk_body_mb"]) * (1 << 20) * BODY_SHARE)
        weights = [len(json.dumps(b, separators=(",", ":"))) + 32 for b in bodies]
    results: list[ScoreResult | None] = [None] * n
    attempts = [0] * n
    pending = list(range(n))

    def progress() -> None:
        if on_progress is not None:
            on_progress(sum(r is not None for r in results), n)

    while pending:
        to_send = chunks(pending, groups, size, weights, max_bytes)
        open_batches: list[tuple[str, list[int]]] = []
        lost: dict[tuple[int, ...], int] = {}
        while to_send or open_batches:
            while to_send:
                chunk = to_send[0]
                items = []
                for i in chunk:
                    label = groups[i] if groups is not None else None
                    items.append({**bodies[i], "group": label} if label is not None else bodies[i])
                # With batches of this step open, 429 means "wait for them", not an outage.
                ok = (200, 202, 429) if open_batches else (200, 202)
                response = yield Call("POST", "/v1/batches", json={"requests": items, "wait": 0}, ok=ok)
                if response.status_code == 429:
                    break
                to_send.pop(0)
                for i in chunk:
                    attempts[i] += 1
                data = parse_json(Call("POST", "/v1/batches"), response)
                _absorb(data, chunk, results)
                if data.get("state") != "done":
                    open_batches.append((data["batch_id"], chunk))
            progress()
            if not open_batches:
                continue
            if _expired(deadline):
                done = sum(r is not None for r in results)
                raise ScoreTimeout(
                    f"{done} of {n} samples scored within the timeout of {timeout:g} s "
                    f"(batches still running: {', '.join(b for b, _ in open_batches)})",
                    done,
                    n,
                )
            still_open = []
            for batch_id, chunk in open_batches:
                # a queued chunk waits on one short poll per round; the rest long-poll
                hold = _remaining(deadline, min(poll_interval, 1.0) if to_send else poll_interval)
                path = f"/v1/batches/{quote(batch_id, safe='')}"
                response = yield Call("GET", path, params={"wait": hold}, hold=hold, ok=(200, 202, 404))
                data = parse_json(Call("GET", path), response)
                if response.status_code == 404:
                    missing = [i for i in chunk if results[i] is None]
                    key = tuple(chunk)
                    lost[key] = lost.get(key, 0) + 1
                    if lost[key] > MAX_LOST:
                        raise RewardServiceError(
                            f"the service lost batch {batch_id} {MAX_LOST + 1} times "
                            f"(404: {data.get('detail')}); giving up"
                        )
                    log.warning(
                        "the service lost batch %s (404: %s): resubmitting its %d unfinished sample(s) (requests %s)",
                        batch_id,
                        data.get("detail"),
                        len(missing),
                        _span(missing),
                    )
                    if missing:
                        to_send.insert(0, missing)
                    continue
                _absorb(data, chunk, results)
                if data.get("state") != "done":
                    still_open.append((batch_id, chunk))
            open_batches = still_open
            progress()
        scored = _all_scored(results)
        pending = [i for i in pending if scored[i].status == Status.sandbox_error and attempts[i] <= infra_retries]
        for i in pending:
            results[i] = None
    final = _all_scored(results)
    if raise_on_infra:
        for i, r in enumerate(final):
            if r.status == Status.sandbox_error:
                raise InfrastructureFailure(r, i, sample_ids[i] if sample_ids is not None else None, attempts[i])
    return final


def _span(indices: list[int]) -> str:
    return f"{indices[0]}..{indices[-1]}" if len(indices) > 3 else ", ".join(map(str, indices))


def _all_scored(results: list[ScoreResult | None]) -> list[ScoreResult]:
    """``results`` once every batch of a round is done (each request has its result). Raises
    :class:`RewardServiceError` when one has none (the service said done without it)."""
    scored = [r for r in results if r is not None]
    if len(scored) != len(results):
        missing = [i for i, r in enumerate(results) if r is None]
        raise RewardServiceError(f"the service finished the batches without results for requests {_span(missing)}")
    return scored


def _absorb(batch: Mapping[str, Any], chunk: list[int], results: list[ScoreResult | None]) -> None:
    got = batch.get("results") or []
    if len(got) != len(chunk):
        raise RewardServiceError(f"batch {batch.get('batch_id')}: {len(got)} results for {len(chunk)} requests")
    for i, data in zip(chunk, got):
        if data is not None and results[i] is None:
            results[i] = _result(data, f"batch {batch.get('batch_id')}")


# -- health and problems -------------------------------------------------------------------------
def health() -> Flow[bool]:
    response = yield Call("GET", "/healthz", retry=False)
    return parse_json(Call("GET", "/healthz"), response).get("status") == "ok"


def register_problem(problem: ProblemSpec | Mapping[str, Any]) -> Flow[ProblemSpec]:
    body = _validated(ProblemSpec, problem, "problem").model_dump(mode="json", exclude_unset=True)
    response = yield Call("POST", "/v1/problems", json=body, ok=(200, 201))
    return _answer(ProblemSpec, parse_json(Call("POST", "/v1/problems"), response), "POST /v1/problems")


def get_problem(problem_id: str) -> Flow[ProblemSpec]:
    path = f"/v1/problems/{quote(problem_id, safe='')}"
    return _answer(ProblemSpec, parse_json(Call("GET", path), (yield Call("GET", path))), f"GET {path}")


def list_problems() -> Flow[list[dict[str, Any]]]:
    response = yield Call("GET", "/v1/problems")
    return parse_json(Call("GET", "/v1/problems"), response)["problems"]


def delete_problem(problem_id: str) -> Flow[None]:
    yield Call("DELETE", f"/v1/problems/{quote(problem_id, safe='')}", ok=(204,))


def load_problems_jsonl(source: str | Path | bytes) -> Flow[dict[str, Any]]:
    """``source``: a path to a CVDP cid012 JSONL file, or its bytes."""
    content = source if isinstance(source, bytes) else Path(source).read_bytes()
    response = yield Call(
        "POST", "/v1/problems:load", content=content, headers={"Content-Type": "application/x-ndjson"}, ok=(201,)
    )
    return parse_json(Call("POST", "/v1/problems:load"), response)


# -- episodes (docs/episodes.md) -----------------------------------------------------------------
def create_episode(body: EpisodeCreate | Mapping[str, Any]) -> Flow[StepAnswer]:
    data = _validated(EpisodeCreate, body, "episode").model_dump(mode="json", exclude_unset=True)
    response = yield Call("POST", "/v1/episodes", json=data, ok=(201,))
    return _answer(StepAnswer, parse_json(Call("POST", "/v1/episodes"), response), "POST /v1/episodes")


def episode_step(episode_id: str, step: StepRequest | Mapping[str, Any], *, wait: float) -> Flow[StepAnswer]:
    """One step, sent again with the same ``step_id`` while the service answers 202 (still
    scoring) or 503 (the transport's retries: a step that hit an infrastructure failure was
    dropped by the service and is scored again)."""
    data = _validated(StepRequest, step, "step").model_dump(mode="json")
    path = f"/v1/episodes/{quote(episode_id, safe='')}/step"
    hold = max(wait, MIN_POLL_S)
    while True:
        response = yield Call("POST", path, params={"wait": hold}, json=data, hold=hold, ok=(200, 202))
        if response.status_code == 200:
            return _answer(StepAnswer, parse_json(Call("POST", path), response), f"POST {path}")


def get_episode(episode_id: str) -> Flow[EpisodeState]:
    path = f"/v1/episodes/{quote(episode_id, safe='')}"
    return _answer(EpisodeState, parse_json(Call("GET", path), (yield Call("GET", path))), f"GET {path}")
