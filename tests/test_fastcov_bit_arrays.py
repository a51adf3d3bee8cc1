"""Big unpacked arrays as 2-state ``bit`` arrays on the fast path (issue 20: zeroing a 4-state
array of 2^16 words was ~550 M of vvp's instructions on async_fifo_compute_ram_0004). Only
arrays with no toggle points (more than 256 bits) that are named nowhere Icarus 11 aborts on a
2-state array (a sensitivity list, ``@*``, a part-select write of an element) become ``bit``;
the points must stay Verilator's, where a 4-state array kept an undriven value's X and
Verilator reads 0."""

from __future__ import annotations

import pytest
from helpers import covered_keys, score_one_file

from reward_service.fastcov.instrument import instrument

#: 64 x 8 = 512 bits (no toggle points); `mem` is written an undriven net's value (X/Z on a
#: 4-state array: its read then took the `else` arm; 0 on Verilator).
DUT = """module bigmem (input logic clk, input logic we, input logic [6:0] a, output logic hit, output logic miss);
  wire [7:0] floating;
  logic [7:0] mem [0:63];
  always_ff @(posedge clk) begin
    if (we) mem[a] <= floating;
    if (mem[a] == 8'd0)
      hit <= 1'b1;
    else
      miss <= 1'b1;
  end
endmodule
"""

TB = """module tb;
  logic clk = 0, we = 0; logic [6:0] a = 0; wire hit, miss;
  bigmem dut (.clk(clk), .we(we), .a(a), .hit(hit), .miss(miss));
  always #5 clk = ~clk;
  initial begin
    @(negedge clk) begin we = 1; a = 7'd3; end
    @(negedge clk) we = 0;
    repeat (2) @(negedge clk);
    $finish;
  end
endmodule
"""


def _same_points(engine, name: str, dut: str, tb: str):
    """(line, metric, detail) of the points Verilator covers, which the fast path must cover
    too, and Verilator's scored sample."""
    fast = score_one_file(engine, name, dut, tb, "fast")
    reference = score_one_file(engine, name, dut, tb, "verilator")
    assert fast.result.engine == "fast", fast.result.fallback
    assert fast.result.status == reference.result.status == "ok", (fast.result.message, reference.result.message)
    assert covered_keys(fast) == covered_keys(reference)
    return {(k[1], k[2], k[3]) for k in covered_keys(reference)}, reference


def _same_prints(engine, name: str, dut: str, tb: str, count: int) -> list[str]:
    """The testbench's `RS ` lines, equal on both engines (``count`` of them): Verilator's."""
    runs = {e: score_one_file(engine, name, dut, tb, e).result for e in ("fast", "verilator")}
    lines = {e: [ln.strip() for ln in (r.log or "").splitlines() if "RS " in ln] for e, r in runs.items()}
    assert runs["fast"].engine == "fast" and len(lines["verilator"]) == count, runs["fast"].fallback
    assert lines["fast"] == lines["verilator"]
    return lines["verilator"]


def _module(text: str, name: str) -> str:
    start = text.index(f"module {name}")
    return text[start : text.index("endmodule", start)]


def test_a_big_array_read_only_at_clock_edges_becomes_bit_without_a_zeroing_loop():
    text = instrument({"bigmem.sv": DUT}).files["bigmem.sv"]
    assert "bit [7:0] mem [0:63];" in text
    assert "initial foreach (mem[" not in text


@pytest.mark.parametrize(
    "use",
    [
        "always @(*) q = mem[a];",  # a sensitivity list of a 2-state element aborts vvp
        "always_comb q = mem[a];",
        "always @(posedge clk) mem[a][3:0] <= 4'd1;",  # a part of a 2-state element: set_word aborts
        "always @(posedge clk) mem[a][2] <= 1'b1;",
        "always @(mem[2]) q = 8'd1;",
        "assign w = mem[a];",
        "function automatic logic [7:0] f(input logic [6:0] i); f = mem[i]; endfunction",
    ],
)
def test_an_array_named_where_icarus_aborts_on_bit_stays_4_state(use):
    dut = f"""module m (input logic clk, input logic [5:0] a, output logic [7:0] q, output logic [7:0] w);
  logic [7:0] mem [0:63];
  always @(posedge clk) mem[a] <= q;
  {use}
endmodule
"""
    text = _module(instrument({"m.sv": dut}).files["m.sv"], "m")
    assert "logic [7:0] mem [0:63];" in text
    assert "initial foreach (mem[" in text


def test_a_small_array_keeps_its_toggle_watchers_and_stays_4_state():
    dut = """module m (input logic clk, input logic [1:0] a, input logic [7:0] d, output logic [7:0] q);
  logic [7:0] mem [0:3];
  always @(posedge clk) begin mem[a] <= d; q <= mem[a]; end
endmodule
"""
    text = instrument({"m.sv": dut}).files["m.sv"]
    assert "logic [7:0] mem [0:3];" in text
    assert "@(mem[__rs_g0])" in text  # the element watchers a bit array would abort on


