"""Reward integrity, cocotb (issue 18; docs/integrity-cocotb.md): a cocotb test that writes a DUT
handle that is not a top-level port of its toplevel is refused, on the fast path (cocotb 2.1 and
1.9) and on Verilator, whatever way it names the handle or makes the write; reading internals,
writing ports, and policy ``allow`` score exactly as before.

Real runs of the shipped CVDP Attenuator (examples/cvdp/Attenuator.sv). The stimulus is the
issue's weak one (reset, one data value, 30 cycles: reward 1.9286, toggle 40/56 on both engines)
plus one hack each. Unguarded (policy ``allow``), ``dut.old_data.value = 31`` raises it to
1.9554 (toggle 46/56) on both engines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reward_service.integrity import cocotb_guard
from reward_service.models import StimulusPolicy

ROOT = Path(__file__).resolve().parents[1]
ATTENUATOR = (ROOT / "examples" / "cvdp" / "Attenuator.sv").read_text()
#: A toplevel with a sub-instance (a counter), for writes into it.
SUB_DESIGN = """module counter (input clk, input rst, output [3:0] q);
    reg [3:0] count;
    assign q = count;
    always @(posedge clk) if (rst) count <= 4'd0; else count <= count + 4'd1;
endmodule

module CountTop (input clk, input rst, output [3:0] q);
    counter u (.clk(clk), .rst(rst), .q(q));
endmodule
"""
HACK = "    # HACK\n"

#: The issue's weak stimulus; HACK is replaced by the line(s) under test (after 30 cycles).
WEAK_21 = f"""import cocotb
from cocotb.clock import Clock
from cocotb.handle import Deposit, Force, Freeze, Release
from cocotb.triggers import ClockCycles, Timer


