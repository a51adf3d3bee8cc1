"""The fast path's token placeholder (fastcov/unit.py TOKEN_PLACEHOLDER) made by the request
itself: the fast path stamps the run's token where its flag lines stand, so a design or
stimulus holding the placeholder could write flag lines the reader takes for this run's.

Written as is, the design is Unsupported and the stimulus refused (screen.reads_files). Made
otherwise (a concatenation of string constants Icarus folds into one string of sim.vvp, a
design header's macro), the compiled sim.vvp holds it where the instrumentation put none
(backend.check_placeholders): the sample is scored by Verilator, the fallback says why."""

from __future__ import annotations

import pytest

from reward_service.fastcov.unit import TOKEN_PLACEHOLDER

# The testbench never drives a high: the `if (a)` arm stays uncovered. The design's own `final`
# block appends a flag line with every one of m's 4 points (and the leading always-1 bit) set.
DUT = (
    """module m(input logic clk, input logic a, output logic q);
  always_ff @(posedge clk) begin
    if (a) q <= 1'b1;
    else q <= 1'b0;
  end
  integer fd;
  final begin fd = $fopen("rs_fastcov.txt", "a"); $fwrite(fd, "PLACEHOLDER F m %m - 11111 1\\n"); $fclose(fd); end
endmodule
"""
).replace("PLACEHOLDER", TOKEN_PLACEHOLDER)
# The same forge with the placeholder split in two string constants (no file holds it).
SPLIT = '{"__RS_FASTCOV", "_TOKEN__ F m %m - 11111 1\\n"}'
assert "".join(SPLIT[2:-1].split('", "')).startswith(TOKEN_PLACEHOLDER)
SPLIT_DUT = DUT.replace(f'"{TOKEN_PLACEHOLDER} F m %m - 11111 1\\n"', SPLIT)
assert TOKEN_PLACEHOLDER not in SPLIT_DUT and SPLIT in SPLIT_DUT
CLEAN_DUT = DUT.replace(TOKEN_PLACEHOLDER, "tok")  # a design the fast path takes

TB = """module tb;
  logic clk = 0, a = 0, q;
  m dut (.clk(clk), .a(a), .q(q));
  always #5 clk = ~clk;
  initial begin #100 $finish; end
endmodule
"""
# The testbench's own forge (an SV testbench is model-written stimulus), naming the DUT instance.
FORGING_TB = TB.replace(
    "endmodule",
    '  integer fd;\n  final begin fd = $fopen("rs_fastcov.txt", "a"); '
    f"$fwrite(fd, {SPLIT.replace('%m', 'tb.dut')}); $fclose(fd); end\nendmodule",
)
assert TOKEN_PLACEHOLDER not in FORGING_TB

METRICS = ["line", "branch"]
# Verilator's totals of m under TB: the `if (a)` arm is never taken.
REFERENCE = {"line": (2, 2), "branch": (1, 2)}
REFUSED = f"the compiled design and stimulus hold the fast path's token placeholder `{TOKEN_PLACEHOLDER}`"

COCOTB_TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles


@cocotb.test()
async def t(dut):
    dut.a.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    await ClockCycles(dut.clk, 5)
