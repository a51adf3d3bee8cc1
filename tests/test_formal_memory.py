"""Toggle points of unpacked arrays (memories) in the formal model (issue 23): every element bit
of an array the fast path counts (Verilator: at most 256 bits in all) gets the two property
bits a vector bit has, so the prover can prove an element bit stuck and the witness search can
aim at each element's rise and fall. Before, arrays had no property: their points were
undecided unless the closure's random tail happened to cover them (sram_fd_0024: 212 of 362
undecided, queue_0007: 180 of 479).

Counterexamples first: the proved sets below are exact (an element order or index mixed up
in the model proves a point of an element the replay covers: ``proved_but_covered``), every
claim replays on both engines (a key the model names differently from the fast path is a
claim no replay covers: ``not_replayed``), and random stimulus never covers a proved point.

Bits of internal variables the design never assigns (partly assigned arrays: prim_max_0005's
trees, 360 points) are proved from the netlist (``prover.undriven_bits``): the model leaves
them free for their readers (Icarus's ``x`` and Verilator's 0 differ there), but neither
engine ever sees them change."""

from __future__ import annotations

import json

import pytest
from conftest import cid012_rows, rtl_files

from reward_service import ceiling
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove

#: A memory yosys keeps as a ``$mem`` (a variable write address): the one-edge model refuses
#: it, the every-input-free model maps it to flip-flops. Only words 0 and 1 are ever written,
#: and bit 3 of a word never.
RAM = """module ram(input clk, input we, input [1:0] wa, input [3:0] d, input [1:0] ra, output reg [3:0] q);
  reg [3:0] mem [0:3];
  always @(posedge clk) begin
    if (we) mem[wa & 2'b01] <= {1'b0, d[2:0]};
    q <= mem[ra];
  end
endmodule
"""

#: Arrays yosys turns into registers (every element reset asynchronously): the one-edge model.
#: A descending range (`sr[0]` is the element written first) and a two-dimensional array of
#: which one element is ever written.
SHIFT = """module shift(input clk, input rst_n, input [3:0] d, input s, output [3:0] q);
  reg [3:0] sr [3:0];
  reg two [0:1][0:2];
  integer i;
  always @(posedge clk or negedge rst_n)
    if (!rst_n) begin
      for (i = 0; i < 4; i = i + 1) sr[i] <= 4'd0;
      two[0][0] <= 1'b0; two[0][1] <= 1'b0; two[0][2] <= 1'b0;
      two[1][0] <= 1'b0; two[1][1] <= 1'b0; two[1][2] <= 1'b0;
    end else begin
      sr[0] <= {1'b0, d[2:0]};
      for (i = 1; i < 4; i = i + 1) sr[i] <= sr[i - 1];
      two[1][2] <= s;
    end
  assign q = sr[3] ^ {3'b0, two[1][2]};
endmodule
"""

#: 17 words of 16 bits: 272 bits, over Verilator's --coverage-max-width (no points at all).
WIDE = """module wide(input clk, input [4:0] a, input [15:0] d, output reg [15:0] q);
  reg [15:0] big [0:16];
  always @(posedge clk) begin big[a] <= d; q <= big[a]; end
endmodule
"""

#: Variables the design never assigns (`u`, the element `part[0]` of an array whose other
#: element is written): Verilator keeps them at 0, the fast path reads Icarus's `x` as 0, so
#: their toggles are unreachable. (Their readers are another matter: Icarus computes with the
#: `x`, Verilator with 0; the model leaves them free there, and nothing here reads them.)
#: An undriven output port (a testbench may drive what it connects) and an undriven net keep
#: their points.
UNDRIVEN = """module und(input clk, input [1:0] a, input [3:0] d, output y, output reg [1:0] o_un, output t_o);
  reg [3:0] u;
  reg [3:0] part [0:1];
  wire t;
  always @(posedge clk) part[1] <= d;
  assign y = a[0] ^ a[1];
  assign t_o = part[1][0];
endmodule
"""

