"""Agentic feedback (reward_service.feedback) on results of real Verilator runs of the case
testbenches; what each text must say is read off the testbench's stimulus and expected.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CID012, REPO, STIMULUS, needs_cases

from reward_service.feedback import annotated_source, compress_bits, feedback_text
from reward_service.problems import load_problems

ARB = "cvdp_copilot_fixed_arbiter_0004"
DDM = "cvdp_copilot_write_through_data_direct_mapped_cache_0001"
ATTN = "cvdp_copilot_Attenuator_0011"


@pytest.fixture(scope="module")
def problems():
    return load_problems(CID012)


@pytest.fixture(scope="module")
def arbiter_weak(engine, problems):
    """weak.sv drives req = 0, then 8'b00000001, then 8'b00001100, and finishes."""
    result = engine.score(problems[ARB].request((STIMULUS / ARB / "weak.sv").read_text()))
    assert result.status == "ok", result.message
    return result


def test_compress_bits():
    assert compress_bits([]) == ""
    assert compress_bits([3]) == "3"
    assert compress_bits([7, 0, 1, 2, 5, 8, 2]) == "0-2,5,7-8"


@pytest.mark.slow
def test_feedback_names_what_the_weak_testbench_missed(arbiter_weak, problems):
    problem = problems[ARB]
    text = feedback_text(arbiter_weak, sources=problem.design.files, target_percent=problem.target_percent)
    cov = json.loads((STIMULUS / ARB / "expected.json").read_text())["testbenches"]["weak"]["coverage"]
    counts = ", ".join(f"{m} {v['covered']}/{v['total']}" for m, v in cov.items())
    assert text.splitlines()[0] == (
        f"Coverage of the DUT (instance `dut`): 53.5% overall — {counts}. Target 95%: not met."
    )
    items = [line for line in text.splitlines() if line.startswith("- ")]
    # req[1] and req[3..7] are never set alone above the granted bits: their arms never run
    never = [i for i in items if "never executed" in i]
    assert [i.split(":")[1].split()[0] for i in never] == ["17", "21", "23", "25", "27", "29"]
    assert never[0] == "- fixed_priority_arbiter.sv:17 `else if (req[1])`: never executed (elsif)"
    # code lines come first, toggles last
    assert items.index(never[-1]) < min(items.index(i) for i in items if "toggled" in i)
    # req: bit 0 rose and fell, bits 2-3 only rose; grant: bit 0 rose and fell, bit 2 only rose
    assert "`req` bits 1,4-7 never toggled; `req` bits 2-3 never fell (1->0)" in text
    assert "`grant` bits 1,3-7 never toggled; `grant` bit 2 never fell (1->0)" in text
    assert len(text) <= 1500


@pytest.mark.slow
def test_annotated_source_marks_the_uncovered_lines(arbiter_weak, problems):
    files = problems[ARB].design.files
    view = annotated_source(files, arbiter_weak.uncovered, context=1)
    lines = view.splitlines()
    assert lines[0] == "== fixed_priority_arbiter.sv =="
    marked = [int(line.split("|")[0][2:]) for line in lines if line.startswith(">>")]
    assert marked == [6, 7, 17, 21, 23, 25, 27, 29]
    src = files["fixed_priority_arbiter.sv"].splitlines()
    assert f">> 17 | {src[16].rstrip()}  // uncovered: never executed (elsif)" in lines
    assert f"   19 | {src[18].rstrip()}" not in lines  # req[2] was granted: not marked, not context of a mark
    assert f"   18 | {src[17].rstrip()}" in lines  # context after line 17
    assert any(line.strip() == "..." for line in lines)
    short = annotated_source(files, arbiter_weak.uncovered, max_lines=5)
    assert len(short.splitlines()) == 6 and short.endswith("... (annotated view truncated)")


@pytest.mark.slow
def test_feedback_is_bounded(arbiter_weak, problems):
    text = feedback_text(arbiter_weak, sources=problems[ARB].design.files, max_chars=320)
    assert len(text) <= 320
    assert text.splitlines()[-1].endswith("more uncovered lines not shown.)")
    assert "never executed" in text and "toggled" not in text  # the most useful items survive


@pytest.mark.slow
def test_feedback_says_when_the_result_lists_only_part(engine, problems):
    problem = problems[DDM]
    result = engine.score(problem.request((STIMULUS / DDM / "weak.sv").read_text()))
    missing = sum(m.total - m.covered for m in result.coverage.metrics.values())
    cov = json.loads((STIMULUS / DDM / "expected.json").read_text())["testbenches"]["weak"]["coverage"]
    assert missing == sum(v["total"] - v["covered"] for v in cov.values()) == 558
    text = feedback_text(result, sources=problem.design.files)
    assert text.endswith(f"the result lists {len(result.uncovered)} of 558 uncovered points.)")
    assert "`uncached` never toggled" in text


@pytest.mark.slow
def test_feedback_of_full_coverage_and_of_a_failure(engine, problems):
    good = engine.score(problems[ATTN].request((STIMULUS / ATTN / "good.sv").read_text()))
    text = feedback_text(good, target_percent=90)
    first, *races = text.split("\n")
    assert first.endswith("Target 90%: met. Every point is covered.")
    # the testbench releases reset with `=` right after rising edges the DUT samples it at
    assert [r.lint() for r in good.races] == races and races
    assert all(": race: blocking write to tb_Attenuator.reset at posedge tb_Attenuator.clk" in r for r in races)
    broken = (STIMULUS / ATTN / "good.sv").read_text().replace("initial begin", "initial begin\n    nope = 1;", 1)
    failed = engine.score(problems[ATTN].request(broken))
    assert failed.status == "compile_error"
    text = feedback_text(failed)
    assert text.startswith("The testbench was not scored on coverage (compile_error): verilator rejected")
    assert "nope" in text
    assert annotated_source(problems[ATTN].design.files, failed.uncovered) == ""


@needs_cases
@pytest.mark.slow
def test_score_feedback_flag(shared_cache_dir):
    env = {
        "REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir),
        "REWARD_SERVICE_RESULT_CACHE": "false",
        "PATH": "/usr/bin:/bin",
        "HOME": str(shared_cache_dir),
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "score",
            "--problems",
            str(CID012),
            "--problem-id",
            ARB,
            "--testbench",
            str(STIMULUS / ARB / "weak.sv"),
            "--feedback",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Uncovered, most useful first:" in out.stdout
    assert "- fixed_priority_arbiter.sv:17 `else if (req[1])`: never executed (elsif)" in out.stdout
    assert ">> 17 |" in out.stdout
