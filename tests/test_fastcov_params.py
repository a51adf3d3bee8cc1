"""A testbench that gives the DUT other parameter values than the design's own: expression
points and the sampled signals depend on them, so the fast path instruments the DUT under the
testbench's elaboration (fastcov/params.py, instrument(context=...)) and must then report
exactly Verilator's points. Found in an earlier session: ``cnt #(.W(8), .EN_B(1), .N(5))``
scored expr 13/13 on the DUT's own point set where Verilator reports 33/34."""

from __future__ import annotations

import pytest
from conftest import ALLOW_DUT_WRITES

from reward_service.fastcov.params import overridden_parameters

DUT = """module cnt #(parameter W = 4, parameter EN_B = 0, parameter N = 2)
  (input logic clk, input logic rst, input logic [W-1:0] d, output logic [W-1:0] q, output logic hit);
  always_ff @(posedge clk) begin
    if (rst) q <= '0;
    else if (d[0] && d[W-1]) q <= q + d;
    else q <= q ^ d;
  end
  generate if (EN_B) begin : g
    always_comb begin
      if (q[1] & d[2]) hit = 1'b1;
      else hit = (q == {W{1'b1}}) || d[1];
    end
  end else begin : ng
    assign hit = 1'b0;
  end endgenerate
  genvar i;
  logic [N-1:0] x;
  for (i = 0; i < N; i++) begin : lp
    always_ff @(posedge clk) if (d[i] | q[i]) x[i] <= ~x[i];
  end
endmodule
"""

TB = """module tb;
  localparam int WIDTH = {width};
  logic clk = 0, rst = 1; logic [WIDTH-1:0] d, q; logic hit;
  cnt {params} dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));
  {defparam}
  always #5 clk = ~clk;
  initial begin
    d = 0; #12 rst = 0;
    repeat (40) begin @(negedge clk); d = $urandom; end
    $finish;
  end
endmodule
"""

OVERRIDING = {"params": "#(.W(WIDTH), .EN_B(1), .N(5))", "width": "8", "defparam": ""}


def tb(params: str = "", width: str = "4", defparam: str = "") -> dict[str, str]:
    return {"tb.sv": TB.format(params=params, width=width, defparam=defparam)}


@pytest.mark.parametrize(
    "params, width", [("", "4"), ("#(.W(WIDTH))", "4"), ("#(4, 0, 2)", "4"), ("#(.W(2 + 2), .N(2))", "4")]
)
def test_the_design_own_values_keep_the_fast_path(params, width):
    assert overridden_parameters({"cnt.sv": DUT}, tb(params, width)) is None


def test_other_values_are_named():
    reason = overridden_parameters({"cnt.sv": DUT}, tb(**OVERRIDING))
    assert (
        reason == "the testbench instantiates cnt with EN_B=1, N=5, W=8, other than the design's own parameter values"
    )


def test_defparam_is_elaborated():
    assert overridden_parameters({"cnt.sv": DUT}, tb(defparam="defparam dut.N = 3;")) == (
        "the testbench instantiates cnt with N=3, other than the design's own parameter values"
    )


def test_a_testbench_pyslang_cannot_parse_is_judged_by_its_text():
    broken = 'module tb; cnt #(.W(8)) dut (); initial begin $display("x") end endmodule\n'
    assert "tb.sv instantiates cnt with parameters" in overridden_parameters({"cnt.sv": DUT}, {"tb.sv": broken})
    plain = 'module tb; cnt dut (); initial begin $display("x") end endmodule\n'
    assert overridden_parameters({"cnt.sv": DUT}, {"tb.sv": plain}) is None


def test_a_sub_module_value_set_the_design_already_has_is_kept():
    """A DUT that instantiates a sub-module twice with two value sets (which the expr kind
    checked to give equal points): the testbench reusing either set is no override."""
    design = {
        "top.sv": """module leaf #(parameter P = 1) (input logic a, output logic y);
  assign y = a & (P > 0);
endmodule
module top (input logic a, output logic y0, output logic y1);
  leaf #(.P(1)) u0 (.a(a), .y(y0));
  leaf #(.P(2)) u1 (.a(a), .y(y1));
endmodule
"""
    }
    same = {
        "tb.sv": "module tb; logic a, y; leaf #(.P(2)) extra (.a(a), .y(y)); top dut (.a(a), .y0(), .y1()); endmodule\n"
    }
    assert overridden_parameters(design, same) is None
    other = {"tb.sv": same["tb.sv"].replace(".P(2)", ".P(7)")}
    assert "instantiates leaf with P=7" in overridden_parameters(design, other)


