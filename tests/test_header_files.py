"""A design header that no file includes is compiled as a source, after the files before it.

CVDP's cvdp_copilot_crypto_0019/0022 (shared/cases/cvdp/cocotb_corpus.jsonl) give the design as
``rtl/prince_core.v rtl/prince_round_functions.vh``: the header holds the cipher's functions at
compilation-unit level (``$unit``), ``prince_core.v``'s own `include of it is commented out, and
the harness lists the header in ``VERILOG_SOURCES``, all files in one simulator call. Before,
the SV-testbench path left every header out of the compiler's command line, so Verilator and
Icarus rejected ``prince_core`` ("Can't find definition of task/function: 'round0'") and every
stimulus scored 0. The fast path cannot instrument such a design (pyslang elaborates each file
as its own compilation unit, so the calls do not resolve) and falls back to Verilator.

The small design here has the same shape: ``core.v`` calls ``mixk`` declared in ``funcs.vh``.
Its coverage, worked out from the testbench: toggles of clk, rst_n, d[3:0], k[3:0], q[3:0] are
14 bits x 2 directions = 28 points, of which rst_n 1->0 (reset is released once, never
asserted again) and k[3] both ways (k only takes 0 and 7) stay uncovered: 25/28; the
``if (!rst_n)`` branch pair and its two expression terms are all hit (reset while the clock
runs, then 18 clocked cycles), as is the always block's one line point.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_CASES

from reward_service import hdl

CORE = """module core (
    input  wire       clk,
    input  wire       rst_n,
    input  wire [3:0] d,
    input  wire [3:0] k,
    output reg  [3:0] q
);
  // mixk() is declared in funcs.vh, compiled after this file (no `include)
  always @(posedge clk or negedge rst_n)
    if (!rst_n) q <= 4'h0;
    else q <= mixk(d, k);
endmodule
"""
FUNCS = """function [3:0] mixk(input [3:0] x, input [3:0] k);
  mixk = {x[2:0], x[3]} ^ k;
endfunction
"""
TB = """module tb;
  reg clk = 0, rst_n = 0;
  reg [3:0] d = 0, k = 0;
  wire [3:0] q;
  integer i, bad = 0;
  core dut (.clk(clk), .rst_n(rst_n), .d(d), .k(k), .q(q));
  always #1 clk = ~clk;
  initial begin
    #4 rst_n = 1;
    @(negedge clk);
    for (i = 0; i < 18; i = i + 1) begin
      d = i[3:0];
      k = (i == 16) ? 4'h7 : 4'h0;
      @(negedge clk);
      if (q !== ({d[2:0], d[3]} ^ k)) bad = bad + 1;
    end
    $display("mismatches=%0d", bad);
    $finish;
  end
