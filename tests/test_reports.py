"""Coverage reports (reward_service/reports): the lcov tracefile read by Debian's genhtml, the
HTML report rendered by a real headless Chromium, from the CLI and from the API.

Expected numbers are the case testbenches' expected.json (bare Verilator runs, see
../shared/cases/README.md), never the report's own output: genhtml's summary and the page's
counts must equal them.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from conftest import CID012, REPO, STIMULUS, cid012_rows, live_server, needs_cases, rtl_files
from test_workers import Service
from test_workers import redis_server as redis_server  # a module fixture (private redis-server), re-exported for pytest

from reward_service.models import ScoreResult
from reward_service.reports import html as html_report
from reward_service.reports.lcov import LcovUnavailable, tracefile

STEGO = "cvdp_copilot_image_stego_0014"  # weak.sv: line 8/11, branch 4/8 (partly covered)
RING = "cvdp_copilot_ring_token_0004"  # good.sv: line 5/6, branch 3/4
ARBITER = "cvdp_copilot_fixed_arbiter_0004"  # two line blocks (if / else) start on line 29

needs_genhtml = pytest.mark.skipif(shutil.which("genhtml") is None, reason="genhtml (Debian lcov) not installed")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium (Debian) not installed")


def expected(pid: str, tb: str) -> dict[str, dict[str, int]]:
    return json.loads((STIMULUS / pid / "expected.json").read_text())["testbenches"][tb]["coverage"]


def case_request(pid: str, tb: str, engine: str) -> dict:
    return {
        "design": {"files": rtl_files(cid012_rows()[pid])},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": (STIMULUS / pid / f"{tb}.sv").read_text()}},
        "engine": engine,
        "report": {"points": True},
    }


def counts(result: ScoreResult) -> dict[str, dict[str, int]]:
    return {m: {"covered": c.covered, "total": c.total} for m, c in result.coverage.metrics.items()}


def genhtml(info: Path, sources: dict[str, str], out: Path) -> dict[str, tuple[int, int]]:
    """Run genhtml on ``info`` with the DUT ``sources`` written beside it; its summary as
    {"lines": (hit, found), "branches": (hit, found)}."""
    for name, text in sources.items():
        (info.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (info.parent / name).write_text(text)
    run = subprocess.run(
        ["genhtml", "--branch-coverage", "-o", str(out), info.name],
        cwd=info.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (out / "index.html").is_file()
    found = {}
    for kind in ("lines", "branches"):
        m = re.search(rf"{kind}\.*: [\d.]+% \((\d+) of (\d+) {kind[:-1] if kind == 'lines' else 'branche'}", run.stdout)
        found[kind] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return found


@pytest.fixture(scope="module")
def stego_verilator(engine) -> ScoreResult:
    """A real Verilator run of a partly covering case testbench, with its points."""
    result = engine.score(case_request(STEGO, "weak", "verilator"))
    assert result.status == "ok" and result.engine == "verilator", result.message
    return result


@pytest.fixture(scope="module")
def ring_fast(engine) -> ScoreResult:
    result = engine.score(case_request(RING, "good", "fast"))
    assert result.status == "ok" and result.engine == "fast", result.fallback
    return result


# -- lcov -------------------------------------------------------------------------------------
@pytest.mark.slow
@needs_genhtml
def test_lcov_of_a_verilator_run_reads_in_genhtml_with_the_results_counts(stego_verilator, tmp_path):
    want = expected(STEGO, "weak")
    assert counts(stego_verilator) == want
    info = tmp_path / "coverage.info"
    info.write_text(tracefile(stego_verilator))
    summary = genhtml(info, stego_verilator.detail.sources, tmp_path / "html")
    assert summary["lines"] == (want["line"]["covered"], want["line"]["total"]) == (8, 11)
    assert summary["branches"] == (want["branch"]["covered"], want["branch"]["total"]) == (4, 8)


@needs_genhtml
def test_lcov_of_a_fast_path_run_reads_in_genhtml_with_the_results_counts(ring_fast, tmp_path):
    want = expected(RING, "good")
    assert counts(ring_fast) == want
    info = tmp_path / "ring.info"
    info.write_text(tracefile(ring_fast, test_name="ring good.sv"))
    text = info.read_text()
    assert text.startswith("TN:ring_good_sv\nSF:") and text.count("end_of_record") == len(ring_fast.detail.sources)
    summary = genhtml(info, ring_fast.detail.sources, tmp_path / "html")
    assert summary["lines"] == (want["line"]["covered"], want["line"]["total"]) == (5, 6)
    assert summary["branches"] == (want["branch"]["covered"], want["branch"]["total"]) == (3, 4)


@needs_genhtml
def test_lcov_line_with_two_blocks_is_one_line_hit_only_when_both_are(engine, tmp_path):
    """fixed_arbiter: the last `else if`'s if and else blocks both start on line 29 (Verilator
    reports them there), so lcov, one DA per source line, has 9 lines for the 10 line points;
    branches stay equal. The twin of the rule: a line is hit when every block on it is."""
    result = engine.score(case_request(ARBITER, "weak", "fast"))
    want = expected(ARBITER, "weak")
    assert result.status == "ok" and counts(result) == want
    blocks: dict[tuple[str, int], list[bool]] = {}
    for p in result.detail.points:
        if p.metric == "line":
            blocks.setdefault((p.file, p.line), []).append(p.covered)
    assert [k for k, v in blocks.items() if len(v) > 1] == [("fixed_priority_arbiter.sv", 29)]
    info = tmp_path / "arb.info"
    info.write_text(tracefile(result))
    summary = genhtml(info, result.detail.sources, tmp_path / "html")
    assert summary["lines"] == (sum(all(v) for v in blocks.values()), len(blocks)) == (3, 9)
    assert summary["branches"] == (want["branch"]["covered"], want["branch"]["total"]) == (2, 2)


def test_reports_need_the_points():
    bare = ScoreResult(status="ok")
    with pytest.raises(LcovUnavailable, match="report.points"):
        tracefile(bare)
    with pytest.raises(html_report.HtmlUnavailable, match="report.points"):
        html_report.render(bare)


def test_points_are_off_by_default_and_leave_the_cache_key_alone(engine):
    """An RL step's results carry no detail; asking for points is a request field of its own key."""
    from reward_service.cache import request_key
    from reward_service.models import ScoreRequest

    plain = case_request(RING, "good", "fast")
    plain.pop("report")
    req, asked = ScoreRequest.model_validate(plain), ScoreRequest.model_validate({**plain, "report": {"points": True}})
    keys = [request_key(r, r.design, r.stimulus, {"v": "1"}) for r in (req, asked)]
    assert keys[0] != keys[1]
    # a request without `report` keys as before the field existed (its dump leaves it out)
    dump = req.model_dump(mode="json", exclude={"design", "stimulus", "problem_id", "report"})
    from reward_service.cache import content_hash
    from reward_service.revisions import results_revision

    assert keys[0] == content_hash(
        {
            "rev": results_revision(),
            "design": req.design.model_dump(mode="json"),
            "stimulus": req.stimulus.model_dump(mode="json"),
            "request": dump,
            "versions": {"v": "1"},
        }
    )
    assert engine.score(plain).detail is None