"""


def _request(design: dict[str, str], testbench: dict[str, str], engine: str) -> dict:
    return {
        "design": {"files": design},
        "engine": engine,
        "coverage": {"scope": "dut", "metrics": METRICS},
        "stimulus": {"kind": "sv_testbench", "files": testbench},
    }


def _cocotb_request(design: dict[str, str], engine: str) -> dict:
    return {
        "design": {"files": design, "toplevel": "m"},
        "engine": engine,
        "coverage": {"metrics": METRICS},
        "stimulus": {"kind": "cocotb", "files": {"test_m.py": COCOTB_TEST}, "test_module": "test_m"},
    }


def _totals(result) -> dict[str, tuple[int, int]]:
    return {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}


def _assert_refused(fast, reference) -> None:
    assert reference.status == "ok", reference.message
    assert _totals(reference) == REFERENCE
    assert fast.engine == "verilator" and fast.status == "ok", (fast.engine, fast.status, _totals(fast), fast.message)
    assert fast.fallback.startswith(REFUSED) and fast.fallback.endswith(" — scored on Verilator"), fast.fallback
    assert _totals(fast) == _totals(reference)


def test_a_design_holding_the_placeholder_is_scored_by_verilator(engine):
    # Before the fix the fast path stamped the design's own line too and scored branch 2/2
    # (engine fast), where Verilator counts 1/2: the testbench never takes the `if (a)` arm.
    fast = engine.score(_request({"m.sv": DUT}, {"tb.sv": TB}, "fast"))
    reference = engine.score(_request({"m.sv": DUT}, {"tb.sv": TB}, "verilator"))
    assert reference.status == "ok", reference.message
    assert fast.engine == "verilator", (fast.engine, _totals(fast))
    assert fast.fallback.startswith(f"the fast path could not instrument the design: m.sv holds `{TOKEN_PLACEHOLDER}`")
    assert _totals(reference) == REFERENCE
    assert _totals(fast) == _totals(reference)


def test_a_testbench_holding_the_placeholder_is_scored_by_verilator(engine):
    testbench = TB.replace("#100 $finish;", f'#100 $display("{TOKEN_PLACEHOLDER}"); $finish;')
    design = {"m.sv": CLEAN_DUT}
    assert engine.score(_request(design, {"tb.sv": TB}, "fast")).engine == "fast"
    fast = engine.score(_request(design, {"tb.sv": testbench}, "fast"))
    assert fast.engine == "verilator" and fast.status == "ok", (fast.engine, fast.message)
    assert fast.fallback.startswith(f"tb.sv holds `{TOKEN_PLACEHOLDER}`"), fast.fallback


def test_a_cocotb_test_holding_the_placeholder_is_screened():
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files

    text = f"import cocotb\nTOKEN = '{TOKEN_PLACEHOLDER}'\n"
    assert f"test_x.py holds `{TOKEN_PLACEHOLDER}`" in reads_files(SimpleNamespace(files={"test_x.py": text}))


# -- the placeholder made by the sources: counted in the compiled sim.vvp ---------------------


def test_a_testbench_making_the_placeholder_is_scored_by_verilator(engine):
    # Icarus folds the testbench's concatenation into one "__RS_FASTCOV_TOKEN__ F m ..." string
    # of sim.vvp; the fast path refuses the build (before: scored on the fast path, engine fast).
    design = {"m.sv": CLEAN_DUT}
    fast = engine.score(_request(design, {"tb.sv": FORGING_TB}, "fast"))
    reference = engine.score(_request(design, {"tb.sv": FORGING_TB}, "verilator"))
    _assert_refused(fast, reference)


def test_a_design_making_the_placeholder_is_scored_by_verilator(engine):
    fast = engine.score(_request({"m.sv": SPLIT_DUT}, {"tb.sv": TB}, "fast"))
    reference = engine.score(_request({"m.sv": SPLIT_DUT}, {"tb.sv": TB}, "verilator"))
    _assert_refused(fast, reference)


def test_auto_sends_a_design_making_the_placeholder_to_verilator(engine):
    # engine=auto runs the design's self-check on the fast path first: its build is refused
    # there (or, when a decision of an earlier version is cached, in the sample's own run)
    fast = engine.score(_request({"m.sv": SPLIT_DUT}, {"tb.sv": TB}, "auto"))
    reference = engine.score(_request({"m.sv": SPLIT_DUT}, {"tb.sv": TB}, "verilator"))
    assert fast.fallback is not None, (fast.engine, _totals(fast))
    fast.fallback = fast.fallback.removeprefix("auto chose Verilator for this design: ")
    _assert_refused(fast, reference)


def test_a_design_header_holding_the_placeholder_is_not_stamped(engine):
    # A header no file includes is compiled as a unit of the design, before the testbench, but
    # not instrumented (nor screened): before the fix prepare stamped the run's token into it
    # too, and a testbench using its macro forged branch 2/2 on the fast path.
    header = f'`define RS_LINE "{TOKEN_PLACEHOLDER} F m tb.dut - 11111 1\\n"\n'
    testbench = TB.replace(
        "endmodule",
        '  integer fd;\n  final begin fd = $fopen("rs_fastcov.txt", "a"); $fwrite(fd, `RS_LINE); $fclose(fd); end\n'
        "endmodule",
    )
    design = {"defs.svh": header, "m.sv": CLEAN_DUT}
    fast = engine.score(_request(design, {"tb.sv": testbench}, "fast"))
    reference = engine.score(_request(design, {"tb.sv": testbench}, "verilator"))
    _assert_refused(fast, reference)


def test_a_normal_testbench_stays_on_the_fast_path(engine):
    fast = engine.score(_request({"m.sv": CLEAN_DUT}, {"tb.sv": TB}, "fast"))
    assert fast.engine == "fast" and fast.status == "ok" and fast.fallback is None, (fast.engine, fast.fallback)
    assert _totals(fast) == REFERENCE


def test_a_cocotb_design_making_the_placeholder_is_scored_by_verilator(engine):
    # The cocotb build is cached per design and stamped per run: before the fix the folded
    # placeholder got the run's token and the design's line scored branch 2/2 on the fast path.
    # Twice: the second run takes the cached build, checked again.
    reference = engine.score(_cocotb_request({"m.sv": SPLIT_DUT}, "verilator"))
    for _ in range(2):
        fast = engine.score(_cocotb_request({"m.sv": SPLIT_DUT}, "fast"))
        _assert_refused(fast, reference)


def test_a_cocotb_test_stays_on_the_fast_path(engine):
    reference = engine.score(_cocotb_request({"m.sv": CLEAN_DUT}, "verilator"))
    for _ in range(2):  # built, then from the build cache: its placeholder is the same
        fast = engine.score(_cocotb_request({"m.sv": CLEAN_DUT}, "fast"))
        assert fast.engine == "fast" and fast.status == "ok" and fast.fallback is None, (fast.fallback, fast.message)
        assert _totals(fast) == _totals(reference) == REFERENCE
    assert fast.cache.build


def test_check_placeholders_counts_the_compiled_model():
    from reward_service.fastcov.backend import check_placeholders
    from reward_service.fastcov.unit import Unsupported

    vvp = b'    %vpi_call/w 3 7 "$fwrite", v0x1_0, "' + TOKEN_PLACEHOLDER.encode() + b' F m %m - 11111 1\\012";\n'
    check_placeholders(b"no placeholder here", 0)
    check_placeholders(vvp, 1)
    with pytest.raises(Unsupported, match="1 time"):
        check_placeholders(vvp, 0)
    with pytest.raises(Unsupported, match="2 time"):
        check_placeholders(vvp * 3, 1)


def test_the_build_placeholder_is_the_designs_own_and_stable():
    from reward_service.fastcov.backend import build_placeholder, instrumented

    inst = instrumented({"m.sv": CLEAN_DUT}, tuple(METRICS), "zero_init", "m")
    other = instrumented({"m.sv": CLEAN_DUT.replace("q <= 1'b0", "q <= a")}, tuple(METRICS), "zero_init", "m")
    placeholder = build_placeholder(inst)
    assert placeholder == build_placeholder(inst) != build_placeholder(other)
    assert TOKEN_PLACEHOLDER not in placeholder and len(placeholder) == len("__RS_FC_") + 32 + 2
