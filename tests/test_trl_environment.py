"""TRL's ``environment_factory`` end to end (issue 21): examples/trainers/trl_environment_tiny.py
runs a real ``trl`` ``GRPOTrainer(environment_factory=CoverageEnvironment)`` on CPU for 2 steps of
2 rollouts against the live embedded service; each rollout is a two-round coverage episode on
the CVDP Attenuator (``POST /v1/episodes``, rounds=2).

What is real: the service (episodes, Verilator simulations, no result cache: every submission
is simulated), the environment adapter, TRL's whole loop — the chat template rendering the
tools into the prompt, the model's generation, TRL parsing the ``<tool_call>``, calling
``CoverageEnvironment.submit``, appending the service's answer as the tool message and
generating again, ``get_reward`` as the reward, the GRPO update.

What is scripted: the policy's choice of testbenches. A tiny random model does not write tool
calls, so the example warm-starts it (SFT) on one demonstration — a two-round episode played on
the service through the same environment class (a weak testbench, then the team's full one) —
and the model reproduces those two ``submit`` calls. Its round-2 call follows the round-1 report
in its context; it was learned, not derived from the report.

Asserted: every rollout's episode on the service has the two rounds, with the rewards the
environment got; each round's reward equals ``/v1/score``'s for the same testbench (scored again
here); the tool message the model saw before its round-2 call (the second round's observation)
is the feedback of round 1's ``/v1/score`` result, listing each of its uncovered points; TRL
logged the environment's rewards. Needs the ``trl`` extra (CI: scripts/install.sh --test)."""

from __future__ import annotations

import statistics

import pytest
from conftest import REPO, run_trainer_example

from reward_service.client import RewardClient
from reward_service.feedback import feedback_text
from reward_service.models import Status

EXAMPLE = REPO / "examples" / "trainers" / "trl_environment_tiny.py"
PROBLEM_ID = "cvdp_copilot_Attenuator_0011"
STEPS, GENERATIONS = 2, 2


@pytest.fixture(scope="module")
def run(trl_extra, trainer_service, tmp_path_factory):
    """The example's JSON: TRL's log history, every rollout (episode id, the messages TRL built,
    the environment's rewards), the demonstration, the SFT losses."""
    out = tmp_path_factory.mktemp("trl-env") / "history.json"
    return run_trainer_example(EXAMPLE, trainer_service, out, "--steps", str(STEPS), "--generations", str(GENERATIONS))


def submitted(messages: list[dict]) -> list[tuple[str, str]]:
    """(testbench of a ``submit`` call, the tool answer after it), in order."""
    pairs = []
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            assert call["function"]["name"] == "submit", call
            answer = messages[i + 1]
            assert answer["role"] == "tool" and answer["name"] == "submit", messages
            pairs.append((call["function"]["arguments"]["testbench"], answer["content"]))
    return pairs


@pytest.mark.slow
def test_environment_factory_runs_two_round_episodes_scored_by_the_service(trainer_service, run):
    data, stdout = run
    check_rollouts(data, stdout, trainer_service, STEPS, GENERATIONS)


def check_rollouts(data: dict, stdout: str, service_url: str, steps: int, generations: int, host_engine=None) -> None:
    """The assertions on an example run (:func:`run`'s JSON and stdout) against the service at
    ``service_url``; with ``host_engine``, each testbench's reward is also this process's own
    simulation of it (on the compose stack, ``/v1/score`` of a testbench an episode step already
    scored returns that step's job, so only the host engine is an independent figure)."""
    assert data["sft_losses"][-1] < 0.1 < data["sft_losses"][0], stdout  # the warm start learned the demonstration
    rollouts = data["rollouts"]
    assert len(rollouts) == steps * generations, stdout
    assert len({r["episode_id"] for r in rollouts}) == len(rollouts)  # one fresh episode per rollout

    # TRL logged the environment's reward (get_reward), step by step
    steps_logged = [e for e in data["log_history"] if "reward" in e]
    assert len(steps_logged) == steps, stdout
    for i, entry in enumerate(steps_logged):
        mine = [r["reward"] for r in rollouts[i * generations : (i + 1) * generations]]
        assert entry["rewards/CoverageEnvironment/mean"] == pytest.approx(statistics.fmean(mine), abs=1e-5)
        assert entry["reward"] == pytest.approx(statistics.fmean(mine), abs=1e-5)
        assert entry["tools/call_frequency"] == 2 and entry["tools/failure_frequency"] == 0

    with RewardClient(service_url, timeout=600) as client:
        problem = client.get_problem(PROBLEM_ID)
        scores: dict[str, object] = {}
        host_rewards: dict[str, float] = {}
        for rollout in rollouts:
            rounds = submitted(rollout["completion"])
            assert len(rounds) == 2, rollout["completion"]
            (first_tb, second_obs), (second_tb, last_obs) = rounds
            for tb in (first_tb, second_tb):
                if tb not in scores:  # a second, independent simulation of the same testbench
                    scores[tb] = client.score(
                        {"problem_id": PROBLEM_ID, "stimulus": {"kind": "completion", "text": tb}}, wait=600
                    )
            one, two = scores[first_tb], scores[second_tb]
            assert one.status == two.status == Status.ok
            if host_engine is not None:
                for tb in (first_tb, second_tb):
                    if tb not in host_rewards:
                        host_rewards[tb] = host_engine.score(problem.request(tb)).reward
                assert [host_rewards[first_tb], host_rewards[second_tb]] == [one.reward, two.reward]

            # the service holds the episode TRL's rollout played: two rounds, each rewarded as /v1/score
            state = client.get_episode(rollout["episode_id"])
            assert state.done is True and state.round == 2 and state.step_ids == ["t1", "t2"]
            assert [h.reward for h in state.history] == rollout["rewards"] == [one.reward, two.reward]
            assert rollout["reward"] == two.reward  # get_reward: the last round's
            assert one.coverage.overall < 0.9 and one.passed is False and two.passed is True

            # the second round's observation (the tool answer in the model's context before its
            # round-2 call) is the EDA feedback of round 1's result: every uncovered point listed
            assert second_obs == feedback_text(one, sources=problem.design.files, target_percent=90.0)
            assert one.uncovered and "Target 90%: not met" in second_obs
            for point in one.uncovered:
                assert f"{point.file}:{point.line}" in second_obs, (point, second_obs)
            assert "`data` bits 1-4 never toggled" in second_obs
            assert last_obs.startswith("Coverage of the DUT") and last_obs.endswith("The episode is over.")
            assert "Target 90%: met" in last_obs
    assert len(scores) == 2  # the policy reproduced the demonstration's two testbenches
    assert f"GRPO step {steps}: reward mean" in stdout
