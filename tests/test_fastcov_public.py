"""Constructs that took public testbenches off the fast path (issue 20 item 2), each a small
public-style sample in tests/fastcov_designs/public/<construct>/ (``design/``: the DUT and its
headers, ``stimulus/``: the SV testbench, its headers and data files; DUT instance ``dut``).

Each handled construct is scored with ``engine=fast`` and ``engine=verilator``: the fast path
must score it (no fallback) and every line, branch, toggle and expression point (key and covered
state) must equal Verilator's. The one still declined says why. ``bench/fallback_rate.py`` reads
the same samples.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from reward_service.fastcov.compare import diff_points
from reward_service.fastcov.unit import Unsupported

PUBLIC = Path(__file__).with_name("fastcov_designs") / "public"
METRICS = ["line", "branch", "toggle", "expr"]
#: construct -> the start of the fallback it still gets (Verilator scores it)
DECLINED: dict[str, str] = {}
#: construct -> a point of the construct's own code that Verilator counts: (metric, line, detail)
OWN_POINT = {
    "assertions": ("line", 24, "block"),  # the property declaration's never-counted point
    "covergroup": ("expr", 10, "(up==1 && down==0) => 1"),
    "datafile": ("line", 9, "block"),
    "include": ("line", 11, "case"),  # a case item labelled by the header's macro
    "params": ("toggle", 7, "wdata[3]:0->1"),  # DATA_W=4 from the testbench's header (no wdata[4])
    "string": ("expr", 9, "(en==1 && (MODE == %22NEAREST%22)==1) => 1"),
    "statement": ("expr", 13, "(din[i[2:0]+:1]==1 && mask[i[2:0]+:1]==0) => 1"),  # inside the foreach
}


def request(folder: Path, engine: str) -> dict:
    return {
        "design": {"files": {p.name: p.read_text() for p in sorted((folder / "design").iterdir())}},
        "stimulus": {
            "kind": "sv_testbench",
            "files": {p.name: p.read_text() for p in sorted((folder / "stimulus").iterdir())},
        },
        "coverage": {"scope": "dut", "metrics": METRICS},
        "engine": engine,
        "limits": {"run_s": 60},
    }


def test_one_sample_per_construct():
    assert not DECLINED  # all seven are handled
    assert {p.name for p in PUBLIC.iterdir()} == {
        "assertions",
        "covergroup",
        "datafile",
        "include",
        "params",
        "statement",
        "string",
    }
    assert set(OWN_POINT) | set(DECLINED) == {p.name for p in PUBLIC.iterdir()}


def _agree(engine, fast_request: dict, reference_request: dict, metrics=METRICS):
    reference_run = engine.scored(reference_request)
    reference = reference_run.result
    assert reference.status == "ok" and reference.engine == "verilator", reference.message + reference.log[-2000:]
    fast_run = engine.scored(fast_request)
    fast = fast_run.result
    assert fast.status == "ok" and fast.engine == "fast" and fast.fallback is None, (
        f"{fast.fallback} {fast.message} {fast.log[-2000:]}"
    )
    assert fast.ended_by == reference.ended_by
    diff = diff_points(fast_run.points, reference_run.points, set(metrics))
    assert diff.equal, diff.describe(30)
    assert any(not p.covered for p in reference_run.points if p.metric in metrics)  # the check can fail
    return fast_run, reference_run


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in PUBLIC.iterdir()))
def test_public_construct_agrees_with_verilator(engine, name):
    folder = PUBLIC / name
    if name in DECLINED:
        fast = engine.score(request(folder, "fast"))
        assert fast.engine == "verilator" and fast.fallback.startswith(DECLINED[name]), fast.fallback
        return
    fast_run, reference_run = _agree(engine, request(folder, "fast"), request(folder, "verilator"))
    metric, line, detail = OWN_POINT[name]
    assert any((p.metric, p.line, p.detail) == (metric, line, detail) for p in reference_run.points), sorted(
        (p.metric, p.line, p.detail) for p in reference_run.points if p.metric != "toggle"
    )
    if name == "params":  # the DUT's own DATA_W=8 would have these
        assert not any(p.detail.startswith("wdata[4]") for p in fast_run.points)


# -- concurrent assertions: declarations, arguments, sequences, a failing one --------------------

ASSERTIONS = """module asrt (input logic clk, input logic rst_n, input logic a, input logic b, output logic q);
  always_ff @(posedge clk) q <= a | b;
  property p_pass;
    @(posedge clk) 1'b1 |-> 1'b1;
  endproperty
  property p_args(x, y);
    @(posedge clk) disable iff (!rst_n) x |-> ##1 y;
  endproperty
  sequence s_ab;
    a ##1 b;
  endsequence
  property p_unused;
    @(posedge clk) a;
  endproperty
  default disable iff (!rst_n);
  default clocking cb @(posedge clk); endclocking
  a_pass: assert property (p_pass);
  a_clocked: assert property (a |-> ##1 q);
  a_args: assert property (p_args(a, q)) else begin $warning("no q"); $display("at %t", $time); end
  a_fails: assert property (@(posedge clk) a |-> b);
  c_seq: cover property (@(posedge clk) s_ab);
  assume property (@(posedge clk) !(a && b && !rst_n));
endmodule
"""
ASSERTIONS_TB = """module tb;
  logic clk = 0, rst_n = 0, a = 0, b = 0, q;
  asrt dut (.*);
  always #5 clk = ~clk;
  initial begin
    #12 rst_n = 1;
    repeat (4) begin @(negedge clk) a = 1; @(negedge clk) begin a = 0; b = 1; end @(negedge clk) b = 0; end
    $display("q=%b", q);
    $finish;
  end
endmodule
"""


def _request(design: dict, tb: str, engine: str, metrics=METRICS) -> dict:
    return {
        "design": {"files": design},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "dut", "metrics": metrics},
        "engine": engine,
        "limits": {"run_s": 60},
    }


@pytest.mark.slow
def test_assertion_declarations_and_a_failing_assertion_agree_with_verilator(engine):
    """Each property/sequence declaration (used, with arguments, unused) is a line point
    Verilator never counts; a failing assertion (default action: $error) does not stop its run;
    a default clocking block has no point."""
    design = {"asrt.sv": ASSERTIONS}
    fast_run, reference_run = _agree(
        engine, _request(design, ASSERTIONS_TB, "fast"), _request(design, ASSERTIONS_TB, "verilator")
    )
    declarations = {(p.line, p.covered) for p in reference_run.points if p.metric == "line" and p.line != 2}
    assert declarations == {(3, False), (6, False), (9, False), (12, False)}
    assert "Assertion failed" in reference_run.result.log  # a_fails fired on Verilator, which went on


def test_assertions_that_do_more_than_print_stay_on_verilator():
    from reward_service.fastcov.instrument import instrument

    fatal = ASSERTIONS.replace('$warning("no q");', '$fatal(1, "no q");')
    with pytest.raises(Unsupported, match="action does more than print"):
        instrument({"asrt.sv": fatal}, tuple(METRICS))
    counting = ASSERTIONS.replace('$warning("no q");', "fails++;").replace("always_ff", "int fails;\n  always_ff")
    with pytest.raises(Unsupported, match="action does more than print"):
        instrument({"asrt.sv": counting}, tuple(METRICS))
    procedural = ASSERTIONS.replace(
        "always_ff @(posedge clk) q <= a | b;",
        "always @(posedge clk) begin q <= a | b; assert property (a |-> b); end",
    )
    with pytest.raises(Unsupported, match="concurrent assertion inside a procedure"):
        instrument({"asrt.sv": procedural}, tuple(METRICS))


def test_assertions_are_taken_out_line_for_line():
    from reward_service.fastcov.instrument import _assertions_out

    out = _assertions_out({"asrt.sv": ASSERTIONS}, None, {})["asrt.sv"]
    assert out.count("\n") == ASSERTIONS.count("\n")
    lines = out.splitlines()
    assert lines[2].strip() == "function automatic void p_pass(); endfunction"
    assert lines[8].strip() == "function automatic void s_ab(); endfunction"
    assert "property" not in out and "assert" not in out and "cover" not in out and "disable iff" not in out
    assert "clocking" not in out


# -- string parameters ----------------------------------------------------------------------------

MODES = """module modes #(parameter string MODE = "FAST", localparam string KIND = "A") (
  input  logic       clk,
  input  logic       a,
  input  logic       b,
  output logic [1:0] y
);
  always_ff @(posedge clk) begin
    if (("SLOW" == MODE) || (a && KIND != "B")) y <= 2'd1;
    else if (MODE != "FAST" && !b) y <= 2'd2;
    else y <= {a, b};
  end
