"""The reward-service CLI in the forms the checks rely on, run as a real subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CID012, REPO, STIMULUS, cid012_rows, needs_cases, rtl_files

PID = "cvdp_copilot_fixed_arbiter_0004"


def _env(cache: Path, columns: int | None) -> dict[str, str]:
    env = {"REWARD_SERVICE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache)}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return env


def cli(*args: str, cache: Path, columns: int | None = None, **env: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout and stderr piped and no terminal at all (stdin /dev/null, a new
    session: no /dev/tty even when pytest runs in one), ``COLUMNS`` unset unless given, ``env``
    added to its environment."""
    return subprocess.run(
        [sys.executable, "-m", "reward_service", *args],
        capture_output=True,
        text=True,
        env={**_env(cache, columns), **env},
        timeout=300,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cli_in_terminal(
    *args: str, cache: Path, width: int, stdout_piped: bool, columns: int | None = None
) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal ``width`` columns wide, and stdout on it too
    unless ``stdout_piped`` (then a pipe, as in ``| less``). Returns (exit code, stdout, the
    terminal's text), colour codes and the terminal's carriage returns removed."""
    import fcntl
    import os
    import pty
    import struct
    import termios
    import threading

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
    env = {**_env(cache, columns), "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reward_service", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout_piped else slave,
        stderr=slave,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=60)
    os.close(master)
    text = ANSI.sub("", b"".join(chunks).decode()).replace("\r", "")
    return proc.returncode, (out or b"").decode(), text


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
    out = cli(
        "score",
        *args,
        "--testbench",
        str(STIMULUS / PID / "weak.sv"),
        "--dut-instance",
        "dut",
        "--simulator",
        "verilator",
        "--json",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    got = {m: {"covered": v["covered"], "total": v["total"]} for m, v in result["coverage"]["metrics"].items()}
    assert got == expected["coverage"]
    assert result["status"] == "ok" and result["reward"] == pytest.approx(
        1 + expected["overall_percent"] / 100, abs=1e-4
    )


@pytest.mark.slow
def test_score_problem_with_completion(tmp_path, shared_cache_dir):
    tb = (STIMULUS / PID / "best.sv").read_text()
    completion = tmp_path / "completion.txt"
    completion.write_text(f"<think>plan the arbiter test</think>\nFinal answer:\n```verilog\n{tb}```\n")
    out = cli(
        "score",
        "--problems",
        str(CID012),
        "--problem-id",
        PID,
        "--completion",
        str(completion),
        "--json",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok" and result["passed"] is True and result["reward"] == 2.0
    assert result["coverage"]["scope"] == "dut"


def test_human_output_shows_table_and_reward(design_files, shared_cache_dir):
    args = [a for p in design_files for a in ("--design", str(p))]
    out = cli(
        "score",
        *args,
        "--testbench",
        str(STIMULUS / PID / "weak.sv"),
        "--dut-instance",
        "dut",
        "--simulator",
        "icarus",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stderr
    assert "status: ok" in out.stdout and "reward: 0.0000" in out.stdout and "engine: icarus" in out.stdout
    assert "unavailable (line, branch, toggle, expr): Icarus Verilog has no code coverage" in out.stdout
    assert "use simulator=verilator" in out.stdout and "no target given" in out.stdout
    assert "--simulator verilator" in out.stdout and "--engine fast" in out.stdout  # the CLI's own flags


@needs_cases
def test_human_output_of_a_sample_refused_before_it_ran_names_no_engine(tmp_path, shared_cache_dir):
    completion = tmp_path / "completion.txt"
    completion.write_text("I would reset the arbiter and then raise each request line in turn.")
    out = cli(
        "score", "--problems", str(CID012), "--problem-id", PID, "--completion", str(completion), cache=shared_cache_dir
    )
    assert out.returncode == 1, out.stderr
    assert "status: invalid_input" in out.stdout and "reward: 0.0000" in out.stdout
    assert "engine: -" in out.stdout and "engine: None" not in out.stdout


def test_failed_sample_exits_1_and_usage_error_exits_2(tmp_path, design_files, shared_cache_dir):
    bad = tmp_path / "tb.sv"
    bad.write_text("module tb; initial begin oops end endmodule\n")
    out = cli(
        "score",
        "--design",
        str(design_files[0]),
        "--testbench",
        str(bad),
        "--simulator",
        "icarus",
        "--json",
        cache=shared_cache_dir,
    )
    assert out.returncode == 1 and json.loads(out.stdout)["status"] == "compile_error"
    out = cli("score", "--testbench", str(bad), cache=shared_cache_dir)
    assert out.returncode == 2 and "--design" in out.stderr
    out = cli(
        "score", "--problems", str(CID012), "--problem-id", "nope", "--testbench", str(bad), cache=shared_cache_dir
    )
    assert out.returncode == 2 and "nope" in out.stderr
    out = cli(
        "score", "--design", str(design_files[0]), "--testbench", str(bad), "-s", "iverilog", cache=shared_cache_dir
    )
    assert out.returncode == 2 and "iverilog" in out.stderr
    out = cli("score", "--design", str(design_files[0]), "--cocotb", str(bad), cache=shared_cache_dir)
    assert out.returncode == 2 and "--toplevel" in out.stderr


def test_sandbox_failure_exits_3_with_its_reason_and_no_traceback(tmp_path, design_files):
    """Our failure (here: the sample's work dir cannot be made) is the status line and one
    warning naming it, exit 3; the traceback is left to debug logging."""
    args = [a for p in design_files for a in ("--design", str(p))]
    out = cli(
        "score",
        *args,
        "--testbench",
        str(STIMULUS / PID / "weak.sv"),
        cache=tmp_path / "cache",
        REWARD_SERVICE_WORK_ROOT=str(tmp_path / "missing"),
    )
    assert out.returncode == 3, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "sandbox failure: " in out.stderr and str(tmp_path / "missing") in out.stderr
    assert "sandbox_error" in out.stdout


@needs_cases
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
    line = next(
        ln for ln in readme.splitlines() if ln.startswith("bash scripts/install.sh && python -m reward_service score")
    )
    args = line.split("python -m reward_service ", 1)[1].split()
    out = cli(*args, cache=shared_cache_dir)
    assert out.returncode == 0, out.stderr
    assert "reward: 2.0000" in out.stdout and "toggle" in out.stdout
    # the README's expected output: its status, table, reward and verdict lines as printed
    block = readme.split("Expected (the first run on a fresh cache; timings differ):\n\n```text\n", 1)[1].split(
        "```", 1
    )[0]
    shown = [ln for ln in block.splitlines() if not ln.startswith(("  ", "timings:"))]
    assert len(shown) == 13
    printed = [ln.rstrip() for ln in out.stdout.splitlines()]
    for line in shown:
        assert line in printed


README_SCORES = [
    line
    for line in (REPO / "README.md").read_text().splitlines()
    if line.startswith("reward-service score ") and "examples/cvdp/" in line
]


@pytest.mark.parametrize("line", README_SCORES, ids=lambda ln: ln.split("examples/cvdp/", 2)[1].split()[0])
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
    assert (
        request["design"]["files"] == {"Attenuator.sv": rtl} == {"Attenuator.sv": (cvdp / "Attenuator.sv").read_text()}
    )
    assert request["stimulus"]["files"] == {"tb_attenuator.sv": (cvdp / "tb_attenuator.sv").read_text()}


# -- the testbench's own verdict and the log in the human output (issue 9, point 10) ------------

GRAY = "cvdp_copilot_gray_to_binary_0014"


@pytest.fixture(scope="module")
def gray_files(tmp_path_factory) -> tuple[list[Path], Path, str]:
    """The gray_to_binary RTL, its good.sv testbench and that testbench's output from a bare
    Icarus run (iverilog -g2012 + vvp -n, no service code)."""
    d = tmp_path_factory.mktemp("gray")
    rtl = []
    for name, text in rtl_files(cid012_rows()[GRAY]).items():
        (d / name).write_text(text)
        rtl.append(d / name)
    tb = d / "good.sv"
    tb.write_text((STIMULUS / GRAY / "good.sv").read_text())
    subprocess.run(
        ["iverilog", "-g2012", "-o", str(d / "sim"), str(tb), *map(str, rtl)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    bare = subprocess.run(["vvp", "-n", str(d / "sim")], capture_output=True, text=True, timeout=60, cwd=d)
    return rtl, tb, bare.stdout


def test_human_output_lists_the_testbench_verdict_lines(gray_files, shared_cache_dir):
    rtl, tb, bare = gray_files
    passes = [ln for ln in bare.splitlines() if ln.startswith("PASS :")]
    finished = [ln for ln in bare.splitlines() if ln.startswith("Test finished with")]
    assert len(passes) > 1 and len(finished) == 1  # what the testbench printed on its own
    args = [a for p in rtl for a in ("--design", str(p))]
    out = cli(
        "score",
        *args,
        "--testbench",
        str(tb),
        "--dut-instance",
        "uut",
        "--simulator",
        "icarus",
        "--no-cache",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("testbench verdict (lines of the log):\n", 1)[1].split("reward:", 1)[0]
    # lines differing only in numbers are one entry, counted; in the order they were printed
    assert section.splitlines() == [f"  {passes[0]} (×{len(passes)})", f"  {finished[0]}"]
    assert "log (" not in out.stdout  # the whole log only with --log


def test_log_option_prints_the_log(gray_files, shared_cache_dir):
    rtl, tb, bare = gray_files
    args = [a for p in rtl for a in ("--design", str(p))]
    out = cli(
        "score",
        *args,
        "--testbench",
        str(tb),
        "--dut-instance",
        "uut",
        "--simulator",
        "icarus",
        "--log",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stderr
    printed = out.stdout.split("\nlog (", 1)[1]
    for line in bare.splitlines():  # every line of the bare run, in order
        assert line in printed
        printed = printed.split(line, 1)[1]
    with_json = cli(
        "score",
        *args,
        "--testbench",
        str(tb),
        "--dut-instance",
        "uut",
        "--simulator",
        "icarus",
        "--log",
        "--json",
        cache=shared_cache_dir,
    )
    assert with_json.returncode == 0
    result = json.loads(with_json.stdout)  # stdout stays pure JSON; the log goes to stderr
    assert with_json.stderr.startswith(f"log ({len(result['log'])} characters):")
    assert bare.splitlines()[-1] in with_json.stderr


@pytest.mark.slow
def test_verilator_error_and_mismatch_lines_are_shown(tmp_path, shared_cache_dir):
    """A testbench that counts its own mismatches and calls $error (Verilator prints
    `[t] %Error: file:line: Assertion failed in <scope>: <message>`): both are in the verdict."""
    (tmp_path / "vdut.sv").write_text(
        "module vdut(input logic [3:0] a, output logic [3:0] y);\n  assign y = (a == 4'd3) ? a : a + 4'd1;\nendmodule\n"
    )
    (tmp_path / "vtb.sv").write_text(
        "module vtb;\n  logic [3:0] a = 0;\n  wire [3:0] y;\n  vdut dut (.a(a), .y(y));\n"
        "  integer mismatches = 0;\n  initial begin\n"
        "    repeat (4) begin\n      #1 a = a + 1;\n      #1 if (y !== a + 4'd1) mismatches++;\n    end\n"
        '    $display("Mismatches: %0d in 4 samples", mismatches);\n'
        '    if (mismatches != 0) $error("value mismatch: %0d samples differ", mismatches);\n'
        '    $display("TEST FAILED");\n    $finish;\n  end\nendmodule\n'
    )
    out = cli(
        "score",
        "--design",
        str(tmp_path / "vdut.sv"),
        "--testbench",
        str(tmp_path / "vtb.sv"),
        "--dut-instance",
        "dut",
        "--simulator",
        "verilator",
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    section = out.stdout.split("testbench verdict (lines of the log):\n", 1)[1].split("reward:", 1)[0]
    lines = section.splitlines()
    # a = 1..4 after each step: only a == 3 differs (y = a), so 1 of 4
    assert lines[0] == "  Mismatches: 1 in 4 samples"
    assert lines[1].endswith("%Error: vtb.sv:12: Assertion failed in vtb: value mismatch: 1 samples differ")
    assert lines[2:] == ["  TEST FAILED"]


def test_verdict_lines_are_bounded_and_deduplicated():
    from reward_service.log_verdicts import verdict_lines

    log = "".join(f"ERROR: sample {i} expected {i + 1}\n" for i in range(40))
    log += "".join(f"check_{chr(97 + i)} FAILED\n" for i in range(15)) + "passes=3 error_count=0\nAborting...\n"
    lines, more = verdict_lines(log, limit=10)
    assert lines[0] == "ERROR: sample 0 expected 1 (×40)"
    assert lines[1:] == [f"check_{chr(97 + i)} FAILED" for i in range(9)]
    assert more == 6  # check_j .. check_o


# -- piped output: lines kept whole, flags shown as flags ------------------------------------------

HELP_COMMANDS = [[], ["score"], ["problems"], ["serve"], ["mcp"], ["rescore"], ["eval-cvdp"]]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "reward-service")
def test_help_shows_flags_without_a_value(command, tmp_path):
    """Every --help lists --help (and each boolean flag) bare, value options with their type."""
    out = cli(*command, "--help", cache=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "<bool>" not in out.stdout
    assert re.search(r"│ +(\* +)?--help +Show this message and exit\.", out.stdout), out.stdout
    flags = {
        "score": [r"--json +print the ScoreResult as JSON", r"--log +print the simulation log"],
        "problems": [r"--json +print JSON lines"],
        "rescore": [r"--quiet +-q +no progress bar", r"--no-cache +embedded: do not reuse"],
        "eval-cvdp": [r"--verbose +-v +log one line"],
    }
    for pattern in flags.get(command[0] if command else "", []):
        assert re.search(pattern, out.stdout), pattern
    if command == ["score"]:  # a value option still shows what it takes
        assert re.search(r"--seed +<int> +simulation seed", out.stdout)


def _score_command():
    import typer

    from reward_service.cli import app

    return typer.main.get_command(app).commands["score"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("columns", [None, 80])
def test_piped_score_help_keeps_option_texts_and_examples_whole(columns, tmp_path):
    """Piped with COLUMNS unset, --help is laid out wide enough that no example command is
    broken over lines; option texts (their [default: ...] notes included) wrap between words
    only, at COLUMNS=80 too."""
    out = cli("score", "--help", cache=tmp_path, columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    command = _score_command()
    examples = [ln.strip() for ln in command.help.splitlines() if ln.strip().startswith("reward-service score")]
    helps = [p.help.replace("\\[", "[") for p in command.params if getattr(p, "help", None)]
    assert len(examples) == 3 and len(helps) > 20
    assert any("[default: verilator; a problem's own]" in h for h in helps)  # rich markup kept it
    words = out.stdout.split()
    for text in examples:
        assert any(text in line for line in lines) == (columns is None), text
    for text in examples + helps:
        for word in text.split():
            assert word in words, (word, text)
    # rich pads the lines outside its panels to the console width: cut in a pipe
    assert [ln for ln in lines if ln.endswith(" ")] == []
    assert any(ln.startswith(("╭", "│")) for ln in lines)  # the panels themselves are kept


def test_score_help_examples_are_readme_commands_on_shipped_files():
    """The examples of `score --help` name files that ship in examples/ and are commands of the
    README (test_readme_scoring_examples_run_on_the_shipped_files runs them)."""
    examples = [ln.strip() for ln in _score_command().help.splitlines() if ln.strip().startswith("reward-service")]
    assert examples
    for line in examples:
        paths = [a for a in line.split() if a.startswith("examples/")]
        assert paths and all((REPO / p).is_file() for p in paths), line
        assert line in README_SCORES


@pytest.mark.parametrize("columns", [None, 80])
def test_piped_score_output_keeps_lines_whole(columns, tmp_path, shared_cache_dir):
    """score's human output in a pipe: the status, reason and timings lines stay one line each
    (longer than 80 columns), the table's words whole."""
    cvdp = REPO / "examples" / "cvdp"
    out = cli(
        "score",
        "--design",
        str(cvdp / "Attenuator.sv"),
        "--testbench",
        str(cvdp / "tb_attenuator.sv"),
        "--dut-instance",
        "uut",
        "--simulator",
        "icarus",
        "--no-cache",
        cache=shared_cache_dir,
        columns=columns,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    timings = [ln for ln in lines if ln.startswith("timings: ")]
    assert len(timings) == 1 and timings[0].endswith("; cache: result=False build=False"), out.stdout
    assert re.fullmatch(r"timings: prepare \d+ ms, toolchain \d+ ms, .*, total \d+ ms; .*", timings[0])
    unavailable = [ln for ln in lines if ln.startswith("unavailable (line, branch, toggle, expr): ")]
    assert len(unavailable) == 1 and unavailable[0].endswith(" for line/branch/toggle/expr coverage"), out.stdout
    assert lines[0].startswith("status: ok — ") and lines[0].endswith(" for line/branch/toggle/expr coverage")
    assert min(len(timings[0]), len(unavailable[0]), len(lines[0])) > 80  # lines rich wrapped at 80
    assert any(re.fullmatch(r"┃ metric +┃ covered ┃ total ┃ +percent ┃", ln) for ln in lines), out.stdout
    assert lines.index(timings[0]) == len(lines) - 1


@needs_cases
@pytest.mark.parametrize("columns", [None, 80])
def test_piped_problems_listing_keeps_words_whole(columns, tmp_path):
    """problems in a pipe: the cid012 table (ids and module names need 157 columns side by side)
    as a table with COLUMNS unset (header words whole, one line a problem); at COLUMNS=80, where
    rich would fold its words ("difficu/lty"), one block of lines a problem within 80 columns,
    every column in it (``-`` for an empty cell)."""
    from reward_service.problems import load_problems

    out = cli("problems", "--problems", str(CID012), cache=tmp_path, columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"82 problems in {CID012}"
    problems = load_problems(CID012)
    fields = ["difficulty", "agentic", "DUT module", "instance", "target %"]
    want = {
        pid: [p.difficulty or "", "yes" if p.agentic else "no", p.design.toplevel or "", p.dut_instance]
        + [f"{p.target_percent:g}"]
        for pid, p in problems.items()
    }
    if columns is None:
        got: dict[str, dict[str, str]] = {}
        assert [cell.strip() for cell in lines[2].strip("┃").split("┃")] == ["id", *fields]
        for line in lines[4:-1]:
            pid, *cells = (cell.strip() for cell in line.strip("│").split("│"))
            got[pid] = dict(zip(fields, cells, strict=True))
        assert got == {pid: dict(zip(fields, values, strict=True)) for pid, values in want.items()}
    else:
        assert max(map(len, lines)) <= columns
        assert _blocks(lines[1:]) == _want_blocks(want, fields)


def _blocks(lines: list[str]) -> dict[str, dict[str, str]]:
    """The problems of a listing printed one block a problem: the id, then `field  value` lines."""
    got: dict[str, dict[str, str]] = {}
    for line in lines:
        if not line.startswith(" "):
            pid = line
            got[pid] = {}
        else:
            match = re.fullmatch(r"  (\S+(?: \S+)?) +(\S+)", line)
            assert match, line
            got[pid][match[1]] = match[2]
    return got


def _want_blocks(want: dict[str, list[str]], fields: list[str]) -> dict[str, dict[str, str]]:
    """Every field in every block, an empty one as ``-`` (agentic is empty for most problems)."""
    return {pid: {f: v or "-" for f, v in zip(fields, values, strict=True)} for pid, values in want.items()}


@pytest.mark.parametrize("columns", [None, 120])
def test_score_help_piped_from_a_terminal_takes_its_width(columns, tmp_path):
    """`score --help | less` in an 80-column terminal (stderr on it, stdout a pipe): the help is
    laid out for 80 columns, its boxes as wide as the terminal, not for a pipe's 200; COLUMNS,
    when set, still wins. Option texts wrap between words."""
    code, out, _ = cli_in_terminal("score", "--help", cache=tmp_path, width=80, stdout_piped=True, columns=columns)
    assert code == 0
    width = columns or 80
    lines = out.splitlines()
    boxes = [ln for ln in lines if ln.startswith("╭─ ")]
    assert boxes and all(len(ln) == width for ln in boxes), boxes
    assert max(map(len, lines)) == width
    words = out.split()
    for text in [p.help.replace("\\[", "[") for p in _score_command().params if getattr(p, "help", None)]:
        for word in text.split():
            assert word in words, (word, text)


@needs_cases
@pytest.mark.parametrize("width", [80, 200])
def test_problems_in_a_terminal_is_a_table_only_when_it_fits(width, tmp_path):
    """problems on a terminal: 80 columns, too narrow for the cid012 table (157), get one block
    of lines a problem with every column named (no word broken); 200 columns get the table."""
    from reward_service.problems import load_problems

    code, _, text = cli_in_terminal(
        "problems", "--problems", str(CID012), cache=tmp_path, width=width, stdout_piped=False
    )
    assert code == 0, text
    lines = text.splitlines()
    assert lines[0] == f"82 problems in {CID012}"
    fields = ["difficulty", "agentic", "DUT module", "instance", "target %"]
    want = {
        pid: [p.difficulty or "", "yes" if p.agentic else "no", p.design.toplevel or "", p.dut_instance]
        + [f"{p.target_percent:g}"]
        for pid, p in load_problems(CID012).items()
    }
    assert max(map(len, lines)) <= width
    if width == 80:
        assert _blocks(lines[1:]) == _want_blocks(want, fields)
    else:
        assert [cell.strip() for cell in lines[2].strip("┃").split("┃")] == ["id", *fields]
        rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in lines[4:-1]]
        assert {pid: cells for pid, *cells in rows} == want


@pytest.mark.parametrize("command", ["rescore", "eval-cvdp"])
def test_piped_rescore_notes_keep_lines_whole(command, tmp_path):
    """rescore / eval-cvdp at COLUMNS=80 in a pipe: the start line on stderr (longer than 80
    columns) is one line. The sample has no code: it is refused before any simulation."""
    completions = tmp_path / "completions.jsonl"
    completions.write_text(
        json.dumps({"problem_id": "cvdp_copilot_Attenuator_0011", "sample_id": 0, "completion": "no code here"}) + "\n"
    )
    results = tmp_path / "a_results_file_with_a_long_name_to_pass_eighty_columns.jsonl"
    problems = REPO / "examples" / "cvdp" / "attenuator.jsonl"
    args = ["--problems", str(problems), "--completions", str(completions), "--out", str(results)]
    if command == "rescore":
        args += ["--k", "1"]
    out = cli(command, *args, cache=tmp_path, columns=80)
    assert out.returncode == 0, out.stdout + out.stderr
    start = f"1 samples of 1 problems: 0 already in {results}, 0 infrastructure failures to retry, 1 to score"
    assert any(ln.startswith(start) and ln.endswith("(embedded)") for ln in out.stderr.splitlines()), out.stderr
    if command == "eval-cvdp":
        assert f"results: {results}" in out.stderr.splitlines()


def test_piped_usage_error_keeps_its_message_on_one_line(tmp_path):
    """A usage error into a pipe (COLUMNS unset): typer's error box holds the message unbroken."""
    out = cli("score", "--testbench", str(REPO / "examples" / "cvdp" / "tb_attenuator.sv"), cache=tmp_path)
    assert out.returncode == 2
    message = "Invalid value: give the design files (--design) or a problem (--problems + --problem-id)"
    assert any(re.fullmatch(rf"│ {re.escape(message)} +│", ln) for ln in out.stderr.splitlines()), out.stderr
