"""Bad input: each gets its own status and a clear message, and nothing else is disturbed
(issue #2, "Bad input"). Real simulators and the real sandbox throughout."""

from __future__ import annotations

import functools
import time

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files
from helpers import seconds_before_run
from samples import adversarial_counter

from reward_service.sandbox.cpu import wall_backstop

PID = "cvdp_copilot_Attenuator_0011"


# The shared cases are read when a test needs them, not at import: a checkout without them
# still collects this module (conftest skips the tests that read them).
@functools.cache
def good_tb() -> str:
    return (STIMULUS / PID / "good.sv").read_text()


@functools.cache
def rtl() -> dict[str, str]:
    return rtl_files(cid012_rows()[PID])


def request(tb: str | None = None, simulator: str = "verilator", scope: str | None = "uut", **extra) -> dict:
    """A request for the Attenuator with ``tb`` (good.sv unless given)."""
    return {
        "design": {"files": rtl()},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good_tb() if tb is None else tb}},
        "simulator": simulator,
        "coverage": {"scope": scope},
        **extra,
    }


def cocotb_request(test_py: str, simulator: str = "icarus", **extra) -> dict:
    return {
        "design": {"files": {"dut_counter.v": adversarial_counter()}, "toplevel": "dut_counter"},
        "stimulus": {"kind": "cocotb", "files": {"test_bad.py": test_py}, "test_module": "test_bad"},
        "simulator": simulator,
        "coverage": {"metrics": ["line"]},
        **extra,
    }


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_syntax_error_in_testbench_is_compile_error(isolated, simulator):
    broken = good_tb().replace("endmodule", "endmodule\nmodule oops(; endmodule", 1)
    r = isolated.score(request(broken, simulator))
    assert r.status == "compile_error"
    assert "tb.sv" in r.message and r.reward == 0.0
    assert "error" in r.log.lower()


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_wrong_instance_name_is_invalid_input(isolated, simulator):
    r = isolated.score(request(good_tb().replace(" uut", " dut_x"), simulator))
    assert r.status == "invalid_input"
    assert "`uut`" in r.message and "dut_x" in r.message


def test_missing_dut_instance_is_invalid_input(isolated):
    tb = "module tb; initial begin #10 $finish; end endmodule\n"
    r = isolated.score(request(tb))
    assert r.status == "invalid_input"
    assert "must instantiate the DUT as `uut`" in r.message and "no DUT instance" in r.message


def test_instance_check_also_uses_the_simulated_hierarchy(isolated):
    # `uut` exists, but it is another module's instance: the DUT itself sits under `other`.
    tb = good_tb().replace(" uut", " other") + "\nmodule dummy; endmodule\nmodule holder; dummy uut(); endmodule\n"
    tb = tb.replace("module tb_Attenuator;", "module tb_Attenuator;\n holder h();", 1)
    r = isolated.score(request(tb))
    assert r.status == "invalid_input"
    assert "not instantiated as `uut`" in r.message and "other" in r.message


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_run_time_limit_ends_within_limit_plus_2s(isolated, simulator):
    tb = good_tb().replace("$finish;", "")
    started = time.monotonic()
    r = isolated.score(request(tb, simulator, limits={"run_s": 2}))
    assert r.status == "timeout" and r.reward == 0.0
    # the limit counts CPU seconds (docs/sandbox.md): the step's CPU is bounded, its wall clock
    # stretches with the machine's load (7.3 s at load 8 for a 2 s budget), up to the backstop
    assert r.timings["run_cpu"] < (2 + 2) * 1000, r.timings
    # the whole scoring: nothing after the kill waits on it (1 s for measuring and finishing)
    assert time.monotonic() - started < wall_backstop(2) + seconds_before_run(r) + 1, r.timings


