"""The trainer adapters in a small RL-like loop against the live service (uvicorn, embedded
dispatcher, Verilator): 4 groups (problems of ../shared/cases/stimulus) x 8 completions -- the
weak/good/best testbenches in several answer styles plus broken ones (no code block, a compile
error) -- sent concurrently through each adapter with the argument shapes its trainer uses.
Rewards must come back aligned with their samples: 1 + overall coverage of expected.json for
the testbenches, the chorus shaping's failure value for the broken ones. An infrastructure
failure (a service whose sandbox cannot start; a service that is down) must follow each
trainer's convention -- None for TRL, an exception naming the sample otherwise -- never 0."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from conftest import CID012, FORCING_CASES, REPO, STIMULUS, case_expected, cid012_rows, free_port, live_server

from reward_service.adapters import openrlhf, slime, trl, verl
from reward_service.api import create_app
from reward_service.cache import ResultCache
from reward_service.client import InfrastructureFailure, RewardClient, ServiceUnavailable
from reward_service.dispatch.local import LocalDispatcher
from reward_service.diversity import group_rewards
from reward_service.engine import Engine
from reward_service.models import CoverageReport, RewardSpec, Status
from reward_service.reward import shape_reward
from reward_service.sandbox import BwrapSandbox
from reward_service.settings import Settings

PROBLEMS = [
    "cvdp_copilot_Attenuator_0011",
    "cvdp_copilot_fixed_arbiter_0004",
    "cvdp_copilot_gray_to_binary_0014",
    "cvdp_copilot_ring_token_0004",
]
#: The chorus shaping's value for a sample that yields no coverage (reward.py).
FAILURE = shape_reward(Status.compile_error, CoverageReport(), False, RewardSpec())
NO_CODE = "I would reset the design, drive random inputs for a while and check the outputs."


@dataclass
class Sample:
    """One rollout: problem, prompt, the model's text, what it is, the label as the dataset holds it."""

    problem_id: str
    prompt: str
    text: str
    kind: str  # weak | good | best | no_code | compile_error
    label: Any
    group: int
    index: int
    expected: float = field(default=0.0)


def _label(pid: str, i: int) -> Any:
    """The three accepted forms of a problem id, in turn."""
    return [pid, json.dumps({"problem_id": pid, "split": "train"}), {"problem_id": pid}][i % 3]


def _expected_reward(pid: str, kind: str) -> float:
    if (pid, kind) in FORCING_CASES:  # refused: the testbench forces DUT registers (docs/integrity.md)
        return FAILURE
    coverage = case_expected(pid)["testbenches"][kind]["coverage"]
    ratios = [m["covered"] / m["total"] for m in coverage.values() if m["total"]]  # metrics with points
    return 1.0 + sum(ratios) / len(ratios)


def rollouts() -> list[list[Sample]]:
    """4 groups x 8 completions, as a policy would answer (several styles; two broken)."""
    rows = cid012_rows()
    prompts = {pid: rows[pid]["input"]["prompt"] for pid in PROBLEMS}
    groups = []
    for g, pid in enumerate(PROBLEMS):
        tb = {k: (STIMULUS / pid / f"{k}.sv").read_text() for k in ("weak", "good", "best")}
        broken = tb["weak"][: tb["weak"].rindex("endmodule")] + "  wire broken = ;\nendmodule\n"
        texts = [
            ("good", f"Here is my testbench.\n```systemverilog\n{tb['good']}```\n"),
            ("weak", f"```verilog\n{tb['weak']}```"),
            (
                "best",
                f"<think>I must reach every branch and toggle every bit.</think>\nFinal answer:\n```systemverilog\n{tb['best']}```",
            ),
            ("no_code", NO_CODE),
            ("good", f"The testbench below drives every input.\n\n```sv\n{tb['good']}```\nIt ends with $finish."),
            ("compile_error", f"```systemverilog\n{broken}```"),
            ("best", tb["best"]),  # bare code, no fence
            ("weak", f"```\n{tb['weak']}```"),
        ]
        groups.append(
            [
                Sample(
                    pid,
                    prompts[pid],
                    text,
                    kind,
                    _label(pid, i),
                    g,
                    g * 8 + i,
                    _expected_reward(pid, kind) if kind in ("weak", "good", "best") else FAILURE,
                )
                for i, (kind, text) in enumerate(texts)
            ]
        )
    return groups


