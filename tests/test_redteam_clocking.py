"""Red-team regressions: a clocking block is no way to write into the DUT (docs/integrity.md).

A clocking ``output``/``inout`` item whose expression is DUT state (``output w =
dut.u_core.state_q;`` then ``cb.w <= 5``) writes that state at every drive; before kind
``clocking_output`` the check saw only a write to the clockvar (a testbench symbol) and scored
such a sample, on every policy. The same for a clocking output (or ``force``, ``assign``) on the
testbench net a DUT output port drives: that port's toggle points counted the testbench's
values. Scored through the engine on ``verilator`` and ``fast``: a refused sample simulates
nothing."""

from __future__ import annotations

import pytest

from reward_service.engine import Engine
from reward_service.settings import Settings

DUT = """\
module core(input logic clk, input logic rst, output logic [3:0] q);
  logic [3:0] state_q;
  always_ff @(posedge clk) if (rst) state_q <= 0; else state_q <= state_q + 1;
  assign q = state_q;
endmodule
module top(input logic clk, input logic rst, output logic [3:0] q);
  core u_core(.clk(clk), .rst(rst), .q(q));
endmodule
"""

HEAD = """\
module tb;
  logic clk = 0, rst = 1; wire [3:0] q;
  top dut(.clk(clk), .rst(rst), .q(q));
  always #5 clk = ~clk;
"""
END = "  initial begin #12 rst = 0; #60 $finish; end\nendmodule\n"

