"""What the trainer adapters share: where the service is, how a problem id is carried, how a
completion becomes a request, group labels, and rewards (with the optional group diversity
term of DESIGN.md, computed by :func:`reward_service.diversity.group_rewards`).

Problem ids. Trainers carry per-sample data in a field of their own (verl ``ground_truth`` /
``extra_info``, TRL a dataset column, OpenRLHF ``labels``, slime ``Sample.label`` /
``Sample.metadata``). Each accepts either the plain problem id (``"cvdp_copilot_Attenuator_0011"``)
or a JSON object holding it (``'{"problem_id": "cvdp_copilot_Attenuator_0011", ...}'``, or that
object as a dict), so a dataset can keep other fields next to the id.

Service. ``REWARD_SERVICE_URL`` (default ``http://127.0.0.1:8000``) and ``REWARD_SERVICE_API_KEY``,
read when a reward is first computed, unless the adapter is given them explicitly. The shared
clients take ``REWARD_SERVICE_MAX_RETRIES`` (5), ``REWARD_SERVICE_BACKOFF_S`` (0.5) and
``REWARD_SERVICE_TIMEOUT`` (30 s) from the environment when they are created.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from reward_service.client import AsyncRewardClient, RewardClient
from reward_service.diversity import group_rewards
from reward_service.models import PROBLEM_ID_PATTERN, ScoreResult, Status

URL_ENV = "REWARD_SERVICE_URL"
KEY_ENV = "REWARD_SERVICE_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8000"
#: Resubmissions of a sample that ended in ``sandbox_error`` before an adapter gives up on it.
INFRA_RETRIES = 2

_ID = re.compile(PROBLEM_ID_PATTERN)


def service_url(url: str | None = None) -> str:
    """``url``, else ``$REWARD_SERVICE_URL``, else ``http://127.0.0.1:8000``."""
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


def api_key(key: str | None = None) -> str | None:
    return key or os.environ.get(KEY_ENV) or None


def problem_id_from(value: Any) -> str | None:
    """The problem id carried by ``value``: a plain id string, a JSON object string with
    ``"problem_id"``, or a mapping with ``"problem_id"``; None when it carries none."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return None
        else:
            return text if _ID.fullmatch(text) else None
    if isinstance(value, Mapping):
        pid = value.get("problem_id")
        return pid if isinstance(pid, str) and _ID.fullmatch(pid) else None
    return None


def find_problem_id(*candidates: Any, where: str) -> str:
    """The first problem id carried by ``candidates`` (in order). Raises ``ValueError`` naming
    ``where`` when none carries one."""
    for value in candidates:
        pid = problem_id_from(value)
        if pid is not None:
            return pid
    shown = ", ".join(f"{v!r:.80}" for v in candidates)
    raise ValueError(
        f"{where}: no problem id found in {shown}: give the problem id "
        f"(letters, digits, '_.:-') or a JSON object with \"problem_id\""
    )


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # multimodal parts: [{"type": "text", "text": ...}, ...]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def completion_text(completion: Any) -> str:
    """The model's text of one completion: a string as is; a conversation (list of
    ``{"role", "content"}`` messages, TRL's conversational format) gives its assistant
    messages joined in order (the extraction then takes the last complete testbench)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence):
        return "\n\n".join(
            _content(m) for m in completion if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"
        )
    raise TypeError(
        f"a completion is a string or a list of {{'role', 'content'}} messages, got {type(completion).__name__}"
    )


def score_request(problem_id: str, text: str) -> dict[str, Any]:
    """The request scoring the raw completion ``text`` on registered problem ``problem_id``."""
    return {"problem_id": problem_id, "stimulus": {"kind": "completion", "text": text}}


def group_label(problem_id: str, *parts: Any) -> str:
    """A stable group label for the samples of one prompt (``parts``: whatever tells prompts
    of one problem apart, e.g. the prompt text or a dataset index)."""
    digest = hashlib.sha1(json.dumps([problem_id, *parts], sort_keys=True, default=str).encode()).hexdigest()
    return f"{problem_id[:150]}#{digest[:12]}"