@cocotb.test()
async def weak(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.reset.value = 1
    dut.data.value = 0
    await ClockCycles(dut.clk, 4)
    dut.reset.value = 0
    dut.data.value = 0b00011
    await ClockCycles(dut.clk, 30)
{HACK}    await ClockCycles(dut.clk, 6)
"""
#: The same on cocotb 1.x idioms (``units=``: auto picks the 1.9 runtime too).
WEAK_19 = f"""import cocotb
from cocotb.clock import Clock
from cocotb.handle import Deposit, Force, Freeze, Release
from cocotb.triggers import ClockCycles, Timer


@cocotb.test()
async def weak(dut):
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    dut.reset <= 1
    dut.data.value = 0
    await ClockCycles(dut.clk, 4)
    dut.reset <= 0
    dut.data <= 0b00011
    await ClockCycles(dut.clk, 30)
{HACK}    await ClockCycles(dut.clk, 6)
"""

#: name -> (lines put at HACK, the handle the guard names). Each writes Attenuator's internals.
HACKS_21 = {
    "value": ("dut.shift_reg.value = 31", "shift_reg"),
    "force": ("dut.shift_reg.value = Force(31)", "shift_reg"),
    "deposit": ("dut.shift_reg.value = Deposit(31)", "shift_reg"),
    "freeze": ("dut.current_state.value = Freeze()", "current_state"),
    "release": ("dut.shift_reg.value = Release()", "shift_reg"),
    "setimmediatevalue": ("dut.shift_reg.setimmediatevalue(31)", "shift_reg"),
    "string_built": ('getattr(dut, "shift" + "_reg").value = 31', "shift_reg"),
    "by_id": ('dut._id("shift_reg", extended=False).value = 31', "shift_reg"),
    # cocotb's C++ clock writes through libgpi without Python's write path (and from a GPI
    # callback: no test frame to name, the violation has no file:line)
    "clock_on_internal": ('cocotb.start_soon(Clock(dut.clk_div2, 4, unit="ns").start())', "clk_div2"),
    # the test takes cocotb's Python write path out of the way: the guard sits below it
    "monkeypatched": (
        "import cocotb.handle as h, sys\n"
        "    h._schedule_write = lambda handle, f, action, value: f(action.value, value)\n"
        "    sys.modules.pop('rs_cocotb_guard', None)\n"
        "    dut.shift_reg.value = 31",
        "shift_reg",
    ),
}
HACKS_19 = {
    "le_operator": ("dut.shift_reg <= 31", "shift_reg"),
    "value": ("dut.shift_reg.value = 31", "shift_reg"),
    "setimmediatevalue": ("dut.shift_reg.setimmediatevalue(31)", "shift_reg"),
    "force": ("dut.shift_reg.value = Force(31)", "shift_reg"),
    "release": ("dut.shift_reg.value = Release()", "shift_reg"),
    "string_built": ('getattr(dut, "shift" + "_reg").value = 31', "shift_reg"),
}
#: A write into the DUT that pays when let through (policy allow).
ALLOWED_HACK = "dut.old_data.value = 31"
#: Reads internals and writes only ports: must score as the weak stimulus.
CONTROLS = {
    "read_internals": (
        "assert dut.current_state.value.is_resolvable\n"
        "    dut._log.info('state %s shift %s', dut.current_state.value, dut.shift_reg.value)"
    ),
    "write_ports_more": "dut.data.value = 0b00011\n    dut.reset.value = 0",
}


def stimulus(template: str, hack: str | None) -> tuple[str, int | None]:
    """The test text with ``hack`` at HACK, and the 1-based line of its last line (the write)."""
    if hack is None:
        return template.replace(HACK, ""), None
    text = template.replace(HACK, f"    {hack}\n")
    lines = text.splitlines()
    last = hack.splitlines()[-1].strip()
    return text, max(i for i, line in enumerate(lines, 1) if line.strip() == last)


def request(text: str, engine: str, runtime: str = "cocotb-2.1", policy: str | None = None, sub=False):
    design = {"CountTop.sv": SUB_DESIGN} if sub else {"Attenuator.sv": ATTENUATOR}
    req = {
        "design": {"files": design},
        "stimulus": {
            "kind": "cocotb",
            "files": {"test_hack.py": text},
            "toplevel": "CountTop" if sub else "Attenuator",
            "test_module": "test_hack",
            "runtime": runtime,
        },
        "simulator": "verilator",
        "engine": engine,
        "limits": {"run_s": 120, "compile_s": 600},
    }
    if policy:
        req["stimulus_policy"] = {"dut_writes": policy}
    return req


def describe(result) -> str:
    return f"{result.status.value} {result.reward} {result.message}\n{(result.log or '')[-3000:]}"


def assert_refused(result, target: str, line: int | None, engine: str) -> None:
    assert result.status == "refused", describe(result)
    assert result.reward == 0.0 and result.passed is False, describe(result)  # chorus: the failure value
    assert result.engine == engine and result.fallback is None, describe(result)
    [v] = result.violations
    assert v.kind == "cocotb_write" and v.target.split(".")[-1] == target, v
    assert v.target.rsplit(".", 1)[0] in ("Attenuator", "CountTop.u"), v
    assert (v.file, v.line) == ("test_hack.py" if line else None, line), v
    assert target in result.message and "not a top-level port" in result.message


@pytest.fixture(scope="module")
def plain(engine):
    """The weak stimulus's result per (engine, runtime), scored once."""
    found = {}

    def get(eng: str, runtime: str):
        if (eng, runtime) not in found:
            text, _ = stimulus(WEAK_19 if runtime == "cocotb-1.9" else WEAK_21, None)
            found[eng, runtime] = engine.score(request(text, eng, runtime))
            assert found[eng, runtime].status == "ok", describe(found[eng, runtime])
            assert all(t.passed for t in found[eng, runtime].tests)
        return found[eng, runtime]

    return get


# ---------------------------------------------------------------------------------------------
# the fast path (Icarus + instrumented DUT), cocotb 2.1 and 1.9


@pytest.mark.parametrize("name", sorted(HACKS_21))
def test_fast_refuses_internal_writes_21(engine, name):
    hack, target = HACKS_21[name]
    text, line = stimulus(WEAK_21, hack)
    if name == "clock_on_internal":
        line = None
    if name == "monkeypatched":  # the write is made inside the test's own lambda
        line = (
            text.splitlines().index("    h._schedule_write = lambda handle, f, action, value: f(action.value, value)")
            + 1
        )
    assert_refused(engine.score(request(text, "fast")), target, line, "fast")


@pytest.mark.parametrize("name", sorted(HACKS_19))
def test_fast_refuses_internal_writes_19(engine, name):
    hack, target = HACKS_19[name]
    text, line = stimulus(WEAK_19, hack)
    result = engine.score(request(text, "fast", runtime="cocotb-1.9"))
    assert_refused(result, target, line, "fast")
    assert "ran on cocotb 1.9" in result.message


def sub_test(runtime: str) -> tuple[str, int]:
    """A test of CountTop writing its sub-instance's register (``u.count``), and that line."""
    unit = 'units="ns"' if runtime == "cocotb-1.9" else 'unit="ns"'
    text = f"""import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles


@cocotb.test()
async def count(dut):
    cocotb.start_soon(Clock(dut.clk, 10, {unit}).start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 3)
    dut.u.count.value = 12
    await ClockCycles(dut.clk, 3)
"""
    return text, text.splitlines().index("    dut.u.count.value = 12") + 1


@pytest.mark.parametrize("runtime", ["cocotb-2.1", "cocotb-1.9"])
def test_fast_refuses_writes_into_a_sub_instance(engine, runtime):
    text, line = sub_test(runtime)
    assert_refused(engine.score(request(text, "fast", runtime, sub=True)), "count", line, "fast")


@pytest.mark.parametrize("runtime", ["cocotb-2.1", "cocotb-1.9"])
@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_fast_controls_score_as_the_weak_stimulus(engine, plain, name, runtime):
    text, _ = stimulus(WEAK_19 if runtime == "cocotb-1.9" else WEAK_21, CONTROLS[name])
    result = engine.score(request(text, "fast", runtime))
    base = plain("fast", runtime)
    assert result.status == "ok" and not result.violations, describe(result)
    assert result.reward == base.reward and result.coverage == base.coverage, describe(result)
    assert [t.passed for t in result.tests] == [True]


def test_fast_policy_allow_scores_the_write_as_before(engine, plain):
    base = plain("fast", "cocotb-2.1")
    assert (round(base.reward, 4), base.coverage.metrics["toggle"].covered) == (1.9286, 40)
    text, _ = stimulus(WEAK_21, ALLOWED_HACK)
    result = engine.score(request(text, "fast", policy="allow"))
    assert result.status == "ok" and not result.violations, describe(result)
    # the write reaches the DUT as before the guard: more toggles than the weak stimulus
    assert (round(result.reward, 4), result.coverage.metrics["toggle"].covered) == (1.9554, 46)
    text, line = stimulus(WEAK_21, ALLOWED_HACK)
    assert_refused(engine.score(request(text, "fast")), "old_data", line, "fast")


def test_fast_refusal_uses_the_failure_value_of_ratio_shaping(engine):
    text, line = stimulus(WEAK_21, HACKS_21["value"][0])
    req = request(text, "fast")
    req["reward"] = {"shaping": "ratio", "failure_value": -0.5}
    result = engine.score(req)
    assert result.status == "refused" and result.reward == -0.5, describe(result)


def test_ways_around_libgpi_are_closed(engine, plain):
    """In-process ways past the guard fail inside the simulator: ctypes (an obfuscated import,
    which the text screen cannot see) does not load, /proc/<pid>/mem does not open. The test
    reports what it met in its failure message."""
    probe = (
        "met = []\n"
        "    try:\n"
        '        __import__("ct" + "ypes").CDLL(None).vpi_put_value\n'
        "        met.append('loaded')\n"
        "    except Exception as exc:\n"
        "        met.append(type(exc).__name__)\n"
        "    import os\n"
        "    try:\n"
        '        open("/proc/" + str(os.getpid()) + "/mem", "r+b")\n'
        "        met.append('mem opened')\n"
        "    except OSError as exc:\n"
        "        met.append(type(exc).__name__)\n"
        "    assert False, 'met: ' + ' '.join(met)"
    )
    for runtime, template in (("cocotb-2.1", WEAK_21), ("cocotb-1.9", WEAK_19)):
        text, _ = stimulus(template, probe)
        result = engine.score(request(text, "fast", runtime))
        assert result.status == "ok", describe(result)
        [test] = result.tests
        assert not test.passed and "met:" in (test.message or ""), describe(result)
        met = test.message.split("met:", 1)[1].split()
        assert met[0] in ("ImportError", "AttributeError"), test.message  # 1.9: the stand-in module
        assert met[1].rstrip(")'\"") == "PermissionError", test.message


#: Red team (review of 12-04): numpy arrays over a raw address write any memory of the process;
#: with /proc/<pid>/maps the test found the guard's port list and added internals to it (reward
#: 1.9554, the `allow` score). The address maps do not open, and the guard's state is on pages
#: made read-only once armed: a write there ends the simulator.
NUMPY_UNGUARD = (
    "import numpy as np, os\n"
    "    class M: pass\n"
    "    met = []\n"
    '    for name in ("maps", "smaps", "map_files", "numa_maps"):\n'
    "        try:\n"
    '            os.listdir("/proc/" + str(os.getpid()) + "/" + name) if name == "map_files" else '
    'open("/proc/" + str(os.getpid()) + "/" + name).read()\n'
    "            met.append(name)\n"
    "        except OSError as exc:\n"
    "            met.append(type(exc).__name__)\n"
    "    dut._log.info('met %s', met)\n"
    "    assert met == ['PermissionError'] * 4, met\n"
    "    dut.old_data.value = 31"
)


def test_a_raw_memory_write_cannot_unguard(engine, plain):
    text, _ = stimulus(WEAK_21, NUMPY_UNGUARD)
    result = engine.score(request(text, "fast"))
    assert result.status == "refused" and result.reward == 0.0, describe(result)
    assert [v.target for v in result.violations] == ["Attenuator.old_data"], describe(result)


def test_refuses_policy_default():
    assert cocotb_guard.refuses(None)
    assert cocotb_guard.refuses(StimulusPolicy())
    assert cocotb_guard.refuses(StimulusPolicy(dut_writes="refuse"))
    assert not cocotb_guard.refuses(StimulusPolicy(dut_writes="allow"))


def test_top_ports_of_ansi_non_ansi_and_instantiated_toplevels():
    assert cocotb_guard.top_ports({"Attenuator.sv": ATTENUATOR}, "Attenuator") == ["clk", "reset", "data"]
    assert cocotb_guard.top_outputs({"Attenuator.sv": ATTENUATOR}, "Attenuator") == ["ATTN_CLK", "ATTN_DATA", "ATTN_LE"]
    design = {
        "a.v": "module sub(input a, output b, inout c); endmodule\n"
        "module top(x, y, z); input x; output y; inout z; sub s(x, y, z); endmodule\n"
    }
    assert cocotb_guard.top_ports(design, "sub") == ["a", "c"] and cocotb_guard.top_outputs(design, "sub") == ["b"]
    assert cocotb_guard.top_ports(design, "top") == ["x", "z"] and cocotb_guard.top_outputs(design, "top") == ["y"]
    with pytest.raises(ValueError):
        cocotb_guard.top_ports(design, "missing")


# ---------------------------------------------------------------------------------------------
# Verilator (cocotb 2.1): a small set, each a real model run


@pytest.mark.slow
@pytest.mark.parametrize("name", ["value", "force", "string_built", "by_id"])
def test_verilator_refuses_internal_writes(engine, name):
    hack, target = HACKS_21[name]
    text, line = stimulus(WEAK_21, hack)
    assert_refused(engine.score(request(text, "verilator")), target, line, "verilator")


@pytest.mark.slow
def test_verilator_refuses_writes_into_a_sub_instance(engine):
    text, line = sub_test("cocotb-2.1")
    assert_refused(engine.score(request(text, "verilator", sub=True)), "count", line, "verilator")


@pytest.mark.slow
def test_verilator_controls_and_allow(engine, plain):
    base = plain("verilator", "cocotb-2.1")
    for name in sorted(CONTROLS):
        text, _ = stimulus(WEAK_21, CONTROLS[name])
        result = engine.score(request(text, "verilator"))
        assert result.status == "ok" and not result.violations, describe(result)
        assert result.reward == base.reward and result.coverage == base.coverage, name
    assert (round(base.reward, 4), base.coverage.metrics["toggle"].covered) == (1.9286, 40)
    text, _ = stimulus(WEAK_21, ALLOWED_HACK)
    allowed = engine.score(request(text, "verilator", policy="allow"))
    assert allowed.status == "ok" and not allowed.violations, describe(allowed)
    assert (round(allowed.reward, 4), allowed.coverage.metrics["toggle"].covered) == (1.9554, 46)


def test_a_guard_that_did_not_start_is_our_failure(engine, monkeypatch, tmp_path):
    """The preload fails (here: not a shared library; ld.so says so and runs on unguarded): the
    run is not checked, so the result is ``sandbox_error`` (reward None, never cached), never
    an unguarded score."""
    broken = tmp_path / "broken.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setattr(cocotb_guard, "library", lambda cache_dir: broken)
    text, _ = stimulus(WEAK_21, None)
    result = engine.score(request(text, "fast"))
    assert result.status == "sandbox_error" and result.reward is None, describe(result)
    assert "write guard did not start" in result.message


def test_a_test_starts_no_process(engine):
    """A test cannot start a program (here another Python with a cleared environment, which
    could be an unguarded simulator of the model) nor fork: a process of the test that outlives
    the simulator could rewrite its coverage file. The call fails (EPERM) and the test goes on
    with the error; the run still scores."""
    probe = (
        "import subprocess, sys\n"
        "    try:\n"
        "        subprocess.run([sys.executable, '-c', 'print(1)'], env={}, capture_output=True)\n"
        "    except OSError as exc:\n"
        "        assert False, 'child: ' + type(exc).__name__ + ' ' + str(exc.errno)\n"
        "    assert False, 'child: started'"
    )
    text, _ = stimulus(WEAK_21, probe)
    result = engine.score(request(text, "fast"))
    [test] = result.tests
    assert result.status == "ok" and not test.passed, describe(result)
    assert "child: PermissionError 1" in (test.message or ""), test.message


#: A toplevel with an internal net (``inv``) and register (``r``), for the 1.x init loop.
NET_DESIGN = """module NetTop (input clk, input [3:0] a, output [3:0] y);
    wire [3:0] inv = ~a;
    reg [3:0] r;
    always @(posedge clk) r <= inv;
    assign y = r;
endmodule
"""


def net_test(after: str) -> str:
    """A cocotb 1.x test on NetTop: the CVDP harnesses' GPI_NET init loop at time 0 (writes
    ``a`` and the internal net ``inv``), then ``after`` a few cycles later."""
    return f"""import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles


@cocotb.test()
async def loop(dut):
    for signal in dut:
        if signal._type == "GPI_NET":
            signal.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    await ClockCycles(dut.clk, 3)
    dut.a.value = 5
    await ClockCycles(dut.clk, 3)
    {after}
    await ClockCycles(dut.clk, 2)
    assert dut.y.value.integer == 10
"""


@pytest.mark.parametrize(
    ("after", "refused"),
    [
        ("pass", None),  # the init loop alone: its zero into `inv` at time 0 is dropped
        ("dut.inv.value = 0", None),  # zero into a net later: dropped (the loop after a reset)
        ("dut.inv.value = 3", "inv"),  # anything else into a net: refused
        ("dut.r.value = 0", "r"),  # zero into a register after time 0: refused
    ],
)
def test_cocotb1x_init_loop_zeros_are_dropped_not_refused(engine, after, refused):
    req = request(net_test(after), "fast", "cocotb-1.9")
    req["design"] = {"files": {"NetTop.sv": NET_DESIGN}}
    req["stimulus"]["toplevel"] = "NetTop"
    result = engine.score(req)
    if refused:
        assert result.status == "refused", describe(result)
        assert [v.target for v in result.violations] == [f"NetTop.{refused}"], describe(result)
        return
    assert result.status == "ok" and not result.violations, describe(result)
    assert [t.passed for t in result.tests] == [True], describe(result)  # the drops never took effect
    assert "NetTop.inv" in result.message and "were ignored" in result.message, result.message
