"""The HTTP API served by uvicorn on a free 127.0.0.1 port, called with httpx: real simulators
(Icarus for speed, Verilator for the CLI-equality contract), the 202/polling path, batches,
problems, bad inputs with their status codes, API keys, health, readiness and metrics."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import CID012, REPO, STIMULUS, cid012_rows, free_port, live_server, rtl_files

from reward_service.api import create_app
from reward_service.dispatch.base import Dispatcher, QueueFull
from reward_service.settings import Settings

ATTN = "cvdp_copilot_Attenuator_0011"

COUNTER = """module ctr(input clk, output reg [7:0] q);
  initial q = 0;
  always @(posedge clk) q <= q + 1;
endmodule
"""
SLOW_TB = """module tb;
  reg clk = 0;
  wire [7:0] q;
  ctr uut(.clk(clk), .q(q));
  initial begin
    repeat (3000000) #1 clk = ~clk;
    $display("done q=%0d", q);
    $finish;
  end
endmodule
"""
QUICK_TB = """module tb;
  reg clk = 0;
  wire [7:0] q;
  ctr uut(.clk(clk), .q(q));
  initial begin
    repeat (10) #1 clk = ~clk;
    $display("quick q=%0d", q);
    $finish;
  end
endmodule
"""
HANG_TB = """module tb;
  reg clk = 0;
  ctr uut(.clk(clk), .q());
  always #1 clk = ~clk;
endmodule
"""
BROKEN_TB = "module tb;\n  reg clk = 0;\n  ctr uut(.clk(clk), .q());\n  initial begin clk = ; end\nendmodule\n"


def attn_rtl() -> dict[str, str]:
    return rtl_files(cid012_rows()[ATTN])


def good_tb() -> str:
    """The Attenuator's good.sv stimulus case (read when a test needs it: the cases may be missing)."""
    return (STIMULUS / ATTN / "good.sv").read_text()


def expected_good() -> dict:
    """good.sv's numbers in the Attenuator's expected.json."""
    return json.loads((STIMULUS / ATTN / "expected.json").read_text())["testbenches"]["good"]


def counter_request(tb: str = QUICK_TB, **extra) -> dict:
    return {
        "design": {"files": {"ctr.v": COUNTER}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "simulator": "icarus",
        "coverage": {"scope": "uut"},
        **extra,
    }


@contextlib.contextmanager
def serving(app) -> Iterator[httpx.Client]:
    """Serve ``app`` with uvicorn in a thread (conftest.live_server); yield a client bound to it."""
    with live_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        yield client


@pytest.fixture(scope="module")
def api(shared_cache_dir) -> Iterator[httpx.Client]:
    """The embedded service (LocalDispatcher, bubblewrap), no result cache, small limits."""
    settings = Settings(
        cache_dir=shared_cache_dir,
        result_cache=False,
        score_workers=2,
        max_body_mb=1,
        max_file_kb=64,
        max_files=6,
        warm_on_register=False,
    )  # test_registering_warms_the_dut_model covers it
    with serving(create_app(settings=settings)) as client:
        yield client


def no_traceback(response: httpx.Response) -> None:
    assert "Traceback" not in response.text and 'File "' not in response.text


# -- the contract: same JSON as the CLI ---------------------------------------------------------
@pytest.mark.slow
def test_verilator_score_equals_cli_json(api, shared_cache_dir, tmp_path):
    request = {
        "design": {"files": attn_rtl()},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good_tb()}},
        "simulator": "verilator",
        "coverage": {"scope": "uut"},
    }
    response = api.post("/v1/score", params={"wait": 300}, json=request)
    assert response.status_code == 200, response.text
    got = response.json()

    for name, text in {**attn_rtl(), "tb.sv": good_tb()}.items():
        (tmp_path / name).write_text(text)
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "score",
            *[a for n in attn_rtl() for a in ("--design", n)],
            "--testbench",
            "tb.sv",
            "--dut-instance",
            "uut",
            "--simulator",
            "verilator",
            "--json",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    for d in (got, expected):
        d.pop("timings"), d.pop("cache")
    assert got == expected
    metrics = {m: {"covered": v["covered"], "total": v["total"]} for m, v in got["coverage"]["metrics"].items()}
    assert metrics == expected_good()["coverage"] and got["reward"] == 2.0 and got["engine"] == "verilator"