def test_instance_arrays_are_elaborated():
    array = {
        "tb.sv": "module tb; logic clk; cnt #(.W(8)) dut[0:1] (.clk(clk), .rst(1'b0), .d(), .q(), .hit()); endmodule\n"
    }
    assert "instantiates cnt with W=8" in overridden_parameters({"cnt.sv": DUT}, array)
    same = {"tb.sv": array["tb.sv"].replace(".W(8)", ".W(4)")}
    assert overridden_parameters({"cnt.sv": DUT}, same) is None


@pytest.mark.parametrize(
    "header, use",
    [
        ("`define PARAMS #(.W(8), .EN_B(1))\n", "cnt `PARAMS dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));"),
        ("cnt #(.W(8)) dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));\n", ""),
    ],
)
def test_overrides_behind_an_included_header_are_elaborated(header, use):
    """pyslang reads the testbench's headers where it includes them (the review's cases:
    parameters from a header macro, an instance in a header): the values are known (issue 20;
    before, only the text could suspect an override)."""
    testbench = {
        "cfg.svh": header,
        "tb.sv": f'`include "cfg.svh"\nmodule tb; logic clk, rst; logic [7:0] d, q; logic hit;\n{use}\nendmodule\n',
    }
    if not use:
        testbench["tb.sv"] = (
            testbench["tb.sv"]
            .replace("\nendmodule", '`include "cfg.svh"\nendmodule')
            .replace('`include "cfg.svh"\nmodule', "module", 1)
        )
    reason = overridden_parameters({"cnt.sv": DUT}, testbench)
    assert reason is not None and "the testbench instantiates cnt with" in reason and "W=8" in reason, reason
    same = {n: t.replace("W(8)", "W(4)").replace("EN_B(1)", "EN_B(0)") for n, t in testbench.items()}  # its own
    assert overridden_parameters({"cnt.sv": DUT}, same) is None


def test_an_include_of_a_file_the_request_lacks_is_suspected():
    """An `include naming no file of the request is not read from the service's disk: the
    text decides, as for any testbench pyslang cannot elaborate."""
    testbench = {"tb.sv": '`include "/etc/cfg.svh"\nmodule tb; cnt #(.W(8)) dut (); endmodule\n'}
    reason = overridden_parameters({"cnt.sv": DUT}, testbench)
    assert reason is not None and "instantiates cnt with parameters (not elaborated here)" in reason


METRICS = ["line", "branch", "toggle", "expr"]


def _both(engine, design: dict[str, str], testbench: dict[str, str], scope: str = "dut"):
    """The sample scored with engine=fast and engine=verilator (scope ``scope``, all four code
    metrics), as :class:`~reward_service.scoring.Scored` runs; Verilator's result must be ok."""
    request = {
        "design": {"files": design},
        "coverage": {"scope": scope, "metrics": METRICS},
        "stimulus": {"kind": "sv_testbench", "files": testbench},
        "stimulus_policy": ALLOW_DUT_WRITES,  # the engines' agreement, defparam included
    }
    fast = engine.scored({**request, "engine": "fast"})
    reference = engine.scored({**request, "engine": "verilator"})
    assert reference.result.status == "ok" and reference.result.engine == "verilator", reference.result.message
    return fast, reference


def _assert_fast_equals(fast_run, reference_run) -> None:
    from reward_service.fastcov.compare import diff_points

    fast, reference = fast_run.result, reference_run.result
    assert fast.status == "ok", fast.message + fast.log[-2000:]
    assert fast.engine == "fast" and fast.fallback is None, fast.fallback
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(20)
    assert fast.coverage == reference.coverage and fast.uncovered == reference.uncovered


def _totals(result) -> dict[str, tuple[int, int]]:
    return {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}


