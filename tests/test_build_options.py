"""build.include_dirs may name the source root itself (CLI ``-I .``, a user's usual spelling):
it is searched anyway, so it is dropped, not refused as a path outside the work dir."""

from __future__ import annotations

from reward_service.models import BuildOptions

DUT = '`include "w.vh"\nmodule inv (input [`W-1:0] a, output [`W-1:0] y);\n  assign y = ~a;\nendmodule\n'
TB = (
    "module tb;\n  reg [3:0] a = 0; wire [3:0] y;\n  inv dut (.a(a), .y(y));\n"
    '  initial begin #1 a = 4\'hf; #1 $display("y=%h", y); $finish; end\nendmodule\n'
)


def test_the_root_as_include_dir_is_accepted():
    assert BuildOptions(include_dirs=[".", "./", "inc"]).include_dirs == ["inc"]


def test_the_root_as_include_dir_scores_as_without_it(engine):
    def score(dirs):
        return engine.score(
            {
                "design": {"files": {"inv.v": DUT, "w.vh": "`define W 4\n"}},
                "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB}},
                "simulator": "icarus",
                "coverage": {"metrics": ["functional"]},
                "build": {"include_dirs": dirs},
            }
        )

    with_root, without = score(["."]), score([])
    assert with_root.status == without.status == "ok", (with_root.message, without.message)
    assert "y=0" in with_root.log and with_root.log == without.log