endmodule
"""
EXPECTED = {"line": (1, 1), "branch": (2, 2), "toggle": (25, 28), "expr": (2, 2)}
EXPECTED_UNCOVERED = [
    ("core.v", 3, "toggle", "rst_n:1->0"),
    ("core.v", 5, "toggle", "k[3]:0->1"),
    ("core.v", 5, "toggle", "k[3]:1->0"),
]


def sv_request(design: dict, tb: dict, **extra) -> dict:
    return {
        "design": {"files": design},
        "stimulus": {"kind": "sv_testbench", "files": tb},
        "coverage": {"scope": "dut"},
        **extra,
    }


def numbers(result) -> dict:
    return {k: (m.covered, m.total) for k, m in result.coverage.metrics.items() if m.available}


def uncovered(result) -> list[tuple]:
    return sorted((p.file, p.line, p.metric, p.detail) for p in result.uncovered)


def test_compilation_units_take_design_headers_nobody_includes():
    files = {
        "rtl/core.v": '`include "inc/defs.vh"\nmodule core; endmodule\n',
        "inc/defs.vh": "`define W 4\n",
        "rtl/funcs.vh": "function f; f = 1; endfunction\n",
        "tb/tb.sv": '`include "tb/tasks.svh"\nmodule tb; endmodule\n',
        "tb/tasks.svh": "task t; endtask\n",
        "tb/spare.svh": "task u; endtask\n",
        "data/x.hex": "00\n",
    }
    dirs = hdl.search_dirs(list(files))
    included = hdl.included_files(files, dirs)
    assert included == {"inc/defs.vh", "tb/tasks.svh"}
    design = ["rtl/core.v", "inc/defs.vh", "rtl/funcs.vh"]
    design_included = hdl.included_files({n: files[n] for n in design}, dirs)
    # a design header nobody includes is a source, where it stands; an included one is not
    assert hdl.compilation_units(design, included, design_included) == ["rtl/core.v", "rtl/funcs.vh"]
    assert hdl.compilation_units(design, included) == ["rtl/core.v"]
    # only the design's own includes decide: a testbench including funcs.vh (under an `ifdef
    # never defined, for all the scan knows) does not take it out of the design's build
    hijack = {**files, "tb/tb.sv": '`ifdef NEVER\n`include "rtl/funcs.vh"\n`endif\n' + files["tb/tb.sv"]}
    assert "rtl/funcs.vh" in hdl.included_files(hijack, dirs)
    assert hdl.compilation_units(design, hdl.included_files(hijack, dirs), design_included) == [
        "rtl/core.v",
        "rtl/funcs.vh",
    ]
    # testbench headers stay include-only (cid012's xrun compiles /code/verif/*.sv)
    assert hdl.compilation_units(["tb/tb.sv", "tb/tasks.svh", "tb/spare.svh", "data/x.hex"], included) == ["tb/tb.sv"]


def test_unit_header_design_on_verilator(engine):
    result = engine.score(sv_request({"core.v": CORE, "funcs.vh": FUNCS}, {"tb.sv": TB}, simulator="verilator"))
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "mismatches=0" in result.log  # the header's function computed q
    assert numbers(result) == EXPECTED
    assert uncovered(result) == EXPECTED_UNCOVERED
    assert result.coverage.overall == pytest.approx((3 + 25 / 28) / 4)
    # the $unit function's points are no point of the DUT instance
    assert not any(p.file == "funcs.vh" for p in result.uncovered)


def test_unit_header_design_fast_falls_back_to_verilator(engine):
    result = engine.score(
        sv_request({"core.v": CORE, "funcs.vh": FUNCS}, {"tb.sv": TB}, simulator="verilator", engine="fast")
    )
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert result.engine == "verilator"
    assert result.fallback and "could not instrument" in result.fallback, result.fallback
    assert numbers(result) == EXPECTED
    assert uncovered(result) == EXPECTED_UNCOVERED


def test_unit_header_design_on_icarus(engine):
    result = engine.score(sv_request({"core.v": CORE, "funcs.vh": FUNCS}, {"tb.sv": TB}, simulator="icarus"))
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "mismatches=0" in result.log
    assert result.ended_by == "finish"


def test_included_header_is_not_compiled_twice(engine):
    """The same header `include'd inside the module: compiled there only (as a source too,
    Verilator would see ``mixk`` twice and the instance would call the module's one anyway)."""
    inner = CORE.replace("  // mixk() is declared", '  `include "funcs.vh"\n  // mixk() is declared')
    result = engine.score(sv_request({"core.v": inner, "funcs.vh": FUNCS}, {"tb.sv": TB}, simulator="icarus"))
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "mismatches=0" in result.log


# -- the corpus item itself ------------------------------------------------------------------

CORPUS = SHARED_CASES / "cvdp" / "cocotb_corpus.jsonl"


