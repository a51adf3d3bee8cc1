"""cocotb stimulus (placeholder until the cocotb flow lands)."""
from __future__ import annotations


def run_cocotb(job, simulator: str):
    raise NotImplementedError("cocotb stimulus")
