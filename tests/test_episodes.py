"""Episodes (issue 21, docs/episodes.md) over HTTP on the embedded server, with real
Verilator/Icarus simulations of the CVDP Attenuator that ships in examples/cvdp: a two-round
episode whose second observation lists the first round's uncovered points, a step's reward
equal to /v1/score's for the same testbench, idempotent retries, tool calls, the bounds of
what an agent can reach, and an episode continued by a restarted API on Redis."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO
from test_api import serving
from test_workers import redis_server as redis_server  # a module fixture (private redis-server), re-exported for pytest

from reward_service.api import create_app
from reward_service.api.episode_store import InMemoryEpisodeStore, RedisEpisodeStore
from reward_service.episodes import EpisodeOptions, EpisodeRecord
from reward_service.feedback import uncovered_by_kind
from reward_service.interface import dut_interface
from reward_service.models import ProblemSpec, UncoveredPoint
from reward_service.problems.cvdp import load_problems
from reward_service.settings import Settings

EXAMPLES = REPO / "examples" / "cvdp"
ATTN = "cvdp_copilot_Attenuator_0011"
#: Round 1: resets and drives one data change, so most `data` bits never toggle and the
#: reset branch's else side is left (below the 90% target).
WEAK_TB = (EXAMPLES / "tb_attenuator_weak.sv").read_text()
#: Round 2: the team's full testbench for the Attenuator (meets the target).
GOOD_TB = (EXAMPLES / "tb_attenuator.sv").read_text()


def sv(text: str, name: str = "tb.sv") -> dict:
    return {"kind": "sv_testbench", "files": {name: text}}


def jobs_submitted(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    return float(re.search(r"^reward_service_jobs_submitted_total (\S+)$", text, re.M).group(1))


@pytest.fixture(scope="module")
def api(shared_cache_dir) -> Iterator[httpx.Client]:
    """The embedded service without the result cache: every scored step really simulates."""
    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    with serving(create_app(settings=settings)) as client:
        loaded = client.post("/v1/problems:load", content=(EXAMPLES / "attenuator.jsonl").read_bytes())
        assert loaded.status_code == 201, loaded.text
        yield client


def reset(api: httpx.Client, **options) -> dict:
    response = api.post("/v1/episodes", json={"problem_id": ATTN, "options": options})
    assert response.status_code == 201, response.text
    return response.json()


def step(api: httpx.Client, episode_id: str, step_id: str, action: dict, status: int = 200) -> dict:
    response = api.post(f"/v1/episodes/{episode_id}/step?wait=600", json={"step_id": step_id, "action": action})
    assert response.status_code == status, response.text
    return response.json()


def test_two_round_episode_feeds_back_round_one_and_rewards_as_score(api):
    first = reset(api, rounds=2)
    obs = first["observation"]
    assert first["reward"] is None and first["done"] is False and obs["kind"] == "reset"
    assert obs["prompt"].startswith("Create a testbench for the `Attenuator` module")
    assert obs["instance"] == "uut" and obs["target_percent"] == 90.0 and obs["files"] == ["Attenuator.sv"]
    assert obs["interface"]["module"] == "Attenuator"
    assert [(p["name"], p["direction"], p["width"]) for p in obs["interface"]["ports"]] == [
        ("clk", "input", 1),
        ("reset", "input", 1),
        ("data", "input", 5),
        ("ATTN_CLK", "output", 1),
        ("ATTN_DATA", "output", 1),
        ("ATTN_LE", "output", 1),
    ]
    episode_id = obs["episode_id"]

    one = step(api, episode_id, "round-1", {"kind": "submit", "stimulus": sv(WEAK_TB)})
    score = api.post("/v1/score?wait=600", json={"problem_id": ATTN, "stimulus": sv(WEAK_TB)})
    assert score.status_code == 200, score.text
    scored = score.json()
    assert scored["cache"]["result"] is False  # a second real simulation, not the step's answer again
    # the step's reward is /v1/score's for the same testbench, and so is everything it reports
    assert one["reward"] == scored["reward"] == one["observation"]["result_reward"]
    assert one["observation"]["coverage"]["overall"] == scored["coverage"]["overall"] < 0.9
    assert one["done"] is False and one["observation"]["round"] == 1 and one["observation"]["passed"] is False

    # the second observation holds the first round's uncovered points, grouped by kind
    eda = one["observation"]["eda_result"]
    listed = {(p["file"], p["line"], p["metric"], p["detail"]) for p in scored["uncovered"]}
    assert eda["uncovered_points"] == len(scored["uncovered"]) == eda["listed_points"] > 0
    assert set(eda["uncovered"]) <= {"blocks", "branches", "expressions", "toggles", "fsm_states", "fsm_arcs"}
    for item in eda["uncovered"].get("branches", []):
        assert (item["file"], item["line"], "branch", item["detail"]) in listed
    toggled = {(t["signal"], t["never"]) for t in eda["uncovered"]["toggles"]}
    assert ("data", "toggled") in toggled  # bits of data the weak testbench never drove
    data_bits = next(t["bits"] for t in eda["uncovered"]["toggles"] if (t["signal"], t["never"]) == ("data", "toggled"))
    assert data_bits == "1-4"
    assert one["observation"]["feedback"].startswith("Coverage of the DUT (instance `uut`)")
    assert "`data` bits 1-4 never toggled" in one["observation"]["feedback"]

    two = step(api, episode_id, "round-2", {"kind": "submit", "stimulus": sv(GOOD_TB, "tb_attenuator.sv")})
    assert two["done"] is True and two["observation"]["passed"] is True and two["observation"]["round"] == 2
    assert two["reward"] == two["observation"]["result_reward"] >= 1.9

    state = api.get(f"/v1/episodes/{episode_id}").json()
    assert state["done"] is True and state["round"] == 2 and state["step_ids"] == ["round-1", "round-2"]
    assert [r["reward"] for r in state["history"]] == [one["reward"], two["reward"]]
    assert state["best_reward"] == two["reward"]
    over = api.post(
        f"/v1/episodes/{episode_id}/step",
        json={"step_id": "round-3", "action": {"kind": "submit", "stimulus": sv(GOOD_TB)}},
    )
    assert over.status_code == 409 and "is over" in over.json()["detail"]


def test_retried_step_is_answered_from_the_episode_and_never_scored_twice(api):
    episode_id = reset(api, rounds=3, reward="improvement")["observation"]["episode_id"]
    action = {"kind": "submit", "stimulus": sv(WEAK_TB)}
    before = jobs_submitted(api)
    first = step(api, episode_id, "s-1", action)
    assert jobs_submitted(api) == before + 1
    again = step(api, episode_id, "s-1", action)
    assert again == first and jobs_submitted(api) == before + 1  # the stored answer, no new job
    state = api.get(f"/v1/episodes/{episode_id}").json()
    assert state["round"] == 1 and len(state["history"]) == 1
    # a step id names one action: reusing it for another is refused, not applied
    other = api.post(
        f"/v1/episodes/{episode_id}/step",
        json={"step_id": "s-1", "action": {"kind": "read_file", "path": "Attenuator.sv"}},
    )
    assert other.status_code == 409 and "another action" in other.json()["detail"]
    # improvement: the first round gains its whole reward, a round scoring the same gains 0
    assert first["reward"] == first["observation"]["result_reward"]
    same = step(api, episode_id, "s-2", action)
    assert same["reward"] == 0.0 and same["observation"]["result_reward"] == first["reward"]


def test_tools_read_files_and_simulate_drafts_without_ending_a_round(api):
    answer = reset(api, rounds=1, max_simulations=1, feedback="annotated")
    episode_id = answer["observation"]["episode_id"]
    read = step(api, episode_id, "read", {"kind": "read_file", "path": "Attenuator.sv"})
    assert read["reward"] is None and read["done"] is False
    assert (
        read["observation"]["content"]
        == load_problems(EXAMPLES / "attenuator.jsonl")[ATTN].design.files["Attenuator.sv"]
    )
    for path in ("../attenuator.jsonl", "/etc/passwd", "src/process.py", "src/Attenuator.sv"):
        missing = api.post(
            f"/v1/episodes/{episode_id}/step",
            json={"step_id": f"bad-{len(path)}", "action": {"kind": "read_file", "path": path}},
        )
        assert missing.status_code == 404 and "no file" in missing.json()["detail"], path

    draft = step(api, episode_id, "draft", {"kind": "simulate", "stimulus": sv(WEAK_TB)})
    assert draft["reward"] is None and draft["done"] is False
    obs = draft["observation"]
    assert obs["kind"] == "simulate" and obs["round"] == 0 and obs["simulations_left"] == 0
    assert obs["status"] == "ok" and obs["coverage"]["overall"] < 0.9
    assert ">> " in obs["feedback"] and "// uncovered:" in obs["feedback"]  # the annotated source
    spent = api.post(
        f"/v1/episodes/{episode_id}/step",
        json={"step_id": "draft-2", "action": {"kind": "simulate", "stimulus": sv(WEAK_TB)}},
    )
    assert spent.status_code == 409 and "simulate calls are spent" in spent.json()["detail"]
    # a model cannot hand the DUT in: the action has no design, and extra fields are refused
    tampered = api.post(
        f"/v1/episodes/{episode_id}/step",
        json={"step_id": "x", "action": {"kind": "submit", "stimulus": sv(WEAK_TB), "design": {"files": {"a.v": ""}}}},
    )
    assert tampered.status_code == 422
    last = step(api, episode_id, "final", {"kind": "submit", "stimulus": sv(WEAK_TB)})
    assert last["done"] is True and last["observation"]["round"] == 1  # rounds spent, target not met
    assert last["reward"] == obs["result_reward"]  # the draft and the round are the same testbench


def test_episode_ids_are_unguessable_and_behind_the_api_keys(shared_cache_dir):
    problem = ProblemSpec(
        id="ctr",
        design={"files": {"ctr.v": "module ctr(input clk, output reg q); always @(posedge clk) q <= ~q; endmodule\n"}},
    )
    settings = Settings(cache_dir=shared_cache_dir, api_keys=["k1"], warm_on_register=False)
    with serving(create_app(settings=settings)) as client:
        body = {"problem": problem.model_dump(mode="json"), "options": {"rounds": 2}}
        assert client.post("/v1/episodes", json=body).status_code == 401
        auth = {"Authorization": "Bearer k1"}
        ids = {
            client.post("/v1/episodes", json=body, headers=auth).json()["observation"]["episode_id"] for _ in range(3)
        }
        assert len(ids) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]{32}", i) for i in ids)
        some = next(iter(ids))
        assert client.get(f"/v1/episodes/{some}").status_code == 401
        assert client.get(f"/v1/episodes/{some}", headers=auth).json()["problem_id"] == "ctr"
        other = some[:-1] + ("y" if some.endswith("x") else "x")  # one character off, never the id itself
        assert client.get(f"/v1/episodes/{other}", headers=auth).status_code == 404
        bad = client.post("/v1/episodes", json={"problem_id": "nope"}, headers=auth)
        assert bad.status_code == 404 and "unknown problem_id" in bad.json()["detail"]
        both = client.post("/v1/episodes", json={**body, "problem_id": "ctr"}, headers=auth)
        assert both.status_code == 422 and "exactly one" in both.json()["detail"]


def test_episode_survives_an_api_restart_on_redis(redis_server, shared_cache_dir):
    settings = Settings(
        cache_dir=shared_cache_dir, redis_url=f"{redis_server}/5", score_workers=1, warm_on_register=False
    )
    problem = load_problems(EXAMPLES / "attenuator.jsonl")[ATTN].spec()
    with serving(create_app(settings=settings)) as client:
        first = client.post("/v1/episodes", json={"problem": problem.model_dump(mode="json"), "options": {"rounds": 2}})
        episode_id = first.json()["observation"]["episode_id"]
        one = step(client, episode_id, "r1", {"kind": "submit", "stimulus": sv(WEAK_TB)})
    with serving(create_app(settings=settings)) as client:  # a new process's stores: Redis only
        assert step(client, episode_id, "r1", {"kind": "submit", "stimulus": sv(WEAK_TB)}) == one
        two = step(client, episode_id, "r2", {"kind": "submit", "stimulus": sv(GOOD_TB)})
        assert two["done"] is True and two["observation"]["round"] == 2
        assert client.get(f"/v1/episodes/{episode_id}").json()["step_ids"] == ["r1", "r2"]


def test_episode_stores_expire_and_copy(redis_server):
    record = EpisodeRecord(
        id="e1",
        problem=ProblemSpec(id="p", design={"files": {"a.v": "module a; endmodule\n"}}),
        interface=dut_interface({"a.v": "module a; endmodule\n"}, None),
        options=EpisodeOptions(),
    )
    memory = InMemoryEpisodeStore(ttl_s=60)
    memory.put(record)
    record.round = 5  # the store keeps what was put, not the caller's object
    assert memory.get("e1").round == 0
    assert InMemoryEpisodeStore(ttl_s=-1).get("e1") is None
    expired = InMemoryEpisodeStore(ttl_s=-1)
    expired.put(record)
    assert expired.get("e1") is None
    redis_store = RedisEpisodeStore(f"{redis_server}/6", ttl_s=120)
    redis_store.put(record)
    assert redis_store.get("e1").round == 5 and 0 < redis_store.client.ttl("reward-service:episode:e1") <= 120
    with redis_store.lock("e1"), memory.lock("e1"):
        pass


def test_uncovered_by_kind_groups_points_as_the_eda_result():
    points = [
        UncoveredPoint(file="d.v", line=3, metric="line", detail="block"),
        UncoveredPoint(file="d.v", line=4, metric="branch", detail="else"),
        UncoveredPoint(file="d.v", line=5, metric="expr", detail="(a==1 && b==0) => 0"),
        UncoveredPoint(file="d.v", line=2, metric="toggle", detail="bus[0]:0->1"),
        UncoveredPoint(file="d.v", line=2, metric="toggle", detail="bus[1]:0->1"),
        UncoveredPoint(file="d.v", line=2, metric="toggle", detail="bus[1]:1->0"),
        UncoveredPoint(file="d.v", line=2, metric="toggle", detail="bus[2]:1->0"),
        UncoveredPoint(file="d.v", line=1, metric="toggle", detail="en:0->1"),
        UncoveredPoint(file="d.v", line=7, metric="fsm_state", detail="state=DONE"),
    ]
    sources = {"d.v": "module d(input en,\n input [2:0] bus);\n x;\n if (a)\n y = a && b;\n"}
    kinds = uncovered_by_kind(points, sources=sources)
    assert kinds["blocks"] == [{"file": "d.v", "line": 3, "code": "x;", "detail": "block"}]
    assert kinds["branches"] == [{"file": "d.v", "line": 4, "code": "if (a)", "detail": "else"}]
    assert kinds["expressions"][0]["detail"] == "(a==1 && b==0) => 0"
    assert kinds["fsm_states"] == [{"file": "d.v", "line": 7, "code": None, "detail": "state=DONE"}]
    toggles = {(t["signal"], t["never"]): t["bits"] for t in kinds["toggles"]}
    assert toggles == {("bus", "toggled"): "1", ("bus", "rose"): "0", ("bus", "fell"): "2", ("en", "rose"): None}
    assert len(uncovered_by_kind(points, max_items=1)["toggles"]) == 1


def test_dut_interface_reads_ports_and_parameters():
    text = Path(EXAMPLES / "Attenuator.sv").read_text()
    assert [p.name for p in dut_interface({"Attenuator.sv": text}, None).ports] == [
        "clk", "reset", "data", "ATTN_CLK", "ATTN_DATA", "ATTN_LE",
    ]  # fmt: skip
    nested = dut_interface(
        {"a.v": "module sub #(parameter W=4)(input [W-1:0] a, output y); assign y=|a; endmodule\n"
         "module top(input [7:0] x, output z); sub #(8) s(.a(x), .y(z)); endmodule\n"},
        "sub",
    )  # fmt: skip
    assert [(p.name, p.width) for p in nested.ports] == [("a", 8), ("y", 1)]
    assert [(p.name, p.value) for p in nested.parameters] == [("W", "8")]
    broken = dut_interface({"a.v": "module x("}, None)
    assert broken.ports == [] and broken.error == "a.v does not parse"


def test_a_step_not_done_within_wait_is_answered_202_and_its_retry_waits_for_the_same_job(api):
    episode_id = reset(api, rounds=2)["observation"]["episode_id"]
    body = {"step_id": "slow", "action": {"kind": "submit", "stimulus": sv(WEAK_TB.replace("#400", "#401"))}}
    before = jobs_submitted(api)
    pending = api.post(f"/v1/episodes/{episode_id}/step?wait=0", json=body)
    assert pending.status_code == 202, pending.text
    assert pending.json() == {"episode_id": episode_id, "step_id": "slow", "state": pending.json()["state"]}
    assert api.get(f"/v1/episodes/{episode_id}").json()["pending_step"] == "slow"
    other = api.post(
        f"/v1/episodes/{episode_id}/step",
        json={"step_id": "next", "action": {"kind": "submit", "stimulus": sv(GOOD_TB)}},
    )
    assert other.status_code == 409 and "'slow' is still scoring" in other.json()["detail"]
    done = step(api, episode_id, "slow", body["action"])
    assert done["observation"]["round"] == 1 and done["observation"]["status"] == "ok"
    assert jobs_submitted(api) == before + 1  # the retry waited for the first job


class FailsFirstDispatcher:
    """Red team: the real embedded dispatcher, except that the first job's result is a
    sandbox_error (a worker lost mid-sample), as a fault would leave it."""

    def __init__(self, real) -> None:
        self.real = real
        self.failed: str | None = None
        self.max_queue = real.max_queue

    def submit(self, request):
        job_id = self.real.submit(request)
        if self.failed is None:
            self.failed = job_id
        return job_id

    def wait(self, job_id, timeout):
        from reward_service.dispatch.base import JobState, JobView
        from reward_service.models import ScoreResult

        view = self.real.wait(job_id, timeout)
        if job_id == self.failed and view is not None and view.state == JobState.done:
            return JobView(job_id, JobState.done, ScoreResult.infrastructure_failure("worker lost"))
        return view

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_sandbox_error_is_not_a_round_and_the_step_can_be_sent_again(shared_cache_dir):
    from reward_service.api.backends import build_dispatcher

    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=1, warm_on_register=False)
    real = build_dispatcher(settings)
    flaky = FailsFirstDispatcher(real)
    try:
        with serving(create_app(flaky, settings=settings)) as client:
            client.post("/v1/problems:load", content=(EXAMPLES / "attenuator.jsonl").read_bytes())
            episode_id = reset(client, rounds=2)["observation"]["episode_id"]
            action = {"kind": "submit", "stimulus": sv(WEAK_TB)}
            failed = client.post(f"/v1/episodes/{episode_id}/step?wait=600", json={"step_id": "s", "action": action})
            assert failed.status_code == 503 and "not counted: send the step again" in failed.json()["detail"]
            state = client.get(f"/v1/episodes/{episode_id}").json()
            assert state["round"] == 0 and state["step_ids"] == [] and state["history"] == []
            again = step(client, episode_id, "s", action)
            assert again["observation"]["round"] == 1 and again["reward"] == again["observation"]["result_reward"] > 1
    finally:
        real.close()


def test_the_python_client_runs_an_episode(api):
    from reward_service.client import RewardClient

    with RewardClient(str(api.base_url), timeout=600) as client:
        first = client.create_episode({"problem_id": ATTN, "options": {"rounds": 1}})
        episode_id = first.observation.episode_id
        assert first.observation.instance == "uut" and first.observation.interface.ports[2].width == 5
        # wait=0: the service answers 202 until it is done; the client sends the same step again
        answer = client.episode_step(
            episode_id, {"step_id": "only", "action": {"kind": "submit", "stimulus": sv(GOOD_TB)}}, wait=0
        )
        assert answer.done is True and answer.observation.passed is True and answer.reward >= 1.9
        state = client.get_episode(episode_id)
        assert state.step_ids == ["only"] and state.history[0].reward == answer.reward


def test_trl_environment_runs_an_episode_through_its_tools(api):
    import inspect

    from reward_service.adapters.trl import CoverageEnvironment
    from reward_service.client import RewardClient

    with RewardClient(str(api.base_url), timeout=600) as client:
        env = CoverageEnvironment(client=client, rounds=2)
        # what TRL's GRPOTrainer takes from the class: reset, get_reward, and the public tools
        public = {n for n, _ in inspect.getmembers(CoverageEnvironment, inspect.isfunction) if not n.startswith("_")}
        assert public == {"reset", "get_reward", "read_file", "simulate", "submit"}
        assert env.get_reward() == 0.0 and env.submit("x").startswith("error: no episode")
        intro = env.reset(prompt="Write a testbench.", problem_id=ATTN)
        assert "instantiate it as `uut`" in intro and "input data [5 bit]" in intro and "2 submissions" in intro
        assert "module Attenuator" in env.read_file("Attenuator.sv")
        assert env.read_file("nope.v").startswith("error 404: no file 'nope.v'")
        weak = env.submit(f"```verilog\n{WEAK_TB}```")
        assert "Target 90%: not met" in weak and "`data` bits 1-4 never toggled" in weak
        good = env.submit(GOOD_TB)
        assert "Target 90%: met" in good and good.endswith("The episode is over.")
        assert env.submit(GOOD_TB).startswith("error 409:")
        scored = client.score({"problem_id": ATTN, "stimulus": sv(GOOD_TB)}, wait=600)
        assert env.get_reward() == scored.reward and len(env.rewards) == 2
    transformers = pytest.importorskip("transformers")
    for tool in (env.read_file, env.simulate, env.submit):  # the schemas TRL renders the tools from
        schema = transformers.utils.get_json_schema(tool)
        assert schema["function"]["name"] == tool.__name__ and schema["function"]["parameters"]["required"]


def test_a_testbench_cannot_swap_the_dut_in_an_episode(api):
    """Red team: a testbench that declares its own (empty) `Attenuator` beside the real test
    scores the problem's DUT, exactly as the same testbench without the copy."""
    fake_dut = (
        "module Attenuator(input clk, input reset, input [4:0] data, "
        "output reg ATTN_CLK, output reg ATTN_DATA, output reg ATTN_LE); endmodule\n"
    )
    episode_id = reset(api, rounds=2)["observation"]["episode_id"]
    swapped = step(api, episode_id, "swap", {"kind": "submit", "stimulus": sv(WEAK_TB + fake_dut)})
    plain = step(api, episode_id, "plain", {"kind": "submit", "stimulus": sv(WEAK_TB)})
    assert swapped["observation"]["coverage"] == plain["observation"]["coverage"]
    assert swapped["reward"] == plain["reward"] and swapped["observation"]["passed"] is False