def _prince_rtl() -> dict[str, str] | None:
    if not CORPUS.exists():
        return None
    with open(CORPUS, encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            if row["id"] == "cvdp_copilot_crypto_0019":
                return {p: row["rtl"][p] for p in ("rtl/prince_core.v", "rtl/prince_round_functions.vh")}
    return None


PRINCE = _prince_rtl()
#: The nine test vectors of the item's cocotb test (PRINCE reference values), encrypted and
#: decrypted, as an SV testbench a model might write for a cid012-style prompt.
PRINCE_TB = """`timescale 1ns/1ps
module tb_prince;
  reg clk = 0, reset_n = 0, encdec = 0, next = 0;
  reg [127:0] key = 0;
  reg [63:0] block = 0;
  wire ready;
  wire [63:0] result;
  integer errors = 0;
  prince_core dut (.clk(clk), .reset_n(reset_n), .encdec(encdec), .next(next),
                   .ready(ready), .key(key), .block(block), .result(result));
  always #1 clk = ~clk;
  task automatic run(input [127:0] k, input [63:0] b, input [63:0] c);
    begin
      key = k; encdec = 1; block = b; next = 1;
      @(negedge clk); next = 0;
      @(negedge clk); while (!ready) @(negedge clk);
      if (result !== c) errors = errors + 1;
      block = c; encdec = 0; next = 1;
      @(negedge clk); next = 0;
      @(negedge clk); while (!ready) @(negedge clk);
      if (result !== b) errors = errors + 1;
    end
  endtask
  initial begin
    #4 reset_n = 1;
    @(negedge clk);
    run(128'h00000000_00000000_00000000_00000000, 64'h00000000_00000000, 64'h818665aa_0d02dfda);
    run(128'h00000000_00000000_00000000_00000000, 64'hffffffff_ffffffff, 64'h604ae6ca_03c20ada);
    run(128'hffffffff_ffffffff_00000000_00000000, 64'h00000000_00000000, 64'h9fb51935_fc3df524);
    run(128'h00000000_00000000_ffffffff_ffffffff, 64'h00000000_00000000, 64'h78a54cbe_737bb7ef);
    run(128'h00000000_00000000_fedcba98_76543210, 64'h01234567_89abcdef, 64'hae25ad3c_a8fa9ccf);
    run(128'h00112233_44556677_8899aabb_ccddeeff, 64'h01234567_89abcdef, 64'hd6dcb597_8de756ee);
    run(128'h01122334_45566778_899aabbc_cddeeff0, 64'h01234567_89abcdef, 64'h392f599f_46761cd3);
    run(128'h01122334_45566778_899aabbc_cddeeff0, 64'hf0123456_789abcde, 64'h4fb5e332_b9b409bb);
    run(128'hd8cdb780_70b4c55a_818665aa_0d02dfda, 64'h69c4e0d8_6a7b0430, 64'h43c6b256_d79de7e8);
    $display("errors=%0d", errors);
    $finish;
  end
endmodule
"""

needs_corpus = pytest.mark.skipif(PRINCE is None, reason=f"{CORPUS} not found")


@needs_corpus
def test_prince_core_on_icarus(engine):
    assert PRINCE is not None
    result = engine.score(sv_request(PRINCE, {"tb_prince.sv": PRINCE_TB}, simulator="icarus"))
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert "errors=0" in result.log  # all 18 results right: the header's functions ran


@needs_corpus
@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["verilator", "fast"])
def test_prince_core_on_verilator(engine, engine_name):
    """Measured (Verilator 5.48, DUT instance ``dut``): every point of prince_core.v but 11:
    the ``default:`` arm of the fully decoded control case (line 300), the else of
    ``if (core_ctrl_we)`` (161: the testbench raises ``next`` in every idle cycle), the
    ``(x[1]==0 && x[63]==1)`` terms of the two key-schedule XORs (227, 233) and 12 toggles
    (reset_n, key[4], key[9], key[26], key[35], key[39], key[45], key[55], key[63], k1_reg[9],
    k1_reg[26], k1_reg[35]: 1->0; the five key bits over 32 were counted before 0.14 by
    Verilator's own toggle loop for signals over 64 bits: tests/test_verilator_wide_toggle.py). The header's
    ``$unit`` functions give no point of the instance. The fast path falls back (it cannot
    elaborate ``$unit`` functions of another file), so both engines give Verilator's numbers."""
    assert PRINCE is not None
    result = engine.score(
        sv_request(
            PRINCE,
            {"tb_prince.sv": PRINCE_TB},
            simulator="verilator",
            engine=engine_name,
            limits={"compile_s": 300},  # a cold C++ build of the cipher takes ~100 s on 2 cores
        )
    )
    assert result.status == "ok", (result.message, result.log[-2000:])
    assert result.engine == "verilator"
    assert "errors=0" in result.log
    assert numbers(result) == {"line": (8, 9), "branch": (17, 18), "toggle": (2330, 2342), "expr": (8, 10)}
    assert result.reward > 1.9


# -- one rule for both flows: headers resolved by path, compiled where they stand -----------