endmodule
"""
MODES_TB = """module tb;
  logic clk = 0, a = 0, b = 0;
  logic [1:0] y;
  modes #(.MODE("MEDIUM")) dut (.clk(clk), .a(a), .b(b), .y(y));
  always #5 clk = ~clk;
  initial begin
    repeat (2) @(negedge clk);
    a = 1; @(negedge clk);
    a = 0; b = 1; @(negedge clk);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_string_parameter_comparisons_agree_with_verilator(engine):
    """A literal on either side, ``!=``, a localparam, a value the testbench gives."""
    design = {"modes.sv": MODES}
    _, reference_run = _agree(engine, _request(design, MODES_TB, "fast"), _request(design, MODES_TB, "verilator"))
    assert ("((MODE != %22FAST%22)==1 && b==0) => 1", True) in {
        (p.detail, p.covered) for p in reference_run.points if p.metric == "expr"
    }


@pytest.mark.parametrize(
    "use",
    ['assign y = 2\'d0;\n  initial $display("%s", MODE);', "assign y = (MODE < \"G\") ? 2'd1 : 2'd0;"],
)
def test_other_uses_of_a_string_parameter_stay_on_verilator(use):
    from reward_service.fastcov.instrument import instrument

    design = {"m.sv": f'module m #(parameter string MODE = "FAST") (output logic [1:0] y);\n  {use}\nendmodule\n'}
    with pytest.raises(Unsupported, match="string"):
        instrument(design, tuple(METRICS))