@pytest.mark.slow
def test_overridden_parameters_are_measured_on_the_fast_path(engine):
    """Width, generate-if and generate-loop parameters: the fast path keeps the sample and its
    points equal Verilator's, which differ from the default values' (Verilator's totals, here
    recorded from its run, show the override matters)."""
    fast, reference = _both(engine, {"cnt.sv": DUT}, tb(**OVERRIDING))
    got = _totals(reference.result)
    assert got["expr"] == (33, 34) and got["toggle"] == (48, 48) and got["line"] == (6, 6), got
    _assert_fast_equals(fast, reference)

    own, own_reference = _both(engine, {"cnt.sv": DUT}, tb())
    _assert_fast_equals(own, own_reference)
    assert _totals(own.result)["expr"][1] != 34  # the defaults enumerate other expression points


# A baud-tick style DUT: a divider from two parameters, a width from $clog2, a parameter as a
# case item (and in an item expression), a generate case with a signal in each arm, and a
# sub-module whose parameter is derived from the DUT's.
TICK = """module stage #(parameter int W = 2) (input logic [W-1:0] a, input logic en, output logic [W-1:0] y);
  assign y = en ? ~a : a;
  logic any_bit;
  assign any_bit = |a && en;
endmodule
module tick #(parameter int CLK_FREQ = 100, parameter int BAUD = 10, parameter int MODE = 0)
  (input logic clk, input logic rst, input logic en, input logic [1:0] sel,
   output logic tick_o, output logic [3:0] y, output logic [MODE + 1:0] s);
  localparam int DIV = CLK_FREQ / BAUD;
  localparam int CW = $clog2(DIV);
  logic [CW-1:0] cnt;
  always_ff @(posedge clk) begin
    if (rst) cnt <= '0;
    else if (en && cnt == DIV - 1) cnt <= '0;
    else if (en) cnt <= cnt + 1'b1;
  end
  assign tick_o = en && (cnt == DIV - 1);
  always_comb begin
    case (sel)
      MODE: y = {cnt[0], tick_o, en, 1'b1};
      MODE + 1: y = (cnt[CW-1] || en) ? 4'h3 : 4'h4;
      default: y = 4'h0;
    endcase
  end
  generate case (MODE)
    0: begin : m0 logic z0; assign z0 = en & tick_o; end
    1: begin : m1 logic [1:0] z1; assign z1 = {en ^ tick_o, cnt[0] | en}; end
    default: begin : md end
  endcase endgenerate
  stage #(.W(MODE + 2)) u_stage (.a(cnt[MODE + 1:0]), .en(tick_o || sel[1]), .y(s));
endmodule
"""