#: The same never-assigned variable, read by its parent through a hierarchical name: a
#: design with a dotted name into another scope gets no undriven proof (yosys does not model
#: a write through one).
HIER = """module child(input clk, output q);
  reg u;
  assign q = u;
endmodule
module top(input clk, input d, output q);
  child c(.clk(clk), .q(q));
  wire peek = c.u;
endmodule
"""

#: Writes only out of range (addresses 10..15 of a 10-word memory), reads only in range:
#: simulators ignore such a write, so no word and no read ever changes; a lowering that
#: aliased the address (compared its low bits only) would let them change.
OUT_OF_RANGE = """module oob(input clk, input we, input [3:0] a, input [3:0] d, output reg [3:0] q);
  reg [3:0] mem [0:9];
  always @(posedge clk) begin
    if (we && a >= 4'd10) mem[a] <= d;
    if (a < 4'd10) q <= mem[a];
  end
endmodule
"""

#: Writes only through an index past the end that Verilator cuts into range: it keeps
#: $clog2(1 + 1) = 1 index bit, so `sh[j + 1]` at j = 1 is `sh[0]` (cid012's
#: rgb_color_space_conversion_0009 shifts its pipeline that way). Yosys dropped the write: the
#: prover proved every bit of `sh[0]` stuck, which both engines toggle (and the witness search
#: claimed 1,080 points of rgb that no replay covered). Only `sh[1]` is never written.
ALIASED = """module alias_wr(input clk, input [3:0] d, output reg [3:0] q);
  reg [3:0] sh [0:1];
  integer j;
  always @(posedge clk) begin
    for (j = 1; j < 2; j = j + 1) sh[j + 1] <= d;
    q <= sh[0];
  end
endmodule
"""

#: An index in its own width: `i + 2'd1` of a 2-bit `i` is 0 at i = 3 on both engines (a
#: self-determined index), so `mem[i + 2'd1]` reads `mem[0]`, which is written with 4'hF. A
#: 32-bit mask widened the index to 4: the prover proved `hit` and the branch unreachable
#: (attacker review 12-05). Only `mem[1..7]` never change (never written: 0 on both engines).
SELF_WIDTH = """module wrap(input clk, input [1:0] i, input [3:0] d, output reg hit);
  reg [3:0] mem [0:7];
  always @(posedge clk) begin
    mem[0] <= d;
    if (mem[i + 2'd1] == 4'hF) hit <= 1'b1;
    else hit <= 1'b0;
  end
endmodule
"""

DESIGNS = {
    "ram.sv": RAM,
    "shift.sv": SHIFT,
    "und.sv": UNDRIVEN,
    "oob.sv": OUT_OF_RANGE,
    "alias.sv": ALIASED,
    "wrap.sv": SELF_WIDTH,
}


def _edges(*names: str) -> set[str]:
    return {f"{n}:{e}" for n in names for e in ("0->1", "1->0")}


#: The array points each design's proof excludes (and the output bit they feed).
PROVED = {
    "ram.sv": (
        "ticks",
        _edges("mem[0][3]", "mem[1][3]", "q[3]") | _edges(*(f"mem[{w}][{b}]" for w in (2, 3) for b in range(4))),
    ),
    "shift.sv": (
        "edges",
        _edges(*(f"sr[{w}][3]" for w in range(4)), "q[3]")
        | _edges("two[0][0]", "two[0][1]", "two[0][2]", "two[1][0]", "two[1][1]"),
    ),
    "oob.sv": (
        "ticks",
        _edges(*(f"mem[{w}][{b}]" for w in range(10) for b in range(4)), "q[0]", "q[1]", "q[2]", "q[3]"),
    ),
    "und.sv": ("edges", _edges(*(f"u[{b}]" for b in range(4)), *(f"part[0][{b}]" for b in range(4)))),
    "alias.sv": ("edges", _edges(*(f"sh[1][{b}]" for b in range(4)))),
    "wrap.sv": ("edges", _edges(*(f"mem[{w}][{b}]" for w in range(1, 8) for b in range(4)))),
}