# -- covergroups in the testbench ----------------------------------------------------------------

COUNTER = """module cnt (input logic clk, input logic up, output logic [2:0] q);
  always_ff @(posedge clk) if (up) q <= q + 1'b1;
endmodule
"""
COVERGROUP_TB = """module tb;
  logic clk = 0, up = 0;
  logic [2:0] q;
  real got;
  cnt dut (.*);
  covergroup cg_q with function sample(logic [2:0] v);
    option.per_instance = 1;
    cp: coverpoint v;
  endgroup
  cg_q cgs;
  always #5 clk = ~clk;
  always @(posedge clk) cgs.sample(q);
  initial begin
    cgs = new();
    cgs.option.weight = 2;
    up = 1;
    repeat (5) @(negedge clk);
    got = cgs.get_coverage() + cg_q::get_coverage();
    if (got == 0.0) begin
      up = 0;  // Verilator ignores covergroups: get_coverage() is 0.0 there, so this arm runs
      repeat (2) @(negedge clk);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_testbench_covergroup_uses_agree_with_verilator(engine):
    design = {"cnt.sv": COUNTER}
    _agree(engine, _request(design, COVERGROUP_TB, "fast"), _request(design, COVERGROUP_TB, "verilator"))


def test_a_covergroup_use_that_cannot_be_taken_out_keeps_the_file_as_written():
    from reward_service.fastcov.instrument import emulate_testbench

    out, skipped = emulate_testbench({"tb.sv": COVERGROUP_TB})
    assert skipped == [] and "covergroup cg_q" not in out["tb.sv"] and "0.0 + 0.0" in out["tb.sv"]
    assert out["tb.sv"].count("\n") == COVERGROUP_TB.count("\n")
    passed = COVERGROUP_TB.replace("cgs = new();", "cgs = new(); $display(cgs);")
    out, skipped = emulate_testbench({"tb.sv": passed})
    assert skipped == ["tb.sv"] and out["tb.sv"] == passed


SIDE_EFFECT_TB = """module tb;
  logic clk = 0, up = 0, kill = 0;
  logic [2:0] q;
  cnt dut (.*);
  covergroup cg_b with function sample(bit b); coverpoint b; endgroup
  cg_b c;
  function automatic bit kill_it(); kill = 1; return 1'b0; endfunction
  always #5 clk = ~clk;
  initial begin
    c = new();
    c.sample(kill_it());
    if (!kill) up = 1;
    repeat (4) @(negedge clk);
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize(
    "use",
    [
        "c.sample(kill_it());",
        "c.sample(kill_it);",  # a function called without parentheses
        "c.sample(q++ == 0);",
        "c.sample($random);",
        "c.option.weight = kill_it();",
    ],
)
def test_a_covergroup_statement_with_side_effects_is_not_blanked(use):
    from reward_service.fastcov.instrument import emulate_testbench

    tb = SIDE_EFFECT_TB.replace("c.sample(kill_it());", use)
    out, skipped = emulate_testbench({"tb.sv": tb})
    assert skipped == ["tb.sv"] and out["tb.sv"] == tb
    pure = SIDE_EFFECT_TB.replace("c.sample(kill_it());", "c.sample(q[0] & ~kill);")
    out, skipped = emulate_testbench({"tb.sv": pure})
    assert skipped == [] and "sample" not in out["tb.sv"]


