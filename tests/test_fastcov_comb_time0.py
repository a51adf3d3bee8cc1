"""Combinational blocks at time 0 on the fast path: every ``always @(*)``/``always_comb`` runs
once at time 0 (Verilator settles before time advances) without Icarus 11's ``always_comb``,
which loops forever at time 0 on this design (a vector written then read bit by bit,
``syn = 0; ... syn[i] = syn[i] ^ d[j]``, next to another such block). The design is run on
real Verilator and on the fast path; their points must be equal, and so must the values the
testbench prints."""

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


def request(engine_name: str) -> dict:
    return {
        "design": {"files": {"comb0.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB}},
        "coverage": {"scope": "dut", "metrics": METRICS},
        "engine": engine_name,
        "limits": {"run_s": 20},
    }


def printed(log: str) -> list[str]:
    return re.findall(r"^t\d q=.*$", log, flags=re.M)


@pytest.mark.slow
def test_comb_blocks_settle_at_time_zero_as_on_verilator(engine):
    reference_run = engine.scored(request("verilator"))
    reference = reference_run.result
    assert reference.status == "ok" and reference.engine == "verilator", reference.message + reference.log[-2000:]
    fast_run = engine.scored(request("fast"))
    fast = fast_run.result
    assert fast.status == "ok" and fast.engine == "fast", f"{fast.status} {fast.fallback} {fast.message}"
    assert fast.ended_by == reference.ended_by
    lines = printed(reference.log)
    assert len(lines) == 5 and lines[0].startswith("t1 q=0 k=0 kc=1 s=5"), reference.log[-2000:]
    assert printed(fast.log) == lines
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(30)
    assert any(not p.covered for p in reference_run.points)  # s = 3'd2 never runs: the check can fail
