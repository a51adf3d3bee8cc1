"""Red-team session 12: probes of today's changes (clocking lowering, time-0 latch)."""

from __future__ import annotations

import pytest
from redteam import WIRE_DUT, attenuator_request, sv_request, toggle
from samples import attenuator_weak


# fastcov's per-module time-0 latch is an identifier in the DUT's instrumented text; a testbench
# forcing it through the hierarchy makes every watcher count time-0 changes as transitions.
@pytest.mark.parametrize("eng", ["fast", "auto"])
def test_forcing_fastcov_time0_latch_is_not_rewarded(engine, eng: str) -> None:
    honest = engine.score(attenuator_request(attenuator_weak(), "verilator"))
    forged = engine.score(
        attenuator_request(
            attenuator_weak().replace(
                "module tb_Attenuator;", "module tb_Attenuator;\n initial force uut.__rs_late0 = 1'b1;\n", 1
            ),
            eng,
        )
    )
    print(eng, forged.status, forged.message[:300] if forged.message else "", toggle(forged), toggle(honest))
    assert forged.status != "ok" or toggle(forged) == toggle(honest)


# Two blocks whose generated names collide: block `a` output `b_d`, block `a_b` output `d`
# both give rs_cbl_a_b_d_p. The lowered text then fails to build although the testbench is legal.
COLLIDE = """`timescale 1ns / 1ps
module tb_Attenuator;
  reg clk;
  reg reset;
  reg [4:0] data;
  reg [4:0] b_data;
  wire ATTN_CLK, ATTN_DATA, ATTN_LE;
  Attenuator uut (.clk(clk), .reset(reset), .data(data), .ATTN_CLK(ATTN_CLK), .ATTN_DATA(ATTN_DATA), .ATTN_LE(ATTN_LE));
  always #5 clk = ~clk;
  clocking a @(posedge clk); output b_data; endclocking
  clocking a_b @(posedge clk); output data; endclocking
  initial begin
    clk = 0; reset = 1; data = 0; b_data = 0;
    #20 reset = 0;
    @(a_b); a_b.data <= 5'b10101;
    @(a); a.b_data <= 5'b00011;
    #200;
    $finish;
  end
endmodule
"""


def test_lowering_name_collision_keeps_legal_testbench_building(engine) -> None:
    r = engine.score(attenuator_request(COLLIDE, "verilator"))
    print(r.status, (r.message or "")[:600], toggle(r))
    assert r.status == "ok", (r.status, r.message)


# A use of the block from a file without the word "clocking" is not seen by lower() (it reads
# only files containing it), so the block is lowered and the other file's drive no longer builds.
MAIN2 = (
    COLLIDE.replace("  clocking a @(posedge clk); output b_data; endclocking\n", "")
    .replace("    @(a); a.b_data <= 5'b00011;\n", "")
    .replace("  always #5 clk", "  drv d();\n  always #5 clk")
)
OTHER = """module drv;
  initial begin #60; @(tb_Attenuator.a_b); tb_Attenuator.a_b.data <= 5'b01010; end
endmodule
"""


def test_block_used_from_file_without_clocking_word(engine) -> None:
    req = attenuator_request(MAIN2, "verilator")
    req["stimulus"]["files"]["drv.sv"] = OTHER
    r = engine.score(req)
    print(r.status, (r.message or "")[:600], toggle(r))
    assert r.status == "ok", (r.status, r.message)


def test_control_same_files_with_clocking_word_in_comment(engine) -> None:
    req = attenuator_request(MAIN2, "verilator")
    req["stimulus"]["files"]["drv.sv"] = "// clocking\n" + OTHER
    r = engine.score(req)
    print(r.status, (r.message or "")[:600], toggle(r))
    assert r.status == "ok", (r.status, r.message)


# A testbench helper module's output port connected to the net a DUT output port drives: the
# helper's `assign o = ...` writes helper.o (a testbench symbol), and the connection `.o(ATTN_LE)`
# is an output connection (skipped by _assignment's EmptyArgument rule), so the port-net rule
# never sees a write of the DUT's output net.
def _helper_tb() -> str:
    return (
        attenuator_weak()
        .replace(
            "module tb_Attenuator;",
            "module drv2(output wire o1, output wire o2, output wire o3);\n"
            "  reg t = 0; always #3 t = ~t;\n  assign o1 = t; assign o2 = t; assign o3 = t;\nendmodule\n"
            "module tb_Attenuator;",
            1,
        )
        .replace(
            "  always #5 clk = ~clk;",
            "  drv2 h(.o1(ATTN_CLK), .o2(ATTN_DATA), .o3(ATTN_LE));\n  always #5 clk = ~clk;",
            1,
        )
    )


def _prim_tb() -> str:
    return attenuator_weak().replace(
        "  always #5 clk = ~clk;",
        "  reg t = 0; always #3 t = ~t;\n  buf b1(ATTN_CLK, t); buf b2(ATTN_DATA, t); buf b3(ATTN_LE, t);\n  always #5 clk = ~clk;",
        1,
    )


