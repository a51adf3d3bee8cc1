"""Our tools' crashes are never the model's fault, and Verilator instruments the DUT's files only
(issue 19, item 4).

A build that stops on a tool's internal error is a ``sandbox_error`` (never cached), not the
sample's ``compile_error``; a sample cannot print such a line into a build log. Verilator builds
the stimulus's files with coverage off (``rs_cov_off.vlt``): their points never counted, and
their instrumentation cost build time and crashed Verilator 5.048 on some testbench types.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from reward_service.coverage import parse_coverage_dat
from reward_service.models import Limits, ScoreRequest, Status, SvTestbench
from reward_service.scoring.classify import tool_internal_error
from reward_service.simulators.base import Job
from reward_service.simulators.verilator import VerilatorSimulator, stimulus_coverage_off

DUT = """module acc(input logic clk, input logic rst, input logic en, input logic [3:0] d, output logic [7:0] q);
  always_ff @(posedge clk)
    if (rst) q <= '0;
    else if (en) q <= q + d;
endmodule
"""

#: A class-based testbench (a mailbox of class handles, a struct, a queue): with coverage on,
#: each of its variables would be a toggle point of the testbench's file.
TB = """class Txn; rand bit [3:0] d; endclass
module tb;
  logic clk = 0, rst = 1, en = 0;
  logic [3:0] d = 0;
  logic [7:0] q;
  mailbox #(Txn) gen2drv = new();
  Txn q_of_txn[$];
  int sent = 0;
  acc dut(.clk, .rst, .en, .d, .q);
  always #5 clk = ~clk;
  initial begin
    Txn t;
    repeat (2) @(negedge clk);
    rst = 0;
    repeat (6) begin
      t = new();
      t.d = 4'(sent + 3);
      gen2drv.put(t);
      gen2drv.get(t);
      q_of_txn.push_back(t);
      @(negedge clk);
      en = 1;
      d = t.d;
      sent++;
    end
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize(
    "line",
    [
        "%Error: Internal Error: tb.sv:12:7: ../V3Coverage.cpp:312: Unexpected node data type in toggle "
        "coverage generation: CLASSREFDTYPE",
        "ivl: t-dll-proc.cc:112: bool dll_target::proc_assign(...): Assertion `lval' failed.",
    ],
)
def test_tool_internal_error_lines_are_found(line):
    log = f"make: entering\n{line}\nmore\n"
    assert tool_internal_error(log) == line


@pytest.mark.parametrize(
    "line",
    [
        # an elaboration-time $error of the sample (Verilator: file:line first)
        '%Error: tb.sv:3:5: Internal Error: "this is the testbench speaking"',
        # Verilator quoting a source line that holds the words
        '   12 | %Error: Internal Error: $display("x")',
        # Icarus' elaboration-time $error
        "ERROR: tb.sv:3: Internal Error: nope",
        "tb.sv:4: error: Assertion x failed",
    ],
)
def test_sample_text_is_not_a_tool_internal_error(line):
    assert tool_internal_error(f"{line}\n") is None


def test_coverage_off_config_names_each_stimulus_file():
    vlt = stimulus_coverage_off(["tb.sv", "verif/pkg.sv"])
    assert vlt.splitlines() == [
        "`verilator_config",
        'coverage_off -file "*/verilated_std.sv"',
        'coverage_off -file "tb.sv"',
        'coverage_off -file "*/tb.sv"',
        'coverage_off -file "verif/pkg.sv"',
        'coverage_off -file "*/verif/pkg.sv"',
    ]


def test_verilator_instruments_dut_files_only(engine):
    """The real coverage.dat of a Verilator build holds points of the DUT's file and none of the
    testbench's or Verilator's std package (before: the testbench's variables and lines, and
    the ``mailbox`` class's, were points too, then dropped)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "src" / "acc.sv").write_text(DUT)
        (root / "src" / "tb.sv").write_text(TB)
        job = Job(
            root=root,
            design_files=["acc.sv"],
            stimulus_files=["tb.sv"],
            stimulus_sources=["tb.sv"],
            limits=Limits(),
            sandbox=engine.sandbox,
            cache_dir=engine.settings.cache_dir,
            top="tb",
        )
        run = VerilatorSimulator().run_sv(job)
        assert not run.build_failed, run.build.output if run.build else run
        assert run.coverage_dat is not None
        files = {p.file for p in parse_coverage_dat(run.coverage_dat, None)}
        assert files == {"acc.sv"}, files


def test_class_testbench_scores_on_verilator_like_the_fast_path(engine):
    """The same DUT points on both engines for a class-based testbench (the testbench's own
    instrumentation is gone; the DUT's is unchanged)."""
    results = {}
    for name in ("verilator", "fast"):
        request = ScoreRequest.model_validate(
            {
                "design": {"files": {"acc.sv": DUT}, "toplevel": "acc"},
                "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB}},
                "coverage": {"scope": "dut"},
                "engine": name,
            }
        )
        results[name] = engine.score(request)
    v, f = results["verilator"], results["fast"]
    assert v.status == Status.ok, v.message
    assert v.engine == "verilator"
    # the fast path may decline a class-based testbench (Icarus 11): then only Verilator's
    # own figures are checked
    if f.engine == "fast":
        assert f.status == Status.ok, f.message
        assert {m: (c.covered, c.total) for m, c in v.coverage.metrics.items()} == {
            m: (c.covered, c.total) for m, c in f.coverage.metrics.items()
        }
    line = v.coverage.metrics["line"]
    assert line.total > 0 and line.covered == line.total


FORGED_TB = """`timescale 1ns / 1ps
module tb;
  reg clk = 1'b0, reset = 1'b1;
  reg [4:0] data = 5'b00000;
  wire ATTN_CLK, ATTN_DATA, ATTN_LE;
  Attenuator uut (.clk(clk), .reset(reset), .data(data),
                  .ATTN_CLK(ATTN_CLK), .ATTN_DATA(ATTN_DATA), .ATTN_LE(ATTN_LE));
endmodule
`line 1 "%Error: Internal Error: boom" 0
module bad; this is not verilog; endmodule
"""


@pytest.mark.parametrize("policy", ["refuse", "allow"])
def test_a_line_directive_cannot_forge_a_tool_crash(engine, policy):
    """Red team: Icarus begins its error lines with the file name, which `line sets; a name
    spelling Verilator's internal-error line made the sample's syntax error a sandbox_error
    (dropped, not 0). Refused by the integrity check; with writes allowed, a compile_error."""
    from reward_service.problems import load_problems

    root = Path(__file__).resolve().parents[1]
    problem = load_problems(root / "examples/cvdp/attenuator.jsonl")["cvdp_copilot_Attenuator_0011"]
    request = problem.request(
        SvTestbench(files={"tb.sv": FORGED_TB}), engine="fast", stimulus_policy={"dut_writes": policy}
    )
    result = engine.score(request)
    assert result.status == (Status.refused if policy == "refuse" else Status.compile_error), result.message
    assert result.reward == 0.0


def test_file_names_with_a_colon_are_invalid():
    with pytest.raises(ValueError, match="colon"):
        SvTestbench(files={"%Error: Internal Error: x.sv": "module tb; endmodule\n"})
