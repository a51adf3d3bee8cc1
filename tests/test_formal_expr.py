"""Expression (``expr``) points in the formal model (reward_service.formal): small designs
whose unreachable term combinations are worked out by hand, and the same designs simulated
with stimulus that reaches every other combination, on the fast path and on Verilator: a
point proved unreachable is never covered, and every point not proved is covered (the proofs
are neither unsound nor vacuous). The checks follow Verilator's placement: at the end of the
statement list that holds the expression (after a later blocking assignment), sticky in a
clocked block, whenever a continuous assignment is evaluated."""

from __future__ import annotations

import pytest

from reward_service.formal.exclude import key_of
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove

#: Combinational: a continuous assignment, an ``always @(*)`` whose ``t`` is 0 again where
#: the check runs, and an XOR of two terms that decide each other.
COMB = """module ca(input [1:0] v, input a, input b, output w, output reg y, output reg z);
  assign w = (v == 2'd2) && (v == 2'd3);
  reg t;
  always @(*) begin
    t = a;
    y = t && b;
    t = 1'b0;
  end
  always @(*) z = (v[0] | v[1]) ^ (v == 2'd0);
endmodule
"""

#: Clocked (a counter that never reaches 7, and reaches 5 only after five edges) and a
#: constant input of a submodule instance.
SEQ = """module cnt(input clk, input go, output reg [2:0] c, output reg hit);
  always @(posedge clk) begin
    c <= (c == 3'd5) ? 3'd0 : c + 3'd1;
    hit <= (c == 3'd7) && go;
    if ((c == 3'd5) && go) hit <= 1'b0;
  end
endmodule
module gate(input en, input a, output y);
  assign y = en && a;
endmodule
module top(input clk, input go, input a, output [2:0] c, output hit, output g);
  cnt u(.clk(clk), .go(go), .c(c), .hit(hit));
  gate k(.en(1'b0), .a(a), .y(g));
endmodule
"""

#: An asynchronous reset (its else arm is modelled, the procedure's own list is not) and a
#: loop's own statement list (not modelled).
ASYNC = """module ar(input clk, input rst_n, input a, output reg [1:0] st);
  integer i;
  reg [1:0] m;
  always @(posedge clk or negedge rst_n)
    if (!rst_n) st <= 2'd0;
    else if ((st == 2'd3) && a) st <= 2'd0;
    else if ((st == 2'd2) && (st == 2'd1)) st <= 2'd1;
    else st <= st + 2'd1;
  always @(posedge clk)
    for (i = 0; i < 2; i = i + 1) m[i] <= (st == 2'd2) && (st == 2'd1);
endmodule
"""

#: An asynchronously reset register read by a continuous assignment. When the reset falls
#: with ``f`` at 1, both simulators evaluate ``p`` on the new reset and the old ``f`` before
#: the reset lands: ``(rst_n==0 && f==1) => 1`` is covered, so it must not be proved (a model
#: whose readers see the reset value at once would prove it).
GLITCH = """module g(input clk, input rst_n, input d, output p, output reg f);
  always @(posedge clk or negedge rst_n)
    if (!rst_n) f <= 1'b0;
    else f <= d;
  assign p = rst_n ^ f;
endmodule
"""

#: (file, line, comment) of the expression points proved unreachable, by hand.
DEAD = {
    "ca.sv": {
        (2, "((v == 2'h2)==1 && (v == 2'h3)==1) => 1"),  # v cannot be 2 and 3
        (6, "(t==1 && b==1) => 1"),  # checked after `t = 1'b0`
        (9, "(v[1]==1 && (v == 2'h0)==1) => 0"),  # v == 0 needs v[1] == 0
        (9, "(v[0]==1 && (v == 2'h0)==1) => 0"),
        (9, "(v[0]==0 && v[1]==0 && (v == 2'h0)==0) => 0"),
    },
    "top.sv": {
        (4, "((c == 3'h7)==1 && go==1) => 1"),  # c counts 0..5
        (9, "(en==1 && a==1) => 1"),  # en is tied to 0
    },
    "ar.sv": {(7, "((st == 2'h2)==1 && (st == 2'h1)==1) => 1")},
    "g.sv": set(),
}