def test_an_array_small_in_one_instance_stays_4_state():
    """Parameters decide the size per instance: one small instance has toggle watchers."""
    dut = """module m #(parameter N = 64) (input logic clk, input logic [5:0] a, output logic [7:0] q);
  logic [7:0] mem [0:N-1];
  always @(posedge clk) q <= mem[a];
endmodule
module top (input logic clk, input logic [5:0] a, output logic [7:0] q1, output logic [7:0] q2);
  m #(.N(64)) big (.clk(clk), .a(a), .q(q1));
  m #(.N(4)) little (.clk(clk), .a(a), .q(q2));
endmodule
"""
    text = _module(instrument({"m.sv": dut}).files["m.sv"], "m")
    assert "logic [7:0] mem [0:N-1];" in text


@pytest.mark.slow
def test_a_bit_array_covers_verilators_points(engine):
    covered, _ = _same_points(engine, "bigmem.sv", DUT, TB)
    # Verilator reads the word written from the undriven net as 0: never the else arm
    assert (6, "branch", "if") in covered and (6, "branch", "else") not in covered


#: Out-of-range indices (docs/fastcov.md): Verilator keeps $clog2(hi + 1) bits of an index, for
#: writes and reads; what is still out of range writes nothing and reads 0. Icarus wrote nothing
#: and read X for all of them.
OOB_DUT = """module oob (input logic clk, input logic [6:0] a, input logic [7:0] d, output logic [3:0] seen);
  logic [7:0] mem [0:63];
  logic [7:0] six [0:5];
  logic [7:0] hi [1:4];
  integer j;
  always_ff @(posedge clk) begin
    mem[a] <= d;
    six[a] <= d;
    hi[a] <= d;
    if (mem[a - 7'd64] == 8'd9)
      seen[0] <= 1'b1;
    if (six[a] == 8'd0)
      seen[1] <= 1'b1;
    else
      seen[2] <= 1'b1;
    if (hi[a] != 8'd0)
      seen[3] <= 1'b1;
  end
  logic [7:0] sh [0:1];
  logic [7:0] last;
  always_ff @(posedge clk) begin
    sh[0] <= d;
    for (j = 0; j < 2; j = j + 1)
      sh[j + 1] <= sh[j];
    last <= sh[0];
  end
endmodule
"""

OOB_TB = """module tb;
  logic clk = 0; logic [6:0] a = 0; logic [7:0] d = 0; wire [3:0] seen;
  oob dut (.clk(clk), .a(a), .d(d), .seen(seen));
  always #5 clk = ~clk;
  initial begin
    @(negedge clk) begin a = 7'd100; d = 8'd9; end  // mem[36], six[4]; hi: nothing
    @(negedge clk) begin a = 7'd7; d = 8'd5; end    // six: nothing, reads 0; hi[7 & 7]: nothing
    @(negedge clk) begin a = 7'd6; d = 8'd0; end    // six: nothing (6 & 7 = 6 > 5)
    @(negedge clk) begin a = 7'd12; d = 8'd3; end   // six[4], hi[4]
    repeat (3) @(negedge clk);
    $finish;
  end
endmodule
"""


def test_out_of_range_indices_are_cut_and_read_0_as_on_verilator():
    text = instrument({"oob.sv": OOB_DUT}).files["oob.sv"]
    assert "mem[((($bits(a))'(a)) & 63)] <= d;" in text
    cut = "((($bits(a))'(a)) & 7)"
    assert f"(({cut} >= (0) && {cut} <= (5)) ? six[{cut}] : '0) == 8'd0" in text


@pytest.mark.slow
def test_out_of_range_indices_cover_verilators_points(engine):
    covered, reference = _same_points(engine, "oob.sv", OOB_DUT, OOB_TB)
    # hi[12] is hi[4] on Verilator (Icarus wrote nothing and read X, which is not != 0)
    assert (16, "branch", "if") in covered
    # the shift register's sh[2] write lands in sh[0] (the later nonblocking write wins): sh
    # stays 0, and so does `last` (Icarus dropped the write: sh[0] took d)
    toggles = {p.detail for p in reference.points if p.metric == "toggle" and p.line == 20}
    assert "last[0]:0->1" in toggles and (20, "toggle", "last[0]:0->1") not in covered


def test_another_scopes_array_keeps_its_own_index():
    """`u.mem[a]` is the instance's array, not the module's own `mem`: no bounds of the latter."""
    dut = """module m (input logic clk, input logic [6:0] a, output logic [7:0] q);
  logic [7:0] mem [0:99];
  always_ff @(posedge clk) q <= mem[a];
endmodule
module top (input logic clk, input logic [6:0] a, output logic [7:0] q, output logic [7:0] r);
  logic [7:0] mem [0:5];
  m u (.clk(clk), .a(a), .q(q));
  always_ff @(posedge clk) r <= u.mem[a] + mem[a];
endmodule
"""
    text = instrument({"m.sv": dut}, ("line",)).files["m.sv"]  # expr refuses hierarchical values
    cut = "((($bits(a))'(a)) & 7)"
    assert f"r <= u.mem[a] + (({cut} >= (0) && {cut} <= (5)) ? mem[{cut}] : '0);" in text
    cut = "((($bits(a))'(a)) & 127)"
    assert f"(({cut} >= (0) && {cut} <= (99)) ? mem[{cut}] : '0)" in text


