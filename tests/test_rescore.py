"""Batch rescoring (`reward-service rescore`): the completions and results files, the report,
and the Done-when of issue 4 — rescoring the CVDP problems × the candidate testbenches of
../shared/cases/stimulus gives the pass@k and coverage hand-computed from their expected.json,
and a run killed halfway resumes to the same report without scoring any sample twice."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CID012, FORCING_CASES, REPO, STIMULUS, case_expected, free_port, live_server, stimulus_dirs

from reward_service.problems import load_problems
from reward_service.rescore.report import summarise
from reward_service.rescore.runner import plan
from reward_service.rescore.store import ResultStore, Sample, problem_digest, read_completions
from reward_service.settings import get_settings

ATTN = "cvdp_copilot_Attenuator_0011"
PROBLEM_DIRS = [d for d in stimulus_dirs() if (d / "expected.json").exists()]
TBS = ("weak", "good", "best")
KS = (1, 2, 3, 5)


@pytest.fixture(scope="module")
def problems():
    return load_problems(CID012)


# -- the completions of the Done-when ------------------------------------------------------------
def _wrap(tb: str, text: str) -> str:
    """The testbench as a model would answer: bare, in a Markdown block, or after reasoning."""
    if tb == "good":
        return f"Here is a testbench that drives every input.\n\n```systemverilog\n{text}```\n\nIt ends with $finish."
    if tb == "best":
        return f"<think>reset first, then sweep the inputs</think>\nFinal answer:\n```verilog\n{text}```\n"
    return text


def broken_completions() -> list[dict]:
    good = (STIMULUS / ATTN / "good.sv").read_text()
    assert good.count("initial begin") == 1
    undeclared = good.replace("initial begin", "initial begin\n    no_such_signal = 1'b1;", 1)
    return [
        {"problem_id": ATTN, "sample_id": "broken-compile", "completion": f"```systemverilog\n{undeclared}```\n"},
        {
            "problem_id": ATTN,
            "sample_id": "broken-prose",
            "completion": "I would reset the attenuator and then apply a few values of `data`.",
        },
    ]


def stimulus_completions() -> list[dict]:
    rows = [
        {"problem_id": d.name, "sample_id": tb, "completion": _wrap(tb, (d / f"{tb}.sv").read_text())}
        for d in PROBLEM_DIRS
        for tb in TBS
    ]
    return rows + broken_completions()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _metric_ratios(coverage: dict) -> dict[str, float]:
    return {m: v["covered"] / v["total"] for m, v in coverage.items() if v["total"]}


def hand_expected(ks=KS) -> dict:
    """pass@k and mean coverage from expected.json alone: the binomial formula with math.comb,
    two broken Attenuator samples that fail with no coverage (0), and the testbenches that
    force DUT registers (FORCING_CASES) refused: not passed, coverage 0, no metric ratios."""
    per = {}
    for d in PROBLEM_DIRS:
        exp = case_expected(d.name)["testbenches"]
        kept = [tb for tb in TBS if (d.name, tb) not in FORCING_CASES]
        refused = len(TBS) - len(kept)
        passed = [exp[tb]["meets_target"] for tb in kept] + [False] * refused
        ratios = [_metric_ratios(exp[tb]["coverage"]) for tb in kept]
        cov = [sum(r.values()) / len(r) for r in ratios] + [0.0] * refused
        if d.name == ATTN:
            passed += [False, False]
            cov += [0.0, 0.0]
        per[d.name] = (len(passed), sum(passed), cov, ratios)
    out = {}
    for k in ks:
        values = [1 - math.comb(n - c, k) / math.comb(n, k) for n, c, _, _ in per.values() if k <= n]
        out[f"pass@{k}"] = sum(values) / len(values) if values else None
        out[f"count@{k}"] = len(values)
    out["mean_coverage"] = sum(sum(cov) / len(cov) for _, _, cov, _ in per.values()) / len(per)
    metrics = {}
    for m in ("line", "branch", "toggle", "expr"):
        means = [
            sum(r[m] for r in ratios if m in r) / sum(m in r for r in ratios)
            for _, _, _, ratios in per.values()
            if any(m in r for r in ratios)
        ]
        metrics[m] = sum(means) / len(means)
    out["coverage_per_metric"] = metrics
    out["per_problem"] = {pid: (n, c) for pid, (n, c, _, _) in per.items()}
    return out


# -- running the command ---------------------------------------------------------------------------
def cli_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_SERVICE_")}
    # expected.json holds Verilator's numbers; CVDP problems default to engine=auto, whose fast
    # path may differ on $random testbenches (image_stego good: one toggle bit, docs/fastcov.md).
    env.update(
        REWARD_SERVICE_CACHE_DIR=str(cache),
        REWARD_SERVICE_RESULT_CACHE="false",
        REWARD_SERVICE_CVDP_ENGINE="verilator",
        **extra,
    )
    return env


def rescore_args(completions: Path, out: Path, *extra: str, problems: Path = CID012) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reward_service",
        "rescore",
        "--problems",
        str(problems),
        "--completions",
        str(completions),
        "--out",
        str(out),
        "--k",
        ",".join(map(str, KS)),
        "--report-json",
        str(out.with_suffix(".report.json")),
        "-v",
        *extra,
    ]


def scored_log(stderr: str) -> list[tuple[str, str]]:
    """The (problem_id, sample_id) of each `scored ...` log line: one per engine result written."""
    return [tuple(line.split()[1:3]) for line in stderr.splitlines() if line.startswith("scored ")]


def result_keys(path: Path) -> list[tuple[str, str]]:
    return [(r["problem_id"], str(r["sample_id"])) for r in map(json.loads, path.read_text().splitlines())]


def comparable(record: dict) -> dict:
    return {k: record[k] for k in ("problem_id", "sample_id", "status", "passed", "reward", "coverage", "points")}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, shared_cache_dir):
    """One uninterrupted embedded run over the whole Done-when set (plus a duplicate line)."""
    d = tmp_path_factory.mktemp("full")
    rows = stimulus_completions()
    completions = write_jsonl(d / "C.jsonl", rows + [rows[0]])
    out = d / "R.jsonl"
    proc = subprocess.run(
        rescore_args(completions, out, "-j", "2"),
        capture_output=True,
        text=True,
        env=cli_env(shared_cache_dir),
        cwd=REPO,
        timeout=900,
    )
    return {
        "proc": proc,
        "out": out,
        "completions": completions,
        "rows": rows,
        "report": json.loads(out.with_suffix(".report.json").read_text()),
    }


# -- the Done-when ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_rescoring_matches_hand_computed_expectation(full_run):
    proc, report = full_run["proc"], full_run["report"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = hand_expected()
    # expected.json's meets_target is CVDP's own grading: the raw figure (no point excluded)
    for k in KS:
        assert report[f"pass@{k}_raw"] == (pytest.approx(want[f"pass@{k}"]) if want[f"pass@{k}"] is not None else None)
        assert report["pass@k_problems"][f"pass@{k}"] == want[f"count@{k}"]
    # spelled out: Attenuator 3 of 5, ring_token 0 of 3, six problems 2 of 3
    assert report["pass@1_raw"] == pytest.approx((3 / 5 + 6 * 2 / 3 + 0) / 8)
    assert report["pass@2_raw"] == pytest.approx((0.9 + 6 * 1.0 + 0) / 8)
    # judged without proved-unreachable points (CVDP problems' default, docs/formal.md): ring_token's
    # best.sv would meet TARGET 100 (95.83 %, its one uncovered point the `default:` arm proved
    # dead), but it forces DUT registers and is refused (docs/integrity.md)
    assert report["pass@1"] == pytest.approx((3 / 5 + 6 * 2 / 3 + 0) / 8)
    assert report["passed"] == report["passed_raw"]
    # only the Attenuator has 5 samples: pass@5 is undefined for the other problems
    assert report["pass@5"] == 1.0 and report["pass@k_problems"]["pass@5"] == 1
    assert report["by_problem"]["cvdp_copilot_ring_token_0004"]["pass@5"] is None
    assert report["mean_coverage"] == pytest.approx(want["mean_coverage"], abs=1e-12)
    assert report["coverage_per_metric"] == pytest.approx(want["coverage_per_metric"], abs=1e-12)
    assert {pid: (p["n"], p["passed_raw"]) for pid, p in report["by_problem"].items()} == want["per_problem"]
    assert report["status_counts"] == {"compile_error": 1, "invalid_input": 1, "ok": 22, "refused": 2}
    assert (report["samples_given"], report["scored"], report["sandbox_errors"], report["pending"]) == (26, 26, 0, 0)
    assert report["duplicates"] == 1 and "repeats line 1" in proc.stderr
    assert report["complete"] is True
    assert set(report["by_difficulty"]) == {"easy", "medium"}
    assert report["by_kind"]["agentic"]["problems"] == 0 and report["by_kind"]["non-agentic"]["problems"] == 8
    # one line and one engine result per sample
    keys = result_keys(full_run["out"])
    assert sorted(keys) == sorted((r["problem_id"], str(r["sample_id"])) for r in full_run["rows"])
    assert sorted(scored_log(proc.stderr)) == sorted(keys)
    # the table judges targets without proved-unreachable points (ring_token good and best refused:
    # 15 of 26; pass@2 (0.9 + 6) / 8, pass@3 7 / 8)
    assert "| all | 8 | 26 | 15 | 57.50 | 86.25 | 87.50 | 100.00 (1/8) |" in proc.stdout


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_report(full_run, tmp_path, shared_cache_dir):
    completions = full_run["completions"]
    out = tmp_path / "R.jsonl"
    args = rescore_args(completions, out, "-j", "2")
    log1 = tmp_path / "run1.log"
    with log1.open("w") as stderr:
        first = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=cli_env(shared_cache_dir),
            cwd=REPO,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        while (not out.exists() or out.read_text().count("\n") < 8) and first.poll() is None:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the whole tree, as a crash would
        first.wait(30)
    assert first.returncode == -signal.SIGKILL
    kept = ResultStore(out).load()  # also cuts a torn last line
    assert 8 <= len(kept) < 26
    second = subprocess.run(args, capture_output=True, text=True, env=cli_env(shared_cache_dir), cwd=REPO, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    rescored = scored_log(second.stderr)
    assert not set(rescored) & set(kept), "a sample kept from the killed run was scored again"
    assert len(rescored) == len(set(rescored)) == 26 - len(kept)
    assert f"{len(kept)} already in" in second.stderr
    keys = result_keys(out)
    assert len(keys) == len(set(keys)) == 26  # no sample twice in R.jsonl
    assert json.loads(out.with_suffix(".report.json").read_text()) == full_run["report"]
    # the results themselves equal the uninterrupted run's
    ours = {
        (r["problem_id"], str(r["sample_id"])): comparable(r) for r in map(json.loads, out.read_text().splitlines())
    }
    theirs = {
        (r["problem_id"], str(r["sample_id"])): comparable(r)
        for r in map(json.loads, full_run["out"].read_text().splitlines())
    }
    assert ours == theirs


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_resumes(tmp_path, shared_cache_dir):
    rows = [r for r in stimulus_completions() if r["problem_id"] == ATTN][:3]
    completions = write_jsonl(tmp_path / "C.jsonl", rows)
    out = tmp_path / "R.jsonl"
    args = rescore_args(completions, out, "-j", "1")
    first = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(shared_cache_dir),
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while (not out.exists() or not out.read_text().endswith("\n")) and first.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(first.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
    _, stderr = first.communicate(timeout=120)
    if first.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert first.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr
    lines = out.read_text().splitlines()
    # nothing recorded from the interrupted sims (the message says what was, if anything)
    assert all(json.loads(line)["status"] == "ok" for line in lines), [
        (json.loads(line)["status"], json.loads(line)["message"][:300]) for line in lines
    ]
    assert out.read_text().endswith("\n")
    second = subprocess.run(args, capture_output=True, text=True, env=cli_env(shared_cache_dir), cwd=REPO, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    keys = result_keys(out)
    assert sorted(keys) == sorted((ATTN, r["sample_id"]) for r in rows)
    assert len(scored_log(second.stderr)) == 3 - len(lines)


@pytest.mark.slow
def test_infrastructure_failures_are_apart_and_retried(tmp_path, shared_cache_dir):
    rows = [
        {"problem_id": ATTN, "sample_id": "weak", "completion": (STIMULUS / ATTN / "weak.sv").read_text()},
        broken_completions()[1],
    ]
    completions = write_jsonl(tmp_path / "C.jsonl", rows)
    out = tmp_path / "R.jsonl"
    args = rescore_args(completions, out)
    # a work root that does not exist: the engine cannot create the sample's work dir (OSError)
    broken = subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env=cli_env(shared_cache_dir, REWARD_SERVICE_WORK_ROOT=str(tmp_path / "missing")),
    )
    assert broken.returncode == 3, broken.stderr[-2000:]
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert report["sandbox_errors"] == 1 and report["sandbox_error_samples"] == [[ATTN, "weak"]]
    assert (report["scored"], report["passed"], report["pass@1"]) == (1, 0, 0.0)  # only the prose sample counts
    assert report["complete"] is False and "retry" in broken.stderr
    fixed = subprocess.run(args, capture_output=True, text=True, env=cli_env(shared_cache_dir), cwd=REPO, timeout=300)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert scored_log(fixed.stderr) == [(ATTN, "weak")]  # only the infrastructure failure is re-tried
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert (report["scored"], report["passed"], report["sandbox_errors"]) == (2, 1, 0)
    assert report["pass@1"] == pytest.approx(0.5) and report["complete"] is True
    lines = [(r["sample_id"], r["status"]) for r in map(json.loads, out.read_text().splitlines())]
    assert sorted(lines[:2]) == [("broken-prose", "invalid_input"), ("weak", "sandbox_error")]
    assert lines[2] == ("weak", "ok")  # the retry's line supersedes the failure's


@pytest.mark.slow
def test_server_mode_equals_embedded(full_run, tmp_path, shared_cache_dir):
    from reward_service.api import create_app
    from reward_service.settings import Settings

    rows = [r for r in full_run["rows"] if r["problem_id"] == ATTN]
    completions = write_jsonl(tmp_path / "C.jsonl", rows)
    out = tmp_path / "R.jsonl"
    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    with live_server(create_app(settings=settings)) as url:
        proc = subprocess.run(
            rescore_args(completions, out, "--server", url, "-j", "4"),
            capture_output=True,
            text=True,
            env=cli_env(shared_cache_dir),
            cwd=REPO,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    embedded = {
        (r["problem_id"], str(r["sample_id"])): comparable(r)
        for r in map(json.loads, full_run["out"].read_text().splitlines())
        if r["problem_id"] == ATTN
    }
    served = {
        (r["problem_id"], str(r["sample_id"])): comparable(r) for r in map(json.loads, out.read_text().splitlines())
    }
    assert served == embedded and len(served) == 5
    assert json.loads(out.with_suffix(".report.json").read_text())["pass@1"] == pytest.approx(3 / 5)


def test_server_refusing_the_design_stops_the_run_but_a_huge_completion_is_invalid(tmp_path, shared_cache_dir):
    """413/422 about the sample (a completion over the server's max_file_kb) is the sample's
    invalid_input; a refusal of the problem's design (over max_files) stops the run instead of
    scoring every sample 0."""
    from reward_service.api import create_app
    from reward_service.settings import Settings

    huge = {"problem_id": ATTN, "sample_id": "huge", "completion": "```verilog\n" + "// x\n" * 30_000 + "```"}
    completions = write_jsonl(tmp_path / "C.jsonl", [huge])
    out = tmp_path / "R.jsonl"
    settings = Settings(
        cache_dir=shared_cache_dir, result_cache=False, score_workers=1, warm_on_register=False, max_file_kb=64
    )
    with live_server(create_app(settings=settings)) as url:
        proc = subprocess.run(
            rescore_args(completions, out, "--server", url),
            capture_output=True,
            text=True,
            env=cli_env(shared_cache_dir),
            cwd=REPO,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = map(json.loads, out.read_text().splitlines())
    assert line["status"] == "invalid_input" and "refused the sample" in line["message"]

    out2 = tmp_path / "R2.jsonl"
    completions = write_jsonl(tmp_path / "C2.jsonl", broken_completions()[:1])
    settings = settings.model_copy(update={"max_files": 1})  # the design alone is over it
    with live_server(create_app(settings=settings)) as url:
        proc = subprocess.run(
            rescore_args(completions, out2, "--server", url),
            capture_output=True,
            text=True,
            env=cli_env(shared_cache_dir),
            cwd=REPO,
            timeout=300,
        )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "not the sample's" in proc.stderr
    assert not out2.exists() or out2.read_text() == ""


def test_a_refused_sample_is_rewarded_by_its_requests_rule_for_no_coverage(problems, shared_cache_dir):
    """A sample the server refuses (413: a completion over max_file_kb) is invalid_input with
    the reward its request's shaping gives a sample without coverage, not a fixed 0."""
    from reward_service.api import create_app
    from reward_service.models import RewardSpec
    from reward_service.rescore.runner import client_scorer
    from reward_service.reward import shape_reward

    huge = "```verilog\n" + "// x\n" * 30_000 + "```"
    settings = get_settings().model_copy(
        update={
            "cache_dir": shared_cache_dir,
            "result_cache": False,
            "score_workers": 1,
            "warm_on_register": False,
            "max_file_kb": 64,
        }
    )
    specs = [RewardSpec(), RewardSpec(shaping="ratio", failure_value=-0.5)]
    with live_server(create_app(settings=settings)) as url:
        score = client_scorer(url)
        results = [score(problems[ATTN].request(huge, reward=spec)) for spec in specs]
    for spec, result in zip(specs, results):
        assert result.status == "invalid_input" and "refused the sample" in result.message, result
        assert result.reward == shape_reward(result.status, result.coverage, False, spec)
    assert [r.reward for r in results] == [0.0, -0.5]


def test_a_scorer_exception_is_a_sandbox_error_naming_it(tmp_path, problems):
    from reward_service.rescore.runner import run

    def broken(request):
        raise KeyError("no such worker")

    store = ResultStore(tmp_path / "R.jsonl")
    outcome = run([Sample(ATTN, 0, "x", 1)], problems, broken, store, show_progress=False)
    assert (outcome.scored, outcome.sandbox_errors) == (1, 1)
    (line,) = map(json.loads, (tmp_path / "R.jsonl").read_text().splitlines())
    assert line["status"] == "sandbox_error" and line["reward"] is None
    assert line["message"] == "scoring failed: KeyError: 'no such worker'"


@pytest.mark.slow
def test_unreachable_server_stops_the_run(tmp_path, shared_cache_dir):
    completions = write_jsonl(tmp_path / "C.jsonl", broken_completions()[:1])
    out = tmp_path / "R.jsonl"
    proc = subprocess.run(
        rescore_args(completions, out, "--server", f"http://127.0.0.1:{free_port()}"),
        capture_output=True,
        text=True,
        env=cli_env(shared_cache_dir),
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "unreachable" in proc.stderr
    assert not out.exists() or out.read_text() == ""  # nothing recorded as a failure of the sample
    assert json.loads(out.with_suffix(".report.json").read_text())["pending"] == 1


def test_a_report_of_finished_results_needs_no_lock(full_run, monkeypatch):
    """Where the lock file cannot be made (a read-only place), a run with nothing left to
    score still reports; one with samples to score stops (review finding)."""
    import dataclasses
    import errno

    import typer

    from reward_service.rescore import commands

    def read_only(self):
        raise OSError(errno.EROFS, "Read-only file system", f"{self.path}.lock")

    monkeypatch.setattr(ResultStore, "locked", read_only)
    for key, value in cli_env(Path(full_run["out"]).parent).items():  # as the run that wrote it
        if key.startswith("REWARD_SERVICE_"):
            monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    opts = commands._Options(
        problems=CID012,
        completions=full_run["completions"],
        out=full_run["out"],
        server=None,
        api_key=None,
        concurrency=1,
        ks=list(KS),
        quiet=True,
        verbose=False,
        no_cache=False,
    )
    report, outcome, _ = commands._execute(opts)
    assert report["pass@1"] == full_run["report"]["pass@1"] and outcome.scored == 0
    more = write_jsonl(
        full_run["out"].parent / "more.jsonl", [{**broken_completions()[1], "sample_id": "not-yet-scored"}]
    )
    with pytest.raises(typer.BadParameter, match="Read-only file system"):
        commands._execute(dataclasses.replace(opts, completions=more))
    monkeypatch.undo()
    get_settings.cache_clear()


# -- files and bookkeeping (no simulation) ----------------------------------------------------------
def test_a_second_run_on_the_same_out_is_refused(tmp_path, shared_cache_dir):
    """Two runs appending to one R.jsonl would score the same samples twice: the second one
    stops before scoring anything while the first holds R.jsonl.lock."""
    completions = write_jsonl(tmp_path / "C.jsonl", broken_completions()[:1])
    out = tmp_path / "R.jsonl"
    with ResultStore(out).locked():
        proc = subprocess.run(
            rescore_args(completions, out),
            capture_output=True,
            text=True,
            env=cli_env(shared_cache_dir),
            cwd=REPO,
            timeout=300,
        )
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "another run is writing" in proc.stderr and not out.exists()
        with pytest.raises(ValueError, match="another run is writing"):
            with ResultStore(out).locked():
                pass
    with ResultStore(out).locked():  # released by the block's end
        pass


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", "not JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"sample_id": 1, "completion": "x"}', "`problem_id` must be"),
        (f'{{"problem_id": "{ATTN}", "sample_id": true, "completion": "x"}}', "`sample_id` must be"),
        (f'{{"problem_id": "{ATTN}", "sample_id": 1, "completion": 5}}', "`completion` must be a string"),
    ],
)
def test_bad_completion_lines_name_the_line(tmp_path, problems, line, message):
    path = tmp_path / "C.jsonl"
    path.write_text(json.dumps({"problem_id": ATTN, "sample_id": 0, "completion": "x"}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=f"C.jsonl:2: .*{message}"):
        read_completions(path, problems)


def test_unknown_problems_and_duplicates(tmp_path, problems):
    path = write_jsonl(
        tmp_path / "C.jsonl",
        [
            {"problem_id": ATTN, "sample_id": 1, "completion": "a"},
            {"problem_id": ATTN, "sample_id": "1", "completion": "a"},  # same sample: 1 and "1"
            {"problem_id": ATTN, "sample_id": 1, "completion": "b"},
            {"problem_id": ATTN, "sample_id": 2, "completion": "b"},
        ],
    )
    got = read_completions(path, problems)
    assert [s.sample_id for s in got.samples] == [1, 2]
    assert len(got.duplicates) == 2
    assert "C.jsonl:2: sample '1'" in got.duplicates[0] and "repeats line 1 (ignored)" in got.duplicates[0]
    assert "with a different completion" in got.duplicates[1]
    write_jsonl(
        path,
        [
            {"problem_id": "nope", "sample_id": 1, "completion": "a"},
            {"problem_id": ATTN, "sample_id": 1, "completion": "a"},
        ],
    )
    with pytest.raises(ValueError, match=r"1 problem id\(s\) are not in the problems file: 'nope' \(line 1\)"):
        read_completions(path, problems)


def _record(
    pid: str, sid, status: str = "ok", passed: bool = True, overall: float | None = 1.0, digest: str | None = None
) -> dict:
    return {
        "problem_id": pid,
        "sample_id": sid,
        "status": status,
        "passed": passed,
        "reward": None if status == "sandbox_error" else 1.0,
        "coverage": {"overall": overall, "line": overall},
        "completion_sha256": digest,
    }


def test_torn_last_line_is_cut_and_a_complete_one_kept(tmp_path):
    path = tmp_path / "R.jsonl"
    good = json.dumps(_record(ATTN, 1)) + "\n"
    path.write_text(good + json.dumps(_record(ATTN, 2))[:40])
    assert list(ResultStore(path).load()) == [(ATTN, "1")]
    assert path.read_text() == good  # the torn line is gone, appending is safe again
    path.write_text(good + json.dumps(_record(ATTN, 2)))  # complete JSON, newline lost
    assert list(ResultStore(path).load()) == [(ATTN, "1"), (ATTN, "2")]
    assert path.read_text().endswith("}\n")
    bad = good + "garbage\n" + good
    path.write_text(bad)
    with pytest.raises(ValueError, match="R.jsonl:2: not a JSON line"):
        ResultStore(path).load()
    assert path.read_text() == bad  # untouched


def test_plan_skips_final_retries_infra_and_refuses_other_completions(problems):
    samples = [Sample(ATTN, i, f"text {i}", i + 1) for i in range(4)]
    done = {
        (ATTN, "0"): _record(ATTN, 0, digest=samples[0].digest),
        (ATTN, "1"): _record(ATTN, 1, status="sandbox_error", digest=samples[1].digest),
        (ATTN, "2"): _record(ATTN, 2, status="compile_error", passed=False, overall=None),
    }  # no digest: older file
    todo, final, retry = plan(samples, done)
    assert [s.sample_id for s in todo] == [1, 3] and (final, retry) == (2, 1)
    done[(ATTN, "0")]["completion_sha256"] = samples[3].digest
    with pytest.raises(ValueError, match="completion text differs"):
        plan(samples, done)
    done[(ATTN, "0")]["completion_sha256"] = samples[0].digest
    done[(ATTN, "0")]["problem_sha256"] = problem_digest(problems[ATTN])
    assert plan(samples, done, problems)[1:] == (2, 1)  # the same problem: reused
    done[(ATTN, "0")]["problem_sha256"] = "0" * 16  # written for another version of the problem
    with pytest.raises(ValueError, match="another version of their problem"):
        plan(samples, done, problems)


def test_report_keeps_infra_failures_and_pending_apart(problems):
    other = "cvdp_copilot_ring_token_0004"
    samples = [Sample(ATTN, i, "x", i) for i in range(4)] + [Sample(other, i, "y", 10 + i) for i in range(2)]
    records = {
        (ATTN, "0"): _record(ATTN, 0, overall=0.95),
        (ATTN, "1"): _record(ATTN, 1, status="compile_error", passed=False, overall=None),
        (ATTN, "2"): _record(ATTN, 2, status="sandbox_error", passed=False, overall=None),
        (other, "0"): _record(other, 0, passed=False, overall=0.5),
    }  # (ATTN, 3) and (other, 1) not scored yet
    report = summarise(samples, records, problems, ks=[1, 2, 3])
    assert (report["scored"], report["sandbox_errors"], report["pending"], report["complete"]) == (3, 1, 2, False)
    assert report["pass@1"] == pytest.approx((1 / 2 + 0) / 2)  # n = 2 and 1: the infra failure is not a failure
    assert report["pass@2"] == pytest.approx(1.0) and report["pass@k_problems"]["pass@2"] == 1
    assert report["pass@3"] is None
    assert report["mean_coverage"] == pytest.approx(((0.95 + 0) / 2 + 0.5) / 2)  # the compile error counts 0
    assert report["coverage_per_metric"] == {"line": pytest.approx((0.95 + 0.5) / 2)}  # ok samples only
    assert report["sandbox_error_samples"] == [[ATTN, 2]]
    assert report["by_problem"][ATTN]["status_counts"] == {"compile_error": 1, "ok": 1}
    assert report["by_difficulty"]["easy"]["problems"] == 2


def test_usage_errors_score_nothing(tmp_path, shared_cache_dir):
    completions = write_jsonl(
        tmp_path / "C.jsonl", [{"problem_id": "not_a_problem", "sample_id": 0, "completion": "x"}]
    )
    out = tmp_path / "R.jsonl"
    proc = subprocess.run(
        rescore_args(completions, out),
        capture_output=True,
        text=True,
        env=cli_env(shared_cache_dir),
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 2 and "not_a_problem" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
    proc = subprocess.run(
        rescore_args(completions, out)[:-3] + ["--k", "1,x"],
        capture_output=True,
        text=True,
        env=cli_env(shared_cache_dir),
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 2 and "--k takes comma-separated positive integers" in proc.stderr