#: points left undecided (no check in the model), with the reason's start
UNDECIDED = {
    "ar.sv": {
        (5, "(rst_n==0) => 1"): "in a procedure with an asynchronous control",
        (5, "(rst_n==1) => 0"): "in a procedure with an asynchronous control",
        (10, "((st == 2'h2)==1 && (st == 2'h1)==1) => 1"): "in a loop's own statement list",
        (10, "((st == 2'h1)==0) => 0"): "in a loop's own statement list",
        (10, "((st == 2'h2)==0) => 0"): "in a loop's own statement list",
    },
    "g.sv": {
        (3, "(rst_n==0) => 1"): "in a procedure with an asynchronous control",
        (3, "(rst_n==1) => 0"): "in a procedure with an asynchronous control",
    },
}

#: undecided points no stimulus covers either (the loop's dead combination)
NEVER = {"ar.sv": {(10, "((st == 2'h2)==1 && (st == 2'h1)==1) => 1")}}

DESIGNS = {"ca.sv": COMB, "top.sv": SEQ, "ar.sv": ASYNC, "g.sv": GLITCH}

#: testbenches that reach every expression point not in DEAD (and not undecided)
TESTBENCHES = {
    "ca.sv": """module tb; reg [1:0] v = 0; reg a = 0, b = 0; wire w, y, z; integer n;
  ca dut(.v(v), .a(a), .b(b), .w(w), .y(y), .z(z));
  initial begin for (n = 0; n < 16; n = n + 1) begin {v, a, b} = n; #1; end $finish; end
endmodule
""",
    "top.sv": """module tb; reg clk = 0, go = 0, a = 0; wire [2:0] c; wire hit, g; integer n;
  top dut(.clk(clk), .go(go), .a(a), .c(c), .hit(hit), .g(g));
  initial begin
    for (n = 0; n < 16; n = n + 1) begin go = n[0] | n[2]; a = n[1]; #1 clk = 1; #1 clk = 0; end
    $finish;
  end
endmodule
""",
    "ar.sv": """module tb; reg clk = 0, rst_n = 0, a = 0; wire [1:0] st; integer n;
  ar dut(.clk(clk), .rst_n(rst_n), .a(a), .st(st));
  initial begin
    #1 rst_n = 1;
    for (n = 0; n < 12; n = n + 1) begin a = n[2]; #1 clk = 1; #1 clk = 0; end
    rst_n = 0; #1 rst_n = 1; #1 clk = 1; #1 clk = 0;
    $finish;
  end
endmodule
""",
    "g.sv": """module tb; reg clk = 0, rst_n = 1, d = 1; wire p, f;
  g dut(.clk(clk), .rst_n(rst_n), .d(d), .p(p), .f(f));
  initial begin #1 clk = 1; #1 clk = 0; #1 rst_n = 0; #1 rst_n = 1; #1 clk = 1; #1 clk = 0; $finish; end
endmodule
""",
}


def _expr(result_keys, name):
    return {(k[1], k[3]) for k in result_keys if k[0] == name and k[2] == "expr"}


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_unreachable_term_combinations_are_proved(name):
    design = {name: DESIGNS[name]}
    result = prove(design)
    assert result.status == "proved", result.reason
    assert _expr(result.unreachable, name) == DEAD[name]
    model = build_model(design)
    no_check = {(k[1], k[3]) for k, provers in model.points if k[2] == "expr" and not provers}
    assert no_check == set(UNDECIDED.get(name, {}))
    for (line, comment), why in UNDECIDED.get(name, {}).items():
        assert any(n.startswith(f"{name}:{line} {comment}: {why}") for n in model.notes), (line, comment)
    expr_points = [k for k, _ in model.points if k[2] == "expr"]
    assert result.per_metric["expr"] == [len(expr_points), len(DEAD[name])]