def test_an_index_with_a_line_comment_is_masked_but_not_copied():
    """The range check copies the index's text onto one line: a `//` comment would end it."""
    dut = """module m (input logic clk, input logic [6:0] a, output logic [7:0] q);
  logic [7:0] mem [0:5];
  always_ff @(posedge clk) q <= mem[a + // the address
  7'd0];
endmodule
"""
    text = instrument({"m.sv": dut}, ("line",)).files["m.sv"]
    assert "q <= mem[(($unsigned(a + // the address\n  7'd0)) & 7)];" in text


#: An index in its own width (attacker review 12-05): `i + 2'd1` of a 2-bit `i` is 0 at i = 3 on
#: Verilator (the index is self-determined), so `mem[i + 2'd1]` reads `mem[0]`; the mask's 32
#: bits widened it to 4 (`mem[4]`): the fast path missed `hit`, and the prover proved it.
SELF_WIDTH_DUT = """module wrap(input clk, input [1:0] i, output reg hit);
  reg [3:0] mem [0:7];
  integer k;
  initial begin hit = 0; for (k = 0; k < 8; k = k + 1) mem[k] = 0; end
  always @(posedge clk) begin
    mem[0] <= 4'hF;
    if (mem[i + 2'd1] == 4'hF) hit <= 1;
  end
endmodule
"""
SELF_WIDTH_TB = """module tb;
  reg clk = 0; reg [1:0] i = 3; wire hit;
  wrap dut(.clk(clk), .i(i), .hit(hit));
  always #5 clk = ~clk;
  initial begin #40 $finish; end
endmodule
"""


@pytest.mark.slow
def test_an_index_keeps_its_own_width_as_on_verilator(engine):
    covered, _ = _same_points(engine, "wrap.sv", SELF_WIDTH_DUT, SELF_WIDTH_TB)
    assert (7, "branch", "if") in covered and (1, "toggle", "hit:0->1") in covered


#: Bit- and indexed part-selects past a packed vector's end (cid012's
#: binary_search_tree_sorting_0030 reads `left_child[node*5 +: 5]` with node 15 of 15 nodes: X
#: on the fast path, 0 on Verilator, and the engines took different FSM branches: 102 toggle
#: points apart on its closure testbench). Verilator cuts the lowest bit to $clog2($bits(v))
#: bits, then reads 0 and writes nothing past the top; the base keeps its own width. `s`, `wr4`:
#: the same for a bit-select (sync_serial_communication_0009's `data_reg[bit_count]`). (`w2` is
#: 40 bits: Verilator 5.052 counts a toggle of bit b of a port over 64 bits also at b+32 and
#: b+64, a difference of its own, not this test's.)
PART_SELECT_DUT = """module ps(input clk, input [3:0] i, input [14:0] v, input [74:0] w, input [15:0] x16, input [39:0] w2,
  output [4:0] a, output [4:0] b, output [4:0] c, output [4:0] d, output [4:0] e, output [4:0] f, output [4:0] g,
  output [3:0] h, output [1:0] k, output s, output reg [14:0] wr1, output reg [14:0] wr3, output reg [74:0] wr2,
  output reg [14:0] wr4, output reg hit);
  assign a = v[i*5 +: 5];
  assign b = v[i*4 +: 5];
  assign c = v[i*5 -: 5];
  assign d = w[i*20 +: 5];
  assign e = w[i*18 +: 5];
  assign f = v[(i-5)*5 +: 5];
  assign g = w[(i-5)*5 +: 5];
  assign h = x16[i*4 +: 4];
  assign k = w2[i + 4'd13 +: 2];
  assign s = v[i*3];
  initial begin wr1 = 0; wr2 = 0; wr3 = 0; wr4 = 0; hit = 0; end
  always @(posedge clk) begin
    wr1[i*4 +: 5] <= 5'b10101;
    wr3[i*5 -: 5] <= 5'b10101;
    wr2[i*18 +: 5] <= 5'b10101;
    wr4[i*5] <= 1'b1;
    if (v[i*5 +: 5] != 5'b11111) hit <= 1;
  end
endmodule
"""
PART_SELECT_TB = """module tb;
  reg clk = 0; reg [3:0] i = 0; reg [14:0] v = 15'h7fff; reg [74:0] w = {75{1'b1}};
  reg [15:0] x16 = 16'h00f5; reg [39:0] w2 = 40'h3;
  wire [4:0] a, b, c, d, e, f, g; wire [3:0] h; wire [1:0] k; wire s; wire [14:0] wr1, wr3, wr4; wire [74:0] wr2;
  wire hit;
  ps dut(.clk(clk), .i(i), .v(v), .w(w), .x16(x16), .w2(w2), .a(a), .b(b), .c(c), .d(d), .e(e), .f(f), .g(g),
         .h(h), .k(k), .s(s), .wr1(wr1), .wr3(wr3), .wr2(wr2), .wr4(wr4), .hit(hit));
  integer n;
  initial begin
    for (n = 0; n < 16; n = n + 1) begin
      i = n; #1;
      $display("RS i=%0d a=%b b=%b c=%b d=%b e=%b f=%b g=%b h=%b k=%b s=%b", i, a, b, c, d, e, f, g, h, k, s);
    end
    i = 3; #1 clk = 1; #1 clk = 0;
    i = 4; #1 clk = 1; #1 clk = 0;
    $display("RS wr1=%b wr3=%b wr2=%h wr4=%b hit=%b", wr1, wr3, wr2, wr4, hit);
    $finish;
  end
endmodule
"""