@functools.cache
def step() -> list[list[Sample]]:
    """:func:`rollouts`, built once, at first use (the shared cases may be missing)."""
    return rollouts()


def flat_samples() -> list[Sample]:
    """The samples of :func:`step` in order."""
    return [s for group in step() for s in group]


@pytest.fixture(scope="module")
def service(shared_cache_dir, tmp_path_factory):
    """The embedded service with the cid012 problems registered. Shared ccache; a result cache
    of this module only, so every distinct testbench is simulated once here."""
    s = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    engine = Engine(s)
    engine.results = ResultCache(tmp_path_factory.mktemp("results"))
    with live_server(create_app(LocalDispatcher(engine, workers=2), settings=s)) as url:
        with RewardClient(url) as client:
            assert client.load_problems_jsonl(CID012)["loaded"] == 82
        yield url


@pytest.fixture(scope="module")
def reference(service):
    """The step scored through the plain client: what the engine gives for these inputs."""
    with RewardClient(service) as client:
        return client.score_batch(
            [{"problem_id": s.problem_id, "stimulus": {"kind": "completion", "text": s.text}} for s in flat_samples()],
            timeout=1800,
        )


def assert_aligned(rewards: list, samples: list[Sample]) -> None:
    assert len(rewards) == len(samples)
    for r, s in zip(rewards, samples):
        assert r == pytest.approx(s.expected), f"{s.problem_id} completion {s.index} ({s.kind}): {r} != {s.expected}"


def shuffled(seed: int) -> list[list[Sample]]:
    """The step in another order (groups and samples inside them), as the next step would be."""
    rng = random.Random(seed)
    groups = [rng.sample(g, len(g)) for g in step()]
    rng.shuffle(groups)
    return groups


# -- the reference: the engine's values are the expected ones ------------------------------------
@pytest.mark.slow
def test_reference_rewards_are_the_expected_coverage(reference):
    statuses = {"weak": "ok", "good": "ok", "best": "ok", "no_code": "invalid_input", "compile_error": "compile_error"}
    assert [r.status.value for r in reference] == [
        "refused" if (s.problem_id, s.kind) in FORCING_CASES else statuses[s.kind] for s in flat_samples()
    ]
    assert_aligned([r.reward for r in reference], flat_samples())
    assert FAILURE == 0.0


# -- verl ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_verl_compute_score_forms(service, reference):
    groups = shuffled(1)
    flat = [s for g in groups for s in g]
    # the batch reward manager: lists of a whole step; ground_truth = problem id, extra_info = row info
    rewards = verl.compute_score_batch(
        data_sources=["cvdp_cid012"] * len(flat),
        solution_strs=[s.text for s in flat],
        ground_truths=[s.label if isinstance(s.label, str) else json.dumps(s.label) for s in flat],
        extra_infos=[{"index": s.group, "split": "train"} for s in flat],
        service_url=service,
    )
    assert_aligned(rewards, flat)

    # the reward loop: the async per-sample function awaited for all samples at once; the problem
    # id in extra_info for some rows (ground_truth then holds something else)
    async def loop():
        return await asyncio.gather(
            *[
                verl.compute_score_async(
                    "cvdp_cid012",
                    s.text,
                    s.label if s.index % 2 else "n/a",
                    {"problem_id": s.problem_id, "index": s.group},
                    service_url=service,
                    reward_router_address=None,
                )
                for s in flat
            ]
        )

    assert_aligned(asyncio.run(loop()), flat)

    # the naive manager's per-sample function, from several threads
    with ThreadPoolExecutor(8) as pool:
        got = list(
            pool.map(
                lambda s: verl.compute_score(
                    "cvdp_cid012", s.text, s.label, None, service_url=service, return_dict=s.index % 2 == 1
                ),
                flat,
            )
        )
    assert_aligned([g["score"] if isinstance(g, dict) else g for g in got], flat)
    details = [g for g in got if isinstance(g, dict)]
    assert details and all(set(d) == {"score", "coverage", "passed"} for d in details)


