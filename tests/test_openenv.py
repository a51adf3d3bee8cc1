"""The OpenEnv front end (/openenv, openenv-core's own server and client): OpenEnv's
``GenericEnvClient`` runs a two-round coverage episode on the CVDP Attenuator over the
WebSocket session unchanged, with real Verilator simulations; the stateless HTTP routes, the
schema endpoint, error statuses and the API keys."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from conftest import live_server
from test_episodes import ATTN, EXAMPLES, GOOD_TB, WEAK_TB, sv

from reward_service.api import create_app
from reward_service.settings import Settings

pytest.importorskip("openenv.core", reason="openenv-core is a server dependency")
from openenv.core.generic_client import GenericEnvClient


@pytest.fixture(scope="module")
def served(shared_cache_dir) -> Iterator[tuple[str, httpx.Client]]:
    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=600) as client:
        assert client.post("/v1/problems:load", content=(EXAMPLES / "attenuator.jsonl").read_bytes()).status_code == 201
        # the first request builds the front end (openenv-core imports gradio: slow on a busy machine),
        # so the WebSocket client's 10 s open timeout is not spent on it
        assert client.get("/openenv/health").json() == {"status": "healthy"}
        yield url, client


def test_openenv_client_runs_a_two_round_episode(served):
    url, client = served
    with GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=600).sync() as env:
        first = env.reset(problem_id=ATTN, options={"rounds": 2})
        assert first.done is False and first.reward is None
        assert first.observation["instance"] == "uut" and first.observation["files"] == ["Attenuator.sv"]
        assert [p["name"] for p in first.observation["interface"]["ports"]][:3] == ["clk", "reset", "data"]

        spec = env.step({"kind": "read_file", "path": "Attenuator.sv"})
        assert spec.reward is None and "module Attenuator" in spec.observation["content"]

        one = env.step({"kind": "submit", "stimulus": sv(WEAK_TB), "step_id": "r1"})
        scored = client.post("/v1/score?wait=600", json={"problem_id": ATTN, "stimulus": sv(WEAK_TB)}).json()
        assert one.reward == scored["reward"] and one.done is False
        toggles = one.observation["eda_result"]["uncovered"]["toggles"]
        assert {"file": "Attenuator.sv", "line": 6, "signal": "data", "bits": "1-4", "never": "toggled"} in toggles

        two = env.step({"kind": "submit", "stimulus": sv(GOOD_TB), "step_id": "r2"})
        assert two.done is True and two.observation["passed"] is True and two.reward >= 1.9

        state = env.state()
        assert state["episode_id"] == first.observation["episode_id"] and state["step_count"] == 3
        assert state["round"] == 2 and [r["step_id"] for r in state["history"]] == ["r1", "r2"]
        with pytest.raises(RuntimeError, match="409: episode .* is over"):
            env.step({"kind": "submit", "text": "```verilog\nmodule tb; endmodule\n```"})
    # the same episode over /v1: one resource, two front ends
    same = client.get(f"/v1/episodes/{state['episode_id']}").json()
    assert same["step_ids"][1:] == ["r1", "r2"] and same["history"] == state["history"]


def test_openenv_http_routes_and_schema(served):
    _, client = served
    schema = client.get("/openenv/schema").json()
    assert set(schema) == {"action", "observation", "state"}
    assert set(schema["action"]["properties"]) >= {"kind", "stimulus", "text", "path", "step_id", "episode_id"}
    assert set(schema["observation"]["properties"]) >= {"done", "reward", "eda_result", "interface", "feedback"}
    reset = client.post("/openenv/reset", json={"problem_id": ATTN, "seed": 3, "options": {"rounds": 1}})
    assert reset.status_code == 200 and set(reset.json()) == {"observation", "reward", "done"}
    episode_id = reset.json()["observation"]["episode_id"]
    # stateless HTTP: the step names its episode
    step = client.post(
        "/openenv/step", json={"action": {"kind": "read_file", "path": "Attenuator.sv", "episode_id": episode_id}}
    )
    assert step.status_code == 200 and step.json()["observation"]["path"] == "Attenuator.sv"
    assert client.get(f"/v1/episodes/{episode_id}").json()["options"]["seed"] == 3
    lost = client.post("/openenv/step", json={"action": {"kind": "read_file", "path": "a.v", "episode_id": "x" * 32}})
    assert lost.status_code == 404 and "unknown episode id" in lost.json()["detail"]
    orphan = client.post("/openenv/step", json={"action": {"kind": "read_file", "path": "a.v"}})
    assert orphan.status_code == 409 and "reset first" in orphan.json()["detail"]
    unknown = client.post("/openenv/reset", json={"problem_id": "nope"})
    assert unknown.status_code == 404
    bad = client.post("/openenv/reset", json={"problem_id": ATTN, "options": {"rounds": 0}})
    assert bad.status_code == 422 and "rounds" in bad.json()["detail"]
    incomplete = client.post("/openenv/step", json={"action": {"kind": "submit", "episode_id": episode_id}})
    assert incomplete.status_code == 422 and "needs exactly one of `stimulus` or `text`" in incomplete.json()["detail"]


def test_openenv_is_behind_the_api_keys(shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir, api_keys=["k1"], warm_on_register=False)
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=600) as client:
        assert client.get("/openenv/schema").status_code == 401
        assert client.get("/openenv/schema", headers={"Authorization": "Bearer k1"}).status_code == 200
        with pytest.raises(ConnectionError):
            GenericEnvClient(base_url=f"{url}/openenv").sync().connect()