def test_memory_bomb_in_sv_is_resource_limit(isolated):
    # the queue is read: with the testbench built without coverage (rs_cov_off.vlt), Verilator
    # drops a loop whose only effect is on a variable nothing reads, and the run ends at $finish
    tb = good_tb().replace(
        "initial begin",
        "int q[$];\n  initial forever begin q.push_back(1); if (q.size() == 0) $stop; end\n  initial begin",
        1,
    )
    r = isolated.score(request(tb, limits={"run_s": 20, "memory_mb": 256}))
    assert r.status == "resource_limit"
    assert "memory" in r.message


def test_memory_bomb_in_cocotb_is_resource_limit(isolated):
    test_py = (
        "import cocotb\n\n@cocotb.test()\nasync def bomb(dut):\n"
        "    hog = []\n    while True:\n        hog.append(bytearray(64 << 20))\n"
    )
    # killed once over memory_mb; run_s leaves room for cocotb's start-up on a loaded machine (a
    # load of 10 on 2 cores: the whole test took 21 s under the 30 s limit this had)
    r = isolated.score(cocotb_request(test_py, limits={"run_s": 90, "memory_mb": 256}))
    assert r.status == "resource_limit" and "memory" in r.message


def test_fork_bomb_in_cocotb_is_resource_limit(isolated):
    test_py = (
        "import os, cocotb\n\n@cocotb.test()\nasync def bomb(dut):\n"
        "    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    )
    # The bomb never ends, so the run always ends at run_s; the process limit must have been hit
    # before that. run_s leaves room for cocotb's own start-up (~1.5 s idle, far more on a loaded
    # 2-core machine: with 5 s the bomb sometimes had not started yet and the run was a timeout;
    # with 20 s, at a load of 10 on 2 cores, the bomb had not started in 1 of 3 runs and started
    # but was not refused before the limit in the other 2).
    # dut_writes=allow: no write guard in the simulator, which would refuse every fork (EPERM;
    # test_a_cocotb_fork_bomb_starts_no_process): the sandbox's process limit is what stops it
    r = isolated.score(
        cocotb_request(test_py, limits={"run_s": 60, "processes": 32}, stimulus_policy={"dut_writes": "allow"})
    )
    assert r.status == "resource_limit" and "process limit" in r.message, (r.status, r.message)


def test_a_cocotb_fork_bomb_starts_no_process(isolated):
    """Under the default policy the write guard refuses every fork (EPERM), saying so once."""
    test_py = (
        "import os, cocotb\n\n@cocotb.test()\nasync def bomb(dut):\n    refused = 0\n"
        "    for _ in range(1000):\n        try:\n            os.fork()\n        except PermissionError:\n"
        "            refused += 1\n    assert False, f'refused {refused}'\n"
    )
    r = isolated.score(cocotb_request(test_py, limits={"run_s": 60}))
    assert r.status == "ok" and r.tests and "refused 1000" in (r.tests[0].message or ""), (r.status, r.message)
    assert r.log.count("fork refused") == 1, r.log[-2000:]


def test_cocotb_network_and_writes_outside_fail_inside_the_sandbox(isolated, tmp_path):
    test_py = """import os, socket, subprocess, cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def escape(dut):
    await Timer(1, unit="ns")
    rc = os.system("echo hi > ../escape_os_system.txt; echo hi > /tmp/escape_os_system_abs.txt")
    cocotb.log.info("os.system rc=%s", rc)
    try:
        socket.create_connection(("93.184.216.34", 80), timeout=2)
        cocotb.log.info("NETWORK REACHED")
    except OSError as exc:
        cocotb.log.info("network blocked: %s", exc)
    cocotb.log.info("uid=%d", os.getuid())
"""
    r = isolated.score(cocotb_request(test_py, limits={"run_s": 120}))  # cocotb's start-up under load
    assert r.status == "ok" and r.tests and r.tests[0].passed
    assert "network blocked" in r.log and "NETWORK REACHED" not in r.log
    assert "uid=65534" in r.log
    assert not (tmp_path / "escape_os_system.txt").exists()
    import os.path

    assert not os.path.exists("/tmp/escape_os_system_abs.txt")


# "-..."/"+..." names would reach iverilog/Verilator as options; a newline splits lcov records
@pytest.mark.parametrize(
    "name",
    ["../x.sv", "/etc/x.sv", "a/../../x.sv", "..", "", "-DX.sv", "+incdir+..sv", "./-Wno-fatal.sv", "a\nSF:b.sv"],
)
def test_path_traversal_in_file_names_is_invalid_input(engine, name):
    r = engine.score(
        {
            "design": {"files": {name: "module x; endmodule"}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good_tb()}},
        }
    )
    assert r.status == "invalid_input"
    assert "design.files" in r.message
    assert r.reward == 0.0


