"""Combinational blocks at time 0 on the fast path: every ``always @(*)``/``always_comb`` runs
once at time 0 (Verilator settles before time advances) without Icarus 11's ``always_comb``,
which loops forever at time 0 on this design (a vector written then read bit by bit,
``syn = 0; ... syn[i] = syn[i] ^ d[j]``, next to another such block). The design is run on
real Verilator and on the fast path; their points must be equal, and so must the values the
testbench prints. Also: the time-0 trigger's declaration in modules that start with
``timeunit``/``timeprecision``, and blocks whose functions read a module ``string`` or
``event`` (no read of those can go into the block's ``@*``), stay on the fast path."""

from __future__ import annotations

import re

import pytest

from reward_service.fastcov.compare import diff_points

METRICS = ["line", "branch", "toggle"]

DUT = """\
module comb0(input logic [6:0] d, input logic [3:0] g_in,
             output logic [3:0] q, output logic [3:0] k, output logic [3:0] kc, output logic [2:0] s,
             output logic err);
  logic [2:0] syn; logic [6:0] fixed; logic [3:0] g;
  integer i, j, p, n;
  assign g = g_in;
  // reads g, which no caller passes: Verilator's combinational blocks wake on it
  function automatic logic [3:0] mix(input logic [3:0] v);
    return v ^ g;
  endfunction
  always_comb begin
    syn = 0;
    for (i = 0; i < 3; i = i + 1)
      for (j = 0; j < 7; j = j + 1)
        if ((j + 1) & (1 << i)) syn[i] = syn[i] ^ d[j];
  end
  always_comb err = |syn;
  always @(*) begin
    fixed = d;
    if (err) fixed[syn - 1] = ~fixed[syn - 1];
  end
  always_comb begin
    n = 0;
    for (p = 0; p < 7; p = p + 1)
      if ((p + 1) & p) begin q[n] = fixed[p]; n = n + 1; end
  end
  always @* k = mix(d[3:0]);
  always_comb kc = mix(4'd1);
  // reads only g_in, which stays 0 until 3: its value at 1 comes from the time-0 run
  always_comb begin
    s = 3'd5;
    if (g_in == 4'hf) s = 3'd2;
  end
endmodule
"""

TB = """\
module tb;
  logic [6:0] d; logic [3:0] g_in; wire [3:0] q, k, kc; wire [2:0] s; wire err;
  comb0 dut(.*);
  initial begin
    d = 0; g_in = 0;
    #1 $display("t1 q=%h k=%h kc=%h s=%h err=%b", q, k, kc, s, err);
    d = 7'h1; #1 $display("t2 q=%h k=%h kc=%h s=%h err=%b", q, k, kc, s, err);
    d = 7'h3; #1 $display("t3 q=%h k=%h kc=%h s=%h err=%b", q, k, kc, s, err);
    g_in = 4'h5; #1 $display("t4 q=%h k=%h kc=%h s=%h err=%b", q, k, kc, s, err);
    d = 7'h55; #1 $display("t5 q=%h k=%h kc=%h s=%h err=%b", q, k, kc, s, err);
    $finish;
  end
endmodule
"""


