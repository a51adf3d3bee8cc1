"""Episode steps against plain /v1/score, on the embedded service and the compose stack (issue 21,
docs/episodes.md).

Per mode (``--mode embedded``, ``compose`` or ``both``):

* embedded: the service in this process (uvicorn in a thread, result cache on, ``--workers``
  simulation workers);
* compose: the docker-compose.yml stack with tests/compose.test.yml (tests/compose_fixtures.py:
  a private project, Redis, the API and ``--compose-workers`` worker containers of one process
  each, the workers' result cache off; images from scripts/build_images.sh).

It registers the CVDP Attenuator of examples/cvdp and scores its testbench once, then times,
interleaved so that machine load hits both alike:

* cached (every call answered from a stored result: the engine's result cache in embedded
  mode, the job's stored result in compose, job ids being content hashes): ``score`` =
  ``POST /v1/score`` of the testbench; ``step`` = ``POST /v1/episodes/{id}/step`` of a
  ``simulate`` action with it (a new step id each time, one episode); ``reset`` =
  ``POST /v1/episodes`` and ``submit`` = one ``submit`` step of a new one-round episode;
* fresh (every call a real simulation: a new variant of the testbench each time, one more wire
  outside the DUT): ``score`` and ``submit`` step, alternating.

Prints the medians (ms) and the latency a step adds over a score call, then the throughput of
``--episodes`` episodes of ``--rounds`` rounds (the weak testbench, then the full one on the last
round; each step a new variant) run by ``--clients`` threads, and of the same number of plain
``/v1/score`` calls of new variants by as many threads: episodes/s, steps/s, scores/s. Not part
of the test suite.

    python bench/bench_episodes.py --mode both --calls 20 --episodes 100 --clients 100 --rounds 2 [--openenv]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from conftest import live_server  # noqa: E402
from test_episodes import WEAK_TB  # noqa: E402  (round 1 of its two-round episode: below the target)

from reward_service.api import create_app  # noqa: E402
from reward_service.settings import Settings  # noqa: E402

EXAMPLES = REPO / "examples" / "cvdp"
ATTN = "cvdp_copilot_Attenuator_0011"
TB = (EXAMPLES / "tb_attenuator.sv").read_text()


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def variant(text: str, n: int) -> str:
    """``text`` with one more wire in the testbench module, outside the DUT: the same coverage,
    a job and a simulation of its own."""
    return re.sub(r"(module\s+\w+\s*;)", rf"\1\n  wire [31:0] rs_bench = {n};", text, count=1)


def sv(text: str) -> dict:
    return {"kind": "sv_testbench", "files": {"tb_attenuator.sv": text}}


def post_step(c: httpx.Client, episode_id: str, step_id: str, action: dict) -> dict:
    """One step, sent again while it answers 202 (still scoring) or 503 (not counted)."""
    while True:
        r = c.post(f"/v1/episodes/{episode_id}/step?wait=60", json={"step_id": step_id, "action": action})
        if r.status_code == 200:
            return r.json()
        assert r.status_code in (202, 503), r.text
        time.sleep(0.2 if r.status_code == 202 else 1)


def post_score(c: httpx.Client, stimulus: dict) -> dict:
    """``/v1/score`` of the Attenuator, polled while it answers 202."""
    r = c.post("/v1/score?wait=60", json={"problem_id": ATTN, "stimulus": stimulus})
    while r.status_code == 202:
        r = c.get(f"{r.headers['Location']}?wait=60")
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    return r.json()


def latencies(c: httpx.Client, calls: int, reward: float) -> dict:
    """Medians (ms) of cached score / simulate step / reset / submit step, and of fresh score /
    submit step."""
    stimulus = sv(TB)
    episode = c.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1, "max_simulations": 1000}})
    episode_id = episode.json()["observation"]["episode_id"]
    got: dict[str, list[float]] = {k: [] for k in ("score", "step", "reset", "submit", "fresh_score", "fresh_submit")}
    stamp = time.time_ns()
    for n in range(calls):
        t0 = time.perf_counter()
        assert post_score(c, stimulus)["reward"] == reward
        got["score"].append(ms(t0))
        t0 = time.perf_counter()
        answer = post_step(c, episode_id, f"s{n}", {"kind": "simulate", "stimulus": stimulus})
        got["step"].append(ms(t0))
        assert answer["observation"]["result_reward"] == reward, answer
        t0 = time.perf_counter()
        r = c.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1}})
        got["reset"].append(ms(t0))
        fresh = r.json()["observation"]["episode_id"]
        t0 = time.perf_counter()
        assert post_step(c, fresh, "r1", {"kind": "submit", "stimulus": stimulus})["reward"] == reward
        got["submit"].append(ms(t0))
        # fresh: new variants, a real simulation each (alternating which goes first)
        order = ("fresh_score", "fresh_submit") if n % 2 == 0 else ("fresh_submit", "fresh_score")
        for kind in order:
            text = sv(variant(TB, stamp + 2 * n + (kind == "fresh_submit")))
            t0 = time.perf_counter()
            if kind == "fresh_score":
                assert post_score(c, text)["reward"] == reward
            else:
                eid = c.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": 1}}).json()
                t0 = time.perf_counter()  # the step alone (the reset is timed above)
                eid = eid["observation"]["episode_id"]
                assert post_step(c, eid, "r1", {"kind": "submit", "stimulus": text})["reward"] == reward
            got[kind].append(ms(t0))
    out = {f"{k}_ms": round(statistics.median(v), 1) for k, v in got.items()}
    out["added_step_ms"] = round(out["step_ms"] - out["score_ms"], 1)
    out["added_submit_ms"] = round(out["submit_ms"] - out["score_ms"], 1)
    out["added_fresh_submit_ms"] = round(out["fresh_submit_ms"] - out["fresh_score_ms"], 1)
    return out


def throughput(url: str, episodes: int, rounds: int, clients: int, rewards: dict[str, float]) -> dict:
    """``episodes`` episodes of ``rounds`` rounds by ``clients`` threads (each step a new
    variant), then as many plain scores of new variants (one per step) by as many threads."""
    stamp = time.time_ns()

    def one_episode(n: int) -> int:
        with httpx.Client(base_url=url, timeout=600) as client:
            reset = client.post("/v1/episodes", json={"problem_id": ATTN, "options": {"rounds": rounds}})
            eid = reset.json()["observation"]["episode_id"]
            for k in range(rounds):
                text = TB if k == rounds - 1 else WEAK_TB
                answer = post_step(
                    client, eid, f"r{k}", {"kind": "submit", "stimulus": sv(variant(text, stamp + n * rounds + k))}
                )
                assert answer["reward"] == rewards["good" if k == rounds - 1 else "weak"], answer
            assert answer["done"], answer
            return rounds

    def one_score(n: int) -> int:
        with httpx.Client(base_url=url, timeout=600) as client:
            text = TB if n % rounds == rounds - 1 else WEAK_TB
            scored = post_score(client, sv(variant(text, stamp + 10**6 + n)))
            assert scored["reward"] == rewards["good" if n % rounds == rounds - 1 else "weak"], scored
            return 1

    out: dict = {"episodes": episodes, "rounds": rounds, "clients": clients}
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        t0 = time.perf_counter()
        steps = sum(pool.map(one_episode, range(episodes)))
        wall = time.perf_counter() - t0
        out.update(
            episodes_wall_s=round(wall, 2),
            episodes_per_s=round(episodes / wall, 3),
            steps_per_s=round(steps / wall, 2),
        )
        t0 = time.perf_counter()
        scores = sum(pool.map(one_score, range(steps)))
        wall = time.perf_counter() - t0
        out.update(scores=scores, scores_wall_s=round(wall, 2), scores_per_s=round(scores / wall, 2))
    out["steps_over_scores"] = round(out["steps_per_s"] / out["scores_per_s"], 3)
    return out


def openenv_latency(url: str, calls: int, reward: float) -> float:
    """Median ms of a cached ``simulate`` step over OpenEnv's WebSocket session."""
    from openenv.core.generic_client import GenericEnvClient

    assert httpx.get(f"{url}/openenv/health", timeout=300).status_code == 200  # builds the front end
    got = []
    with GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=600).sync() as env:
        env.reset(problem_id=ATTN, options={"rounds": 1, "max_simulations": 1000})
        for n in range(calls):
            t0 = time.perf_counter()
            result = env.step({"kind": "simulate", "stimulus": sv(TB), "step_id": f"w{n}"})
            got.append(ms(t0))
            assert result.observation["result_reward"] == reward
    return round(statistics.median(got), 1)