def empty_inputs() -> dict[str, dict]:
    return {
        "no-design-files": {
            "design": {"files": {}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good_tb()}},
        },
        "blank-testbench": {
            "design": {"files": rtl()},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "   \n"}},
        },
        "empty-completion": {"design": {"files": rtl()}, "stimulus": {"kind": "completion", "text": ""}},
        "empty-request": {},
    }


@pytest.mark.parametrize("bad", ["no-design-files", "blank-testbench", "empty-completion", "empty-request"])
def test_empty_input_is_invalid_input(engine, bad):
    r = engine.score(empty_inputs()[bad])
    assert r.status == "invalid_input" and r.message


def test_completion_without_code_is_invalid_input(engine):
    r = engine.score(
        {
            "design": {"files": rtl()},
            "coverage": {"scope": "uut"},
            "stimulus": {"kind": "completion", "text": "I would write a testbench that resets the DUT."},
        }
    )
    assert r.status == "invalid_input"
    assert "code" in r.message.lower()


def test_completion_is_extracted_and_scored(engine):
    text = f"Here is my testbench:\n```systemverilog\n{good_tb()}\n```\nIt covers every state."
    r = engine.score(
        {
            "design": {"files": rtl()},
            "coverage": {"scope": "uut"},
            "simulator": "verilator",
            "stimulus": {"kind": "completion", "text": text},
        }
    )
    assert r.status == "ok"
    assert r.coverage.metrics["toggle"].covered == 56 and r.reward == 2.0


REJECTED_BY_ICARUS = """module rej(input logic clk, input logic a, output logic b);
  always_ff @(posedge clk) b <= a;
  property p_follow; @(posedge clk) a |=> b; endproperty
  assert property (p_follow);
endmodule
"""
TB_REJ = """module tb; logic clk = 0, a = 0, b; rej dut(.clk(clk), .a(a), .b(b));
  always #5 clk = ~clk;
  initial begin a = 1; #20 a = 0; #20 $finish; end
endmodule
"""


def test_design_one_simulator_rejects_is_compile_error_on_that_one(engine):
    req = {
        "design": {"files": {"rej.sv": REJECTED_BY_ICARUS}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB_REJ}},
        "coverage": {"scope": "dut"},
    }
    icarus = engine.score({**req, "simulator": "icarus"})
    assert icarus.status == "compile_error" and icarus.engine == "icarus"
    assert "rej.sv:3: syntax error" in icarus.message
    verilator = engine.score({**req, "simulator": "verilator"})
    assert verilator.status == "ok" and verilator.engine == "verilator"


def test_vhdl_is_invalid_input(engine):
    vhdl = "entity counter is\n port (clk : in bit);\nend entity;\narchitecture rtl of counter is\nbegin\nend rtl;\n"
    for files in ({"counter.vhd": vhdl}, {"counter.sv": vhdl}):
        r = engine.score(
            {"design": {"files": files}, "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good_tb()}}}
        )
        assert r.status == "invalid_input" and "VHDL" in r.message


def test_malformed_request_shape_is_invalid_input(engine):
    r = engine.score({"design": {"files": rtl()}, "stimulus": {"kind": "perl", "files": {}}})
    assert r.status == "invalid_input" and "stimulus" in r.message
