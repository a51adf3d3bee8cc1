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