# -- 202 and polling ----------------------------------------------------------------------------
def test_wait_zero_answers_202_then_job_polls_to_the_result(api):
    response = api.post("/v1/score?wait=0", json=counter_request(SLOW_TB))
    assert response.status_code == 202, response.text
    body = response.json()
    assert set(body) == {"job_id", "state"} and body["state"] in ("queued", "running")
    assert response.headers["location"] == f"/v1/jobs/{body['job_id']}"

    job = api.get(response.headers["location"]).json()
    assert job["job_id"] == body["job_id"] and job["state"] in ("queued", "running") and job["result"] is None
    job = api.get(response.headers["location"], params={"wait": 60}).json()
    assert job["state"] == "done"
    assert job["result"]["status"] == "ok" and "done q=" in job["result"]["log"]
    assert job["result"]["engine"] == "icarus"

    missing = api.get("/v1/jobs/0123456789abcdef")
    assert missing.status_code == 404 and "unknown job id" in missing.json()["detail"]


# -- batches ----------------------------------------------------------------------------------
def test_batch_results_in_request_order_with_broken_samples(api):
    requests = [
        {**counter_request(), "group": "g1"},
        {**counter_request(BROKEN_TB), "group": "g1"},
        {
            **counter_request(),
            "stimulus": {"kind": "completion", "text": "I cannot write this testbench."},
            "group": "g1",
        },
        {**counter_request(HANG_TB, limits={"run_s": 1}), "group": "g2"},
        counter_request(SLOW_TB),
        {**counter_request(), "seed": 3},
    ]
    response = api.post("/v1/batches", json={"requests": requests, "wait": 0})
    assert response.status_code == 202, response.text
    batch = response.json()
    assert batch["total"] == 6 and batch["done"] < 6 and len(batch["results"]) == 6
    assert response.headers["location"] == f"/v1/batches/{batch['batch_id']}"
    assert batch["groups"] == ["g1", "g1", "g1", "g2", None, None]

    done = api.get(response.headers["location"], params={"wait": 120})
    assert done.status_code == 200, done.text
    batch = done.json()
    assert batch["state"] == "done" and batch["done"] == 6
    statuses = [r["status"] for r in batch["results"]]
    assert statuses == ["ok", "compile_error", "invalid_input", "timeout", "ok", "ok"]
    assert "quick q=" in batch["results"][0]["log"] and "done q=" in batch["results"][4]["log"]
    assert [r["reward"] for r in batch["results"][1:4]] == [0.0, 0.0, 0.0]
    rewards = batch["group_rewards"]
    assert rewards is not None and len(rewards["diversity"]) == 6 and rewards["diversity"][4] is None
    # Icarus has no code coverage: grouped samples without coverage have diversity 0
    assert rewards["diversity"][:4] == [0.0, 0.0, 0.0, 0.0]

    # waiting in the POST itself answers 200 with everything
    quick = api.post("/v1/batches", json={"requests": [counter_request(), counter_request(BROKEN_TB)], "wait": 60})
    assert quick.status_code == 200 and [r["status"] for r in quick.json()["results"]] == ["ok", "compile_error"]
    assert api.get("/v1/batches/nope").status_code == 404