TICK_TB = """module tb;
  logic clk = 0, rst = 1, en = 0, tick_o; logic [1:0] sel = 0; logic [3:0] y; logic [{sw}:0] s;
  logic [7:0] lfsr = 8'h5a;  // no $urandom: the two simulators' random sequences differ
  tick {params} dut (.clk(clk), .rst(rst), .en(en), .sel(sel), .tick_o(tick_o), .y(y), .s(s));
  always #5 clk = ~clk;
  initial begin
    #12 rst = 0;
    repeat (60) begin
      @(negedge clk); lfsr = {{lfsr[6:0], lfsr[7] ^ lfsr[5] ^ lfsr[4] ^ lfsr[3]}};
      en = lfsr[1:0] != 0; sel = lfsr[4:3];
    end
    $finish;
  end
endmodule
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "params, sw",
    [
        ("#(.CLK_FREQ(200), .BAUD(25), .MODE(1))", "2"),  # DIV 8, CW 3, generate arm m1, stage W 3
        ("#(200, 40)", "1"),  # positional, DIV 5, MODE kept
        ("#(.MODE(2), .CLK_FREQ(120))", "3"),  # the generate default arm, DIV 12, stage W 4
    ],
)
def test_parameter_shapes_equal_verilator(engine, params, sw):
    from reward_service.fastcov.params import testbench_values

    testbench = {"tb.sv": TICK_TB.format(params=params, sw=sw)}
    assert testbench_values({"tick.sv": TICK}, testbench) is not None  # an override indeed
    fast, reference = _both(engine, {"tick.sv": TICK}, testbench)
    _assert_fast_equals(fast, reference)


@pytest.mark.slow
def test_defparam_and_a_second_testbench_with_the_same_values(engine):
    """defparam is elaborated too; two testbenches giving the same values share one
    instrumentation (keyed by the values, not the testbench text) and both equal Verilator."""
    from reward_service.fastcov.backend import _CONTEXT_CACHE

    first = {"tb.sv": TICK_TB.format(params="", sw="1").replace("always #5", "defparam dut.CLK_FREQ = 160; always #5")}
    second = {"tb.sv": first["tb.sv"].replace("repeat (60)", "repeat (45)")}
    before = len(_CONTEXT_CACHE)
    for testbench in (first, second):
        fast, reference = _both(engine, {"tick.sv": TICK}, testbench)
        _assert_fast_equals(fast, reference)
    assert len(_CONTEXT_CACHE) == before + 1


@pytest.mark.slow
def test_two_value_sets_with_other_expression_points_fall_back(engine):
    """The testbench makes two instances with value sets whose expression points differ: one
    module copy per value set on Verilator, one flag table per module here, so Verilator
    scores it and the fallback says why."""
    testbench = {
        "tb.sv": TICK_TB.format(params="#(.MODE(1))", sw="2").replace(
            "  always #5",
            "  logic t2; logic [3:0] y2; logic [1:0] s2;\n"
            "  tick #(.MODE(0)) other (.clk(clk), .rst(rst), .en(en), .sel(sel), .tick_o(t2), .y(y2), .s(s2));\n"
            "  always #5",
        )
    }
    fast_run, reference_run = _both(engine, {"tick.sv": TICK}, testbench)
    fast, reference = fast_run.result, reference_run.result
    assert fast.engine == "verilator", fast.engine
    assert fast.fallback.startswith(
        "the fast path could not instrument the design under the testbench's parameter values: "
    ), fast.fallback
    assert "other expression points with other parameter values" in fast.fallback
    assert _totals(fast) == _totals(reference)


# -- testbenches that read files stay off the fast path (fastcov/screen.py) ------------------------
FORGE = """module tb;
  logic clk = 0, rst = 1; logic [3:0] d, q; logic hit; integer fd, n; string word, token;
  cnt dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));
  always #5 clk = ~clk;
  initial begin
    d = 0; #12 rst = 0; #20;
    fd = $fopen("/work/src/cnt.sv", "r");
    while (!$feof(fd)) begin n = $fscanf(fd, "%s", word); if (word.len() == 32) token = word; end
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize(
    "text, why",
    [
        (FORGE, "tb.sv reads files (`$fscanf`)"),
        (
            'module tb; integer f; initial f = $fopen("x.txt", "r+"); endmodule',
            "tb.sv opens a file for reading (`$fopen` mode r+)",
        ),
        ('module tb; integer f; string m = "r"; initial f = $fopen("x", m); endmodule', "mode not a literal"),
        ('module tb; initial $readmemh("m.hex", mem); endmodule', "tb.sv reads files (`$readmemh`)"),
    ],
)
def test_file_reading_testbenches_are_screened(text, why):
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files

    assert why in reads_files(SimpleNamespace(files={"tb.sv": text}))


@pytest.mark.parametrize(
    "text",
    [
        'module tb; integer f; initial begin f = $fopen("log.txt", "w"); $fdisplay(f, "x"); end endmodule',
        'module tb; integer f; initial f = $fopen("log.txt"); endmodule',
        'module tb; initial $display("$fscanf $fopen(x, \\"r\\")"); // $readmemh("m", a)\nendmodule',
    ],
)
def test_writing_testbenches_keep_the_fast_path(text):
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files

    assert reads_files(SimpleNamespace(files={"tb.sv": text})) is None


@pytest.mark.parametrize("name", ["/model", "sim.vvp", "/work/obj"])
def test_cocotb_tests_naming_the_fast_paths_files_are_screened(name):
    # a cached cocotb build is bound at /model; its per-run sim.vvp copy holds the run's token
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files

    text = f"import os\nprint(os.listdir('{name}'))\n"
    assert "test_x.py names the fast path's files" in reads_files(SimpleNamespace(files={"test_x.py": text}))


def test_a_file_reading_testbench_is_scored_by_verilator(engine):
    result = engine.score(
        {
            "design": {"files": {"cnt.sv": DUT}},
            "engine": "fast",
            "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": FORGE}},
        }
    )
    assert result.engine == "verilator" and result.fallback.startswith("tb.sv reads files (`$fscanf`)")
