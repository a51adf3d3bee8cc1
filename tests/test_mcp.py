"""The MCP server (`reward-service mcp`, fastmcp): fastmcp's own client runs a two-round
coverage episode on the CVDP Attenuator through the tools (in memory, on an embedded service
in this process), and over stdio against the real command; real Verilator simulations."""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
import pytest
from conftest import REPO
from test_episodes import ATTN, EXAMPLES, GOOD_TB, WEAK_TB

from reward_service.api import create_app
from reward_service.client import AsyncRewardClient
from reward_service.settings import Settings

fastmcp = pytest.importorskip("fastmcp")
from fastmcp import Client  # noqa: E402
from fastmcp.client.transports import StdioTransport  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402

from reward_service.mcp_server import EpisodeClient, build_mcp  # noqa: E402


def test_mcp_tools_run_a_two_round_episode(shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    client = AsyncRewardClient("http://embedded", transport=httpx.ASGITransport(app=create_app(settings=settings)))
    server = build_mcp(EpisodeClient(client, problems_jsonl=(EXAMPLES / "attenuator.jsonl").read_bytes()))

    async def run() -> None:
        async with Client(server) as client:
            names = {t.name for t in await client.list_tools()}
            assert names == {"reset", "read_file", "simulate", "submit", "state"}
            with pytest.raises(ToolError, match="call `reset` first"):
                await client.call_tool("read_file", {"path": "Attenuator.sv"})
            first = (await client.call_tool("reset", {"problem_id": ATTN, "rounds": 2})).structured_content
            obs = first["observation"]
            assert obs["instance"] == "uut" and obs["target_percent"] == 90.0 and "status" not in obs
            assert [p["name"] for p in obs["interface"]["ports"]] == [
                "clk",
                "reset",
                "data",
                "ATTN_CLK",
                "ATTN_DATA",
                "ATTN_LE",
            ]
            rtl = (await client.call_tool("read_file", {"path": "Attenuator.sv"})).structured_content
            assert "module Attenuator" in rtl["observation"]["content"]

            draft = (await client.call_tool("simulate", {"code": WEAK_TB})).structured_content
            assert draft["reward"] is None and draft["observation"]["round"] == 0
            one = (await client.call_tool("submit", {"code": WEAK_TB, "step_id": "one"})).structured_content
            # the round and the draft are the same testbench: the same coverage, and the round's reward
            assert one["observation"]["coverage"] == draft["observation"]["coverage"]
            assert one["reward"] == draft["observation"]["result_reward"] and one["done"] is False
            toggles = one["observation"]["eda_result"]["uncovered"]["toggles"]
            assert {"file": "Attenuator.sv", "line": 6, "signal": "data", "bits": "1-4", "never": "toggled"} in toggles
            again = (await client.call_tool("submit", {"code": WEAK_TB, "step_id": "one"})).structured_content
            assert again == one  # a retried step: the stored answer

            fenced = f"Here is a better one:\n```systemverilog\n{GOOD_TB}```\n"
            two = (await client.call_tool("submit", {"code": fenced, "kind": "completion"})).structured_content
            assert two["done"] is True and two["observation"]["passed"] is True
            state = (await client.call_tool("state", {})).structured_content
            assert state["round"] == 2 and state["done"] is True and len(state["history"]) == 2
            with pytest.raises(ToolError, match="409: .* is over"):
                await client.call_tool("submit", {"code": GOOD_TB})
            with pytest.raises(ToolError, match="404: no file"):
                await client.call_tool("read_file", {"path": "../../etc/passwd"})

    asyncio.run(run())


def test_reward_service_mcp_over_stdio(shared_cache_dir, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),  # this checkout's package, not an installed one
        "REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir),
        "REWARD_SERVICE_WARM_ON_REGISTER": "false",
        "REWARD_SERVICE_SCORE_WORKERS": "1",
    }
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "reward_service", "mcp", "--problems", str(EXAMPLES / "attenuator.jsonl")],
        env=env,
        cwd=str(tmp_path),
    )

    async def run() -> None:
        async with Client(transport, timeout=600) as client:
            first = (await client.call_tool("reset", {"problem_id": ATTN, "rounds": 1})).structured_content
            assert first["observation"]["instance"] == "uut"
            one = (await client.call_tool("submit", {"code": GOOD_TB})).structured_content
            assert one["done"] is True and one["observation"]["passed"] is True and one["reward"] >= 1.9

    asyncio.run(run())