# -- HTML in a real browser --------------------------------------------------------------------
class _Dom(HTMLParser):
    """Ids, hrefs and the text of elements with an id, from Chromium's --dump-dom output."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.rows: dict[str, list[str]] = {}
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "tr" and (a.get("id") or "").startswith("summary-"):
            self._row = a["id"][len("summary-") :]
            self.rows[self._row] = []
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._row is not None and self._cell is not None:
            self.rows[self._row].append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={page.parent / '.chromium'}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def check_page_in_browser(result: ScoreResult, page: Path, want: dict[str, dict[str, int]]) -> None:
    """The page as Chromium renders it: the summary rows show ``want``'s counts, every uncovered
    point links to a source line that exists, and a screenshot shows more than a blank page."""
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    parsed = _Dom()
    parsed.feed(dom.stdout)
    for metric, c in want.items():
        assert parsed.rows[metric][1:3] == [str(c["covered"]), str(c["total"])], (metric, parsed.rows[metric])
    assert parsed.rows["overall"][-1] == f"{100 * result.coverage.overall:.2f}"
    links = [h for h in parsed.hrefs if h.startswith("#f")]  # one per file, line and metric
    assert len(links) == len({(u.file, u.line, u.metric) for u in result.uncovered}) > 0
    assert all(h[1:] in parsed.ids for h in links)
    shot = page.parent / "shot.png"
    run = chromium(page, f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars")
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    assert png_size(shot) == (1200, 1600)
    # a blank 1200x1600 page compresses to a few KB; text, tables and colours do not
    assert shot.stat().st_size > 40_000, shot.stat().st_size


@pytest.mark.slow
@needs_chromium
def test_html_report_of_a_verilator_run_renders_in_chromium(stego_verilator, tmp_path):
    page = html_report.write(stego_verilator, tmp_path / "report", title="stego weak.sv")
    text = page.read_text()
    assert text.count('class="missed"') == len({(u.file, u.line) for u in stego_verilator.uncovered})
    uncovered = sum(c.total - c.covered for c in stego_verilator.coverage.metrics.values())
    assert f"Uncovered points ({len(stego_verilator.uncovered)})" in text and uncovered == 194 < 200  # not capped
    check_page_in_browser(stego_verilator, page, expected(STEGO, "weak"))


@needs_chromium
def test_html_report_groups_toggle_bits_per_signal(engine, tmp_path):
    """fixed_arbiter weak.sv leaves req[7:1] and grant[7:1] untoggled: one line per signal lists
    its bits; the page escapes source text (`<=` stays text)."""
    result = engine.score(case_request(ARBITER, "weak", "fast"))
    page = html_report.write(result, tmp_path / "report")
    text = page.read_text()
    want = expected(ARBITER, "weak")["toggle"]
    missing = [p.detail for p in result.detail.points if p.metric == "toggle" and not p.covered]
    assert len(missing) == want["total"] - want["covered"] == 25
    listed = re.findall(r"toggle (\w+): (.*?)(?:; |</td>)", html.unescape(text))
    assert sorted(sig for sig, _ in listed) == sorted({d.split("[")[0].split(":")[0] for d in missing})
    assert sum(len(bits.split(", ")) for _, bits in listed) == len(missing)
    assert "toggle req: [1] 0-&gt;1" in text and "toggle grant: [1] 0-&gt;1" in text
    assert "grant &lt;= 8&#39;b00000001;" in text
    check_page_in_browser(result, page, expected(ARBITER, "weak"))


@needs_chromium
def test_html_report_lists_uncovered_expression_terms(ring_fast, tmp_path):
    """ring_token_0004 good.sv leaves one of its 3 expression terms uncovered (expected.json): the
    rendered page lists that term under its source line, whose expr cell counts it as missed."""
    want = expected(RING, "good")["expr"]
    missing = [p for p in ring_fast.detail.points if p.metric == "expr" and not p.covered]
    assert len(missing) == want["total"] - want["covered"] == 1
    (term,) = missing
    page = html_report.write(ring_fast, tmp_path / "report")
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0
    anchor = f"f{sorted(ring_fast.detail.sources).index(term.file)}-L{term.line}"
    row, below = dom.stdout.split(f'<tr id="{anchor}"', 1)[1].split("</tr>", 2)[:2]
    on_line = [p for p in ring_fast.detail.points if p.metric == "expr" and (p.file, p.line) == (term.file, term.line)]
    assert f"expr: {sum(p.covered for p in on_line)} of {len(on_line)} covered" in row
    assert 'class="missed"' in below and html.escape(f"expr: {term.detail}", quote=False) in below


# -- the CLI -----------------------------------------------------------------------------------
@needs_genhtml
@needs_chromium
def test_cli_writes_lcov_and_html_of_the_shipped_example(tmp_path, shared_cache_dir):
    """README's command: the shipped Attenuator on the fast path with --lcov and --html; genhtml
    run from the checkout (the tracefile names the files as given) agrees with --json's counts."""
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    info, out = tmp_path / "att.info", tmp_path / "att-report"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "score",
            "--design",
            "examples/cvdp/Attenuator.sv",
            "--testbench",
            "examples/cvdp/tb_attenuator.sv",
            "--dut-instance",
            "uut",
            "--engine",
            "fast",
            "--lcov",
            str(info),
            "--html",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = ScoreResult.model_validate_json(run.stdout)
    assert result.detail is not None and f"lcov: {info}" in run.stderr and "html:" in run.stderr
    assert "SF:examples/cvdp/Attenuator.sv" in info.read_text()
    gen = subprocess.run(
        ["genhtml", "--branch-coverage", "-o", str(tmp_path / "gen"), str(info)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, gen.stderr
    line, branch = result.coverage.metrics["line"], result.coverage.metrics["branch"]
    assert f"({line.covered} of {line.total} lines)" in gen.stdout
    assert f"({branch.covered} of {branch.total} branches)" in gen.stdout
    assert not result.uncovered  # the shipped testbench covers every point: no links to follow
    assert_page_counts(out / "index.html", counts(result))


def assert_page_counts(page: Path, want: dict[str, dict[str, int]]) -> None:
    dom = chromium(page, "--dump-dom")
    parsed = _Dom()
    parsed.feed(dom.stdout)
    for metric, c in want.items():
        assert parsed.rows[metric][1:3] == [str(c["covered"]), str(c["total"])]


# -- the API -----------------------------------------------------------------------------------
@needs_genhtml
def test_api_job_reports(shared_cache_dir, tmp_path):
    """POST /v1/score with report.points: the job's coverage.info and report.html; a job without
    points is 409, an unknown one 404."""
    from reward_service.api import create_app
    from reward_service.settings import Settings

    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=1, warm_on_register=False)
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=300) as api:
        response = api.post("/v1/score", params={"wait": 300}, json=case_request(RING, "good", "fast"))
        assert response.status_code == 200, response.text
        job = response.headers["content-location"]
        result = ScoreResult.model_validate(response.json())
        lcov = api.get(f"{job}/coverage.info")
        assert lcov.status_code == 200 and lcov.headers["content-type"].startswith("text/plain")
        assert lcov.text == tracefile(result, test_name=job.rsplit("/", 1)[1])
        info = tmp_path / "job.info"
        info.write_text(lcov.text)
        want = expected(RING, "good")
        summary = genhtml(info, result.detail.sources, tmp_path / "html")
        assert (
            summary
            == {"lines": (5, 6), "branches": (3, 4)}
            == {
                "lines": (want["line"]["covered"], want["line"]["total"]),
                "branches": (want["branch"]["covered"], want["branch"]["total"]),
            }
        )
        page = api.get(f"{job}/report.html")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        parsed = _Dom()
        parsed.feed(page.text)
        assert parsed.rows["toggle"][1:3] == [str(want["toggle"]["covered"]), str(want["toggle"]["total"])]

        plain = case_request(RING, "good", "fast")
        plain.pop("report")
        bare = api.post("/v1/score", params={"wait": 300}, json=plain)
        assert bare.status_code == 200 and "detail" in bare.json() and bare.json()["detail"] is None
        refused = api.get(f"{bare.headers['content-location']}/coverage.info")
        assert refused.status_code == 409 and "report" in refused.text
        assert api.get("/v1/jobs/nope/report.html").status_code == 404