#: name -> (testbench, [(kind, target)] refused)
CASES = {
    "output_hierarchical": (
        HEAD + "  clocking cb @(posedge clk); output w = dut.u_core.state_q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.w <= 5; end\n" + END,
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
    "output_bit_select_drive": (
        HEAD + "  clocking cb @(posedge clk); output w = dut.u_core.state_q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.w[3] <= 1; end\n" + END,
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
    "inout_hierarchical": (
        HEAD + "  clocking cb @(posedge clk); inout w = dut.u_core.state_q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.w <= 5; end\n" + END,
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
    "default_clocking_cycle_delay": (
        HEAD + "  default clocking cb @(posedge clk); output w = {dut.u_core.state_q}; endclocking\n"
        "  initial begin ##3 cb.w <= 5; end\n" + END,
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
    "output_port_of_the_dut": (
        HEAD + "  clocking cb @(posedge clk); output w = dut.q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.w <= 5; end\n" + END,
        [("clocking_output", "tb.dut.q")],
    ),
    "interface_block": (
        HEAD
        + "  ifc i(clk);\n  initial begin repeat (3) @(i.cb); i.cb.w <= 5; end\n"
        + END
        + "interface ifc(input logic clk);\n"
        "  clocking cb @(posedge clk); output w = tb.dut.u_core.state_q; endclocking\nendinterface\n",
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
    "bind_with_a_clocking_block": (
        HEAD + END + "module spy(input logic clk);\n"
        "  clocking cb @(posedge clk); output s = state_q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.s <= 7; end\nendmodule\n"
        "bind core spy u_spy(.clk(clk));\n",
        [("bind", "core"), ("bind", "tb.dut.u_core.u_spy")],
    ),
    "bind_with_default_clocking": (
        HEAD + END + "module spy(input logic clk);\n"
        "  default clocking cb @(posedge clk); output s = state_q; endclocking\n"
        "  initial begin ##3 cb.s <= 7; end\nendmodule\n"
        "bind core spy u_spy(.clk(clk));\n",
        [("bind", "core"), ("bind", "tb.dut.u_core.u_spy")],
    ),
    # pyslang cannot bind `nosuch`: the syntax scan still refuses the item
    "syntax_fallback": (
        HEAD + "  clocking cb @(posedge clk); output w = dut.u_core.state_q; endclocking\n"
        "  initial begin repeat (3) @(cb); cb.w <= 5; nosuch = 1; end\n" + END,
        [("clocking_output", "tb.dut.u_core.state_q")],
    ),
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine(Settings(cache_dir=tmp_path_factory.mktemp("cache"), result_cache=False))


def _score(engine: Engine, tb: str, eng: str, design: str = DUT, policy: dict | None = None):
    request = {
        "design": {"files": {"top.sv": design}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "dut", "metrics": ["line", "toggle"]},
        "engine": eng,
    }
    if policy is not None:
        request["stimulus_policy"] = policy
    return engine.score(request)


@pytest.mark.parametrize("eng", ["fast", "verilator"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_clocking_writes_into_the_dut_are_refused(engine: Engine, case: str, eng: str) -> None:
    tb, refused = CASES[case]
    r = _score(engine, tb, eng)
    assert r.status == "refused", (r.status, r.message)
    assert sorted((v.kind, v.target) for v in r.violations) == sorted(refused)
    assert r.reward == 0.0


def test_an_explicit_refuse_policy_without_a_scope_refuses_too(engine: Engine) -> None:
    """``dut_writes: refuse`` set on the request refuses the same write."""
    tb, refused = CASES["output_hierarchical"]
    r = _score(engine, tb, "verilator", policy={"dut_writes": "refuse"})
    assert r.status == "refused"
    assert [(v.kind, v.target) for v in r.violations] == refused


def test_a_block_inside_the_dut_is_no_way_in(engine: Engine) -> None:
    """A clocking block the design declares, driven from the testbench (``dut.u_core.dcb.s <=``):
    the clockvar lies inside the DUT, so the drive is a write into it."""
    design = DUT.replace(
        "  assign q = state_q;\n", "  assign q = state_q;\n  clocking dcb @(posedge clk); output state_q; endclocking\n"
    )
    tb = HEAD + "  initial begin repeat (3) @(posedge clk); dut.u_core.dcb.state_q <= 5; end\n" + END
    r = _score(engine, tb, "verilator", design=design)
    assert r.status == "refused"
    assert [(v.kind, v.target) for v in r.violations] == [("nonblocking_assignment", "tb.dut.u_core.dcb.state_q")]


def test_driving_the_dut_inputs_through_a_block_stays_free(engine: Engine) -> None:
    """``output r = dut.rst`` drives an input port of the DUT instance, like the testbench's own
    port connection: scored (and lowered like any clocking drive), as on the fast path."""
    tb = (
        "module tb;\n  logic clk = 0, rst = 1; wire [3:0] q;\n  top dut(.clk(clk), .rst(rst), .q(q));\n"
        "  always #5 clk = ~clk;\n  clocking cb @(posedge clk); output rst; endclocking\n"
        "  initial begin @(cb); cb.rst <= 0; repeat (3) @(cb); #1 $finish; end\nendmodule\n"
    )
    r = _score(engine, tb, "verilator")
    assert r.status == "ok", r.message
    assert r.violations == []
    # reset released at t=5: state_q counts 1, 2, 3 at t=15, 25, 35
    uncovered = {u.detail for u in r.uncovered if u.metric == "toggle"}
    assert {"q[0]:0->1", "q[1]:0->1", "q[0]:1->0"}.isdisjoint(uncovered)
    assert "q[2]:0->1" in uncovered


OUT_DUT = """\
module core(input logic clk, input logic rst, output logic [3:0] q);
  always_ff @(posedge clk) if (rst) q <= 0; else q <= q;
endmodule
"""
OUT_HEAD = (
    "module tb;\n  logic clk = 0, rst = 1; wire [3:0] q;\n  core dut(.clk(clk), .rst(rst), .q(q));\n"
    "  always #5 clk = ~clk;\n"
)

#: A write to the testbench net a DUT output port drives: the port's toggle points counted it
#: (measured before the fix: toggle 12/12 on both engines against 4/12 without the write).
PORT_NET_CASES = {
    "clocking_output_on_the_port_net": (
        OUT_HEAD + "  clocking cb @(posedge clk); output q; endclocking\n"
        "  initial begin #12 rst = 0; @(cb); cb.q <= 4'hf; @(cb); cb.q <= 0; #60 $finish; end\nendmodule\n",
        [("clocking_output", "tb.dut.q")],
    ),
    "force_on_the_port_net": (
        OUT_HEAD + "  initial begin #12 rst = 0; #10 force q = 15; #10 force q = 0; #60 $finish; end\nendmodule\n",
        [("force", "tb.dut.q")],
    ),
    "force_on_a_bit_of_the_port_net": (
        OUT_HEAD + "  initial begin #12 rst = 0; #10 force q[1] = 1; #60 $finish; end\nendmodule\n",
        [("force", "tb.dut.q")],
    ),
}


@pytest.mark.parametrize("eng", ["fast", "verilator"])
@pytest.mark.parametrize("case", sorted(PORT_NET_CASES))
def test_writes_to_what_a_dut_output_drives_are_refused(engine: Engine, case: str, eng: str) -> None:
    tb, refused = PORT_NET_CASES[case]
    r = _score(engine, tb, eng, design=OUT_DUT)
    assert r.status == "refused", (r.status, r.message)
    assert sorted((v.kind, v.target) for v in r.violations) == sorted(refused)


@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_reading_what_a_dut_output_drives_stays_free(engine: Engine, eng: str) -> None:
    tb = OUT_HEAD + (
        "  logic [3:0] r;\n  initial begin #12 rst = 0; #10 r = q; $display(q); #60 $finish; end\nendmodule\n"
    )
    r = _score(engine, tb, eng, design=OUT_DUT)
    assert r.status == "ok", r.message
    assert (r.coverage.metrics["toggle"].covered, r.coverage.metrics["toggle"].total) == (4, 12)