def test_part_selects_are_cut_and_zeroed_in_the_text():
    text = instrument({"ps.sv": PART_SELECT_DUT}).files["ps.sv"]
    mask = "((1 << ($clog2($bits(v)) > 0 ? $clog2($bits(v)) : 1)) - 1)"
    # a read: shifted down by the cut lowest bit (zeros past the top), cast to its width
    assert f"assign a = $unsigned((5)'(v >> ((($bits(i*5))'(i*5)) & {mask})  ));" in text
    assert (
        f"assign c = $unsigned((5)'(v >> ((($bits(i*5))'(i*5) - (5) + 1) & {mask})  ));" in text
    )  # `-:`: its lowest bit
    assert f"assign s = $unsigned(1'(v >> ((($bits(i*3))'(i*3)) & {mask})));" in text
    # a write: cut only (Verilator writes nothing past the top; nor does Icarus)
    mask = mask.replace("(v)", "(wr3)")
    assert f"wr3[((($bits(i*5))'(i*5) - (5) + 1) & {mask}) +: 5] <= 5'b10101;" in text


@pytest.mark.slow
def test_part_selects_past_the_end_read_and_write_as_on_verilator(engine):
    """Every printed value equal on both engines; a few of Verilator's, worked out by hand:
    `v[20 +: 5]` of 15 bits is `v[4 +: 5]`, `v[30 +: 5]` is `v[14 +: 5]` (one bit, then 0),
    `v[-4 +: 5]` is `v[12 +: 5]`; a write at 16 lands at 0."""
    lines = _same_prints(engine, "ps.sv", PART_SELECT_DUT, PART_SELECT_TB, 17)
    rows = {ln.split()[1]: ln for ln in lines}
    assert "a=11111" in rows["i=4"] and "a=00001" in rows["i=6"] and "a=00000" in rows["i=3"]
    assert "c=00111" in rows["i=0"] and "h=0101" in rows["i=4"] and "k=11" in rows["i=3"]
    assert "s=0" in rows["i=5"] and "s=1" in rows["i=6"]  # v[15] past the top; v[18] is v[2]
    assert "RS wr1=101000000010101 wr3=010100000010101 wr2=5000540000000000000 wr4=000000000010000 hit=1" in lines


@pytest.mark.slow
def test_part_selects_past_the_end_cover_verilators_points(engine):
    covered, _ = _same_points(engine, "ps.sv", PART_SELECT_DUT, PART_SELECT_TB)
    assert (21, "branch", "if") in covered  # v[15 +: 5] reads 00000 (Icarus: xxxxx, not != 5'b11111)


#: Indices holding selects and calls (attacker review 12-05: a base holding another select was
#: only cut, not zeroed past the top; an array's range check copied a nested select uncut, and
#: the two rewrites' parentheses crossed where one select was the other's whole index). A read
#: of a vector is a shift now (no copy of its index); an array's check copies its index as
#: rewritten in place. Reads as a function's input, an input port's connection and in `wait`
#: are reads too; a function's arguments are vectors as the module's are. On Verilator, by hand: `w[12]` of 10 bits reads 0, `v[w[k]]` is `v[0]`...
NESTED_DUT = """module nest(input clk, input [3:0] i, input [2:0] k, input [9:0] w, input [14:0] v,
  output [4:0] a, output b, output [7:0] c, output d, output e, output reg f, output reg g);
  reg [7:0] mem [0:5];
  reg [3:0] idx [0:2];
  integer n;
  function automatic logic [4:0] pick(input logic [3:0] at, logic [14:0] from);
    pick = from[at +: 5];
  endfunction
  function automatic logic [3:0] twice(input logic [3:0] x);
    twice = x + x;
  endfunction
  initial begin
    f = 0; g = 0;
    for (n = 0; n < 6; n = n + 1) mem[n] = 8'd10 + n;
    idx[0] = 4'd9; idx[1] = 4'd2; idx[2] = 4'd14;
  end
  assign a = v[w[i +: 4] +: 5];
  assign b = v[twice(i)];
  assign c = mem[idx[k]];
  assign d = w[idx[k]];
  pass1 u (.y(e), .a(w[i + 4'd1]));
  always @(posedge clk) begin
    if (pick(i, v) == 5'd0) f <= 1;
    if (w[twice(i)]) g <= 1;
  end
endmodule
module pass1(output y, input a);
  assign y = a;
endmodule
"""
NESTED_TB = """module tb;
  reg clk = 0; reg [3:0] i = 0; reg [2:0] k = 0; reg [9:0] w = 10'b1111100001; reg [14:0] v = 15'h7ffe;
  wire [4:0] a; wire b, d, e, f, g; wire [7:0] c;
  nest dut(.clk(clk), .i(i), .k(k), .w(w), .v(v), .a(a), .b(b), .c(c), .d(d), .e(e), .f(f), .g(g));
  integer n;
  initial begin
    for (n = 0; n < 16; n = n + 1) begin
      i = n; k = n[2:0]; #1;
      $display("RS i=%0d a=%b b=%b c=%0d d=%b e=%b", i, a, b, c, d, e);
      clk = 1; #1 clk = 0;
    end
    $display("RS f=%b g=%b", f, g);
    $finish;
  end
endmodule
"""