# -- rescoring ---------------------------------------------------------------------------------
@needs_chromium
def test_rescore_report_html_shows_the_reports_numbers(tmp_path, shared_cache_dir):
    """examples/rescore: `rescore --report-html` beside --report-json; the page Chromium renders
    shows the JSON report's pass@k, mean coverage and per-problem row."""
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    page, data = tmp_path / "rescore.html", tmp_path / "report.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "rescore",
            "--problems",
            "examples/cvdp/attenuator.jsonl",
            "--completions",
            "examples/rescore/completions.jsonl",
            "--out",
            str(tmp_path / "r.jsonl"),
            "--k",
            "1,2,4",
            "--report-json",
            str(data),
            "--report-html",
            str(page),
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(data.read_text())
    assert report["scored"] == 4 and report["passed"] == 3  # examples/rescore/README.md: 3 of 4 pass
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0
    cells = re.findall(r"<td[^>]*>(.*?)</td>", dom.stdout.split('id="group-0"', 1)[1].split("</tr>", 1)[0], re.S)
    assert cells[:4] == ["all", "1", "4", "3"]
    assert cells[4:7] == [f"{100 * report[f'pass@{k}']:.2f}" for k in (1, 2, 4)] == ["75.00", "100.00", "100.00"]
    assert cells[7] == f"{100 * report['mean_coverage']:.2f}"
    row = dom.stdout.split('id="problem-cvdp_copilot_Attenuator_0011"', 1)[1].split("</tr>", 1)[0]
    assert f"{100 * report['by_problem']['cvdp_copilot_Attenuator_0011']['mean_coverage']:.2f}" in row


