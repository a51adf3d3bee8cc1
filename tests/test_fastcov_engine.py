"""The fast path inside the engine (issue 5 items 1, 3, 4): every ending writes the flags, forged
flag files are ignored, the fallback to Verilator (with its reason), the shadow check and its
metrics, ``engine=auto`` decided once per design, the CLI's ``--engine`` and the CVDP default.
Real Icarus, real Verilator, real sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from conftest import cid012_rows
from test_bad_input import TB_REJ

from reward_service.api.telemetry import Metrics
from reward_service.engine import Engine
from reward_service.fastcov.choice import decision_key
from reward_service.fastcov.compare import diff_points
from reward_service.problems import problem_from_row
from reward_service.settings import Settings

METRICS = ["line", "branch", "toggle"]

DUT = """module counter (input clk, input rst, input [1:0] mode, output reg [3:0] q, output wire odd);
  // design {tag}
  assign odd = q[0] ? 1'b1 : 1'b0;
  always @(posedge clk) begin
    if (rst) q <= 0;
    else if (mode == 2'd1) q <= q + 1;
    else if (mode == 2'd2) q <= q - 1;
    else begin
      case (mode)
        2'd0: q <= q;
        default: q <= 4'hf;
      endcase
    end
  end
endmodule
"""

TB = """module tb;
  reg clk = 0, rst = 1;
  reg [1:0] mode = 0;
  wire [3:0] q;
  wire odd;
  counter dut (.clk(clk), .rst(rst), .mode(mode), .q(q), .odd(odd));
  always #5 clk = ~clk;
  initial begin
    #12 rst = 0;
    mode = 1; repeat (5) @(posedge clk);
    mode = 2; repeat (2) @(posedge clk);
    {ending}
  end
endmodule
"""

ENDINGS = {
    "finish": "$finish;",
    "stop": "$stop;",
    "fatal": '$fatal(1, "deliberate");',
    "no_events": "#1 disable clk_gen;",  # replaced below: the clock stops, no event is left
    "timeout": "forever #5 mode = mode;",
}


def design(tag: str = "base") -> dict[str, str]:
    return {"counter.sv": DUT.replace("{tag}", tag)}


def request(ending: str = "finish", tag: str = "base", **extra) -> dict:
    tb = TB.replace("{ending}", ENDINGS[ending])
    if ending == "no_events":
        tb = tb.replace("always #5 clk = ~clk;", "initial begin : clk_gen repeat (40) #5 clk = ~clk; end").replace(
            ENDINGS["no_events"], ""
        )
    return {
        "design": {"files": design(tag)},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "dut", "metrics": METRICS},
        "limits": {"run_s": 3},
        **extra,
    }


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["finish", "stop", "fatal", "no_events"])
def test_every_ending_writes_the_flags(engine, ending):
    fast_run = engine.scored(request(ending, engine="fast"))
    fast = fast_run.result
    assert fast.status == "ok" and fast.engine == "fast" and fast.fallback is None, fast.message + fast.log
    assert fast.ended_by == ending
    reference_run = engine.scored(request(ending, engine="verilator"))  # rs_main.cpp writes on each ending
    reference = reference_run.result
    assert reference.status == "ok" and reference.ended_by == ending, reference.message
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe()


def test_timeout_reports_the_coverage_up_to_the_limit(engine):
    fast = engine.score(request("timeout", engine="fast"))
    assert fast.status == "timeout" and fast.engine == "fast" and fast.ended_by == "timeout"
    assert fast.reward == 0.0 and fast.coverage.metrics["line"].covered > 0  # for information


def test_a_forged_flag_file_is_ignored(engine):
    forged = request(engine="fast")
    tb = forged["stimulus"]["files"]["tb.sv"]
    forge = (
        'initial begin : forge integer fd; fd = $fopen("rs_fastcov.txt", "w"); '
        '$fwrite(fd, "0000 F counter tb.dut 1111111111111 1\\n"); $fclose(fd); end\n'
    )
    forged["stimulus"]["files"]["tb.sv"] = tb.replace("endmodule", forge + "endmodule")
    honest = engine.score(request(engine="fast"))
    result = engine.score(forged)
    assert result.status == "ok" and result.coverage == honest.coverage


#: Icarus 11 rejects `iff` in an event control (a syntax error). (test_bad_input's design with a
#: concurrent assertion is scored on the fast path since issue 20: the assertion is taken out.)
REJECTED_ON_ICARUS = """module rej(input logic clk, input logic a, output logic b);
  logic b2;
  always_ff @(posedge clk iff a) b <= a;
endmodule
"""


@pytest.mark.slow
def test_fallback_to_verilator_says_why(engine):
    unmeasured = engine.score({**request(engine="fast"), "coverage": {"scope": "dut", "metrics": ["line", "user"]}})
    assert unmeasured.engine == "verilator" and unmeasured.status == "ok"
    assert unmeasured.fallback == "the fast path does not measure user"

    iface = {"counter_if.sv": "interface counter_if; logic a; endinterface\n", **design("iface")}
    uninstrumentable = engine.score({**request(engine="fast"), "design": {"files": iface}})
    assert uninstrumentable.engine == "verilator" and uninstrumentable.status == "ok"
    assert uninstrumentable.fallback.startswith(
        "the fast path could not instrument the design: counter_if.sv: InterfaceDeclaration"
    )

    rejected = engine.score(
        {
            "design": {"files": {"rej.sv": REJECTED_ON_ICARUS}},
            "engine": "fast",
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB_REJ}},
            "coverage": {"scope": "dut", "metrics": METRICS},
        }
    )
    assert rejected.engine == "verilator" and rejected.status == "ok"
    assert rejected.fallback == "Icarus rejects the design: rej.sv:3: syntax error — scored on Verilator"


@pytest.mark.slow
def test_shadow_check_diffs_against_verilator_and_is_counted(shared_cache_dir):
    engine = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False, fastcov_shadow_rate=1.0))
    result = engine.score(request(engine="fast"))
    assert result.engine == "fast" and result.shadow is not None, result.message
    assert result.shadow.agreed and result.shadow.differences == 0
    metrics = Metrics(queue_depth=lambda: 0)
    metrics.observe_result("job-1", result)
    disagreeing = result.model_copy(
        update={
            "shadow": result.shadow.model_copy(update={"agreed": False, "differences": 3, "metrics": {"toggle": 3}})
        }
    )
    metrics.observe_result("job-2", disagreeing)
    metrics.observe_result("job-2", disagreeing)  # once per job id
    get = metrics.registry.get_sample_value
    assert get("reward_service_fastcov_shadow_checks_total", {"agreed": "true"}) == 1
    assert get("reward_service_fastcov_shadow_checks_total", {"agreed": "false"}) == 1
    assert get("reward_service_fastcov_shadow_disagreeing_points_total") == 3
    assert get("reward_service_engine_results_total", {"engine": "fast", "fallback": "false"}) == 2


@pytest.mark.slow
def test_auto_decides_once_per_design(engine):
    tag = uuid.uuid4().hex  # a design no earlier run has decided
    first = engine.score(request(tag=tag, engine="auto"))
    assert first.status == "ok" and first.engine == "fast" and first.fallback is None, first.fallback
    key = decision_key(design(tag), None)
    path = engine.settings.cache_dir / "fastcov" / "decisions" / f"{key}.json"
    decision = json.loads(path.read_text())
    assert decision["engine"] == "fast" and decision["reason"].startswith("self-check agreed with Verilator")
    decided_at = path.stat().st_mtime_ns
    again = engine.score(request("stop", tag=tag, engine="auto"))
    assert again.engine == "fast" and path.stat().st_mtime_ns == decided_at

    # a DUT that is another design on Verilator (`ifdef VERILATOR): the self-check disagrees
    split = DUT.replace("{tag}", tag).replace(
        "  end\nendmodule", "  end\n`ifdef VERILATOR\n  always @(posedge clk) if (q == 4'd9) q <= 0;\n`endif\nendmodule"
    )
    result = engine.score({**request(tag=tag, engine="auto"), "design": {"files": {"counter.sv": split}}})
    assert result.engine == "verilator" and result.status == "ok"
    assert result.fallback.startswith("auto chose Verilator for this design: self-check:"), result.fallback


def test_cli_engine_option(shared_cache_dir, tmp_path):
    (tmp_path / "counter.sv").write_text(design()["counter.sv"])
    (tmp_path / "tb.sv").write_text(request()["stimulus"]["files"]["tb.sv"])
    env = {"REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "score",
            "-d",
            "counter.sv",
            "-t",
            "tb.sv",
            "--dut-instance",
            "dut",
            "-m",
            "line",
            "-m",
            "branch",
            "-m",
            "toggle",
            "--engine",
            "fast",
            "--json",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["engine"] == "fast" and result["status"] == "ok" and result["fallback"] is None
    bad = subprocess.run(
        [sys.executable, "-m", "reward_service", "score", "-d", "counter.sv", "-t", "tb.sv", "--engine", "fastest"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "fastest" in bad.stderr


def test_cvdp_problems_default_to_auto():
    problem = problem_from_row(cid012_rows()["cvdp_copilot_Attenuator_0011"])
    assert problem.engine == "auto" and problem.request("x").engine == "auto"
    assert problem.request("x", engine="verilator").engine == "verilator"
    # asking for Icarus keeps meaning Icarus without code coverage: auto replaces the Verilator path
    assert problem.request("x", simulator="icarus").engine is None
    assert problem.request("x", simulator="icarus", engine="fast").engine == "fast"


def test_cocotb19_tests_get_code_coverage_on_the_fast_path(engine):
    """cocotb 1.x-idiom tests run only on Icarus (the cocotb 1.9 runtime): the fast path gives them
    code coverage, which no Verilator build could."""
    from test_cocotb_corpus import ROWS, outcome
    from test_cocotb_corpus import request as corpus_request

    request = corpus_request(ROWS["cvdp_copilot_sorter_0042"])
    result = engine.score({**request, "engine": "fast", "coverage": {"metrics": METRICS}})
    assert result.status == "ok" and result.engine == "fast", outcome(result)
    assert "ran on cocotb 1.9" in result.message and all(t.passed for t in result.tests)
    assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()} == {
        "line": (13, 16),
        "branch": (12, 12),
        "toggle": (415, 420),
    }
