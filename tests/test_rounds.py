"""LLM4Cov rounds for GRPO trainers (reward_service.adapters.rounds): round k+1's prompt from a
group scored with real Verilator simulations of the CVDP Attenuator — the chosen sample's
testbench without its <think> reasoning, then the EDA-result turn of its result."""

from __future__ import annotations

import pytest
from test_episodes import ATTN, EXAMPLES, GOOD_TB, WEAK_TB

from reward_service.adapters.rounds import EDA_INSTRUCTION, next_round, next_rounds
from reward_service.feedback import feedback_text
from reward_service.models import ScoreResult, Status
from reward_service.problems.cvdp import load_problems

PROBLEM = load_problems(EXAMPLES / "attenuator.jsonl")[ATTN]
WEAK = f"<think>drive data once</think>\nHere is a testbench:\n```systemverilog\n{WEAK_TB}```\n"
GOOD = f"<think>walk every bit of data</think>\n```verilog\n{GOOD_TB}```"
BROKEN = "```systemverilog\nmodule tb; Attenuator uut(.clk(clk)); initial begin clk = ; end endmodule\n```"


@pytest.fixture(scope="module")
def group(engine) -> list[ScoreResult]:
    results = [engine.score(PROBLEM.request(text)) for text in (WEAK, GOOD, BROKEN)]
    assert [r.status for r in results] == [Status.ok, Status.ok, Status.compile_error]
    assert results[0].reward < results[1].reward and results[2].reward == 0.0
    return results


def test_next_round_takes_the_best_testbench_and_its_eda_result(group):
    prompt = [{"role": "system", "content": "You write testbenches."}, {"role": "user", "content": PROBLEM.prompt}]
    best = next_round(prompt, [WEAK, GOOD, BROKEN], group, sources=PROBLEM.design.files, target_percent=90)
    assert best.chosen == 1 and best.reward == group[1].reward
    assert best.messages[:2] == prompt
    assistant, eda = best.messages[2:]
    assert assistant == {"role": "assistant", "content": f"```verilog\n{GOOD_TB}```"}  # no <think>
    report = feedback_text(group[1], sources=PROBLEM.design.files, target_percent=90)
    assert eda == {"role": "user", "content": f"EDA result:\n{report}\n\n{EDA_INSTRUCTION}"}


def test_next_round_worst_and_the_weak_testbench_uncovered_points(group):
    worst = next_round(PROBLEM.prompt, [WEAK, GOOD, BROKEN], group, pick="worst")
    assert worst.chosen == 2 and worst.messages[0] == {"role": "user", "content": PROBLEM.prompt}
    assert "The testbench was not scored on coverage (compile_error)" in worst.messages[-1]["content"]
    # without the broken sample, the worst is the weak one: its report names what it left uncovered
    weak = next_round(PROBLEM.prompt, [WEAK, GOOD], group[:2], pick="worst", sources=PROBLEM.design.files)
    assert weak.chosen == 0 and weak.messages[1]["content"].startswith("Here is a testbench:")
    assert "`data` bits 1-4 never toggled" in weak.messages[-1]["content"]


def test_next_rounds_per_group_and_errors(group):
    infra = ScoreResult.infrastructure_failure("worker lost")
    rounds = next_rounds(
        ["p-a"] * 3 + ["p-b"] * 2,
        [WEAK, GOOD, BROKEN, GOOD, WEAK],
        [*group, infra, group[0]],
        ["a", "a", "a", "b", "b"],
    )
    assert rounds["a"].chosen == 1 and rounds["b"].chosen == 4  # b: the sandbox_error sample is never chosen
    assert rounds["b"].messages[0]["content"] == "p-b" and rounds["b"].reward == group[0].reward
    with pytest.raises(ValueError, match="all sandbox_error"):
        next_round("p", [GOOD], [infra])
    with pytest.raises(ValueError, match="2 completions but 1 results"):
        next_round("p", [GOOD, WEAK], [group[0]])
