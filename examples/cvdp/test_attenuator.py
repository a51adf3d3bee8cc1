"""cocotb test for the CVDP Attenuator (examples/cvdp/Attenuator.sv, toplevel ``Attenuator``):
reset, then a few data values, each given time for LOAD -> SHIFT x5 -> LATCH; checks that every
change of ``data`` is latched (ATTN_LE pulses). Written by the reward-service team (Apache-2.0).

    reward-service score --design examples/cvdp/Attenuator.sv --cocotb examples/cvdp/test_attenuator.py \\
        --toplevel Attenuator --engine fast
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge


@cocotb.test()
async def latches_every_change(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.reset.value = 1
    dut.data.value = 0
    await ClockCycles(dut.clk, 4)
    dut.reset.value = 0
    latches = 0

    async def count_latches():
        nonlocal latches
        while True:
            await RisingEdge(dut.ATTN_LE)
            latches += 1

    cocotb.start_soon(count_latches())
    values = [0b10101, 0b01010, 0b11111, 0b00000, 0b00001]
    for value in values:
        dut.data.value = value
        await ClockCycles(dut.clk, 24)
    assert latches >= len(values) - 1, f"only {latches} latches for {len(values)} data changes"