# -- problems ---------------------------------------------------------------------------------
def test_register_problem_and_score_by_id_with_a_completion(api):
    problem = {
        "id": "attn-icarus",
        "design": {"files": attn_rtl()},
        "dut_instance": "uut",
        "simulator": "icarus",
        "targets": [{"metric": "overall", "percent": 90}],
        "limits": {"run_s": 10},
    }
    created = api.post("/v1/problems", json=problem)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/problems/attn-icarus"
    assert created.json()["design"]["toplevel"] == "Attenuator"  # found when not given
    assert api.post("/v1/problems", json=problem).status_code == 200  # replaced

    listed = api.get("/v1/problems").json()["problems"]
    mine = next(p for p in listed if p["id"] == "attn-icarus")
    assert mine["dut_instance"] == "uut" and mine["files"] == ["Attenuator.sv"] and mine["simulator"] == "icarus"
    assert api.get("/v1/problems/attn-icarus").json()["limits"]["run_s"] == 10

    completion = f"Here is the testbench.\n```systemverilog\n{good_tb()}```\n"
    scored = api.post(
        "/v1/score",
        json={
            "problem_id": "attn-icarus",
            "stimulus": {"kind": "completion", "text": completion},
            "coverage": {"metrics": ["line", "functional"]},
        },
    )
    assert scored.status_code == 200, scored.text
    result = scored.json()
    assert result["status"] == "ok" and result["engine"] == "icarus" and "Attenuator TB complete" in result["log"]
    assert result["coverage"]["scope"] == "uut"  # the problem's instance, kept under a coverage override
    assert sorted(result["coverage"]["metrics"]) == ["functional", "line"]

    # the problem's instance is enforced: a testbench instantiating `uut` fails a problem wanting `dut`
    api.post("/v1/problems", json={**problem, "id": "attn-dut", "dut_instance": "dut"})
    wrong = api.post(
        "/v1/score", json={"problem_id": "attn-dut", "stimulus": {"kind": "completion", "text": completion}}
    )
    assert wrong.json()["status"] == "invalid_input" and "`dut`" in wrong.json()["message"]

    unknown = api.post(
        "/v1/score", json={"problem_id": "no-such-problem", "stimulus": {"kind": "completion", "text": "x"}}
    )
    assert unknown.status_code == 404 and "unknown problem_id 'no-such-problem'" in unknown.json()["detail"]
    batch = api.post(
        "/v1/batches",
        json={
            "requests": [
                {"problem_id": "attn-icarus", "stimulus": {"kind": "completion", "text": "x"}},
                {"problem_id": "no-such-problem", "stimulus": {"kind": "completion", "text": "x"}},
            ]
        },
    )
    assert batch.status_code == 404 and batch.json()["detail"].startswith("requests[1]: unknown problem_id")

    assert api.delete("/v1/problems/attn-dut").status_code == 204
    assert api.get("/v1/problems/attn-dut").status_code == 404
    assert api.post("/v1/problems", json={**problem, "id": "bad/id"}).status_code == 422


