"""Drives the inputs only after 5 ns and never sets sel to 0: item 2'b00 of each case is run by
the evaluation at time 0 alone."""

import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def test_late_inputs(dut):
    await Timer(5, unit="ns")
    for sel, a, y, z in ((1, 3, 0xC, 1), (2, 3, 0x6, 2), (3, 4, 0x2, 4)):
        dut.sel.value = sel
        dut.a.value = a
        await Timer(1, unit="ns")
        assert (int(dut.y.value), int(dut.z.value)) == (y, z), (sel, a)