#: ``rtl/core.v`` includes ``a/defs.vh`` (its K); ``rtl/b/defs.vh``, of the same basename, is
#: included by nobody and holds the $unit function ``mix``: a compilation unit. The cocotb flow
#: used to match includes by basename, took ``b/defs.vh`` for included, left it out, and the
#: build failed on ``mix``; the SV flow compiled it.
AB_CORE = """module core (
    input  wire       clk,
    input  wire       rst_n,
    input  wire [3:0] d,
    output reg  [3:0] q
);
`include "a/defs.vh"
  always @(posedge clk or negedge rst_n)
    if (!rst_n) q <= 4'h0;
    else q <= mix(d) ^ K;
endmodule
"""
AB_DESIGN = {
    "rtl/core.v": AB_CORE,
    "rtl/a/defs.vh": "localparam [3:0] K = 4'h5;\n",
    "rtl/b/defs.vh": "function [3:0] mix(input [3:0] x);\n  mix = {x[2:0], x[3]};\nendfunction\n",
}
#: d = 0..15 after a reset, q checked a cycle later (q = rotl(d) ^ 5), the same in both flows.
AB_TB = """module tb;
  reg clk = 0, rst_n = 0;
  reg [3:0] d = 0;
  wire [3:0] q;
  integer i, bad = 0;
  core dut (.clk(clk), .rst_n(rst_n), .d(d), .q(q));
  always #1 clk = ~clk;
  initial begin
    #4 rst_n = 1;
    @(negedge clk);
    for (i = 0; i < 16; i = i + 1) begin
      d = i[3:0];
      @(negedge clk);
      if (q !== ({d[2:0], d[3]} ^ 4'h5)) bad = bad + 1;
    end
    $display("mismatches=%0d", bad);
    $finish;
  end
endmodule
"""
AB_TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer


@cocotb.test()
async def mixes(dut):
    dut.rst_n.value = 0
    dut.d.value = 0
    cocotb.start_soon(Clock(dut.clk, 2, "ns").start(start_high=False))
    await Timer(4, "ns")
    dut.rst_n.value = 1
    await FallingEdge(dut.clk)
    bad = 0
    for i in range(16):
        dut.d.value = i
        await FallingEdge(dut.clk)
        if int(dut.q.value) != (((i << 1) | (i >> 3)) & 15) ^ 5:
            bad += 1
    assert bad == 0, bad
