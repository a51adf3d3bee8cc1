"""Points proved unreachable, visible everywhere a result is read (issue 22): the CLI table and
verdict line, the JSON result, the HTML report in a real Chromium, the rescore report (JSON,
Markdown and HTML), and the prover's note only when it changed something or on --explain.

The example is the issue's: cvdp_copilot_binary_to_BCD_0030 (TARGET 90) with a testbench that
applies every input value (tests/data/binary_to_bcd_0030_tb.sv). Its raw overall is 84.44 %
(line 2/2, branch 5/6, toggle 56/80, no expr points: (1 + 5/6 + 56/80) / 3); the prover
proves 25 of its points unreachable (docs/formal.md, "Results on cid012": binary_to_BCD_0030
25, max raw 84.44): the `if` arm of line 21 (the hundreds digit of an 8-bit value never
reaches 5 before a shift) and 24 toggle points of bits that never leave 0 (bcd_out[11:10],
shift_reg[7:0] and [19:18]: after the 8 shifts the low byte is 0, and 255 has hundreds digit
2). Without them every point is covered: reachable 100 %, the TARGET is met, the reward stays
1 + 0.8444.
"""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import CID012, REPO, needs_cases, require_cases
from test_reports import _Dom, chromium, needs_chromium

from reward_service.models import ScoreResult

PID = "cvdp_copilot_binary_to_BCD_0030"
GOOD_TB = REPO / "tests" / "data" / "binary_to_bcd_0030_tb.sv"
#: the colour of a proved point's cell (score.html.j2, td.dead)
PROVED_RGB = (0xCF, 0xD8, 0xE6)


def weak_tb() -> str:
    """The good testbench cut to 0, 1, 9, 10 and 15: raw 62.64 %, reachable 70.12 %, fails."""
    text = GOOD_TB.read_text().split("    // powers of two")[0] + "    $finish;\n  end\nendmodule\n"
    for value in (45, 99, 100, 123, 199, 200, 255):
        text = text.replace(f"    apply(8'd{value});\n", "")
    return text


