"""The reward-service CLI in the forms the checks rely on, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CID012, REPO, STIMULUS, cid012_rows, rtl_files

PID = "cvdp_copilot_fixed_arbiter_0004"


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {"REWARD_SERVICE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache)}
    return subprocess.run([sys.executable, "-m", "reward_service", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=REPO)


@pytest.fixture(scope="module")
def design_files(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("design")
    paths = []
    for name, text in rtl_files(cid012_rows()[PID]).items():
        (d / name).write_text(text)
        paths.append(d / name)
    return paths


@pytest.mark.slow
def test_score_design_and_testbench_json(design_files, shared_cache_dir):
    expected = json.loads((STIMULUS / PID / "expected.json").read_text())["testbenches"]["weak"]
    args = [a for p in design_files for a in ("--design", str(p))]
    out = cli("score", *args, "--testbench", str(STIMULUS / PID / "weak.sv"), "--dut-instance", "dut",
              "--simulator", "verilator", "--json", cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    got = {m: {"covered": v["covered"], "total": v["total"]} for m, v in result["coverage"]["metrics"].items()}
    assert got == expected["coverage"]
    assert result["status"] == "ok" and result["reward"] == pytest.approx(1 + expected["overall_percent"] / 100, abs=1e-4)


@pytest.mark.slow
def test_score_problem_with_completion(tmp_path, shared_cache_dir):
    tb = (STIMULUS / PID / "best.sv").read_text()
    completion = tmp_path / "completion.txt"
    completion.write_text(f"<think>plan the arbiter test</think>\nFinal answer:\n```verilog\n{tb}```\n")
    out = cli("score", "--problems", str(CID012), "--problem-id", PID, "--completion", str(completion), "--json",
              cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok" and result["passed"] is True and result["reward"] == 2.0
    assert result["coverage"]["scope"] == "dut"


def test_human_output_shows_table_and_reward(design_files, shared_cache_dir):
    args = [a for p in design_files for a in ("--design", str(p))]
    out = cli("score", *args, "--testbench", str(STIMULUS / PID / "weak.sv"), "--dut-instance", "dut",
              "--simulator", "icarus", cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    assert "status: ok" in out.stdout and "reward: 0.0000" in out.stdout
    assert "unavailable (line, branch, toggle, expr): Icarus Verilog has no code coverage" in out.stdout
    assert "use simulator=verilator" in out.stdout and "no target given" in out.stdout


def test_failed_sample_exits_1_and_usage_error_exits_2(tmp_path, design_files, shared_cache_dir):
    bad = tmp_path / "tb.sv"
    bad.write_text("module tb; initial begin oops end endmodule\n")
    out = cli("score", "--design", str(design_files[0]), "--testbench", str(bad), "--simulator", "icarus", "--json",
              cache=shared_cache_dir)
    assert out.returncode == 1 and json.loads(out.stdout)["status"] == "compile_error"
    out = cli("score", "--testbench", str(bad), cache=shared_cache_dir)
    assert out.returncode == 2 and "--design" in out.stderr
    out = cli("score", "--problems", str(CID012), "--problem-id", "nope", "--testbench", str(bad), cache=shared_cache_dir)
    assert out.returncode == 2 and "nope" in out.stderr
    out = cli("score", "--design", str(design_files[0]), "--testbench", str(bad), "-s", "iverilog", cache=shared_cache_dir)
    assert out.returncode == 2 and "iverilog" in out.stderr
    out = cli("score", "--design", str(design_files[0]), "--cocotb", str(bad), cache=shared_cache_dir)
    assert out.returncode == 2 and "--toplevel" in out.stderr


def test_problems_lists_cid012(shared_cache_dir):
    out = cli("problems", "--problems", str(CID012), "--json", cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 82
    by_id = {r["id"]: r for r in rows}
    assert by_id["cvdp_copilot_Attenuator_0011"]["dut_instance"] == "uut"
    assert by_id["cvdp_copilot_Attenuator_0011"]["target_percent"] == 90


def test_readme_example_runs(shared_cache_dir):
    """README's first command (minus the install step) scores the shipped example."""
    readme = (REPO / "README.md").read_text()
    line = next(l for l in readme.splitlines() if l.startswith("bash scripts/install.sh && python -m reward_service score"))
    args = line.split("python -m reward_service ", 1)[1].split()
    out = cli(*args, cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    assert "reward: 2.0000" in out.stdout and "toggle" in out.stdout


README_SCORES = [line for line in (REPO / "README.md").read_text().splitlines()
                 if line.startswith("reward-service score ") and "examples/cvdp/" in line]


@pytest.mark.parametrize("line", README_SCORES, ids=lambda l: l.split("examples/cvdp/", 2)[1].split()[0])
def test_readme_scoring_examples_run_on_the_shipped_files(shared_cache_dir, line):
    """Every `reward-service score` example of the README that names examples/cvdp files runs
    as printed and scores what that stimulus covers (testbench and cocotb test: all of the
    Attenuator's points; the completion's shorter testbench: 96.61 %: branch 9/10, toggle 54/56)."""
    out = cli(*line.split()[1:], cache=shared_cache_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    want = "1.9661" if "completion.md" in line else "2.0000"
    if "--json" in line:
        assert f"{json.loads(out.stdout)['reward']:.4f}" == want
    else:
        assert f"reward: {want}" in out.stdout


def test_shipped_request_json_is_the_shipped_files():
    """examples/cvdp/request.json (README's curl body) holds the same RTL as the CVDP row and the
    same testbench as tb_attenuator.sv."""
    cvdp = REPO / "examples" / "cvdp"
    row = json.loads((cvdp / "attenuator.jsonl").read_text().splitlines()[0])
    request = json.loads((cvdp / "request.json").read_text())
    rtl = row["harness"]["files"]["src/Attenuator.sv"]
    assert request["design"]["files"] == {"Attenuator.sv": rtl} == {"Attenuator.sv": (cvdp / "Attenuator.sv").read_text()}
    assert request["stimulus"]["files"] == {"tb_attenuator.sv": (cvdp / "tb_attenuator.sv").read_text()}