@pytest.mark.slow
def test_load_cvdp_jsonl_then_score_a_completion_with_verilator(api):
    loaded = api.post(
        "/v1/problems:load", content=CID012.read_bytes(), headers={"Content-Type": "application/x-ndjson"}
    )
    assert loaded.status_code == 201, loaded.text
    assert loaded.json()["loaded"] == 82 and ATTN in loaded.json()["ids"]
    problem = api.get(f"/v1/problems/{ATTN}").json()
    assert problem["dut_instance"] == "uut" and problem["targets"] == [{"metric": "overall", "percent": 90.0}]
    assert problem["prompt"] and problem["design"]["toplevel"] == "Attenuator"

    completion = f"<think>drive every data value</think>\n```verilog\n{good_tb()}```"
    response = api.post(
        "/v1/score?wait=300", json={"problem_id": ATTN, "stimulus": {"kind": "completion", "text": completion}}
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "ok" and result["passed"] is True and result["reward"] == 2.0
    assert {
        m: {"covered": v["covered"], "total": v["total"]} for m, v in result["coverage"]["metrics"].items()
    } == expected_good()["coverage"]

    bad = api.post("/v1/problems:load", content=CID012.read_text().splitlines()[0] + "\n{not json\n")
    assert bad.status_code == 422 and bad.json()["detail"].startswith("line 2: malformed JSON")


# -- bad inputs -------------------------------------------------------------------------------
def test_bad_inputs_get_their_status_codes(api):
    def check(response: httpx.Response, status: int, text: str) -> None:
        assert response.status_code == status, response.text
        assert text in response.json()["detail"], response.json()
        no_traceback(response)

    json_headers = {"Content-Type": "application/json"}
    check(api.post("/v1/score", content=b'{"design": {"files": ', headers=json_headers), 422, "malformed JSON body")
    check(
        api.post("/v1/score", content=b"design=x", headers={"Content-Type": "application/x-www-form-urlencoded"}),
        422,
        "must be a JSON object",
    )
    check(api.post("/v1/score", content=b"[1, 2]", headers=json_headers), 422, "invalid request: body")
    big = counter_request(stimulus={"kind": "completion", "text": "x" * (1536 * 1024)})
    check(api.post("/v1/score", json=big), 413, "larger than 1 MiB")
    many = counter_request()
    many["design"]["files"].update({f"m{i}.v": f"module m{i}; endmodule\n" for i in range(6)})
    check(api.post("/v1/score", json=many), 422, "too many files: 8")
    fat = counter_request()
    fat["design"]["files"]["ctr.v"] = COUNTER + "// pad\n" * 12000
    check(api.post("/v1/score", json=fat), 422, "larger than the 64 KiB limit")
    for name in ("../escape.v", "/etc/passwd.v", "a/../../b.v"):
        bad = counter_request()
        bad["design"]["files"] = {name: COUNTER}
        check(api.post("/v1/score", json=bad), 422, "design.files")
    traversal = api.post(
        "/v1/score", json={**counter_request(), "stimulus": {"kind": "sv_testbench", "files": {"../tb.sv": QUICK_TB}}}
    )
    check(traversal, 422, "must stay inside the work dir")
    check(
        api.post("/v1/score", json={**counter_request(), "problem_id": "x"}),
        422,
        "exactly one of `design` or `problem_id`",
    )
    check(
        api.post("/v1/score", json={**counter_request(), "stimulus": {"kind": "vhdl", "files": {"a": "b"}}}),
        422,
        "stimulus",
    )
    check(api.post("/v1/score", json={**counter_request(), "simulator": "xcelium"}), 422, "simulator")
    check(api.post("/v1/score?wait=601", json=counter_request()), 422, "wait must be at most 600")
    check(api.post("/v1/score?wait=-1", json=counter_request()), 422, "wait")
    check(api.post("/v1/batches", json={"requests": []}), 422, "requests")
    check(
        api.post("/v1/batches", json={"requests": [counter_request(), {**counter_request(), "seed": -1}]}),
        422,
        "requests.1.seed",
    )
    # the service stays healthy
    assert api.get("/healthz").status_code == 200
    assert api.post("/v1/score", json=counter_request()).json()["status"] == "ok"


class StubDispatcher(Dispatcher):
    """A dispatcher test double: submit raises ``exc``; ready() returns ``checks``."""

    def __init__(self, exc: Exception | None = None, checks: dict[str, str] | None = None) -> None:
        self.exc, self.checks = exc, checks or {"workers": "ok"}

    def submit(self, request):
        raise self.exc

    def submit_many(self, requests):
        raise self.exc

    def get(self, job_id):
        return None

    def wait(self, job_id, timeout):
        return None

    def queue_depth(self) -> int:
        return 7

    def ready(self) -> dict[str, str]:
        return self.checks


def test_queue_full_429_internal_error_500_and_not_ready_503(shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir)
    with serving(
        create_app(StubDispatcher(QueueFull("queue full (7 pending jobs)", retry_after=2.5)), settings=settings)
    ) as client:
        full = client.post("/v1/score", json=counter_request())
        assert full.status_code == 429 and full.headers["retry-after"] == "3"
        assert "queue full" in full.json()["detail"]
        batch = client.post("/v1/batches", json={"requests": [counter_request()] * 3})
        assert batch.status_code == 429 and "retry-after" in batch.headers
        assert "reward_service_queue_depth 7.0" in client.get("/metrics").text
    secret = RuntimeError("connection to /var/run/secret-socket refused")
    with serving(
        create_app(
            StubDispatcher(secret, checks={"workers": "no worker answered the ping", "broker": "ok"}), settings=settings
        )
    ) as client:
        broken = client.post("/v1/score", json=counter_request())
        assert broken.status_code == 500 and "internal error (reference" in broken.json()["detail"]
        assert "secret" not in broken.text
        no_traceback(broken)
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {
            "ready": False,
            "checks": {
                "workers": "no worker answered the ping",
                "broker": "ok",
                "problem_store": "ok",
                "batch_store": "ok",
            },
        }
        assert client.get("/healthz").status_code == 200
        assert (
            'reward_service_http_requests_total{method="POST",route="/v1/score",status="500"} 1.0'
            in client.get("/metrics").text
        )


def test_api_keys(shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir, api_keys=["k-one", "k-two"])
    with serving(create_app(StubDispatcher(QueueFull("full")), settings=settings)) as client:
        missing = client.get("/v1/problems")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in missing.json()["detail"]
        assert client.get("/v1/problems", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/v1/problems", headers={"Authorization": "Basic k-one"}).status_code == 401
        assert client.get("/v1/problems", headers={"Authorization": "Bearer k-two"}).status_code == 200
        # authentication comes before body validation; probes stay open
        assert client.post("/v1/score", content=b"{").status_code == 401
        assert client.get("/v1/jobs/x").status_code == 401
        assert client.get("/healthz").status_code == 200 and client.get("/metrics").status_code == 200


# -- health, readiness, metrics ---------------------------------------------------------------
def test_health_ready_and_metrics(shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir, result_cache=True)  # the second request hits the cache
    with serving(create_app(settings=settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        assert ready.json()["checks"]["sandbox"] == "ok"
        request = counter_request(seed=time.time_ns() % 2**31)  # new to the shared result cache
        first = client.post("/v1/score", json=request).json()
        second = client.post("/v1/score", json=request).json()
        assert first["status"] == second["status"] == "ok" and second["cache"]["result"] is True
        assert client.get("/v1/jobs/unknown").status_code == 404
        text = client.get("/metrics").text
        assert 'reward_service_http_requests_total{method="POST",route="/v1/score",status="200"} 2.0' in text
        assert 'reward_service_http_requests_total{method="GET",route="/v1/jobs/{job_id}",status="404"} 1.0' in text
        assert 'reward_service_results_total{status="ok"} 2.0' in text
        assert 'reward_service_job_stage_seconds_count{stage="total"} 2.0' in text
        assert 'reward_service_cache_hits_total{cache="result"} 1.0' in text
        assert "reward_service_queue_depth 0.0" in text
        assert "reward_service_jobs_submitted_total 2.0" in text
        assert client.get("/docs").status_code == 200
        assert "/v1/score" in client.get("/openapi.json").json()["paths"]


def test_serve_command_starts_the_embedded_service(shared_cache_dir, tmp_path):
    port = free_port()
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reward_service",
            "serve",
            "--port",
            str(port),
            "--workers",
            "1",
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "serve did not answer within 30 s"
                time.sleep(0.1)
        assert health.status_code == 200
        scored = httpx.post(f"http://127.0.0.1:{port}/v1/score", json=counter_request(), timeout=60)
        assert scored.status_code == 200 and scored.json()["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_registering_warms_the_dut_model(tmp_path):
    """POST /v1/problems queues a build of the DUT model: a cocotb sample sent afterwards finds
    it in the build cache (cache.build) and only runs."""
    settings = Settings(cache_dir=tmp_path, result_cache=False, score_workers=1)  # fresh model cache
    problem = {
        "id": "warm-ctr",
        "design": {"files": {"ctr.v": COUNTER}},
        "dut_instance": "uut",
        "simulator": "verilator",
    }
    test_py = (
        "import cocotb\nfrom cocotb.triggers import Timer\n\n@cocotb.test()\n"
        "async def tick(dut):\n    dut.clk.value = 0\n    await Timer(1, unit='ns')\n"
    )
    with serving(create_app(settings=settings)) as client:
        assert client.post("/v1/problems", json=problem).status_code == 201
        deadline = time.monotonic() + 300
        while not list((tmp_path / "models").glob("*/ctr")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert list((tmp_path / "models").glob("*/ctr")), "registering did not build the DUT model"
        r = client.post(
            "/v1/score?wait=300",
            json={
                "problem_id": "warm-ctr",
                "stimulus": {"kind": "cocotb", "files": {"test_tick.py": test_py}, "test_module": "test_tick"},
            },
        )
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "ok" and body["cache"]["build"] is True and body["tests"][0]["passed"]