# -- TRL ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_trl_reward_function(service, reference):
    reward = trl.CoverageReward(service)
    assert reward.__name__ == "coverage_reward"
    groups = shuffled(2)
    flat = [s for g in groups for s in g]  # TRL: the num_generations completions of a prompt are adjacent
    standard = dict(
        prompts=[s.prompt for s in flat],
        completions=[s.text for s in flat],
        problem_id=[s.label for s in flat],
        completion_ids=[[0]] * len(flat),
        trainer_state=None,
    )
    conversational = dict(
        prompts=[[{"role": "user", "content": s.prompt}] for s in flat],
        completions=[[{"role": "assistant", "content": s.text}] for s in flat],
        problem_id=[s.label for s in flat],
    )
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda kw: reward(**kw), [standard, conversational])
    assert_aligned(a, flat)
    assert_aligned(b, flat)
    with pytest.raises(KeyError, match="no dataset column 'problem_id'.*'answer'"):
        reward(prompts=["p"], completions=["c"], answer=["x"])


@pytest.mark.slow
def test_trl_group_diversity_term(service, reference):
    weight = 0.5
    rewards = trl.CoverageReward(service, diversity_weight=weight)(
        prompts=[s.prompt for s in flat_samples()],
        completions=[s.text for s in flat_samples()],
        problem_id=[s.label for s in flat_samples()],
    )
    # the same term as the batch API's, each group being the 8 completions of one problem
    expected = group_rewards(reference, [str(s.group) for s in flat_samples()], weight)
    assert rewards == pytest.approx(expected.rewards)
    for r, s, d in zip(rewards, flat_samples(), expected.diversity):
        if s.kind in ("no_code", "compile_error") or (s.problem_id, s.kind) in FORCING_CASES:
            assert r == FAILURE and d == 0.0  # FORCING_CASES: refused, no coverage to share
        else:
            assert 0.0 < d <= 1.0 and r == pytest.approx(s.expected + weight * d)


# -- OpenRLHF -----------------------------------------------------------------------------------
def post_openrlhf(url: str, queries: list, prompts: list, labels: list, **params) -> httpx.Response:
    """What OpenRLHF's remote_rm_fn sends (requests.post(url, json=..., headers=...))."""
    return httpx.post(
        f"{url}/v1/openrlhf/reward",
        params=params,
        timeout=1800,
        json={"query": queries, "prompts": prompts, "labels": labels},
        headers={"Content-Type": "application/json"},
    )


@pytest.mark.slow
def test_openrlhf_remote_reward(service, reference):
    flat = [s for g in shuffled(3) for s in g]
    halves = [flat[:16], flat[16:], []]  # --remote_rm_url with three servers: the last gets nothing
    with ThreadPoolExecutor(3) as pool:
        answers = list(
            pool.map(
                lambda part: post_openrlhf(
                    service, [s.prompt + s.text for s in part], [s.prompt for s in part], [s.label for s in part]
                ),
                halves,
            )
        )
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
    assert answers[2].json() == {"rewards": [], "scores": [], "extra_logs": {}}
    body = {k: answers[0].json()[k] + answers[1].json()[k] for k in ("rewards", "scores")}
    assert_aligned(body["rewards"], flat)
    assert body["scores"] == pytest.approx([max(0.0, s.expected - 1.0) for s in flat])
    logs = answers[0].json()["extra_logs"]
    assert set(logs) == {"coverage", "passed", "no_coverage"} and len(logs["passed"]) == 16
    assert logs["no_coverage"] == [float(s.kind in ("no_code", "compile_error")) for s in flat[:16]]

    # with the diversity term (URL parameter): the samples of one prompt are a group
    div = post_openrlhf(
        service,
        [s.prompt + s.text for s in flat_samples()],
        [s.prompt for s in flat_samples()],
        [s.label for s in flat_samples()],
        diversity_weight=0.25,
    ).json()
    assert div["rewards"] == pytest.approx(
        group_rewards(reference, [str(s.group) for s in flat_samples()], 0.25).rewards
    )
    assert len(div["extra_logs"]["diversity"]) == 32

    # the Python-file form (--remote_rm_url path/to/openrlhf.py) through the client
    out = openrlhf.reward_func(
        [s.prompt + s.text for s in flat], [s.prompt for s in flat], [s.label for s in flat], service_url=service
    )
    assert_aligned([float(x) for x in out["rewards"]], flat)


def test_openrlhf_bad_bodies(service):
    assert post_openrlhf(service, [], [], []).json() == {"rewards": [], "scores": [], "extra_logs": {}}
    bad = post_openrlhf(service, ["a", "b"], ["a", "b"], [PROBLEMS[0], "not a problem id!"])
    assert bad.status_code == 422 and bad.json()["detail"].startswith("labels[1]: no problem id")
    assert (
        "prompts has 1 entries for 2 queries" in post_openrlhf(service, ["a", "b"], ["a"], ["x", "y"]).json()["detail"]
    )
    unknown = post_openrlhf(service, ["a"], ["a"], ["unregistered_problem"])
    assert (
        unknown.status_code == 404
        and "labels[0]: unknown problem_id 'unregistered_problem'" in unknown.json()["detail"]
    )