@contextlib.contextmanager
def service(mode: str, args: argparse.Namespace) -> Iterator[str]:
    """The base URL of the service of ``mode``, stopped (and, compose, taken down) on exit."""
    if mode == "embedded":
        cache = Path(tempfile.mkdtemp(prefix="bench-episodes-"))
        settings = Settings(cache_dir=cache, result_cache=True, score_workers=args.workers, warm_on_register=False)
        with live_server(create_app(settings=settings)) as url:
            yield url
    else:
        from compose_fixtures import compose_stack

        logs = Path(tempfile.mkdtemp(prefix="bench-episodes-compose-"))
        with compose_stack(logs, workers=args.compose_workers) as stack:
            yield stack.url
        print(f"compose logs: {logs}", file=sys.stderr)


def run_mode(mode: str, args: argparse.Namespace) -> dict:
    with service(mode, args) as url, httpx.Client(base_url=url, timeout=600) as c:
        assert c.post("/v1/problems:load", content=(EXAMPLES / "attenuator.jsonl").read_bytes()).status_code == 201
        rewards = {"good": post_score(c, sv(TB))["reward"], "weak": post_score(c, sv(WEAK_TB))["reward"]}
        # the first real simulations of each kind (the fast engine's first check of the design)
        post_score(c, sv(variant(TB, -1)))
        out: dict = {"mode": mode, "load_start": os.getloadavg()[0], **latencies(c, args.calls, rewards["good"])}
        if args.openenv:
            out["openenv_ws_simulate_step_ms"] = openenv_latency(url, args.calls, rewards["good"])
        if args.episodes:
            out.update(throughput(url, args.episodes, args.rounds, args.clients, rewards))
        out["load_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("embedded", "compose", "both"), default="embedded")
    parser.add_argument("--calls", type=int, default=20, help="timed calls of each kind")
    parser.add_argument("--episodes", type=int, default=8, help="episodes for the throughput (0: skip)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each of those episodes")
    parser.add_argument("--clients", type=int, default=2, help="threads running those episodes")
    parser.add_argument("--workers", type=int, default=2, help="embedded simulation workers")
    parser.add_argument("--compose-workers", type=int, default=2, help="worker containers (one process each)")
    parser.add_argument("--openenv", action="store_true", help="also time simulate steps over OpenEnv's WebSocket")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()

    modes = ("embedded", "compose") if args.mode == "both" else (args.mode,)
    out = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "args": vars(args) | {"json": str(args.json) if args.json else None},
        "runs": [run_mode(mode, args) for mode in modes],
    }
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
