"""Red team, cocotb: writing the toplevel's output ports (docs/integrity-cocotb.md).

An output is DUT state: a deposit on an ``output reg`` holds the test's value until the DUT's
next assignment, and the DUT reads it. Passed on (policy ``allow``), ``dut.busy.value = 1`` on
the design below makes the DUT count (branch 5/6, toggle 13/16, reward 1.8819 on the fast path,
both cocotb runtimes) where the test drove nothing that could (branch 4/6, toggle 4/16, reward
1.6389); Verilator ignored the same write, so the engines disagreed too. Guarded (the default
policy), the write is dropped with a note naming the port: every engine scores the honest
stimulus's numbers.
"""

from __future__ import annotations

import pytest
from test_integrity_cocotb import request as attenuator_request

#: `busy` is set only by `go`, which the test never raises; `level` counts while `busy`.
DESIGN = """module OutTop (input clk, input rst, input go, output reg [3:0] level, output reg busy);
  always @(posedge clk)
    if (rst) begin
      level <= 4'd0;
      busy <= 1'b0;
    end else begin
      if (go) busy <= 1'b1;
      if (busy) level <= level + 4'd1;
    end
endmodule
"""
TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles


@cocotb.test()
async def drive(dut):
    cocotb.start_soon(Clock(dut.clk, 10, {unit}="ns").start())
    dut.rst.value = 1
    dut.go.value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
{hack}    await ClockCycles(dut.clk, 20)
"""
HACK = "    dut.busy.value = 1\n"
#: (reward, branch covered, toggle covered) of the honest stimulus, and with the write passed on
HONEST = (1.6389, 4, 4)
PAID = (1.8819, 5, 13)


def request(hack: str, engine: str, runtime: str, policy: str | None = None) -> dict:
    unit = "units" if runtime == "cocotb-1.9" else "unit"
    req = attenuator_request(TEST.format(unit=unit, hack=hack), engine, runtime, policy)
    req["design"] = {"files": {"OutTop.sv": DESIGN}}
    req["stimulus"]["toplevel"] = "OutTop"
    return req


def numbers(result) -> tuple[float, int, int]:
    assert result.status.value == "ok" and not result.violations, (result.status, result.message)
    metrics = result.coverage.metrics
    return round(result.reward, 4), metrics["branch"].covered, metrics["toggle"].covered


@pytest.mark.parametrize("runtime", ["cocotb-2.1", "cocotb-1.9"])
def test_fast_an_output_write_is_dropped_and_pays_nothing(engine, runtime):
    assert numbers(engine.score(request("", "fast", runtime))) == HONEST
    assert numbers(engine.score(request(HACK, "fast", runtime, policy="allow"))) == PAID  # the hole
    guarded = engine.score(request(HACK, "fast", runtime))
    assert numbers(guarded) == HONEST
    assert "1 write(s) into the DUT's output ports were ignored (OutTop.busy;" in guarded.message, guarded.message


@pytest.mark.slow
def test_verilator_an_output_write_is_dropped(engine):
    guarded = engine.score(request(HACK, "verilator", "cocotb-2.1"))
    assert numbers(guarded) == HONEST == numbers(engine.score(request("", "verilator", "cocotb-2.1")))
    assert "write(s) into the DUT's output ports were ignored (TOP.busy;" in guarded.message, guarded.message


def test_an_output_read_and_an_input_write_are_not_touched(engine):
    """Reading an output and driving inputs (the control): no note, the honest numbers."""
    control = "    assert dut.busy.value == 0\n    dut.go.value = 0\n"
    result = engine.score(request(control, "fast", "cocotb-2.1"))
    assert numbers(result) == HONEST and "output ports" not in result.message, result.message