# -- slime --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_slime_reward_functions(service, reference):
    args = SimpleNamespace(
        reward_service_url=service, rm_type=None, custom_rm_path="reward_service.adapters.slime.reward_func"
    )

    def slime_sample(s: Sample) -> SimpleNamespace:
        """A slime Sample's fields the reward function reads: label from --label-key; half of
        them carry the id in metadata instead."""
        label, metadata = (s.label, {}) if s.index % 2 else (None, {"problem_id": s.problem_id})
        return SimpleNamespace(
            group_index=s.group,
            index=s.index,
            prompt=[{"role": "user", "content": s.prompt}],
            response=s.text,
            label=label if not isinstance(label, dict) else json.dumps(label),
            metadata=metadata,
            reward=None,
        )

    groups = shuffled(4)

    async def rollout():
        single = asyncio.gather(*[slime.reward_func(args, slime_sample(s)) for g in groups for s in g])
        grouped = asyncio.gather(*[slime.batched_reward_func(args, [slime_sample(s) for s in g]) for g in groups])
        return await asyncio.gather(single, grouped)

    single, grouped = asyncio.run(rollout())
    assert_aligned(single, [s for g in groups for s in g])
    for rewards, group in zip(grouped, groups):
        assert_aligned(rewards, group)


# -- infrastructure failures --------------------------------------------------------------------
@pytest.fixture(scope="module")
def broken(shared_cache_dir):
    """A service whose sandbox cannot start (bwrap missing): every simulation ends in
    sandbox_error; a completion without code is still the model's fault (invalid_input)."""
    s = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    engine = Engine(s, sandbox=BwrapSandbox(bwrap="/nonexistent/bwrap"))
    with live_server(create_app(LocalDispatcher(engine, workers=2), settings=s)) as url:
        with RewardClient(url) as client:
            client.load_problems_jsonl(CID012)
        yield url


def test_infrastructure_failure_follows_each_trainers_convention(broken):
    group = step()[0][:4]  # good, weak, best, no_code of the Attenuator
    texts, labels = [s.text for s in group], [s.label for s in group]

    # TRL: None for the failed samples; the model's own failure stays 0
    assert trl.CoverageReward(broken)(prompts=[s.prompt for s in group], completions=texts, problem_id=labels) == [
        None,
        None,
        None,
        FAILURE,
    ]
    with pytest.raises(InfrastructureFailure, match=r"completion 0 \(problem 'cvdp_copilot_Attenuator_0011'\)"):
        trl.CoverageReward(broken, on_infra_failure="raise")(prompts=["p"] * 4, completions=texts, problem_id=labels)

    # verl: an exception naming the sample, after the retries
    with pytest.raises(InfrastructureFailure) as info:
        verl.compute_score("cvdp_cid012", texts[0], labels[0], None, service_url=broken)
    assert "data_source='cvdp_cid012', problem_id='cvdp_copilot_Attenuator_0011'" in str(info.value)
    assert info.value.attempts == 3 and info.value.result.status == Status.sandbox_error and "not 0" in str(info.value)
    assert verl.compute_score("cvdp_cid012", NO_CODE, labels[0], None, service_url=broken) == FAILURE
    with pytest.raises(InfrastructureFailure, match="sample 0, data_source='cvdp_cid012'") as info:
        verl.compute_score_batch(
            ["cvdp_cid012"] * 4,
            texts,
            [str(label) for label in labels[:1]] + [group[0].problem_id] * 3,
            [None] * 4,
            service_url=broken,
        )
    assert info.value.index == 0
    with pytest.raises(InfrastructureFailure, match="problem_id='cvdp_copilot_Attenuator_0011'"):
        asyncio.run(verl.compute_score_async("cvdp_cid012", texts[1], labels[1], None, service_url=broken))

    # slime: an exception naming the sample (index, group)
    args = SimpleNamespace(reward_service_url=broken)
    sample = SimpleNamespace(index=7, group_index=3, response=texts[2], label=group[0].problem_id, metadata={})
    with pytest.raises(
        InfrastructureFailure, match=r"index=7, group_index=3, problem_id='cvdp_copilot_Attenuator_0011'"
    ):
        asyncio.run(slime.reward_func(args, sample))
    with pytest.raises(InfrastructureFailure, match="index=7"):
        asyncio.run(slime.batched_reward_func(args, [sample]))

    # OpenRLHF: 503 naming the samples (OpenRLHF's client retries, then raises); never 0
    answer = post_openrlhf(broken, texts, [""] * 4, labels)
    assert answer.status_code == 503 and "retry-after" in answer.headers
    detail = answer.json()["detail"]
    assert "query[0] (problem 'cvdp_copilot_Attenuator_0011'), query[1]" in detail and "after 3 attempts" in detail
    assert "not 0" in detail and "query[3]" not in detail
    with pytest.raises(InfrastructureFailure, match=r"query 0 \(problem"):
        openrlhf.reward_func(texts, [""] * 4, labels, service_url=broken)


