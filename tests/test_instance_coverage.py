"""The DUT instance's own coverage (issue 9 point 5): a testbench that also instantiates the
DUT's module as a reference model gets the coverage of the DUT instance alone, on Verilator and
on the fast path; the DUT-instance check works with several instances and names what it found.

Expected values come from an independent twin: the same testbench without the reference
instance (one instance, nothing to choose). The per-instance merge itself is checked against
Verilator's own default merge, from a bare Verilator build writing both files.
Real Verilator, real Icarus, real sandbox."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reward_service.coverage import parse_coverage_dat
from reward_service.coverage.instances import combine_hier, merge_instances
from reward_service.fastcov.compare import diff_points
from reward_service.sandbox.toolchain import host_toolchain, require_verilator
from reward_service.simulators.verilator import COVERAGE_FLAGS, VERILATOR_LINT_FLAGS

METRICS = ["line", "branch", "toggle", "expr"]

# The DUT has two instances of one sub-module of its own (merged within the DUT, as Verilator
# merges instances of one module).
DUT = """module leaf (input logic clk, input logic [3:0] d, output logic [3:0] q);
  always_ff @(posedge clk) if (d > 4'd7) q <= d; else q <= ~d;
endmodule
module acc (input logic clk, input logic rst, input logic [3:0] in, output logic [3:0] out);
  logic [3:0] s;
  leaf u_a (.clk(clk), .d(s), .q());
  leaf u_b (.clk(clk), .d(in), .q());
  always_ff @(posedge clk) begin
    if (rst) s <= 4'd0;
    else if (in[0] && in[1]) s <= s + in;
    else s <= s;
  end
  assign out = s;
endmodule
"""

# The reference model is driven differently (never reset, other inputs): counted, it would
# cover points the DUT instance does not.
REF = "  acc ref_model (.clk(clk), .rst(1'b0), .in(b), .out(o2));\n"
TB = """module tb;
  logic clk = 0, rst = 1;
  logic [3:0] a = 0, b = 4'hf;
  wire [3:0] o1, o2;
  acc {name} (.clk(clk), .rst(rst), .in(a), .out(o1));
{ref}  always #5 clk = ~clk;
  initial begin
    #12 rst = 0;
    repeat (5) begin @(negedge clk); a = a + 4'd3; b = b - 4'd5; end
    $finish;
  end
endmodule
"""


def request(engine_name: str, reference: bool, name: str = "dut", scope: str | None = "dut") -> dict:
    tb = TB.replace("{name}", name).replace("{ref}", REF if reference else "")
    coverage = {"metrics": METRICS, **({"scope": scope} if scope else {})}
    return {
        "design": {"files": {"acc.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": coverage,
        "engine": engine_name,
        "limits": {"run_s": 5},
    }


def counts(result) -> dict[str, tuple[int, int]]:
    return {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["verilator", "fast"])
def test_reference_instance_does_not_count(engine, engine_name):
    twin_run = engine.scored(request(engine_name, reference=False))
    twin = twin_run.result
    both_run = engine.scored(request(engine_name, reference=True))
    both = both_run.result
    for r in (twin, both):
        assert r.status == "ok" and r.engine == engine_name, r.message + r.log
        assert r.coverage.scope_found is True
    assert counts(both) == counts(twin)
    assert all(total > 0 for _, total in counts(twin).values())
    # The same points, hierarchy and all: the DUT's own `tb.dut.u_a`/`u_b` merged as `tb.dut.u_*`.
    assert diff_points(both_run.points, twin_run.points, set(METRICS)).equal
    assert {p.hier for p in both_run.points} == {"tb.dut", "tb.dut.u_*"}
    # Without a named instance every instance counts, merged (the totals of one instance, the
    # reference model's hits added): the test above could fail.
    unscoped = engine.score(request(engine_name, reference=True, scope=None))
    assert unscoped.status == "ok", unscoped.message
    assert {m: t for m, (_, t) in counts(unscoped).items()} == {m: t for m, (_, t) in counts(twin).items()}
    assert sum(c for c, _ in counts(unscoped).values()) > sum(c for c, _ in counts(twin).values())


@pytest.mark.slow
def test_fast_path_agrees_with_verilator_per_instance(engine):
    fast_run = engine.scored(request("fast", reference=True))
    fast = fast_run.result
    reference_run = engine.scored(request("verilator", reference=True))
    reference = reference_run.result
    assert fast.engine == "fast" and reference.engine == "verilator"
    diff = diff_points(fast_run.points, reference_run.points, {"line", "branch", "toggle"})
    assert diff.equal, diff.describe()


@pytest.mark.parametrize("engine_name", ["verilator", "fast"])
def test_wrong_instance_name_lists_the_instances_found(engine, engine_name):
    # the source check: no instance of that name at all
    result = engine.score(request(engine_name, reference=True, name="u_dut"))
    assert result.status == "invalid_input", result.message
    assert "must instantiate the DUT as `dut` (found instance(s): ref_model, u_dut)" in result.message
    # the hierarchy check: an instance `dut`, but not under the top (inside a generate block);
    # with the instances merged this said "found: *"
    req = request(engine_name, reference=True)
    tb = req["stimulus"]["files"]["tb.sv"]
    req["stimulus"]["files"]["tb.sv"] = tb.replace("  acc dut (", "  if (1) begin : g acc dut (").replace(
        ".out(o1));", ".out(o1)); end"
    )
    result = engine.score(req)
    assert result.status == "invalid_input", result.message + result.log
    assert result.message.endswith(
        "the DUT is not instantiated as `dut` under `tb` (found: g, g.dut, ref_model); "
        "a DUT below the top is named by its path: `g.dut`"
    ), result.message


def test_combine_hier_is_verilators():
    # verilated_cov.cpp's own selftest cases
    assert combine_hier("a.b.c", "a.b.c") == "a.b.c"
    assert combine_hier("a.b.c", "a.b") == "a.b*"
    assert combine_hier("a.x.c", "a.y.c") == "a.*.c"
    assert combine_hier("a.z.z.z.c", "a.b.c") == "a.*.c"
    assert combine_hier("z", "a") == "*"
    assert combine_hier("q.a", "q.b") == "q.*"
    assert combine_hier("q.za", "q.zb") == "q.z*"
    assert combine_hier("1.2.3.a", "9.8.7.a") == "*.a"


MAIN = """#include "verilated.h"
#include "verilated_cov.h"
#include "Vtop.h"
int main(int argc, char** argv) {
  VerilatedContext ctx; ctx.commandArgs(argc, argv); Vtop top{&ctx, ""};
  while (!ctx.gotFinish()) { top.eval(); if (!top.eventsPending()) break; ctx.time(top.nextTimeSlot()); }
  top.final();
  ctx.coveragep()->write("merged.dat");
  ctx.coveragep()->forcePerInstance(true);
  ctx.coveragep()->write("per_instance.dat");
  return 0;
}
"""


@pytest.mark.slow
def test_merge_of_per_instance_records_is_verilators_default(tmp_path, shared_cache_dir):
    """merge_instances over a per-instance coverage.dat gives Verilator's default file, point by
    point (count and combined hierarchy), from one bare build writing both."""
    (tmp_path / "acc.sv").write_text(DUT)
    (tmp_path / "tb.sv").write_text(TB.replace("{name}", "dut").replace("{ref}", REF))
    (tmp_path / "main.cpp").write_text(MAIN)
    root = require_verilator(host_toolchain())
    env = {
        **os.environ,
        "VERILATOR_ROOT": root,
        "OBJCACHE": "ccache",
        "CCACHE_DIR": str(Path(shared_cache_dir) / "ccache"),
        "CCACHE_BASEDIR": str(tmp_path),
    }
    subprocess.run(
        [
            f"{root}/bin/verilator",
            "--cc",
            "--exe",
            "--build",
            "--timing",
            *COVERAGE_FLAGS,
            *VERILATOR_LINT_FLAGS,
            "--prefix",
            "Vtop",
            "--top-module",
            "tb",
            "-Mdir",
            "obj",
            "-o",
            "sim",
            "acc.sv",
            "tb.sv",
            "main.cpp",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(["obj/sim"], cwd=tmp_path, check=True, capture_output=True)

    def keyed(points):
        return sorted((p.metric, p.file, p.line, p.detail, p.hier, p.count) for p in points)

    merged = parse_coverage_dat(tmp_path / "merged.dat", {"acc.sv"})
    per_instance = parse_coverage_dat(tmp_path / "per_instance.dat", {"acc.sv"})
    assert len(per_instance) > len(merged) > 0
    assert {p.hier for p in merged} >= {"tb.*"}  # leaf's four instances, merged by Verilator
    assert keyed(merge_instances(per_instance)) == keyed(merged)
    dut_only = merge_instances(per_instance, "tb.dut")
    assert {p.hier for p in dut_only} == {"tb.dut", "tb.dut.u_*"}
    assert 0 < len(dut_only) == len(merged)  # one instance's points: every point once