def test_an_unreadable_term_leaves_only_the_expression_points_undecided(monkeypatch):
    """yosys 0.23 cannot read every check the fast path writes: the design's other points are
    still proved (a second run without the checks), its expression points stay undecided."""
    from reward_service.formal import model as model_mod

    original = model_mod._expr_points

    def broken(unit, anchors, why_not, notes):
        reasons = original(unit, anchors, why_not, notes)
        if why_not is not model_mod._not_asked and unit.name == "gate":
            # a check yosys refuses (yosys 0.23 does not read `do ... while`)
            unit.insert_before(unit.syntax.endmodule, " reg y0; always @(*) begin do y0 = a; while (1'b0); end ")
        return reasons

    design = {"top.sv": SEQ}
    whole = prove(design)
    monkeypatch.setattr(model_mod, "_expr_points", broken)
    result = prove(design)
    assert result.status == "proved", result.reason
    assert result.notes[0].startswith("expression checks left out (yosys: "), result.notes[:1]
    assert not _expr(result.unreachable, "top.sv")
    assert set(result.unreachable) == {k for k in whole.unreachable if k[2] != "expr"}


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["fast", "verilator"])
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_simulation_covers_exactly_the_points_not_proved(engine, name, engine_name):
    result = prove({name: DESIGNS[name]})
    dead = set(result.unreachable)
    scored = engine.scored(
        {
            "design": {"files": {name: DESIGNS[name]}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TESTBENCHES[name]}},
            "simulator": "verilator",
            "engine": engine_name,
            "coverage": {"scope": "dut", "metrics": ["expr"]},
        }
    )
    assert scored.result.status == "ok", scored.result.message
    points = [p for p in scored.points if p.metric == "expr"]
    keys = {key_of(p) for p in points}
    assert {k for k in dead if k[2] == "expr"} <= keys  # the proof names the run's points
    covered = {(p.line, p.detail) for p in points if p.covered}
    assert not covered & DEAD[name]
    # the stimulus reaches every other combination: the proved ones are all the dead ones
    assert covered == {(p.line, p.detail) for p in points} - DEAD[name] - NEVER.get(name, set())


#: Timing outside the model, each with the expression point the model proved unreachable
#: before it refused the design, and which Verilator covers: a variable assigned with `=` in a
#: clocked procedure and read by another one (Verilator runs the writer first in both block
#: orders; the model read the value from before the edge), an incomplete level-sensitive list
#: (the model evaluated it as `@*`: `y` never stale) and a delay in an `initial` block (yosys
#: drops it: `en` was 1 from time 0).
UNSOUND = {
    "bl.sv": (
        """module bl(input clk, input d, output reg c, output reg t, output reg y);
  always @(posedge clk) begin c <= ~c; t = c; end
  always @(posedge clk) y <= (t ^ c) ? d : 1'b0;
endmodule
""",
        (3, "(t==1 && c==1) => 0"),
        "bl.sv: `t` is assigned with `=` in a clocked procedure (line 2) and read by another process",
    ),
    "bl2.sv": (
        """module bl2(input clk, input d, output reg c, output reg t, output reg y);
  always @(posedge clk) y <= (t ^ c) ? d : 1'b0;
  always @(posedge clk) begin c <= ~c; t = c; end
endmodule
""",
        (2, "(t==1 && c==1) => 0"),
        "bl2.sv: `t` is assigned with `=` in a clocked procedure (line 3) and read by another process",
    ),
    "sl.sv": (
        """module sl(input a, input b, output reg y, output z);
  always @(a) y = a & b;
  assign z = y ^ (a & b);
endmodule
""",
        (3, "(y==0 && a==1 && b==1) => 1"),
        "sl.sv: the event list of the always block at line 2 does not name `b`, which it reads",
    ),
    "ini.sv": (
        """module ini(input a, output y);
  reg en;
  initial begin en = 1'b0; #5 en = 1'b1; end
  assign y = en & a;
endmodule
""",
        (4, "(en==0) => 0"),
        "ini.sv: `#` in an initial block (line 3): its timing is not modelled",
    ),
}