def test_indices_holding_selects_and_calls_are_read_once_and_nest():
    text = instrument({"nest.sv": NESTED_DUT}, ("line",)).files["nest.sv"]
    line = {ln.split("=")[0].strip(): ln for ln in text.splitlines() if "assign" in ln}
    # the call made once: `$bits` evaluates nothing
    assert line["assign b"].startswith("  assign b = $unsigned(1'(v >> ((($bits(twice(i)))'(twice(i))) & ")
    # the array's check copies `idx[k]` as it reads in place: cut, zeroed past idx [0:2]
    k = "((($bits(k))'(k)) & 3)"
    inner = f"(({k} >= (0) && {k} <= (2)) ? idx[{k}] : '0)"
    assert f"assign c = ((((($bits(idx[k]))'({inner})) & 7) >= (0) && " in line["assign c"]
    assert f"mem[((($bits(idx[k]))'({inner})) & 7)] : '0);" in line["assign c"]
    assert "pass1 u (.y(e), .a($unsigned(1'(w >> " in text  # an input port's connection is read
    assert "pick = $unsigned((5)'(from >> ((($bits(at))'(at)) & " in text  # a function's argument, as its vector


@pytest.mark.slow
def test_indices_holding_selects_and_calls_read_as_on_verilator(engine):
    """Every printed value equal on both engines; some of Verilator's, worked out by hand:
    i = 3: `w[3 +: 4]` = 4'b1100 = 12, `v[12 +: 5]` = 5'b00111; `idx[3]` is cut to `idx[3]`,
    past [0:2]: reads 0, so `mem[0]` = 10 and `w[0]` = 1; i = 12: `w[13]` is cut to `w[13]`,
    past the top: 0."""
    lines = _same_prints(engine, "nest.sv", NESTED_DUT, NESTED_TB, 17)
    rows = {ln.split()[1]: ln for ln in lines}
    assert "a=00111" in rows["i=3"] and "c=10 d=1" in rows["i=3"]
    assert "e=0" in rows["i=12"] and "e=1" in rows["i=4"]


@pytest.mark.slow
def test_indices_holding_selects_and_calls_cover_verilators_points(engine):
    _same_points(engine, "nest.sv", NESTED_DUT, NESTED_TB)


def test_a_part_select_whose_base_calls_clog2_is_read_once():
    """binary_search_tree_sorting_0030's `left_child[node*($clog2(N)+1) +: ...]` read X on the
    fast path past the end, 0 on Verilator; its base is read once, in place."""
    dut = """module m(input [3:0] i, input [74:0] v, output [4:0] a);
  assign a = v[i*($clog2(15)+1) +: 5];
endmodule
"""
    text = instrument({"m.sv": dut}, ("line",)).files["m.sv"]  # expr refuses $clog2 of a literal
    a = next(line for line in text.splitlines() if "assign a" in line)
    assert a.startswith("  assign a = $unsigned((5)'(v >> ((($bits(i*($clog2(15)+1)))'(i*($clog2(15)+1))) & ")
    assert a.count("$clog2(15)") == 2  # once evaluated, once in `$bits` (not evaluated)


#: An array of a generate block named like a module vector (attacker review 12-05): the select
#: in the block is the array's element, not a bit of the vector; taken for the vector's, its read
#: was ANDed with a one-bit range check (fast o1 = 1 where Verilator reads 3).
SHADOW_DUT = """module m(input clk, input [1:0] i, input [3:0] v, output [3:0] o1, output o2);
  assign o2 = v[i];
  if (1) begin : g
    wire [3:0] v [0:3];
    assign v[0] = 4'h1; assign v[1] = 4'h2; assign v[2] = 4'h3; assign v[3] = 4'h4;
    assign o1 = v[i];
  end
endmodule
"""
SHADOW_TB = """module tb;
  reg clk = 0; reg [1:0] i = 0; reg [3:0] v = 4'h5; wire [3:0] o1; wire o2;
  m dut(.clk(clk), .i(i), .v(v), .o1(o1), .o2(o2));
  initial begin #1 i = 2; #1 i = 1; #1 i = 3; #1 $finish; end
endmodule
"""


@pytest.mark.slow
def test_a_generate_blocks_array_named_like_a_vector_is_not_cut_as_the_vector(engine):
    covered, _ = _same_points(engine, "m.sv", SHADOW_DUT, SHADOW_TB)
    assert (1, "toggle", "o1[1]:0->1") in covered and (1, "toggle", "o1[2]:0->1") in covered