def test_every_element_bit_of_a_counted_array_has_a_property():
    """Each element bit's two points get the vector bit's properties; an array over 256 bits
    has no point (the fast path and Verilator count none)."""
    model = build_model({"ram.sv": RAM})
    toggles = {key[3]: provers for key, provers in model.points if key[2] == "toggle"}
    elements = {name: p for name, p in toggles.items() if name.startswith("mem[")}
    assert set(elements) == _edges(*(f"mem[{w}][{b}]" for w in range(4) for b in range(4)))
    assert all(elements.values()), sorted(n for n, p in elements.items() if not p)
    rise, fall = elements["mem[2][1]:0->1"], elements["mem[2][1]:1->0"]
    assert len(rise) == 1 and len(fall) == 2 and fall[0] == rise[0]
    high, low = model.properties[fall[0]], model.properties[fall[1]]
    assert high.bit == low.bit == 2 * 4 + 1  # element by element, LSB first
    two = build_model({"shift.sv": SHIFT})
    names = {key[3] for key, provers in two.points if key[2] == "toggle" and provers}
    assert _edges(*(f"two[{i}][{j}]" for i in range(2) for j in range(3))) <= names
    assert _edges(*(f"sr[{w}][{b}]" for w in range(4) for b in range(4))) <= names
    wide = build_model({"wide.sv": WIDE})
    assert not [key for key, _ in wide.points if key[3].startswith("big")]


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_element_bits_that_never_change_are_proved(name):
    model_name, expected = PROVED[name]
    proof = prove({name: DESIGNS[name]})
    assert proof.status == "proved" and proof.model == model_name, (proof.status, proof.model, proof.reason)
    assert {key[3] for key in proof.unreachable} == expected


def test_undriven_proofs_only_without_writes_from_outside_the_netlist():
    """Only internal variables qualify (not `o_un`, a port, nor `t`, a net); a design with a
    hierarchical name qualifies none."""
    model = build_model({"und.sv": UNDRIVEN})
    names = {model.properties[p[0]].signal: key[3].split("[")[0] for key, p in model.points if key[2] == "toggle" and p}
    assert {names[w] for w in model.undriven_ok} == {"u", "part"}
    assert build_model({"hier.sv": HIER}, "top").undriven_ok == frozenset()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_the_closure_classifies_every_array_point(engine, name):
    """Every element point is proved or witnessed; each claim replays on both engines and no
    proved point is covered."""
    result = ceiling.closure({name: DESIGNS[name]}, engine=engine)
    assert result.status == "ok", result.reason
    assert result.replayed_on == {"fast": "fast", "verilator": "verilator"}
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.proved_but_covered == []
    # the undriven port and net: constant on both engines, but not proved (see UNDRIVEN)
    left = _edges("o_un[0]", "o_un[1]", "t") if name == "und.sv" else set()
    assert {k[3] for k in result.undecided_keys} == left, json.dumps(result.to_json())
    # each reachable element point is aimed at by the search, not left to the random tail
    arrays = {
        k[3] for k, _ in build_model({name: DESIGNS[name]}).points if k[3].startswith(("mem[", "sr[", "two[", "part["))
    }
    claimed = {k[3] for k in result.witness.claimed}
    assert arrays - PROVED[name][1] <= claimed


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_random_stimulus_never_covers_a_proved_element_bit(engine, name):
    result = ceiling.soundness({name: DESIGNS[name]}, seeds=(1, 2), steps=300, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved == len(PROVED[name][1])
    assert result.covered == []


@pytest.mark.slow
def test_sram_fd_every_memory_point_witnessed(engine):
    """cid012's sram_fd_0024 (a 16 x 8 dual-port RAM, a `$mem`): 256 of its 362 points are
    memory element toggles; all 362 are witnessed (150 before)."""
    rows = cid012_rows()
    result = ceiling.closure(rtl_files(rows["cvdp_copilot_sram_fd_0024"]), engine=engine, budget_s=120)
    assert result.status == "ok", result.reason
    assert not any(result.not_replayed.values()), result.not_replayed
    assert result.proved_but_covered == []
    assert result.undecided == 0, json.dumps(result.to_json())
    assert sum(m.total for m in result.metrics.values()) == 362
