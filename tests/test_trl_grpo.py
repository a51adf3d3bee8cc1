"""TRL end to end: examples/trainers/trl_grpo_tiny.py runs a real ``trl`` ``GRPOTrainer`` on CPU
(a tiny Qwen2 model and a BPE tokenizer built in the run, warm-started with TRL's SFTTrainer on
the two shipped Attenuator testbenches) for 3 steps against the live embedded service, with
``CoverageReward`` as its only reward function. The trainer's own log history must show a
reward mean > 0 at every step, equal to the mean of what the reward function returned that
step, and every completion's reward must equal what the plain client gets from the service for
the same text (the reward TRL trained on is the service's, sample by sample). Needs the
``trl`` extra (CI installs it: scripts/install.sh --test)."""

from __future__ import annotations

import statistics

import pytest
from conftest import REPO, run_trainer_example

from reward_service.client import RewardClient
from reward_service.models import CoverageReport, RewardSpec, Status
from reward_service.reward import shape_reward

EXAMPLE = REPO / "examples" / "trainers" / "trl_grpo_tiny.py"
ATTENUATOR = REPO / "examples" / "cvdp" / "attenuator.jsonl"
PROBLEM_ID = "cvdp_copilot_Attenuator_0011"
STEPS = 3
#: The chorus shaping's value for a completion without coverage (reward.py).
FAILURE = shape_reward(Status.compile_error, CoverageReport(), False, RewardSpec())


@pytest.fixture(scope="module")
def run(trl_extra, trainer_service, tmp_path_factory):
    """The example's JSON: TRL's log history, what the reward function scored, the SFT losses."""
    out = tmp_path_factory.mktemp("grpo") / "history.json"
    return run_trainer_example(EXAMPLE, trainer_service, out, "--steps", str(STEPS), timeout=540)


@pytest.mark.slow
def test_grpo_steps_log_the_service_rewards(trainer_service, run):
    data, stdout = run
    assert data["sft_losses"][-1] < 0.1 < data["sft_losses"][0]  # the warm start learned the answers
    steps = [e for e in data["log_history"] if "reward" in e]
    assert len(steps) == STEPS and len(data["scored"]) == STEPS, stdout
    for entry, call in zip(steps, data["scored"]):
        rewards = call["rewards"]
        assert len(rewards) == 4 and None not in rewards
        assert entry["reward"] > 0 and max(rewards) > FAILURE, (entry, call)
        assert entry["reward"] == pytest.approx(statistics.fmean(rewards), abs=1e-5)
        assert entry["rewards/coverage_reward/mean"] == pytest.approx(entry["reward"], abs=1e-5)
        assert entry["reward_std"] == pytest.approx(statistics.stdev(rewards), abs=1e-4)
    # sample by sample, the reward TRL got is the service's for that exact completion
    texts = sorted({t for call in data["scored"] for t in call["completions"]})
    with RewardClient(trainer_service) as client:
        direct = dict(
            zip(
                texts,
                client.score_batch(
                    [{"problem_id": PROBLEM_ID, "stimulus": {"kind": "completion", "text": t}} for t in texts],
                    timeout=600,
                ),
            )
        )
    for call in data["scored"]:
        assert call["rewards"] == pytest.approx([direct[t].reward for t in call["completions"]])
    good = [r for r in direct.values() if r.status == Status.ok]
    assert good and all(r.reward == pytest.approx(1.0 + r.coverage.overall) for r in good)
    assert "GRPO step 3: reward mean" in stdout