#: The testbench's own selects past the end (attacker review 12-05: only the DUT's were
#: rewritten, so a testbench read `pat[k]` as X on the fast path, a bit on Verilator, and drove
#: the DUT differently), and a narrow signed index, which Verilator sign-extends before cutting
#: it (`w[si]` of 64 bits with si = 3'sb111 is `w[63]`; an unsigned one would read `w[7]`).
TB_SELECT_DUT = """module tsel(input clk, input [7:0] d, input signed [2:0] si, input [63:0] w, output o, output [1:0] p,
  output reg seen);
  reg [3:0] mem [0:7];
  integer n;
  initial begin seen = 0; for (n = 0; n < 8; n = n + 1) mem[n] = n; end
  assign o = w[si];
  assign p = mem[si][1:0];
  always @(posedge clk) if (d == 8'hA5) seen <= 1;
endmodule
"""
TB_SELECT_TB = """module tb;
  localparam W = 10;
  reg clk = 0; reg [7:0] d = 0; reg signed [2:0] si = 0; reg [63:0] w = 64'h8000_0000_0000_0081;
  reg [W-1:0] pat = 10'b1010011101; reg [3:0] k; reg [4:0] j;
  wire o, seen; wire [1:0] p;
  tsel dut(.clk(clk), .d(d), .si(si), .w(w), .o(o), .p(p), .seen(seen));
  initial begin
    for (j = 0; j < 16; j = j + 1) begin
      k = j[3:0]; si = j[2:0];
      d = {pat[k], pat[k +: 3], pat[k -: 2], 2'b01}; #1;
      $display("RS k=%0d d=%b o=%b p=%b", k, d, o, p);
      clk = 1; #1 clk = 0;
    end
    d = 8'h00; if (pat[j] == 1'b1) d = 8'hA5;  // j = 16 is cut to 0: pat[0] = 1 (Icarus: past the end, X)
    #1 clk = 1; #1 clk = 0;
    $display("RS seen=%b", seen);
    $finish;
  end
endmodule
"""


def test_testbench_selects_and_signed_indices_in_the_text():
    from reward_service.fastcov.instrument import emulate_testbench

    tb, skipped = emulate_testbench({"tb.sv": TB_SELECT_TB})
    assert not skipped
    assert "{$unsigned(1'(pat >> ((($bits(k))'(k)) & " in tb["tb.sv"]  # declared `[W-1:0]`: its width left to $bits
    dut = instrument({"tsel.sv": TB_SELECT_DUT}, ("line",)).files["tsel.sv"]
    assert "assign o = $unsigned(1'(w >> ((($bits(si))'(si)) & " in dut  # signed: the mask extends it
    assert "mem[((($bits(si))'(si)) & 7)]" in dut


@pytest.mark.slow
def test_testbench_selects_and_signed_indices_read_as_on_verilator(engine):
    """Every printed value equal on both engines; by hand on Verilator: k = 9, `pat[9 +: 3]` is
    bit 9 then zeros (001), `pat[9 -: 2]` is bits 9..8 (10); si = -1: `w[63]` = 1, `mem[7]`."""
    lines = _same_prints(engine, "tsel.sv", TB_SELECT_DUT, TB_SELECT_TB, 17)
    rows = {ln.split()[1]: ln for ln in lines}
    assert "d=10011001" in rows["k=9"] and "o=1 p=11" in rows["k=7"]
    assert "RS seen=1" in lines


