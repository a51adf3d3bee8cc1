"""A testbench that `includes a design file is preprocessed before it: a macro the testbench
`defines and the design reads (here the counter's width, `ifndef CW) would change the DUT and so
its coverage (reward 1.85 -> 2.0 by shrinking the counter to 2 bits). Such stimulus is
invalid_input; an include without such a macro scores as its twin that does not include."""

from __future__ import annotations

import pytest

from reward_service.models import ScoreRequest

DUT = """`ifndef CW
`define CW 8
`endif
module cnt (input clk, input rst, output reg [`CW-1:0] q);
  always @(posedge clk) if (rst) q <= 0; else q <= q + 1'b1;
endmodule
"""
TB = """{pre}module tb;
  reg clk = 0, rst = 1; wire [7:0] q;
  cnt dut (.clk(clk), .rst(rst), .q(q));
  always #5 clk = ~clk;
  initial begin #12 rst = 0; #100 $finish; end
endmodule
"""


def score(engine, tb: str):
    return engine.score(
        {
            "design": {"files": {"cnt.v": DUT}},
            "engine": "verilator",
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "coverage": {"scope": "dut"},
        }
    )


def test_a_testbench_macro_read_by_an_included_design_file_is_refused(engine):
    result = score(engine, TB.format(pre='`define CW 2\n`include "cnt.v"\n'))
    assert result.status == "invalid_input", (result.status, result.message)
    assert "CW" in result.message and "cnt.v" in result.message, result.message


def test_an_include_without_such_macros_scores_as_its_twin(engine):
    included = score(engine, TB.format(pre='`define RS_OWN 1\n`include "cnt.v"\n'))
    twin = score(engine, TB.format(pre=""))
    assert included.status == twin.status == "ok", (included.message, twin.message)
    assert {m: (c.covered, c.total) for m, c in included.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in twin.coverage.metrics.items()
    }
    assert twin.coverage.metrics["toggle"].total == 20  # 8-bit q: the design's own width


FOREIGN_DESIGN = "module d(input clk, input a, output reg q); always @(posedge clk) q <= a; endmodule\n"
FOREIGN_TB = """{pre}
module tb; reg clk = 0, a = 0; wire q; d dut(.clk(clk), .a(a), .q(q));
`include {path}
initial begin #10 a = 1; #10 clk = 1; #10 $finish; end
endmodule
"""


@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
@pytest.mark.parametrize(
    "pre,path",
    [
        ('`define DIR /etc\n`define F `"`DIR/hostname`"', "`F"),  # a path no text check sees
        ("", '"../../../../../../../../etc/hostname"'),
    ],
    ids=["macro-built", "dot-dot"],
)
def test_an_include_of_a_host_file_is_refused_on_every_engine(engine, engine_name, pre, path):
    """hdl.foreign_files: the parse read a file that is not one of the request's; nothing of it
    may reach the result (its text could leak through a message or a coverage count)."""
    result = engine.score(
        ScoreRequest.model_validate(
            {
                "design": {"files": {"d.sv": FOREIGN_DESIGN}},
                "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": FOREIGN_TB.format(pre=pre, path=path)}},
                "simulator": "verilator",
                "engine": engine_name,
                "coverage": {"scope": "dut"},
            }
        )
    )
    assert result.status == "refused", result.message
    assert [(v.kind, v.target) for v in result.violations] == [("include_outside_request", "/etc/hostname")]


def test_an_include_of_the_requests_own_file_is_not_foreign(engine):
    tb = FOREIGN_TB.format(pre="", path='"stim.svh"').replace("initial begin", "initial begin `STEP")
    result = engine.score(
        ScoreRequest.model_validate(
            {
                "design": {"files": {"d.sv": FOREIGN_DESIGN}},
                "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb, "stim.svh": "`define STEP #1;\n"}},
                "simulator": "verilator",
                "engine": "fast",
                "coverage": {"scope": "dut"},
            }
        )
    )
    assert result.status == "ok" and not result.violations, result.message