@pytest.mark.parametrize("form", ["helper_module", "primitive"])
@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_driving_dut_output_net_through_instance_output(engine, form: str, eng: str) -> None:
    tb = _helper_tb() if form == "helper_module" else _prim_tb()
    honest = engine.score(attenuator_request(attenuator_weak(), eng))
    r = engine.score(attenuator_request(tb, eng))
    print(form, eng, r.status, (r.message or "")[:400], toggle(r), toggle(honest))
    assert r.status != "ok" or toggle(r)[0] <= toggle(honest)[0], (r.status, toggle(r), toggle(honest))


# The testbench drives the net y of WIRE_DUT (redteam.py) with a stronger driver of its own.
WIRE_TB = """`timescale 1ns/1ps
module tb;
  reg clk = 0, rst = 1; wire y;
  d dut(.clk(clk), .rst(rst), .y(y));
  always #5 clk = ~clk;
  initial begin #20 rst = 0; #200 $finish; end
endmodule
"""
WIRE_FORGES = {
    "helper_output": WIRE_TB.replace(
        "module tb;",
        "module h(output o); reg t = 0; always #3 t = ~t; assign (supply1, supply0) o = t; endmodule\nmodule tb;",
    ).replace("  always #5", "  h hh(.o(y));\n  always #5"),
    "strong_buf": WIRE_TB.replace(
        "  always #5", "  reg t = 0; always #3 t = ~t;\n  buf (supply1, supply0) b(y, t);\n  always #5"
    ),
    "pullup": WIRE_TB.replace("  always #5", "  pullup (supply1) p(y);\n  always #5"),
}


@pytest.mark.parametrize("form", sorted(WIRE_FORGES))
@pytest.mark.parametrize("eng", ["fast", "verilator", "auto"])
def test_stronger_driver_on_dut_output_wire(engine, form: str, eng: str) -> None:
    honest = engine.score(sv_request(WIRE_DUT, WIRE_TB, "dut", eng))
    r = engine.score(sv_request(WIRE_DUT, WIRE_FORGES[form], "dut", eng))
    print("\nRES", form, eng, r.status, (r.message or "")[:300], toggle(r), toggle(honest), honest.status)
    assert r.status != "ok" or toggle(r)[0] <= toggle(honest)[0], (r.status, toggle(r), toggle(honest))


def test_control_plain_assign_to_dut_output_wire_is_refused(engine) -> None:
    tb = WIRE_TB.replace(
        "  always #5", "  reg t = 0; always #3 t = ~t;\n  assign (supply1, supply0) y = t;\n  always #5"
    )
    r = engine.score(sv_request(WIRE_DUT, tb, "dut", "fast"))
    print("\nRES control", r.status, (r.message or "")[:300])
    assert r.status == "refused"


WIRE_FORGES_MORE = {
    "helper_inout": WIRE_TB.replace(
        "module tb;",
        "module h2(inout io); reg t = 0; always #3 t = ~t; assign (supply1, supply0) io = t; endmodule\nmodule tb;",
    ).replace("  always #5", "  h2 hh(.io(y));\n  always #5"),
    "tran": WIRE_TB.replace(
        "  always #5",
        "  reg t = 0; always #3 t = ~t; wire (supply1, supply0) z; assign (supply1, supply0) z = t;\n"
        "  tran tr(y, z);\n  always #5",
    ),
}


@pytest.mark.parametrize("form", sorted(WIRE_FORGES_MORE))
@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_stronger_driver_on_dut_output_wire_more(engine, form: str, eng: str) -> None:
    honest = engine.score(sv_request(WIRE_DUT, WIRE_TB, "dut", eng))
    r = engine.score(sv_request(WIRE_DUT, WIRE_FORGES_MORE[form], "dut", eng))
    print("\nRES", form, eng, r.status, (r.message or "")[:300], toggle(r), toggle(honest))
    assert r.status != "ok" or toggle(r)[0] <= toggle(honest)[0], (r.status, toggle(r), toggle(honest))


# A constant zero divisor: opt_expr (run by prep, before the division techmap) replaces a
# divide-by-zero cell with an undef driver, so the techmap never sees it; what the proof's
# model does with that x decides whether the arm (`a / 0 == 0`, Verilator's value) is "proved".
DIV_CONST0 = """module dz(input clk, input [3:0] a, output reg hit, output reg [3:0] r);
  wire [3:0] q = a / 4'd0;
  wire [3:0] m = a % 4'd0;
  always @(posedge clk) begin
    hit <= 1'b0;
    if (q == 4'd0 && a == 4'd5) hit <= 1'b1;
    r <= (a == 4'd5) ? m : 4'd9;
  end
endmodule
"""


def test_constant_zero_divisor_is_not_proved_unreachable():
    from test_formal import prove

    proof = prove({"dz.sv": DIV_CONST0})
    print("\nRES", proof.status, getattr(proof, "reason", ""), sorted(proof.unreachable))
    proved = set(proof.unreachable)
    assert ("dz.sv", 6, "branch", "if") not in proved
    assert not {k for k in proved if k[2] == "toggle" and k[3].startswith(("hit", "r[0]", "r[1]", "r[2]", "r[3]"))}