UNSOUND_TESTBENCHES = {
    "bl.sv": """module tb; reg clk = 0, d = 0; wire c, t, y; integer n;
  bl dut(.clk(clk), .d(d), .c(c), .t(t), .y(y));
  initial begin for (n = 0; n < 8; n = n + 1) begin d = n[1]; #1 clk = 1; #1 clk = 0; end $finish; end
endmodule
""",
    "bl2.sv": """module tb; reg clk = 0, d = 0; wire c, t, y; integer n;
  bl2 dut(.clk(clk), .d(d), .c(c), .t(t), .y(y));
  initial begin for (n = 0; n < 8; n = n + 1) begin d = n[1]; #1 clk = 1; #1 clk = 0; end $finish; end
endmodule
""",
    "sl.sv": """module tb; reg a = 0, b = 0; wire y, z;
  sl dut(.a(a), .b(b), .y(y), .z(z));
  initial begin #1 a = 1; #1 b = 1; #1 b = 0; #1 a = 0; #1 a = 1; #1 b = 1; #1 a = 0; #1 $finish; end
endmodule
""",
    "ini.sv": """module tb; reg a = 0; wire y; integer n;
  ini dut(.a(a), .y(y));
  initial begin for (n = 0; n < 10; n = n + 1) begin a = n[0]; #1; end $finish; end
endmodule
""",
}


@pytest.mark.parametrize("name", sorted(UNSOUND))
def test_timing_outside_the_model_makes_the_design_unsupported(name):
    rtl, _, why = UNSOUND[name]
    result = prove({name: rtl})
    assert result.status == "unsupported" and result.reason.startswith(why), result.reason
    assert not result.unreachable and result.undecided == 0  # nothing decided, nothing proved


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNSOUND))
def test_verilator_covers_the_point_such_timing_hid(engine, name):
    """The refusal is needed: Verilator covers the point the model proved unreachable."""
    rtl, (line, detail), _ = UNSOUND[name]
    scored = engine.scored(
        {
            "design": {"files": {name: rtl}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": UNSOUND_TESTBENCHES[name]}},
            "simulator": "verilator",
            "engine": "verilator",
            "coverage": {"scope": "dut", "metrics": ["expr"]},
        }
    )
    assert scored.result.status == "ok", scored.result.message
    covered = {(p.line, p.detail) for p in scored.points if p.metric == "expr" and p.covered}
    assert (line, detail) in covered, sorted(covered)


def test_a_blocking_write_read_by_another_clocked_procedure_is_a_race_for_the_fast_path_too():
    """The fast path's screen finds the same race (one detector for both): Icarus may run the
    reader first where Verilator runs the writer first."""
    from reward_service.fastcov.screen import design_race

    for name in ("bl.sv", "bl2.sv"):
        rtl, _, why = UNSOUND[name]
        assert (design_race({name: rtl}) or "").startswith(why), name
    assert all(design_race({n: DESIGNS[n]}) is None for n in DESIGNS)


class _FirstYosysFails:
    """A sandbox whose first yosys run fails as the environment can make it fail (its script
    cannot be read); every other command runs as given."""

    def __init__(self, inner):
        self.inner, self.failed = inner, False

    def toolchain(self):
        return self.inner.toolchain()

    def run(self, spec):
        import dataclasses

        if spec.argv[0] == "yosys" and not self.failed:
            self.failed = True
            spec = dataclasses.replace(spec, argv=["yosys", "-q", "-s", "missing.ys"])
        return self.inner.run(spec)


def test_a_yosys_error_outside_the_checks_is_not_cached_without_them(tmp_path):
    """Only an error in the inserted checks leads to the run without them (that verdict is
    cached): after any other yosys error the design's expression points must not stay
    undecided, so the result is the error's, not kept, and the next call proves them."""
    from reward_service.formal.prover import kept
    from reward_service.sandbox import get_sandbox

    design = {"top.sv": SEQ}
    sandbox = get_sandbox("bwrap")
    first = prove(design, sandbox=_FirstYosysFails(sandbox), cache_dir=tmp_path)  # type: ignore[arg-type]
    assert first.status == "unsupported" and first.reason.startswith("yosys: "), first.reason
    assert not kept(first) and not any(n.startswith("expression checks left out") for n in first.notes)
    assert not list(tmp_path.glob("*.json"))
    again = prove(design, sandbox=sandbox, cache_dir=tmp_path)
    assert again.status == "proved", again.reason
    assert _expr(again.unreachable, "top.sv") == DEAD["top.sv"]