@pytest.mark.slow
def test_a_covergroup_sample_with_side_effects_is_scored_as_verilator_does(engine):
    """Red team: blanking `c.sample(kill_it())` dropped the call's effect, so the fast path ran
    another testbench (1.741 against Verilator's 1.324)."""
    design = {"cnt.sv": COUNTER}
    reference = engine.score(_request(design, SIDE_EFFECT_TB, "verilator"))
    fast = engine.score(_request(design, SIDE_EFFECT_TB, "fast"))
    assert reference.status == fast.status == "ok", fast.message
    assert fast.engine == "verilator" and fast.reward == reference.reward
    # up stays 0: q never counts
    assert reference.coverage.metrics["toggle"].covered < reference.coverage.metrics["toggle"].total


def test_sample_with_arguments_on_a_covergroup_without_a_sample_function_is_not_blanked():
    """`c.sample(x)` compiles only with `with function sample(...)`: Verilator rejects it, so
    the fast path must not take it out and score the testbench."""
    from reward_service.fastcov.instrument import emulate_testbench

    tb = SIDE_EFFECT_TB.replace(" with function sample(bit b); coverpoint b;", " @(posedge clk); coverpoint up;")
    out, skipped = emulate_testbench({"tb.sv": tb.replace("c.sample(kill_it());", "c.sample(kill);")})
    assert skipped == ["tb.sv"]
    out, skipped = emulate_testbench({"tb.sv": tb.replace("c.sample(kill_it());", "c.sample();")})
    assert skipped == []