#: A parameter read past its end (a lookup table in a `localparam`; attacker review 12-05):
#: Icarus read X, Verilator cuts the index and reads 0 (`LUT[12]` of 10 bits: 0; `Q[11 +: 3]`
#: of 6 bits is `Q[3 +: 3]`).
PARAM_DUT = """module pv #(parameter [3:0] A = 4'b1010)(input clk, input [3:0] i, output o, output [2:0] p, output a,
  output reg hit);
  localparam [9:0] LUT = 10'b1011001110;
  parameter logic [5:0] Q = 6'b101101;
  initial hit = 0;
  assign o = LUT[i];
  assign p = Q[i +: 3];
  assign a = A[i];
  always @(posedge clk) if (LUT[i] == 1'b0 && i > 4'd9) hit <= 1;
endmodule
"""
PARAM_TB = """module tb;
  reg clk = 0; reg [3:0] i = 0; wire o, a, hit; wire [2:0] p;
  pv dut(.clk(clk), .i(i), .o(o), .p(p), .a(a), .hit(hit));
  integer n;
  initial begin
    for (n = 0; n < 16; n = n + 1) begin
      i = n; #1;
      $display("RS i=%0d o=%b p=%b a=%b", i, o, p, a);
      clk = 1; #1 clk = 0;
    end
    $display("RS hit=%b", hit);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_parameters_read_past_the_end_as_on_verilator(engine):
    lines = _same_prints(engine, "pv.sv", PARAM_DUT, PARAM_TB, 17)
    rows = {ln.split()[1]: ln for ln in lines}
    # A[11] is A[3] (a 4-bit vector keeps 2 index bits), A[6] is A[2]
    assert "o=0 p=101 a=1" in rows["i=11"] and "a=0" in rows["i=6"]
    assert "RS hit=1" in lines
    covered, _ = _same_points(engine, "pv.sv", PARAM_DUT, PARAM_TB)
    assert (9, "branch", "if") in covered


def test_a_blocks_parameter_array_shadows_the_modules_vector_and_instruments():
    """A generate block's parameter array named like a module vector is not cut as the vector
    (its element select), and its value (an unpacked array) does not stop the expression
    points (expr_ir read it as an integer: ValueError)."""
    dut = """module m #(parameter [3:0] A = 4'b1010)(input [3:0] i, output [3:0] g4, output o);
  if (1) begin : g
    localparam logic [3:0] A [0:1] = '{4'd5, 4'd9};
    assign g4 = (A[i[0]] == 4'd5 && i[1]) ? 4'd1 : 4'd0;
  end
  assign o = i[2] & i[3];
endmodule
"""
    text = instrument({"m.sv": dut}).files["m.sv"]
    assert "(A[i[0]] == 4'd5 && i[1])" in text


#: The attacker review of 0.15.0's first cut (helper-72), each case printing differently on the
#: engines then; Verilator's lines. A loop variable named like a module vector read signed
#: through the cast (`ff` for 1); a select in an event control overlapped the edge guard and
#: left the whole testbench 4-state (`s` X); a macro-made name did too; a signed index that is
#: not a bare name was zero-extended (`w[si + 3'sd0]` with si = -1 is `w[63]`); a task's input,
#: `$sformat`'s arguments and an assertion's condition kept reading X past the top.
_PASS8 = "module m(input logic [7:0] a, output logic [7:0] q);\n  assign q = a;\nendmodule\n"
_INV2 = """module m(input wire a, input logic b, output logic ra, output logic rb);
  always_comb begin
    if (~a) ra = 1'b1; else ra = 1'b0;
    if (~b) rb = 1'b1; else rb = 1'b0;
  end
endmodule
"""
_EDGE_TB = """{define}module tb;
  logic [5:0] pat = 6'h3f; logic [2:0] k = 0; wire ra, rb; logic s, y; logic a = 0, b = 0;
  m dut(.a(a), .b(b), .ra(ra), .rb(rb));
  initial begin
    {use}
  end
  initial begin
    #1 if (s == 1'b0) a = 0; else begin a = 1; #1 a = 0; end
    #1;
    $display("RS s=%b ra=%b", s, ra);
    $finish;
  end
endmodule
"""
REVIEW_CASES = {
    "loop_variable_named_like_a_vector": (
        _PASS8,
        """module tb;
  logic [7:0] a = 0; wire [7:0] q;
  logic [7:0] v; logic [2:0] i = 0;
  m dut(.a(a), .q(q));
  initial begin
    for (int v = 1; v < 2; v++) a = v[i];
    #1 $display("RS a=%h", a);
    $finish;
  end
endmodule
""",
        ["RS a=01"],
    ),
    "select_in_an_event_control": (
        _INV2,
        _EDGE_TB.format(define="", use="#1 @(posedge pat[k]) s = 1;"),
        ["RS s=0 ra=1"],
    ),
    "macro_made_name": (_INV2, _EDGE_TB.format(define="`define P pat\n", use="y = `P[k];"), ["RS s=0 ra=1"]),
    "signed_index_expressions": (
        """module m(input logic [2:0] u, output logic a, output logic b, output logic c, output logic d, output logic e);
  logic [63:0] w = 64'h8000_0000_0000_0000;
  logic signed [2:0] si;
  logic signed [2:0] sa [0:1];
  assign si = u;
  always_comb begin
    sa[0] = u; sa[1] = u;
    a = w[si];
    b = w[si + 3'sd0];
    c = w[$signed(u)];
    d = w[sa[0]];
    e = w[-si];
  end
endmodule
""",
        """module tb;
  logic [2:0] u; wire a, b, c, d, e;
  m dut(.u(u), .a(a), .b(b), .c(c), .d(d), .e(e));
  initial begin
    u = 3'b111; #1;
    $display("RS a=%b b=%b c=%b d=%b e=%b", a, b, c, d, e);
    u = 3'b001; #1;
    $display("RS a=%b b=%b c=%b d=%b e=%b", a, b, c, d, e);
    $finish;
  end
endmodule
""",
        ["RS a=1 b=1 c=1 d=1 e=0", "RS a=0 b=0 c=0 d=0 e=1"],
    ),
    "sformat_assert_and_function_reads": (
        _PASS8,
        """module tb;
  logic [7:0] a; wire [7:0] q;
  logic [5:0] pat; logic [2:0] k; string s; logic r3, r4;
  function automatic logic id(input logic x); return x; endfunction
  m dut(.a(a), .q(q));
  initial begin
    pat = '1; k = 7; a = 0;
    $sformat(s, "%b", pat[k]);
    r3 = 1; assert (pat[k] == 1'b0) else r3 = 0;
    r4 = id(pat[k]);
    $display("RS s=%s r3=%b r4=%b", s, r3, r4);
    $finish;
  end
endmodule
""",
        ["RS s=0 r3=1 r4=0"],
    ),
    "task_input": (
        """module m(input logic clk, input logic [2:0] i, output logic q, output logic r);
  logic [5:0] v = 6'h3f;
  task automatic put(input logic x); q = x; endtask
  always @(posedge clk) begin
    put(v[i]);
    if (~q) r <= 1'b1; else r <= 1'b0;
  end
endmodule
""",
        """module tb;
  logic clk = 0; logic [2:0] i = 7; wire q, r;
  m dut(.clk(clk), .i(i), .q(q), .r(r));
  initial begin
    #1 clk = 1; #1 clk = 0; #1 clk = 1; #1;
    $display("RS q=%b r=%b", q, r);
    $finish;
  end
endmodule
""",
        ["RS q=0 r=1"],
    ),
}


#: The second review (helper-74): a function of a generate block lost the module's vectors, a
#: non-ANSI function's or task's `input` was taken for a write, an index from a call lost its
#: sign; and (since 0.6) every queue and dynamic array got a `foreach` zeroing initial, which
#: Icarus runs once over an empty queue (the queue gained an element: an extra `a=0` drove the
#: DUT) and forever over an empty dynamic array (an honest testbench timed out).
_ONE_EDGE_TB = """module tb;
  logic clk = 0; logic [2:0] {index} = 3'd7; wire q, r;
  m dut(.clk(clk), .{index}({index}), .q(q), .r(r));
  initial begin
    #1 clk = 1; #1 clk = 0; #1;
    $display("RS q=%b r=%b", q, r);
    $finish;
  end
endmodule
"""
_HIT_DUT = """module m(input logic clk, input logic [3:0] a, output logic hit);
  always @(posedge clk)
    if (a == 4'd0) hit <= 1'b1;
    else hit <= 1'b0;
endmodule
"""
_HIT_TB = """module tb;
  logic clk = 0; logic [3:0] a = 4'd5; wire hit;
  {declare}
  m dut(.clk(clk), .a(a), .hit(hit));
  initial begin
    {fill}
    {loop}
      #1 clk = 1; #1 clk = 0;
      $display("RS a=%0d hit=%b", a, hit);
    end
    $finish;
  end
endmodule
"""
REVIEW_CASES.update(
    {
        "function_of_a_generate_block": (
            """module m(input logic clk, input logic [2:0] i, output logic q);
  logic [5:0] v = 6'h00;
  if (1) begin : g
    function automatic logic pick(input logic [2:0] k);
      return !v[k];
    endfunction
    always @(posedge clk) q <= pick(i);
  end
endmodule
""",
            """module tb;
  logic clk = 0; logic [2:0] i = 3'd7; wire q;
  m dut(.clk(clk), .i(i), .q(q));
  initial begin
    #1 clk = 1; #1 clk = 0; #1;
    $display("RS q=%b", q);
    $finish;
  end
endmodule
""",
            ["RS q=1"],
        ),
        "non_ansi_function_and_task_inputs": (
            """module m(input clk, input [2:0] i, output reg q, output reg r);
  reg [5:0] v;
  initial v = 6'h00;
  function inv;
    input x;
    begin
      inv = !x;
    end
  endfunction
  task chk;
    input x;
    begin
      r = x;
    end
  endtask
  always @(posedge clk) begin
    if (inv(v[i])) q <= 1'b1;
    else q <= 1'b0;
    chk(!v[i]);
  end
endmodule
""",
            _ONE_EDGE_TB.format(index="i"),
            ["RS q=1 r=1"],
        ),
        "signed_index_from_a_call": (
            """module m(input logic clk, input logic [2:0] k, output logic q, output logic r);
  logic [63:0] w = 64'h8000_0000_0000_0000;
  logic signed [2:0] si;
  function automatic logic signed [2:0] off(input logic [2:0] a);
    return $signed(a);
  endfunction
  always @(posedge clk) begin
    si = $signed(k);
    q <= w[off(k)];
    r <= w[si
          ];
  end
endmodule
""",
            _ONE_EDGE_TB.format(index="k"),
            ["RS q=1 r=1"],
        ),
        "empty_queue_not_zeroed": (
            _HIT_DUT,
            _HIT_TB.format(
                declare="int q[$];",
                fill="q.push_back(5); q.push_back(6);",
                loop="while (q.size() > 0) begin a = q.pop_front();",
            ),
            ["RS a=5 hit=0", "RS a=6 hit=0"],
        ),
        "empty_dynamic_array_not_zeroed": (
            _HIT_DUT,
            _HIT_TB.format(
                declare="int d[];", fill="d = new[2]; d[0] = 5; d[1] = 6;", loop="foreach (d[k]) begin a = d[k];"
            ),
            ["RS a=5 hit=0", "RS a=6 hit=0"],
        ),
    }
)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REVIEW_CASES))
def test_review_cases_print_and_cover_as_on_verilator(engine, case):
    dut, tb, printed = REVIEW_CASES[case]
    assert _same_prints(engine, "m.sv", dut, tb, len(printed)) == printed
    fast = score_one_file(engine, "m.sv", dut, tb, "fast")
    assert "kept 4-state" not in (fast.result.message or ""), fast.result.message
    _same_points(engine, "m.sv", dut, tb)