@needs_cases
@pytest.mark.slow
@needs_chromium
def test_eval_cvdp_report_html_shows_the_reports_numbers(tmp_path, shared_cache_dir):
    """examples/rescore/cid012_completions.jsonl: `eval-cvdp --report-html` beside --report-json;
    the page Chromium renders shows the JSON report's Pass@1 and mean coverage per setting
    (non-agentic, agentic) and per problem, and the metric mapping's code spans as code (the
    Markdown report's backticks were shown as such)."""
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    page, data = tmp_path / "cvdp.html", tmp_path / "cvdp.json"
    command = ["eval-cvdp", "--problems", str(CID012), "--completions", "examples/rescore/cid012_completions.jsonl"]
    command += ["--out", str(tmp_path / "r.jsonl"), "--report-json", str(data), "--report-html", str(page), "-q"]
    run = subprocess.run(
        [sys.executable, "-m", "reward_service", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(data.read_text())
    assert report["scored"] == 4 and report["status_counts"] == {"ok": 4}
    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0
    rows = {}
    for row in re.findall(r'<tr id="(group-\d+|problem-[^"]+)">(.*?)</tr>', dom.stdout, re.S):
        rows[row[0]] = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)]
    groups = {cells[0]: cells for key, cells in rows.items() if key.startswith("group-")}
    for name, g in [("all", report), *report["by_kind"].items()]:
        assert groups[name][1:4] == [str(g["problems"]), str(g["samples"]), str(g["passed"])], name
        assert groups[name][4:6] == [f"{100 * g['pass@1']:.2f}", f"{100 * g['mean_coverage']:.2f}"], name
    assert set(report["by_kind"]) == {"non-agentic", "agentic"}
    for pid, p in report["by_problem"].items():
        cells = rows[f"problem-{pid}"]
        assert cells[0] == pid and f"{100 * p['mean_coverage']:.2f}" in cells
    assert "`line`" in report["metric_mapping"]
    mapping = dom.stdout.split('id="metric-mapping">', 1)[1].split("</p>", 1)[0]
    assert "<code>line</code>" in mapping and "`" not in mapping


