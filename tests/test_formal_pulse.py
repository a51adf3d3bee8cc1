"""A zero-width reset pulse on the one-edge model (reward_service.formal.prover, issue 23).

A testbench that writes ``rst_n = 0; rst_n = 1;`` in one time step wakes every
``always @(posedge clk or negedge rst_n)`` process on plain Icarus, which runs it after the
pulse ended, on its ``else`` branch, with no clock edge (IEEE 1800 4.7 lets the woken process
run then); Verilator sees no change of ``rst_n``. A model whose flip-flops move only at clock
edges proves ``q && !seen`` unreachable (``seen`` set by the same clock, no reset) although
Icarus covers it. The fast path now runs such a process only on an edge Verilator sees
(``fastcov/emulate.edge_processes``, tests/test_zero_width_pulse.py): neither engine covers the
point any more, and the model's pulse (``formal/pulses.py``) keeps it unproved, which is sound
(not tight). Counterexample first: the designs below, each with a one-clock variant the
one-edge model handles (the ticks model has the same case with a second clock edge,
tests/test_formal_ticks.py)."""

from __future__ import annotations

import pytest
from helpers import covered_keys, point_key, pulse_dut, pulse_tb, score_one_file

from reward_service.formal.prover import prove

#: name -> (design, testbench, (line, metric, detail) of the point the fast path covers)
PULSED = {
    # the reset register takes its `else` value at the pulse, `seen` (no reset) does not move
    "zw_reset.v": (
        pulse_dut(
            "zw_reset",
            "input clk, input rst_n, output reg q, output reg hit",
            "  always @(posedge clk or negedge rst_n) if (!rst_n) q <= 1'b0; else q <= 1'b1;",
        ),
        pulse_tb("zw_reset", "clk = 0, rst_n = 1", "q, hit", "#5 rst_n = 0; rst_n = 1;"),
        (7, "branch", "if"),
    ),
    # a register the process does not reset (a plain flip-flop in yosys's netlist) runs too
    "zw_unreset.v": (
        pulse_dut(
            "zw_unreset",
            "input clk, input rst_n, input d, output reg q, output reg r, output reg hit",
            "  always @(posedge clk or negedge rst_n) if (!rst_n) q <= 1'b0; else begin q <= 1'b1; r <= d; end",
            reg="r",
        ),
        pulse_tb("zw_unreset", "clk = 0, rst_n = 1, d = 1", "q, r, hit", "#5 rst_n = 0; rst_n = 1;"),
        (7, "branch", "if"),
    ),
    # an active-high reset with an enable (`$adffe`): the pulse loads `q` when `en` is 1
    "zw_enable.v": (
        pulse_dut(
            "zw_enable",
            "input clk, input rst, input en, output reg q, output reg hit",
            "  always @(posedge clk or posedge rst) if (rst) q <= 1'b0; else if (en) q <= 1'b1;",
        ),
        pulse_tb("zw_enable", "clk = 0, rst = 0, en = 1", "q, hit", "#5 rst = 1; rst = 0;"),
        (7, "branch", "if"),
    ),
}


@pytest.mark.parametrize("name", sorted(PULSED))
def test_the_one_edge_model_leaves_what_a_pulse_reaches(name):
    rtl, _, point = PULSED[name]
    result = prove({name: rtl})
    assert result.status == "proved" and result.model == "edges", result.reason
    assert point_key(name, point) not in result.unreachable


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PULSED))
def test_no_engine_covers_it_nor_a_proved_point(engine, name):
    """The engines agree on this testbench (neither runs the process at the pulse; the fast
    path did, Verilator did not) and neither covers a proved point."""
    rtl, tb, point = PULSED[name]
    dead = set(prove({name: rtl}).unreachable)
    covered = {}
    for engine_name in ("fast", "verilator"):
        scored = score_one_file(engine, name, rtl, tb, engine_name)
        assert scored.result.status == "ok", scored.result.message
        covered[engine_name] = covered_keys(scored)
        assert not covered[engine_name] & dead, sorted(covered[engine_name] & dead)
    assert covered["fast"] == covered["verilator"], sorted(covered["fast"] ^ covered["verilator"])
    assert point_key(name, point) not in covered["fast"]