def cli(*args: str, cache: Path, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reward_service", *args],
        capture_output=True,
        text=True,
        env={"REWARD_SERVICE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(home)},
        cwd=REPO,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def human(shared_cache_dir, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The issue's command, human output, with --html."""
    require_cases()
    out = tmp_path_factory.mktemp("bcd-human")
    run = cli(
        "score",
        "--problems",
        str(CID012),
        "--problem-id",
        PID,
        "--completion",
        str(GOOD_TB),
        "--html",
        str(out / "report"),
        cache=shared_cache_dir,
        home=out,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run, out / "report" / "index.html"


@pytest.fixture(scope="module")
def as_json(shared_cache_dir, tmp_path_factory) -> ScoreResult:
    require_cases()
    out = tmp_path_factory.mktemp("bcd-json")
    run = cli(
        "score",
        "--problems",
        str(CID012),
        "--problem-id",
        PID,
        "--completion",
        str(GOOD_TB),
        "--json",
        "--html",
        str(out / "report"),
        cache=shared_cache_dir,
        home=out,
    )
    assert run.returncode == 0, run.stderr
    return ScoreResult.model_validate_json(run.stdout)


# -- the JSON result ------------------------------------------------------------------------------
def test_json_result_carries_the_exclusion(as_json):
    r = as_json
    assert r.status == "ok" and r.passed is True
    per = {m: (c.covered, c.total, c.unreachable) for m, c in r.coverage.metrics.items()}
    assert per == {"line": (2, 2, 0), "branch": (5, 6, 1), "toggle": (56, 80, 24), "expr": (0, 0, 0)}
    assert r.coverage.overall == pytest.approx((1 + 5 / 6 + 56 / 80) / 3) == pytest.approx(0.84444, abs=1e-5)
    assert r.coverage.overall_reachable == 1.0
    assert r.reward == pytest.approx(1 + r.coverage.overall)  # the raw figure, the seed's rule
    (target,) = r.targets
    assert target.model_dump() == {
        "metric": "overall",
        "percent": 90.0,
        "figure": "reachable",
        "value": 100.0,
        "met": True,
    }
    assert not r.uncovered  # the proved points are never listed as uncovered
    note = r.coverage.unreachable_note
    assert note.startswith("25 coverage points (branch 1, toggle 24) can never be covered by any stimulus")
    assert note in r.message  # it changed the judged figure: the message says so
    # every proved point is marked with its proof's kind in the points of the report
    proved = [(p.metric, p.line, p.detail, p.unreachable) for p in r.detail.points if p.unreachable]
    assert len(proved) == 25 and not any(p.covered for p in r.detail.points if p.unreachable)
    assert [x for x in proved if x[0] == "branch"] == [("branch", 21, "if", "invariant")]
    toggles = {(d.split(":")[0], kind) for m, _, d, kind in proved if m == "toggle"}
    want = {f"bcd_out[{b}]" for b in (10, 11)} | {f"shift_reg[{b}]" for b in (*range(8), 18, 19)}
    assert toggles == {(bit, "stuck at 0") for bit in want}
    # the other points are all covered: reachable 100 %
    assert all(p.covered for p in r.detail.points if not p.unreachable)


# -- the CLI ---------------------------------------------------------------------------------------
def test_cli_table_verdict_and_reward_lines(human):
    run, _ = human
    text = run.stdout
    assert text.startswith("status: ok — 25 coverage points (branch 1, toggle 24) can never be covered")
    rows = {
        cells[0]: cells[1:]
        for cells in (re.split(r"\s*│\s*", ln.strip("│ ")) for ln in text.splitlines() if ln.startswith("│"))
    }
    head = next(ln for ln in text.splitlines() if ln.startswith("┃"))
    assert [c.strip() for c in head.strip("┃").split("┃")] == [
        "metric",
        "covered",
        "total",
        "proved unreachable",
        "percent",
    ]
    assert rows["line"] == ["2", "2", "0", "100.00"]
    assert rows["branch"] == ["5", "6", "1", "83.33"]
    assert rows["toggle"] == ["56", "80", "24", "70.00"]
    assert rows["overall"][-1] == "84.44"
    assert rows["overall, reachable"][-2:] == ["25", "100.00"]
    assert "passed: reachable 100.00 >= TARGET 90 (raw 84.44; 25 points proved unreachable and excluded)" in text
    assert re.search(r"^reward: 1\.8444 \(1 \+ raw overall 0\.8444: the reward counts every point", text, re.M)
    assert "uncovered points" not in text


def test_cli_shipped_example_prints_no_prover_note_unless_asked(shared_cache_dir, tmp_path):
    """examples/cvdp (Attenuator, two clock edges: the prover does not model it): nothing was
    excluded, so the run prints no note about it; --explain says why in plain words."""
    args = ["score", "--problems", "examples/cvdp/attenuator.jsonl", "--problem-id", "cvdp_copilot_Attenuator_0011"]
    args += ["--testbench", "examples/cvdp/tb_attenuator.sv"]
    plain = cli(*args, cache=shared_cache_dir, home=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("status: ok\n")
    assert "unreachable" not in plain.stdout and "clock edge" not in plain.stdout
    assert "passed: raw 100.00 >= TARGET 90" in plain.stdout and "reward: 2.0000   engine:" in plain.stdout
    explained = cli(*args, "--explain", cache=shared_cache_dir, home=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert (
        "unreachable points: every coverage point counts: no point could be proved unreachable, because "
        "its flip-flops use 2 clock edges (two clocks, or posedge and negedge flip-flops); the proof models "
        "designs clocked on one edge only" in explained.stdout
    )
    as_json = cli(*args, "--json", cache=shared_cache_dir, home=tmp_path)
    result = json.loads(as_json.stdout)
    assert result["message"] == "" and "2 clock edges" in result["coverage"]["unreachable_note"]
    assert result["targets"] == [{"metric": "overall", "percent": 90.0, "figure": "raw", "value": 100.0, "met": True}]


# -- the HTML report in a browser -------------------------------------------------------------------
def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit non-interlaced RGB or RGBA PNG, as
    Chromium writes screenshots (the PNG filters undone)."""
    data = path.read_bytes()
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6) and header[12] == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, rows = zlib.decompress(b"".join(chunks)), width * bpp, []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) if bpp == 3 else bytes(x for j, x in enumerate(r) if j % 4 != 3) for r in rows]


@needs_chromium
def test_html_report_shows_proved_points_apart_in_chromium(human):
    _, page = human
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    parsed = _Dom()
    parsed.feed(dom.stdout)
    assert parsed.rows["branch"] == ["branch", "5", "6", "1", "83.33"]
    assert parsed.rows["toggle"] == ["toggle", "56", "80", "24", "70.00"]
    assert parsed.rows["overall"][-1] == "84.44"
    assert parsed.rows["overall-reachable"][-2:] == ["25", "100.00"]
    text = html.unescape(re.sub(r"<[^>]+>", "", dom.stdout))
    assert "Uncovered points (0), proved unreachable (25)" in text
    assert "passed: reachable 100.00 >= TARGET 90 (raw 84.44; 25 points proved unreachable and excluded)" in text
    assert "reward 1.8444 (made from the raw overall 84.44 %" in text
    # the proved points: their own list (with the proof's kind, linked to their lines) and cells
    proved = dom.stdout.split('<ul id="proved">', 1)[1].split("</ul>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", proved, re.S)
    assert len(items) == 3  # bcd_out (line 5), shift_reg (line 9), the if arm (line 21)
    assert "binary_to_bcd.sv:21</a> branch: if — invariant (no state the design can reach gets there)" in proved
    assert "toggle bcd_out: [10] 0-&gt;1, [10] 1-&gt;0, [11] 0-&gt;1, [11] 1-&gt;0 — stuck at 0" in proved
    assert all(h[1:] in parsed.ids for h in re.findall(r'href="(#f[^"]+)"', proved))
    # no line is drawn as a miss: the proved cells are of their own class, the lines under them too
    assert 'class="cell miss"' not in dom.stdout and 'class="missed"' not in dom.stdout
    dead = re.findall(
        r'<td class="cell dead" title="(\w+): (\d+) of (\d+) covered, (\d+) proved unreachable">', dom.stdout
    )
    assert sorted(dead) == [("branch", "1", "2", "1"), ("toggle", "20", "24", "4"), ("toggle", "20", "40", "20")]
    assert dom.stdout.count('<tr class="proved">') == 3
    # and the browser paints them in that colour (a screenshot's pixels)
    shot = page.parent / "shot.png"
    run = chromium(page, f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars")
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1200, 1600)
    colour = bytes(PROVED_RGB)
    painted = sum(row.count(colour) // 1 for row in rows)  # byte-string hits, near the pixel count
    assert painted > 1000, painted


# -- rescore: how many samples pass only because of the exclusion ----------------------------------
@needs_cases
@needs_chromium
def test_rescore_report_counts_the_samples_that_pass_only_by_exclusion(shared_cache_dir, tmp_path):
    """Two samples: the good testbench passes on the reachable figure only (raw 84.44 < 90), the
    weak one fails either way. The JSON, Markdown and HTML reports count 1 sample passing only
    because of the exclusion; its record carries the proved points per metric."""
    completions = tmp_path / "c.jsonl"
    lines = [
        {"problem_id": PID, "sample_id": 0, "completion": f"```systemverilog\n{GOOD_TB.read_text()}```"},
        {"problem_id": PID, "sample_id": 1, "completion": f"```systemverilog\n{weak_tb()}```"},
    ]
    completions.write_text("".join(json.dumps(x) + "\n" for x in lines))
    data, page, md, out = (
        tmp_path / "report.json",
        tmp_path / "report.html",
        tmp_path / "report.md",
        tmp_path / "r.jsonl",
    )
    run = cli(
        "rescore",
        "--problems",
        str(CID012),
        "--completions",
        str(completions),
        "--out",
        str(out),
        "--k",
        "1,2",
        "--report-json",
        str(data),
        "--report-md",
        str(md),
        "--report-html",
        str(page),
        "-q",
        cache=shared_cache_dir,
        home=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    records = {r["sample_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records[0]["passed"] is True and records[0]["unreachable"] == {"branch": 1, "toggle": 24}
    assert records[0]["overall_reachable"] == 1.0 and round(100 * records[0]["coverage"]["overall"], 2) == 84.44
    assert records[1]["passed"] is False and records[1]["unreachable"] == {"branch": 1, "toggle": 24}
    report = json.loads(data.read_text())
    assert (report["passed"], report["passed_raw"], report["passed_by_exclusion"]) == (1, 0, 1)
    assert (report["pass@1"], report["pass@1_raw"]) == (0.5, 0.0)
    problem = report["by_problem"][PID]
    assert (problem["passed"], problem["passed_raw"], problem["passed_by_exclusion"]) == (1, 0, 1)
    assert report["by_kind"]["non-agentic"]["passed_by_exclusion"] == 1
    assert "**1 of the 1 passing samples passes only because coverage points proved unreachable" in md.read_text()
    from reward_service.rescore.report import render_cvdp_table  # eval-cvdp's table, on the same report

    table = render_cvdp_table(report, ["line", "branch", "toggle", "expr"], 82)
    assert "| all | 1 | 2.0 | 50.00 | " in table
    assert "passing samples passes only because coverage points proved unreachable" in table
    assert "(Pass@1 on the raw figure: 0.00 %)" in table
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0
    note = re.sub(r"<[^>]+>", "", dom.stdout.split('id="by-exclusion">', 1)[1].split("</p>", 1)[0])
    assert note.startswith("1 of the 1 passing samples passes only because coverage points proved unreachable")
    assert "With every point counted (CVDP's own grading): 0 passed, pass@1 0.00 %, pass@2 0.00 %." in html.unescape(
        note
    )
    group = dom.stdout.split('id="group-0"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="by-exclusion">(\d+)</td>', group) == ["1"]
    row = dom.stdout.split(f'id="problem-{PID}"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="by-exclusion">(\d+)</td>', row) == ["1"]


def test_agent_feedback_names_the_reachable_figure(as_json):
    """The next-turn feedback (score --feedback, reward_service.feedback) must not read '84.4%
    overall ... Target 90%: met' with nothing to say why, nor send the agent after points no
    stimulus reaches."""
    from reward_service.feedback import feedback_text

    assert feedback_text(as_json, target_percent=90) == (
        "Coverage of the DUT (instance `uut`): 84.4% overall (100.0% of the reachable points; 25 proved "
        "unreachable) — line 2/2, branch 5/6, toggle 56/80, expr 0/0. Target 90% on the reachable points: "
        "met. Every reachable point is covered."
    )