"""


def cocotb_request(design: dict, test: str, **extra) -> dict:
    return {
        "design": {"files": design, "toplevel": "core"},
        "stimulus": {"kind": "cocotb", "test_module": "test_core", "files": {"test_core.py": test}},
        "coverage": {"scope": "dut"},
        **extra,
    }


def make_job(root, design: dict[str, str], stimulus: dict[str, str], **fields):
    from reward_service.models import Limits
    from reward_service.sandbox.bwrap import BwrapSandbox
    from reward_service.simulators.base import Job

    for name, text in {**design, **stimulus}.items():
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / name).write_text(text)
    return Job(
        root=root,
        design_files=list(design),
        stimulus_files=list(stimulus),
        limits=Limits(),
        sandbox=BwrapSandbox(),
        cache_dir=root,
        toplevel="core",
        **fields,
    )


def test_cocotb_sources_are_the_sv_flows_compilation_units(tmp_path):
    """cocotb_flow.sources() is hdl.compilation_units as scoring/run.py calls it:
    headers by path (b/defs.vh is nobody's include, whatever its basename) and where they
    stand in the request (cfg.vh first), not after every HDL file."""
    from reward_service.simulators import cocotb_flow

    design = {"rtl/cfg.vh": "`define STEP 1\n", **AB_DESIGN}
    files = {**design, "test_core.py": AB_TEST}
    dirs = hdl.search_dirs(list(files))
    expected = hdl.compilation_units(list(design), hdl.included_files(files, dirs), hdl.included_files(design, dirs))
    assert expected == ["rtl/cfg.vh", "rtl/core.v", "rtl/b/defs.vh"]
    job = make_job(tmp_path, design, {"test_core.py": AB_TEST}, include_dirs=dirs)
    assert cocotb_flow.sources(job) == expected
    # as the engine lays it out (design_files already the units; no include dirs given by hand)
    assert cocotb_flow.sources(make_job(tmp_path, {n: design[n] for n in expected}, {})) == expected


def test_same_basename_headers_on_both_flows(engine):
    """The a/b defs.vh design scored as an SV testbench and as a cocotb test, on Verilator and
    Icarus: both flows compile core.v and b/defs.vh and give the same coverage (measured:
    line 1/1, branch 2/2, expr 2/2; toggles of clk, rst_n, d, q = 10 bits x 2 = 20, of which
    rst_n 1->0 (reset asserted from the start only) and d[3] 1->0 (d ends at 15) stay
    uncovered: 18/20). Before, the cocotb build failed (``mix`` not found)."""
    sv = engine.score(sv_request(AB_DESIGN, {"tb.sv": AB_TB}, simulator="verilator"))
    assert sv.status == "ok", (sv.message, sv.log[-2000:])
    assert "mismatches=0" in sv.log
    cocotb = engine.score(cocotb_request(AB_DESIGN, AB_TEST, simulator="verilator"))
    assert cocotb.status == "ok", (cocotb.message, cocotb.log[-2000:])
    assert [t.passed for t in cocotb.tests] == [True], cocotb.tests
    assert numbers(cocotb) == numbers(sv) == {"line": (1, 1), "branch": (2, 2), "toggle": (18, 20), "expr": (2, 2)}
    assert (
        uncovered(cocotb)
        == uncovered(sv)
        == [
            ("rtl/core.v", 3, "toggle", "rst_n:1->0"),
            ("rtl/core.v", 4, "toggle", "d[3]:1->0"),
        ]
    )
    icarus_sv = engine.score(sv_request(AB_DESIGN, {"tb.sv": AB_TB}, simulator="icarus"))
    assert icarus_sv.status == "ok" and "mismatches=0" in icarus_sv.log, (icarus_sv.message, icarus_sv.log[-2000:])
    icarus = engine.score(cocotb_request(AB_DESIGN, AB_TEST, simulator="icarus"))
    assert icarus.status == "ok", (icarus.message, icarus.log[-2000:])
    assert [t.passed for t in icarus.tests] == [True], icarus.tests


#: A header nobody includes, first in the request, defining a macro core.v uses: compiled
#: before core.v (one simulator call, one preprocessor stream), as the SV flow does. The cocotb
#: flow used to put it after core.v: "`STEP undefined".
ORDER_DESIGN = {
    "cfg.vh": "`define STEP 4'h3\n",
    "core.v": AB_CORE.replace('`include "a/defs.vh"\n', "").replace("mix(d) ^ K", "d + `STEP"),
}
ORDER_TEST = AB_TEST.replace("(((i << 1) | (i >> 3)) & 15) ^ 5", "(i + 3) & 15")


@pytest.mark.parametrize("flow", ["sv", "cocotb"])
def test_unincluded_header_is_compiled_where_it_stands(engine, flow):
    if flow == "sv":
        tb = AB_TB.replace("({d[2:0], d[3]} ^ 4'h5)", "(d + 4'h3)")
        result = engine.score(sv_request(ORDER_DESIGN, {"tb.sv": tb}, simulator="icarus"))
        assert result.status == "ok" and "mismatches=0" in result.log, (result.message, result.log[-2000:])
    else:
        result = engine.score(cocotb_request(ORDER_DESIGN, ORDER_TEST, simulator="icarus"))
        assert result.status == "ok", (result.message, result.log[-2000:])
        assert [t.passed for t in result.tests] == [True], result.tests


#: A testbench that drops the design's funcs.vh (an include the scan sees, under an `ifdef
#: never defined) and declares its own mixk for the DUT to call: the DUT would then compute
#: another function (Verilator scored it ok, toggle 21/28, before the design's own includes
#: decided). The design's header stays in the design's build, so the testbench's mixk is a
#: second declaration: a compile error of the sample, never a score of an altered DUT.
HIJACK_TB = (
    '`ifdef NEVER_DEFINED\n`include "funcs.vh"\n`endif\n'
    "function [3:0] mixk(input [3:0] x, input [3:0] k);\n  mixk = 4'h0;\nendfunction\n" + TB
)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_testbench_cannot_replace_a_design_header(engine, simulator):
    result = engine.score(sv_request({"core.v": CORE, "funcs.vh": FUNCS}, {"tb.sv": HIJACK_TB}, simulator=simulator))
    assert result.status == "compile_error", (result.status, numbers(result) if result.coverage else None)
    assert "mixk" in result.log