# -- through Celery workers ---------------------------------------------------------------------


@needs_genhtml
def test_reports_of_a_job_scored_by_a_celery_worker(redis_server, shared_cache_dir, tmp_path):
    """The points survive the worker's JSON result in Redis: the API on the CeleryDispatcher
    serves the job's tracefile, which genhtml reads with the case's expected counts."""
    from reward_service.api import create_app
    from reward_service.models import ScoreRequest
    from reward_service.settings import Settings

    svc = Service(f"{redis_server}/15", shared_cache_dir, tmp_path)
    try:
        svc.start("reports", concurrency=1)
        job = svc.dispatcher.submit(ScoreRequest.model_validate(case_request(RING, "good", "fast")))
        view = svc.dispatcher.wait(job, 120)
        assert view is not None and view.state == "done" and view.result.detail is not None, svc.logs()
        app = create_app(dispatcher=svc.dispatcher, settings=Settings(warm_on_register=False))
        with live_server(app) as base, httpx.Client(base_url=base, timeout=60) as api:
            lcov = api.get(f"/v1/jobs/{job}/coverage.info")
            assert lcov.status_code == 200, lcov.text
            page = api.get(f"/v1/jobs/{job}/report.html")
            assert page.status_code == 200 and 'id="summary-toggle"' in page.text
        info = tmp_path / "celery.info"
        info.write_text(lcov.text)
        want = expected(RING, "good")
        assert genhtml(info, view.result.detail.sources, tmp_path / "html") == {
            "lines": (want["line"]["covered"], want["line"]["total"]),
            "branches": (want["branch"]["covered"], want["branch"]["total"]),
        }
    finally:
        svc.close()