def request(engine_name: str, design: dict[str, str] | None = None, tb: str = TB) -> dict:
    return {
        "design": {"files": design or {"comb0.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "dut", "metrics": METRICS},
        "engine": engine_name,
        "limits": {"run_s": 20},
    }


def printed(log: str) -> list[str]:
    return re.findall(r"^t\d .*=.*$", log, flags=re.M)


def fast_equals_verilator(engine, design: dict[str, str] | None = None, tb: str = TB) -> tuple[list[str], list]:
    """Score on Verilator and on the fast path (which must not fall back); the points and the
    printed lines must be equal. Returns Verilator's printed lines and points."""
    reference_run = engine.scored(request("verilator", design, tb))
    reference = reference_run.result
    assert reference.status == "ok" and reference.engine == "verilator", reference.message + reference.log[-2000:]
    fast_run = engine.scored(request("fast", design, tb))
    fast = fast_run.result
    assert fast.status == "ok" and fast.engine == "fast" and not fast.fallback, (
        f"{fast.status} {fast.fallback} {fast.message}"
    )
    assert fast.ended_by == reference.ended_by
    lines = printed(reference.log)
    assert printed(fast.log) == lines
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(30)
    return lines, reference_run.points


@pytest.mark.slow
def test_comb_blocks_settle_at_time_zero_as_on_verilator(engine):
    lines, points = fast_equals_verilator(engine)
    assert len(lines) == 5 and lines[0].startswith("t1 q=0 k=0 kc=1 s=5"), lines
    assert any(not p.covered for p in points)  # s = 3'd2 never runs: the check can fail


# The DUT has no timeunit: the flag declarations (instrument.py) still go right after its header
TIMEUNIT_DUT = """\
module tu0(input logic [3:0] a, input logic sel, output logic [3:0] y, output logic hit);
  logic [3:0] base;
  // reads only sel, which stays 0 until 2: base at 1 comes from the time-0 run
  always_comb begin
    base = 4'd9;
    if (sel) base = 4'd2;
  end
  always @(*) begin
    y = base ^ a;
    hit = 1'b0;
    if (y == 4'hf) hit = 1'b1;
  end
endmodule
"""

# timeunit/timeprecision must be a module's first items: the trigger goes after them
TIMEUNIT_TB = """\
module tb;
  timeunit 1ns;
  timeprecision 1ps;
  logic [3:0] a, x = 4'd6; logic sel = 1'b0; wire [3:0] y; wire hit;
  tu0 dut(.*);
  // x keeps its declaration value until 1: a at 1 comes from the time-0 run
  always @* a = x;
  initial begin
    #1 $display("t1 y=%h hit=%b", y, hit);
    x = 4'd3; #1 $display("t2 y=%h hit=%b", y, hit);
    sel = 1'b1; #1 $display("t3 y=%h hit=%b", y, hit);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_time_zero_trigger_follows_timeunit_items(engine):
    lines, _ = fast_equals_verilator(engine, {"tu0.sv": TIMEUNIT_DUT}, TIMEUNIT_TB)
    # 9 ^ 6: both blocks ran at time 0, the testbench's and the DUT's
    assert lines == ["t1 y=f hit=1", "t2 y=a hit=0", "t3 y=1 hit=0"], lines


# The functions read a string and an event: neither can be an `if` condition on Icarus (a
# string aborts vvp at run time, an event does not compile), so those blocks stay always_comb.
NONINTEGRAL_DUT = """\
module sel4(input logic [3:0] a, output logic [1:0] r);
  always_comb begin
    r = 2'd0;
    if (a == 4'd3) r = 2'd1;
    else if (a == 4'hc) r = 2'd2;
  end
endmodule
"""

NONINTEGRAL_TB = """\
module tb;
  string mode;
  event ev;
  logic [3:0] a, b, x = 4'd3; wire [1:0] r;
  sel4 dut(.a(a), .r(r));
  function automatic logic [3:0] pick(input logic [3:0] v);
    return (mode == "inv") ? ~v : v;
  endfunction
  function automatic logic [3:0] note(input logic [3:0] v);
    -> ev;
    return v + 4'd1;
  endfunction
  always @* a = pick(x);
  always @* b = note(x);
  initial begin
    mode = "plain";
    #1 $display("t1 a=%h b=%h r=%h", a, b, r);
    mode = "inv"; #1 $display("t2 a=%h b=%h r=%h", a, b, r);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_function_reads_of_string_and_event_stay_on_fast_path(engine):
    lines, points = fast_equals_verilator(engine, {"sel4.sv": NONINTEGRAL_DUT}, NONINTEGRAL_TB)
    assert lines[0] == "t1 a=3 b=4 r=1", lines
    assert any(p.covered for p in points if p.metric == "branch")
