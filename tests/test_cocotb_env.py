"""CocotbStimulus.env reaches the test; names that steer Python/cocotb/the loader are refused."""

from __future__ import annotations

import pytest
from samples import adversarial_counter

TEST = """import os, cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def knob(dut):
    await Timer(1, unit="ns")
    assert os.environ["SELECTION"] == "reset init_ready", os.environ.get("SELECTION")
"""


def _req(env: dict) -> dict:
    return {
        "design": {"files": {"dut_counter.v": adversarial_counter()}, "toplevel": "dut_counter"},
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


# Models print and write non-ASCII text (✓, →, ❌ in corpus logs). Steps run in the C locale;
# cocotb steps in C.UTF-8: cocotb 1.9 embeds Python the old way, which does not turn on UTF-8
# mode in the C locale (stdout and open() were ASCII: the print raised, the test failed).
UNICODE_TEST = """import cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def unicode_text(dut):
    await Timer(1, __UNIT__="ns")
    print("PRINTED ok \\u2713 \\u2192")
    with open("/work/u.txt", "w") as fh:
        fh.write("\\u00e9\\u2713")
    with open("/work/u.txt") as fh:
        assert fh.read() == "\\u00e9\\u2713"
"""


@pytest.mark.parametrize("runtime", ["2.x", "1.9"])
def test_a_test_prints_and_writes_utf8_on_both_runtimes(engine, runtime):
    if runtime == "1.9" and not engine.sandbox.toolchain().cocotb19_python:
        pytest.skip("no cocotb 1.9 runtime in this toolchain")
    text = UNICODE_TEST.replace("__UNIT__", "units" if runtime == "1.9" else "unit")
    r = engine.score(
        {
            "design": {"files": {"dut_counter.v": adversarial_counter()}, "toplevel": "dut_counter"},
            "stimulus": {"kind": "cocotb", "files": {"test_u.py": text}, "test_module": "test_u"},
            "simulator": "icarus",
        }
    )
    assert r.status == "ok" and len(r.tests) == 1 and r.tests[0].passed, r.message + r.log[-2000:]
    assert ("ran on cocotb 1.9" in r.message) == (runtime == "1.9"), r.message
    assert "PRINTED ok \u2713 \u2192" in r.log
