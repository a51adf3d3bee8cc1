"""A testbench that gives the DUT other parameter values than the design's own: expression
points depend on them, so the fast path hands such a sample to Verilator (fastcov/params.py).
Found this session: ``cnt #(.W(8), .EN_B(1), .N(5))`` scored expr 13/13 on the fast path where
Verilator reports 33/34."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("params, width", [("", "4"), ("#(.W(WIDTH))", "4"), ("#(4, 0, 2)", "4"),
                                           ("#(.W(2 + 2), .N(2))", "4")])
def test_the_design_own_values_keep_the_fast_path(params, width):
    assert overridden_parameters({"cnt.sv": DUT}, tb(params, width)) is None


def test_other_values_are_named():
    reason = overridden_parameters({"cnt.sv": DUT}, tb(**OVERRIDING))
    assert reason == ("the testbench instantiates cnt with EN_B=1, N=5, W=8, other than the design's "
                      "own parameter values (expression points depend on them)")


def test_defparam_is_elaborated():
    assert overridden_parameters({"cnt.sv": DUT}, tb(defparam="defparam dut.N = 3;")) == (
        "the testbench instantiates cnt with N=3, other than the design's own parameter values "
        "(expression points depend on them)")


def test_a_testbench_pyslang_cannot_parse_is_judged_by_its_text():
    broken = "module tb; cnt #(.W(8)) dut (); initial begin $display(\"x\") end endmodule\n"
    assert "tb.sv instantiates cnt with parameters" in overridden_parameters({"cnt.sv": DUT}, {"tb.sv": broken})
    plain = "module tb; cnt dut (); initial begin $display(\"x\") end endmodule\n"
    assert overridden_parameters({"cnt.sv": DUT}, {"tb.sv": plain}) is None


def test_a_sub_module_value_set_the_design_already_has_is_kept():
    """A DUT that instantiates a sub-module twice with two value sets (which the expr kind
    checked to give equal points): the testbench reusing either set is no override."""
    design = {"top.sv": """module leaf #(parameter P = 1) (input logic a, output logic y);
  assign y = a & (P > 0);
endmodule
module top (input logic a, output logic y0, output logic y1);
  leaf #(.P(1)) u0 (.a(a), .y(y0));
  leaf #(.P(2)) u1 (.a(a), .y(y1));
endmodule
"""}
    same = {"tb.sv": "module tb; logic a, y; leaf #(.P(2)) extra (.a(a), .y(y)); top dut (.a(a), .y0(), .y1()); endmodule\n"}
    assert overridden_parameters(design, same) is None
    other = {"tb.sv": same["tb.sv"].replace(".P(2)", ".P(7)")}
    assert "instantiates leaf with P=7" in overridden_parameters(design, other)


def test_instance_arrays_are_elaborated():
    array = {"tb.sv": "module tb; logic clk; cnt #(.W(8)) dut[0:1] (.clk(clk), .rst(1'b0), .d(), .q(), .hit()); endmodule\n"}
    assert "instantiates cnt with W=8" in overridden_parameters({"cnt.sv": DUT}, array)
    same = {"tb.sv": array["tb.sv"].replace(".W(8)", ".W(4)")}
    assert overridden_parameters({"cnt.sv": DUT}, same) is None


@pytest.mark.parametrize("header, use", [
    ("`define PARAMS #(.W(8), .EN_B(1))\n", "cnt `PARAMS dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));"),
    ("cnt #(.W(8)) dut (.clk(clk), .rst(rst), .d(d), .q(q), .hit(hit));\n", ""),
])
def test_overrides_behind_an_included_header_are_suspected(header, use):
    """pyslang is not given the testbench's headers: an `include makes the text decide, headers
    included (the review's cases: parameters from a header macro, an instance in a header)."""
    testbench = {"cfg.svh": header,
                 "tb.sv": f"`include \"cfg.svh\"\nmodule tb; logic clk, rst; logic [7:0] d, q; logic hit;\n"
                          f"{use}\nendmodule\n"}
    if not use:
        testbench["tb.sv"] = testbench["tb.sv"].replace("\nendmodule", "`include \"cfg.svh\"\nendmodule").replace(
            '`include "cfg.svh"\nmodule', "module", 1)
    reason = overridden_parameters({"cnt.sv": DUT}, testbench)
    assert reason is not None and "instantiates cnt with parameters (not elaborated here)" in reason


@pytest.mark.slow
def test_the_fast_engine_falls_back_and_equals_verilator(engine):
    request = {"design": {"files": {"cnt.sv": DUT}}, "coverage": {"scope": "dut"},
               "stimulus": {"kind": "sv_testbench", "files": tb(**OVERRIDING)}}
    fast = engine.score({**request, "engine": "fast"})
    reference = engine.score({**request, "engine": "verilator"})
    assert reference.status == "ok", reference.message
    got = {m: (c.covered, c.total) for m, c in reference.coverage.metrics.items()}
    assert got["expr"] == (33, 34) and got["toggle"] == (48, 48) and got["line"] == (6, 6), got
    assert fast.engine == "verilator" and fast.fallback.startswith("the testbench instantiates cnt with")
    assert fast.coverage == reference.coverage

    own = engine.score({"design": {"files": {"cnt.sv": DUT}}, "coverage": {"scope": "dut"}, "engine": "fast",
                        "stimulus": {"kind": "sv_testbench", "files": tb()}})
    assert own.status == "ok" and own.engine == "fast" and own.fallback is None, own.fallback


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


@pytest.mark.parametrize("text, why", [
    (FORGE, "tb.sv reads files (`$fscanf`)"),
    ('module tb; integer f; initial f = $fopen("x.txt", "r+"); endmodule', "tb.sv opens a file for reading (`$fopen` mode r+)"),
    ('module tb; integer f; string m = "r"; initial f = $fopen("x", m); endmodule', "mode not a literal"),
    ('module tb; initial $readmemh("m.hex", mem); endmodule', "tb.sv reads files (`$readmemh`)"),
])
def test_file_reading_testbenches_are_screened(text, why):
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files
    assert why in reads_files(SimpleNamespace(files={"tb.sv": text}))


@pytest.mark.parametrize("text", [
    'module tb; integer f; initial begin f = $fopen("log.txt", "w"); $fdisplay(f, "x"); end endmodule',
    'module tb; integer f; initial f = $fopen("log.txt"); endmodule',
    'module tb; initial $display("$fscanf $fopen(x, \\"r\\")"); // $readmemh("m", a)\nendmodule',
])
def test_writing_testbenches_keep_the_fast_path(text):
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files
    assert reads_files(SimpleNamespace(files={"tb.sv": text})) is None


def test_a_file_reading_testbench_is_scored_by_verilator(engine):
    result = engine.score({"design": {"files": {"cnt.sv": DUT}}, "engine": "fast",
                           "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
                           "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": FORGE}}})
    assert result.engine == "verilator" and result.fallback.startswith("tb.sv reads files (`$fscanf`)")
