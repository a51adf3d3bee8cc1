"""`reward-service eval-cvdp`: the CVDP-ECov table (Pass@1 over n samples and mean coverage,
non-agentic and agentic apart) on a small subset of cid012, non-agentic and agentic rows, checked
against expected.json and against the engine scoring the same completions directly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CID012, REPO, SHARED_CASES, STIMULUS
from test_rescore import cli_env, write_jsonl

from reward_service.problems import load_problems

ARB = "cvdp_copilot_fixed_arbiter_0004"
BCD = "cvdp_agentic_bcd_adder_0006"
EXAMPLE = REPO / "examples" / "rescore" / "cid012_completions.jsonl"


def completions() -> list[dict]:
    """The example file (Attenuator, and the agentic bcd_adder: its completions are the
    `verif/tb_bcd_adder.sv` its patch names) plus the arbiter's weak/good and a third arbiter
    sample that --n 2 must leave out."""
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    rows += [
        {"problem_id": ARB, "sample_id": tb, "completion": (STIMULUS / ARB / f"{tb}.sv").read_text()}
        for tb in ("weak", "good", "best")
    ]
    return rows


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory, shared_cache_dir):
    d = tmp_path_factory.mktemp("eval")
    path = write_jsonl(d / "C.jsonl", completions())
    args = [
        sys.executable,
        "-m",
        "reward_service",
        "eval-cvdp",
        "--completions",
        str(path),
        "--n",
        "2",
        "--report-json",
        str(d / "report.json"),
        "--report-md",
        str(d / "report.md"),
        "-j",
        "2",
    ]
    # no --problems: the default is $REWARD_SERVICE_CASES/cvdp/cid012.jsonl
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env=cli_env(shared_cache_dir, REWARD_SERVICE_CASES=str(SHARED_CASES)),
    )
    return {"proc": proc, "report": json.loads((d / "report.json").read_text()), "dir": d, "path": path}


@pytest.mark.slow
def test_table_split_non_agentic_agentic(evaluation, engine):
    proc, report = evaluation["proc"], evaluation["report"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = load_problems(CID012)
    assert problems[BCD].agentic and not problems[ARB].agentic
    # the engine on the same completions, scored directly (first two samples of each problem)
    direct: dict[str, list] = {}
    for row in completions():
        if len(direct.setdefault(row["problem_id"], [])) < 2:
            direct[row["problem_id"]].append(engine.score(problems[row["problem_id"]].request(row["completion"])))

    def row(pids):
        pass1 = [sum(r.passed for r in direct[p]) / 2 for p in pids]
        cov = [sum(r.coverage.overall or 0 for r in direct[p]) / 2 for p in pids]
        return sum(pass1) / len(pids), sum(cov) / len(pids)

    non_agentic, agentic = report["by_kind"]["non-agentic"], report["by_kind"]["agentic"]
    assert (non_agentic["problems"], non_agentic["samples"]) == (2, 4)
    assert (agentic["problems"], agentic["samples"]) == (1, 2)
    assert (non_agentic["pass@1"], non_agentic["mean_coverage"]) == pytest.approx(
        row(["cvdp_copilot_Attenuator_0011", ARB])
    )
    assert (agentic["pass@1"], agentic["mean_coverage"]) == pytest.approx(row([BCD]))
    # the arbiter against expected.json: weak fails at 53.52 %, good passes at 100 %
    expected = json.loads((STIMULUS / ARB / "expected.json").read_text())["testbenches"]
    arb = report["by_problem"][ARB]
    assert (arb["n"], arb["passed"], arb["pass@1"]) == (2, 1, 0.5)
    assert round(100 * arb["mean_coverage"], 2) == round((expected["weak"]["overall_percent"] + 100) / 2, 2)
    # the exhaustive bcd testbench meets the TARGET of 90, the three-vector one does not
    assert [r.passed for r in direct[BCD]] == [True, False] and report["by_problem"][BCD]["passed"] == 1
    assert report["pass@1"] == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    assert report["problems_in_file"] == 82


@pytest.mark.slow
def test_printed_table_and_mapping(evaluation):
    out, report = evaluation["proc"].stdout, evaluation["report"]
    lines = out.splitlines()
    assert lines[0] == "# CVDP-ECov (cid012) evaluation"
    assert "| setting | problems | samples / problem | Pass@1 % | mean coverage % |" in lines
    agentic = report["by_kind"]["agentic"]
    assert f"| agentic | 1 | 2.0 | {100 * agentic['pass@1']:.2f} | {100 * agentic['mean_coverage']:.2f} |" in lines
    assert f"| all | 3 | 2.0 | {100 * report['pass@1']:.2f} | {100 * report['mean_coverage']:.2f} |" in lines
    assert "**79 of the 82 problems have no completion**" in out
    assert "`line` for Block, `branch` for Branch, `toggle` for Toggle, `expr` for Expression" in out
    assert report["metric_mapping"] in out
    md = (evaluation["dir"] / "report.md").read_text()
    assert md.startswith("# CVDP-ECov (cid012) evaluation") and "# Details" in md and "## By problem" in md


@pytest.mark.slow
def test_rerun_scores_nothing_and_prints_the_same(evaluation, shared_cache_dir):
    d = evaluation["dir"]
    args = [
        sys.executable,
        "-m",
        "reward_service",
        "eval-cvdp",
        "--completions",
        str(evaluation["path"]),
        "--problems",
        str(CID012),
        "--n",
        "2",
        "--report-json",
        str(d / "again.json"),
        "-v",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=REPO, env=cli_env(shared_cache_dir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "6 already in" in proc.stderr and "scored " not in proc.stderr
    assert proc.stdout == evaluation["proc"].stdout
    assert json.loads((d / "again.json").read_text()) == evaluation["report"]


def test_missing_default_problems_is_a_usage_error(tmp_path, shared_cache_dir):
    path = write_jsonl(tmp_path / "C.jsonl", completions()[:1])
    proc = subprocess.run(
        [sys.executable, "-m", "reward_service", "eval-cvdp", "--completions", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=cli_env(shared_cache_dir),
    )
    assert proc.returncode == 2 and "cid012.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_shipped_examples_are_release_rows():
    """examples/cvdp/cid012_examples.jsonl (README's eval-cvdp example from any checkout) is exactly
    the cid012 rows of the problems the example completions answer, unmodified."""
    shipped = (REPO / "examples" / "cvdp" / "cid012_examples.jsonl").read_text().splitlines()
    release = {json.loads(line)["id"]: line for line in CID012.read_text().splitlines()}
    answered = {json.loads(line)["problem_id"] for line in EXAMPLE.read_text().splitlines()}
    assert sorted(json.loads(line)["id"] for line in shipped) == sorted(answered)
    assert all(line == release[json.loads(line)["id"]] for line in shipped)
    assert set(load_problems(REPO / "examples" / "cvdp" / "cid012_examples.jsonl")) == answered