def rewards_of(
    results: Sequence[ScoreResult], groups: Sequence[str | None] | None = None, diversity_weight: float = 0.0
) -> tuple[list[float | None], list[float | None] | None]:
    """(rewards, diversity): ``results[i].reward`` (None for ``sandbox_error``), plus
    ``diversity_weight`` × the group diversity term when a weight and groups are given."""
    if not diversity_weight or groups is None:
        return [r.reward for r in results], None
    grouped = group_rewards(list(results), list(groups), diversity_weight)
    return grouped.rewards, grouped.diversity


def known_reward(result: ScoreResult) -> float:
    """The reward of a result scored with ``raise_on_infra=True``: the client raised for a
    ``sandbox_error``, the one status without a reward."""
    assert result.reward is not None, "raise_on_infra raises for a sandbox_error, the one status without a reward"
    return result.reward


def known_rewards(rewards: Sequence[float | None]) -> list[float]:
    """``rewards`` (:func:`rewards_of`) of results scored with ``raise_on_infra=True``: none is
    None (see :func:`known_reward`)."""
    known = [r for r in rewards if r is not None]
    assert len(known) == len(rewards), "raise_on_infra raises for a sandbox_error, the one status without a reward"
    return known


def infra_failures(results: Sequence[ScoreResult]) -> list[int]:
    return [i for i, r in enumerate(results) if r.status == Status.sandbox_error]


def coverage_of(result: ScoreResult) -> float:
    """Overall coverage in [0, 1]; 0 for a sample without coverage."""
    return result.coverage.overall if result.status == Status.ok and result.coverage.overall is not None else 0.0


# -- clients shared by the calls of one process --------------------------------------------------
_lock = threading.Lock()
_clients: dict[tuple[str, str | None], RewardClient] = {}
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict] = weakref.WeakKeyDictionary()


class ClientOptions(TypedDict, total=False):
    """Keyword options of the shared clients (:class:`RewardClient`'s of the same names)."""

    max_retries: int
    backoff_s: float
    timeout: float


_N = TypeVar("_N", int, float)


def _env_number(env: str, cast: Callable[[str], _N]) -> _N | None:
    """``env`` read with ``cast``; None when unset or empty. Raises ValueError naming ``env``
    when it is not such a number."""
    raw = os.environ.get(env)
    if not raw:
        return None
    try:
        return cast(raw)
    except ValueError:
        raise ValueError(f"{env} must be a number, got {raw!r}") from None


def client_options() -> ClientOptions:
    """Retry and timeout options of the shared clients, from the environment (those set)."""
    options: ClientOptions = {}
    max_retries = _env_number("REWARD_SERVICE_MAX_RETRIES", int)
    if max_retries is not None:
        options["max_retries"] = max_retries
    backoff_s = _env_number("REWARD_SERVICE_BACKOFF_S", float)
    if backoff_s is not None:
        options["backoff_s"] = backoff_s
    timeout = _env_number("REWARD_SERVICE_TIMEOUT", float)
    if timeout is not None:
        options["timeout"] = timeout
    return options


def shared_client(url: str | None = None, key: str | None = None) -> RewardClient:
    """One pooled :class:`RewardClient` per (URL, key) for the whole process."""
    ident = (service_url(url), api_key(key))
    with _lock:
        client = _clients.get(ident)
        if client is None:
            client = _clients[ident] = RewardClient(ident[0], api_key=ident[1], **client_options())
        return client


def shared_async_client(url: str | None = None, key: str | None = None) -> AsyncRewardClient:
    """One :class:`AsyncRewardClient` per (URL, key) and running event loop (httpx pools
    connections per loop)."""
    ident = (service_url(url), api_key(key))
    loop = asyncio.get_running_loop()
    with _lock:
        per_loop = _async_clients.setdefault(loop, {})
        client = per_loop.get(ident)
        if client is None:
            client = per_loop[ident] = AsyncRewardClient(ident[0], api_key=ident[1], **client_options())
        return client
