"""Episode steps against plain /v1/score on the embedded service (issue 21, docs/episodes.md).

Starts the embedded service in this process (uvicorn in a thread, result cache on), registers
the CVDP Attenuator of examples/cvdp and scores its testbench once (so every later call is a
result-cache hit), then times, interleaved so that machine load hits both alike:

* ``score``: ``POST /v1/score`` of the testbench;
* ``step``: ``POST /v1/episodes/{id}/step`` of a ``simulate`` action with the same testbench
  (a new step id each time, one episode; a cached result);
* ``submit``: ``POST /v1/episodes`` (reset) then one ``submit`` of it (one-round episodes):
  the reset and the step are timed apart.

Prints the medians (ms) and the added latency of a step over a score call, and the episode
throughput of ``--episodes`` one-round episodes run by ``--clients`` threads (a new testbench
per episode, so each really simulates). Not part of the test suite.

    python bench/bench_episodes.py --calls 20 --episodes 8 --clients 2 [--openenv]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from conftest import live_server  # noqa: E402

from reward_service.api import create_app  # noqa: E402
from reward_service.settings import Settings  # noqa: E402

EXAMPLES = REPO / "examples" / "cvdp"
ATTN = "cvdp_copilot_Attenuator_0011"
TB = (EXAMPLES / "tb_attenuator.sv").read_text()


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="timed calls of each kind")
    parser.add_argument("--episodes", type=int, default=8, help="one-round episodes for the throughput (0: skip)")
    parser.add_argument("--clients", type=int, default=2, help="threads running those episodes")
    parser.add_argument("--workers", type=int, default=2, help="embedded simulation workers")
    parser.add_argument("--openenv", action="store_true", help="also time simulate steps over OpenEnv's WebSocket")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()

    cache = Path(tempfile.mkdtemp(prefix="bench-episodes-"))
    settings = Settings(cache_dir=cache, result_cache=True, score_workers=args.workers, warm_on_register=False)
    stimulus = {"kind": "sv_testbench", "files": {"tb_attenuator.sv": TB}}
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=600) as c:
        assert c.post("/v1/problems:load", content=(EXAMPLES / "attenuator.jsonl").read_bytes()).status_code == 201
        first = c.post("/v1/score?wait=600", json={"problem_id": ATTN, "stimulus": stimulus}).json()
        assert first["status"] == "ok", first
        episode = c.post(
            "/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1, "max_simulations": 1000}}
        ).json()["observation"]["episode_id"]
        score_ms, step_ms, reset_ms, submit_ms = [], [], [], []
        for n in range(args.calls):
            t0 = time.perf_counter()
            r = c.post("/v1/score?wait=600", json={"problem_id": ATTN, "stimulus": stimulus})
            score_ms.append(ms(t0))
            assert r.status_code == 200 and r.json()["cache"]["result"], r.text
            t0 = time.perf_counter()
            r = c.post(
                f"/v1/episodes/{episode}/step?wait=600",
                json={"step_id": f"s{n}", "action": {"kind": "simulate", "stimulus": stimulus}},
            )
            step_ms.append(ms(t0))
            assert r.status_code == 200 and r.json()["observation"]["result_reward"] == first["reward"], r.text
            t0 = time.perf_counter()
            r = c.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1}})
            reset_ms.append(ms(t0))
            fresh = r.json()["observation"]["episode_id"]
            t0 = time.perf_counter()
            r = c.post(
                f"/v1/episodes/{fresh}/step?wait=600",
                json={"step_id": "r1", "action": {"kind": "submit", "stimulus": stimulus}},
            )
            submit_ms.append(ms(t0))
            assert r.status_code == 200 and r.json()["reward"] == first["reward"], r.text

        out: dict = {
            "calls": args.calls,
            "score_ms": statistics.median(score_ms),
            "simulate_step_ms": statistics.median(step_ms),
            "reset_ms": statistics.median(reset_ms),
            "submit_step_ms": statistics.median(submit_ms),
        }
        out["added_step_ms"] = out["simulate_step_ms"] - out["score_ms"]
        out["added_submit_ms"] = out["submit_step_ms"] - out["score_ms"]

        if args.openenv:
            from openenv.core.generic_client import GenericEnvClient

            assert c.get("/openenv/health").status_code == 200  # builds the front end (imports openenv-core)
            ws_ms = []
            with GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=600).sync() as env:
                env.reset(problem_id=ATTN, options={"rounds": 1, "max_simulations": 1000})
                for n in range(args.calls):
                    t0 = time.perf_counter()
                    result = env.step({"kind": "simulate", "stimulus": stimulus, "step_id": f"w{n}"})
                    ws_ms.append(ms(t0))
                    assert result.observation["result_reward"] == first["reward"]
            out["openenv_ws_simulate_step_ms"] = statistics.median(ws_ms)

        if args.episodes:

            def one_episode(n: int) -> float:
                # a testbench of its own (one more wire outside the DUT): a real simulation, no cache hit
                text = TB.replace("module tb_attenuator;", f"module tb_attenuator;\n  wire [31:0] rs_bench = {n};", 1)
                own = {"kind": "sv_testbench", "files": {"tb_attenuator.sv": text}}
                with httpx.Client(base_url=url, timeout=600) as client:
                    eid = client.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1}}).json()[
                        "observation"
                    ]["episode_id"]
                    r = client.post(
                        f"/v1/episodes/{eid}/step?wait=600",
                        json={"step_id": "r1", "action": {"kind": "submit", "stimulus": own}},
                    )
                    assert r.status_code == 200 and r.json()["done"], r.text
                    return float(r.json()["reward"])

            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
                rewards = list(pool.map(one_episode, range(args.episodes)))
            wall = time.perf_counter() - t0
            assert all(r == first["reward"] for r in rewards), rewards
            out.update(
                episodes=args.episodes, clients=args.clients, episodes_wall_s=wall, episodes_per_s=args.episodes / wall
            )

    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