# -- data files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, why",
    [
        ('f = $fopen("/work/src/dut.sv", "r");', "of a name that is not a plain string literal"),
        ('f = $fopen("../obj/sim.vvp", "r");', "of a name that is not a plain string literal"),
        ('f = $fopen("sim.vvp", "rb");', "`$fopen` mode rb of 'sim.vvp', not a data file of the request"),
        ('f = $fopen({"vec", "tors.txt"}, "r");', "not a plain string literal"),
        ('f = $fopen("vectors\\x2etxt", "r");', "not a plain string literal"),
        ("$readmemh(name, mem);", "`$readmemh` of a name that is not a plain string literal"),
        ('$readmemh("data/rom.hex", mem); f = $fopen(name, "r");', "`$fopen` mode r of a name"),
    ],
)
def test_reading_anything_but_the_requests_data_files_is_screened(text, why):
    from reward_service.fastcov.screen import reads_files

    tb = f"module tb; integer f; string name; logic [7:0] mem [4]; initial begin {text} end endmodule"
    reason = reads_files(SimpleNamespace(files={"tb.sv": tb}), ["vectors.txt", "data/rom.hex"])
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize(
    "text",
    [
        'f = $fopen("vectors.txt", "r"); n = $fscanf(f, "%d", x); $fclose(f);',
        'f = $fopen("./vectors.txt", "r"); $readmemh("data/rom.hex", mem); n = $fgets(s, f);',
        'f = $fopen("out.txt", "w"); $fdisplay(f, "x");',
    ],
)
def test_reading_the_requests_data_files_keeps_the_fast_path(text):
    from reward_service.fastcov.screen import reads_files

    tb = f"module tb; integer f, n, x; string s; logic [7:0] mem [4]; initial begin {text} end endmodule"
    assert reads_files(SimpleNamespace(files={"tb.sv": tb}), ["vectors.txt", "data/rom.hex"]) is None


TOKEN_READ_TB = r"""`define OPEN $fopen
module tb;
  logic clk = 0, up = 0;
  logic [2:0] q;
  cnt dut (.*);
  integer fd, c, n;
  always #5 clk = ~clk;
  initial begin
    fd = `OPEN("/work/src/cnt.sv", "r");
    n = 0;
    c = $fgetc(fd);
    while (c >= 0) begin n = n + 1; c = $fgetc(fd); end
    if (n > 0) up = 1;
    repeat (4) @(negedge clk);
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize(
    "text",
    [
        'f = `OPEN("/work/src/dut.sv", "r"); n = $fgetc(f);',  # `$fopen` behind a macro: none seen
        "n = $fgetc(32'h8000_0000);",  # a descriptor written as a number
        'f = $fopen("vectors.txt", "r"); n = $fgetc(32\'h8000_0003);',
        'f = $fopen("vectors.txt", "r"); f = `OPEN("/work/src/dut.sv", "r"); n = $fgetc(f);',
        'f = $fopen("vectors.txt", "r"); n = $fgetc(f + 1);',
        'f = $fopen("vectors.txt", "r"); n = `P($fg, etc)(f);',  # token pasting
    ],
)
def test_a_read_the_screen_cannot_trace_to_a_data_file_is_refused(text):
    from reward_service.fastcov.screen import reads_files

    tb = f"`define OPEN $fopen\n`define P(a, b) a``b\nmodule tb; integer f, n; initial begin {text} end endmodule"
    reason = reads_files(SimpleNamespace(files={"tb.sv": tb}), ["vectors.txt"])
    assert reason is not None, text


@pytest.mark.slow
def test_a_testbench_reading_the_instrumented_source_through_a_macro_is_scored_by_verilator(engine):
    """Red team: `` `define OPEN $fopen `` hid the open, the screen let `$fgetc` through, and
    the testbench read the run's token from the instrumented source (reward 2.0 vs 1.24)."""
    design = {"cnt.sv": COUNTER}
    reference = engine.score(_request(design, TOKEN_READ_TB, "verilator"))
    fast = engine.score(_request(design, TOKEN_READ_TB, "fast"))
    assert fast.status == reference.status == "ok", fast.message
    assert fast.engine == "verilator" and "reads files (`$fgetc`)" in fast.fallback
    assert fast.reward == reference.reward


# -- `include --------------------------------------------------------------------------------------


