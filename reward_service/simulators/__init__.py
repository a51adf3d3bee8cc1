"""Simulator backends behind one interface (:class:`~.base.SimulatorBackend`)."""

from __future__ import annotations

from reward_service.simulators.base import SimulatorBackend
from reward_service.simulators.icarus import IcarusSimulator
from reward_service.simulators.verilator import VerilatorSimulator

#: name -> backend class (the request's ``simulator``).
SIMULATORS: dict[str, type[SimulatorBackend]] = {"verilator": VerilatorSimulator, "icarus": IcarusSimulator}


def get_simulator(name: str) -> SimulatorBackend:
    """The backend for ``name`` ("verilator" or "icarus"); raises KeyError otherwise."""
    return SIMULATORS[name]()
