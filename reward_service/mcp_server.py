"""``reward-service mcp``: the episode tools (reset, read_file, simulate, submit, state) as an
MCP server (fastmcp), for agent harnesses and for closing coverage by hand with an assistant
(docs/episodes.md). The tools call the episodes API (``/v1/episodes``) of a running service
(``--url``) or of an embedded one built in this process (the same app, through httpx's ASGI
transport), so both modes score exactly as ``/v1/score`` does.

Each tool takes an optional ``episode_id``; without it, the episode of this server's last
``reset`` is used (one agent per server, as over stdio)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any, Literal, TypeVar

import httpx
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from reward_service.client import AsyncRewardClient
from reward_service.client.errors import RequestFailed
from reward_service.client.errors import RewardServiceError as ClientError

__all__ = ["EpisodeClient", "build_mcp", "service_client"]

T = TypeVar("T")

#: Seconds to connect and read an answer, on top of a step's long-poll.
TIMEOUT_S = 60.0
INSTRUCTIONS = (
    "Coverage closure: write a testbench that drives a hardware DUT so that its code coverage "
    "reaches the target. Call `reset` with a problem id first; its observation gives the task, "
    "the DUT's ports, the instance name the testbench must use and the files `read_file` can "
    "read. `simulate` a draft to see its coverage and uncovered points without spending a "
    "round; `submit` ends a round and gives its reward. The episode is done when the target is "
    "met or the rounds are spent."
)


class EpisodeClient:
    """The episodes API through ``client`` (:class:`AsyncRewardClient`: retries, 202s and
    503s handled as for every client call); its errors raise :class:`ToolError` naming the
    status and detail. ``problems_jsonl`` (a CVDP cid012 JSONL body) is registered before the
    first reset."""

    def __init__(self, client: AsyncRewardClient, problems_jsonl: bytes | None = None) -> None:
        self.client = client
        self._pending_problems = problems_jsonl

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except RequestFailed as exc:
            raise ToolError(f"{exc.status_code}: {exc.detail}") from exc
        except ClientError as exc:
            raise ToolError(str(exc)) from exc

    async def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._pending_problems is not None:
            await self._call(self.client.load_problems_jsonl(self._pending_problems))
            self._pending_problems = None
        return (await self._call(self.client.create_episode(body))).model_dump(mode="json")

    async def step(self, episode_id: str, step_id: str, action: dict[str, Any]) -> dict[str, Any]:
        answer = await self._call(self.client.episode_step(episode_id, {"step_id": step_id, "action": action}))
        return answer.model_dump(mode="json")

    async def state(self, episode_id: str) -> dict[str, Any]:
        return (await self._call(self.client.get_episode(episode_id))).model_dump(mode="json")


def service_client(url: str | None, api_key: str | None = None) -> AsyncRewardClient:
    """A client of the service at ``url``, or (None) of an embedded service built in this
    process (settings from the environment, as ``reward-service serve``; the same app, through
    httpx's ASGI transport)."""
    if url:
        return AsyncRewardClient(url, api_key=api_key, timeout=TIMEOUT_S)
    from reward_service.api import create_app

    return AsyncRewardClient("http://embedded", timeout=TIMEOUT_S, transport=httpx.ASGITransport(app=create_app()))


def _compact(answer: dict[str, Any]) -> dict[str, Any]:
    """The step answer without the observation's empty fields (what a model reads)."""
    observation = {k: v for k, v in answer["observation"].items() if v is not None}
    return {**answer, "observation": observation}


def _stimulus(code: str, kind: str, file_name: str | None) -> dict[str, Any]:
    if kind == "completion":
        return {"kind": "completion", "text": code}
    if kind == "cocotb":
        name = file_name or "test_dut.py"
        return {"kind": "cocotb", "files": {name: code}, "test_module": name.rsplit("/", 1)[-1].removesuffix(".py")}
    return {"kind": "sv_testbench", "files": {file_name or "tb.sv": code}}


StimulusKind = Literal["sv_testbench", "cocotb", "completion"]


def build_mcp(client: EpisodeClient) -> FastMCP:
    """The MCP server with the episode tools on ``client``."""
    mcp = FastMCP("reward-service", instructions=INSTRUCTIONS)
    current: dict[str, str | None] = {"episode_id": None}

    def episode(episode_id: str | None) -> str:
        chosen = episode_id or current["episode_id"]
        if chosen is None:
            raise ToolError("no episode yet: call `reset` first (or pass episode_id)")
        return chosen

    async def scored(
        action: str, code: str, kind: str, file_name: str | None, episode_id: str | None, step_id: str | None
    ) -> dict[str, Any]:
        body = {"kind": action, "stimulus": _stimulus(code, kind, file_name)}
        return _compact(await client.step(episode(episode_id), step_id or uuid.uuid4().hex, body))

    @mcp.tool
    async def reset(
        problem_id: str | None = None,
        problem: dict[str, Any] | None = None,
        rounds: int = 3,
        feedback: Literal["none", "text", "annotated"] = "text",
        reward: Literal["absolute", "improvement"] = "absolute",
        seed: int = 0,
        max_simulations: int = 10,
    ) -> dict[str, Any]:
        """Start an episode on a registered problem (``problem_id``) or an inline problem
        (``problem``: a ProblemSpec object). Returns the first observation: the task prompt,
        the DUT's interface (ports), the instance name the testbench must use, the readable
        files, the coverage target, and the episode_id."""
        options = {
            "rounds": rounds,
            "feedback": feedback,
            "reward": reward,
            "seed": seed,
            "max_simulations": max_simulations,
        }
        body: dict[str, Any] = {"options": options}
        body.update({"problem_id": problem_id} if problem is None else {"problem": problem})
        answer = await client.reset(body)
        current["episode_id"] = answer["observation"]["episode_id"]
        return _compact(answer)

    @mcp.tool
    async def read_file(path: str, episode_id: str | None = None) -> dict[str, Any]:
        """Read one of the problem's files (the DUT's RTL or a spec document) by the name the
        reset observation's `files` lists."""
        action = {"kind": "read_file", "path": path}
        return _compact(await client.step(episode(episode_id), uuid.uuid4().hex, action))

    @mcp.tool
    async def simulate(
        code: str,
        kind: StimulusKind = "sv_testbench",
        file_name: str | None = None,
        episode_id: str | None = None,
        step_id: str | None = None,
    ) -> dict[str, Any]:
        """Simulate a draft testbench (SystemVerilog source, a cocotb test module, or a raw
        answer with a code block: `kind`) and get its coverage and uncovered points, without
        ending the round. Limited per episode (simulations_left)."""
        return await scored("simulate", code, kind, file_name, episode_id, step_id)

    @mcp.tool
    async def submit(
        code: str,
        kind: StimulusKind = "sv_testbench",
        file_name: str | None = None,
        episode_id: str | None = None,
        step_id: str | None = None,
    ) -> dict[str, Any]:
        """Submit a testbench for this round: it is scored (the reward) and the observation
        lists what it left uncovered, by kind, with feedback text. `done` says whether the
        target is met or the rounds are spent. Send the same step_id again to retry safely."""
        return await scored("submit", code, kind, file_name, episode_id, step_id)

    @mcp.tool
    async def state(episode_id: str | None = None) -> dict[str, Any]:
        """The episode's progress: rounds, rewards per round, whether it is done."""
        return await client.state(episode(episode_id))

    return mcp