def test_service_down_follows_each_trainers_convention(monkeypatch):
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens
    monkeypatch.setenv("REWARD_SERVICE_MAX_RETRIES", "1")
    monkeypatch.setenv("REWARD_SERVICE_BACKOFF_S", "0.01")
    pid = PROBLEMS[0]
    assert trl.CoverageReward(down)(prompts=["p", "p"], completions=["a", "b"], problem_id=[pid, pid]) == [None, None]
    with pytest.raises(ServiceUnavailable) as info:
        verl.compute_score("cvdp_cid012", "text", pid, None, service_url=down)
    assert info.value.attempts == 2 and down in str(info.value)
    assert info.value.__notes__ == [f"while scoring the verl sample data_source='cvdp_cid012', problem_id='{pid}'"]
    with pytest.raises(ServiceUnavailable) as info:
        asyncio.run(
            slime.reward_func(
                SimpleNamespace(reward_service_url=down),
                SimpleNamespace(index=2, group_index=0, response="x", label=pid, metadata={}),
            )
        )
    assert "index=2, group_index=0" in info.value.__notes__[0]


def jobs_submitted(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("reward_service_jobs_submitted_total "):
            return float(line.split()[1])
    raise AssertionError("no reward_service_jobs_submitted_total in /metrics")


@pytest.mark.slow
def test_openrlhf_retried_post_waits_for_the_same_batch(service):
    """OpenRLHF's client times out and POSTs the same body again: it gets the same batch, so
    nothing is scored twice."""
    pid = PROBLEMS[0]
    tb = (STIMULUS / pid / "weak.sv").read_text() + "// a testbench new to the result cache\n"
    body = ([f"```verilog\n{tb}```", NO_CODE], ["", ""], [pid, pid])
    before = jobs_submitted(service)
    first = post_openrlhf(service, *body, wait=0)
    assert first.status_code == 503 and "still scoring" in first.json()["detail"], first.text
    again = post_openrlhf(service, *body)
    assert again.status_code == 200, again.text
    assert again.json()["rewards"] == pytest.approx([_expected_reward(pid, "weak"), FAILURE])
    assert jobs_submitted(service) - before == 2


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["verl", "trl", "openrlhf", "slime"])
def test_trainer_example_runs(service, trainer):
    """examples/trainers/<trainer>_example.py scores the shipped Attenuator problem on the service."""
    script = REPO / "examples" / "trainers" / f"{trainer}_example.py"
    run = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "REWARD_SERVICE_URL": service},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) >= 2 and all(line.rstrip().endswith("0.0]") or "'no_coverage'" in line for line in lines), (
        run.stdout
    )
    # The first completion is examples/cvdp/completion.md: every printed list starts with the
    # service's own reward for it (the problem's engine; + a group diversity term <= 0.1 where
    # the example asks for one).
    from reward_service.client import RewardClient

    completion = (REPO / "examples" / "cvdp" / "completion.md").read_text()
    with RewardClient(service) as client:
        want = client.score(
            {"problem_id": "cvdp_copilot_Attenuator_0011", "stimulus": {"kind": "completion", "text": completion}}
        ).reward
    assert want > 1.9  # covers most of the Attenuator
    firsts = [
        float(m.group(1))
        for line in lines
        if (m := re.search(r"'rewards': \[([0-9.]+),", line) or re.match(r"[^:{]+: \[([0-9.]+),", line))
    ]
    assert firsts and all(want - 1e-9 <= v <= want + 0.1 for v in firsts), (want, run.stdout)
