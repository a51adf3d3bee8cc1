"""Red-team regressions: a stimulus cannot read host files through `include nor shadow a design header."""

from __future__ import annotations

from pathlib import Path

import pytest

from reward_service.engine import Engine
from reward_service.settings import Settings

INCLUDE = Path(__file__).parent / "fastcov_designs" / "public" / "include"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine(Settings(cache_dir=tmp_path_factory.mktemp("cache"), result_cache=False))


@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_macro_pasted_include_of_a_host_file_is_refused_without_leaking(
    engine: Engine, eng: str, tmp_path: Path
) -> None:
    secret = tmp_path / "hexsecret"
    secret.write_text("c0ffee1234abcd")
    dut = "module pm #(parameter [63:0] K = 0)(input logic clk, output logic [63:0] q); always_ff @(posedge clk) q <= K; endmodule\n"
    tb = (
        "`define E(a,b) `a``b\nmodule tb; logic clk = 0; wire [63:0] q;\n"
        f' pm #(.K(\'h `E(inc,lude) "{secret}"\n)) dut(.clk(clk), .q(q));\n'
        " always #5 clk = ~clk; initial begin repeat (3) @(negedge clk); $finish; end\nendmodule\n"
    )
    r = engine.score(
        {
            "design": {"files": {"pm.sv": dut}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "coverage": {"scope": "dut", "metrics": ["line", "toggle"]},
            "engine": eng,
        }
    )
    assert r.status == "refused"
    assert [v.kind for v in r.violations] == ["include_outside_request"]
    assert r.parameter_overrides == []
    assert "c0ffee" not in r.model_dump_json().lower()


@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_stimulus_header_shadowing_a_design_include_is_invalid(engine: Engine, eng: str) -> None:
    alu = (INCLUDE / "design" / "alu.v").read_text()
    defs = (INCLUDE / "design" / "alu_defs.vh").read_text()
    tb = (INCLUDE / "stimulus" / "tb.v").read_text()
    base = {
        "build": {"include_dirs": ["inc"]},
        "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
        "engine": eng,
    }
    design = {"files": {"alu.v": alu, "inc/alu_defs.vh": defs}}
    honest = engine.score({**base, "design": design, "stimulus": {"kind": "sv_testbench", "files": {"tb.v": tb}}})
    assert honest.status == "ok"
    assert (honest.coverage.metrics["toggle"].covered, honest.coverage.metrics["toggle"].total) == (22, 54)
    shadow = engine.score(
        {**base, "design": design, "stimulus": {"kind": "sv_testbench", "files": {"tb.v": tb, "alu_defs.vh": defs}}}
    )
    assert shadow.status == "invalid_input"
    assert "alu_defs.vh" in (shadow.message or "")


def test_design_include_resolves_beside_the_file_on_every_engine(engine: Engine) -> None:
    """Icarus (the fast path) finds a design's `include beside the including file first, as
    Verilator does: rtl/x.vh (8 bits) before the root's x.vh (2 bits)."""
    dut = (
        '`include "x.vh"\nmodule a(input logic clk, input logic [7:0] d, output logic [`W-1:0] q);\n'
        "  always_ff @(posedge clk) q <= d[`W-1:0];\nendmodule\n"
    )
    tb = (
        "module tb; logic clk = 0; logic [7:0] d = 0; wire [7:0] q; a dut(.clk(clk), .d(d), .q(q));\n"
        " always #5 clk = ~clk;\n"
        " initial begin repeat (3) @(negedge clk); d = 8'hff; repeat (3) @(negedge clk); $finish; end\nendmodule\n"
    )
    design = {"rtl/a.v": dut, "x.vh": "`define W 2\n", "rtl/x.vh": "`define W 8\n"}
    toggles = {}
    for eng in ("fast", "verilator"):
        r = engine.score(
            {
                "design": {"files": design},
                "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
                "coverage": {"scope": "dut", "metrics": ["line", "toggle"]},
                "engine": eng,
            }
        )
        assert r.status == "ok" and r.engine == eng
        toggles[eng] = (r.coverage.metrics["toggle"].covered, r.coverage.metrics["toggle"].total)
    assert toggles == {"fast": (18, 34), "verilator": (18, 34)}
