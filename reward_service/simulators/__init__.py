"""Simulator backends behind one interface (:class:`~.base.SimulatorBackend`)."""

from __future__ import annotations

from reward_service.simulators.base import SimulatorBackend


def get_simulator(name: str) -> SimulatorBackend:
    """The backend for ``name`` ("verilator" or "icarus"); raises KeyError otherwise."""
    from reward_service.simulators.icarus import IcarusSimulator
    from reward_service.simulators.verilator import VerilatorSimulator

    return {"verilator": VerilatorSimulator, "icarus": IcarusSimulator}[name]()
