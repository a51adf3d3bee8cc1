"""CocotbStimulus.env reaches the test; names that steer Python/cocotb/the loader are refused."""

from __future__ import annotations

import pytest
from conftest import ADVERSARIAL

COUNTER = (ADVERSARIAL / "12-hang-no-finish-zero-delay" / "dut_counter.v").read_text()
TEST = """import os, cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def knob(dut):
    await Timer(1, unit="ns")
    assert os.environ["SELECTION"] == "reset init_ready", os.environ.get("SELECTION")
"""


def _req(env: dict) -> dict:
    return {
        "design": {"files": {"dut_counter.v": COUNTER}, "toplevel": "dut_counter"},
        "stimulus": {"kind": "cocotb", "files": {"test_knob.py": TEST}, "test_module": "test_knob", "env": env},
        "simulator": "icarus",
    }


def test_env_reaches_the_test(engine):
    r = engine.score(_req({"SELECTION": "reset init_ready"}))
    assert r.status == "ok" and len(r.tests) == 1 and r.tests[0].passed, r.log


def test_without_env_the_same_test_fails(engine):
    r = engine.score(_req({}))
    assert r.status == "ok" and not r.tests[0].passed


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PYTHONPATH", "COCOTB_TEST_MODULES", "PATH", "PYTEST_PLUGINS", "lower"])
def test_reserved_or_bad_names_are_invalid_input(engine, name):
    r = engine.score(_req({name: "x"}))
    assert r.status == "invalid_input" and name in r.message