def test_an_include_the_request_does_not_hold_is_refused():
    from reward_service.fastcov.instrument import instrument

    design = {"alu.v": '`include "/etc/hostname"\nmodule alu (input a, output y); assign y = a; endmodule\n'}
    with pytest.raises(Unsupported, match="names no file of the request"):
        instrument(design, tuple(METRICS))
    design = {"alu.v": "`include `HDR\nmodule alu (input a, output y); assign y = a; endmodule\n"}
    with pytest.raises(Unsupported, match="not a literal"):
        instrument(design, tuple(METRICS))


def test_code_from_an_included_file_is_not_instrumented():
    from reward_service.fastcov.instrument import instrument

    design = {
        "top.v": '`include "body.vh"\n',
        "body.vh": "module top (input a, output reg y); always @(*) if (a) y = 1; else y = 0; endmodule\n",
    }
    with pytest.raises(Unsupported, match="`include'd file is not instrumented"):
        instrument(design, tuple(METRICS))


TYPES = "typedef enum bit [1:0] {IDLE, RUN, DONE} state_t;\nlocalparam int LIMIT = 3;\n"
FSM = """`include "types.svh"
module fsm (input logic clk, input logic rst, input logic go, output state_t st);
  logic [1:0] n;
  always_ff @(posedge clk) begin
    if (rst) begin st <= IDLE; n <= 0; end
    else case (st)
      IDLE: if (go) st <= RUN;
      RUN: begin n <= n + 1; if (n == LIMIT - 1 && !go) st <= DONE; end
      default: st <= IDLE;
    endcase
  end
endmodule
"""
FSM_TB = """module tb;
  logic clk = 0, rst = 1, go = 0;
  logic [1:0] st;
  fsm dut (.*);
  always #5 clk = ~clk;
  initial begin @(negedge clk) rst = 0; go = 1; @(negedge clk) go = 0; repeat (4) @(negedge clk); $finish; end
endmodule
"""


@pytest.mark.slow
def test_a_header_of_declarations_before_the_module_agrees_with_verilator(engine):
    """The file's first token comes from the header (its own buffer is found by its last)."""
    design = {"types.svh": TYPES, "fsm.sv": FSM}
    _agree(engine, _request(design, FSM_TB, "fast"), _request(design, FSM_TB, "verilator"))


def test_a_header_whose_code_needs_a_rewrite_is_refused():
    """A ``logic`` typedef in a header would have to become 2-state in the header's own text
    (a documented gap: Verilator scores such designs)."""
    from reward_service.fastcov.instrument import instrument

    design = {"types.svh": TYPES.replace("enum bit", "enum logic"), "fsm.sv": FSM}
    with pytest.raises(Unsupported, match="`include'd file is not instrumented"):
        instrument(design, tuple(METRICS))


TEST_ASRT = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge


@cocotb.test()
async def drive(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst_n.value = 0
    dut.a.value = 0
    dut.b.value = 0
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    for a, b in [(1, 0), (0, 1), (1, 1), (0, 0), (1, 0)]:
        await FallingEdge(dut.clk)
        dut.a.value = a
        dut.b.value = b
    await RisingEdge(dut.clk)
"""


@pytest.mark.slow
def test_assertions_under_cocotb_stay_on_verilator(engine):
    """Verilator's cocotb run ends at a failing assertion (ended_by sim_ended_early; the SV
    testbench run goes on), so the fast path cannot drop them there."""
    request = {
        "design": {"files": {"asrt.sv": ASSERTIONS}, "toplevel": "asrt"},
        "stimulus": {"kind": "cocotb", "test_module": "test_asrt", "files": {"test_asrt.py": TEST_ASRT}},
        "coverage": {"metrics": METRICS},
        "limits": {"run_s": 60},
    }
    reference = engine.score({**request, "engine": "verilator"})
    assert reference.status == "ok" and reference.ended_by == "sim_ended_early", reference.message
    fast = engine.score({**request, "engine": "fast"})
    assert fast.engine == "verilator" and fast.fallback.startswith(
        "asrt.sv: concurrent assertions under cocotb (a failing one ends Verilator's cocotb run"
    ), fast.fallback
