"""The fast path's token placeholder in the request's own text (fastcov/unit.py
TOKEN_PLACEHOLDER): the fast path stamps the run's token over every occurrence in the
instrumented DUT (backend.prepare; stamp_token in the cocotb build's vvp), so a design holding
it could write flag lines the reader takes for this run's. Such a design, or a stimulus holding
it, is scored by Verilator instead."""

from __future__ import annotations

from reward_service.fastcov.unit import TOKEN_PLACEHOLDER

# The testbench never drives a high: the `if (a)` arm stays uncovered. The design's own `final`
# block appends a flag line with every one of m's 4 points (and the leading always-1 bit) set.
DUT = (
    """module m(input logic clk, input logic a, output logic q);
  always_ff @(posedge clk) begin
    if (a) q <= 1'b1;
    else q <= 1'b0;
  end
  integer fd;
  final begin fd = $fopen("rs_fastcov.txt", "a"); $fwrite(fd, "PLACEHOLDER F m %m - 11111 1\\n"); $fclose(fd); end
endmodule
"""
).replace("PLACEHOLDER", TOKEN_PLACEHOLDER)

TB = """module tb;
  logic clk = 0, a = 0, q;
  m dut (.clk(clk), .a(a), .q(q));
  always #5 clk = ~clk;
  initial begin #100 $finish; end
endmodule
"""

METRICS = ["line", "branch"]


def _request(design: dict[str, str], testbench: dict[str, str], engine: str) -> dict:
    return {
        "design": {"files": design},
        "engine": engine,
        "coverage": {"scope": "dut", "metrics": METRICS},
        "stimulus": {"kind": "sv_testbench", "files": testbench},
    }


def _totals(result) -> dict[str, tuple[int, int]]:
    return {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}


def test_a_design_holding_the_placeholder_is_scored_by_verilator(engine):
    # Before the fix the fast path stamped the design's own line too and scored branch 2/2
    # (engine fast), where Verilator counts 1/2: the testbench never takes the `if (a)` arm.
    fast = engine.score(_request({"m.sv": DUT}, {"tb.sv": TB}, "fast"))
    reference = engine.score(_request({"m.sv": DUT}, {"tb.sv": TB}, "verilator"))
    assert reference.status == "ok", reference.message
    assert fast.engine == "verilator", (fast.engine, _totals(fast))
    assert fast.fallback.startswith(f"the fast path could not instrument the design: m.sv holds `{TOKEN_PLACEHOLDER}`")
    assert _totals(reference) == {"line": (2, 2), "branch": (1, 2)}
    assert _totals(fast) == _totals(reference)


def test_a_testbench_holding_the_placeholder_is_scored_by_verilator(engine):
    testbench = TB.replace("#100 $finish;", f'#100 $display("{TOKEN_PLACEHOLDER}"); $finish;')
    design = {"m.sv": DUT.replace(TOKEN_PLACEHOLDER, "tok")}  # a design the fast path takes
    assert engine.score(_request(design, {"tb.sv": TB}, "fast")).engine == "fast"
    fast = engine.score(_request(design, {"tb.sv": testbench}, "fast"))
    assert fast.engine == "verilator" and fast.status == "ok", (fast.engine, fast.message)
    assert fast.fallback.startswith(f"tb.sv holds `{TOKEN_PLACEHOLDER}`"), fast.fallback


def test_a_cocotb_test_holding_the_placeholder_is_screened():
    from types import SimpleNamespace

    from reward_service.fastcov.screen import reads_files

    text = f"import cocotb\nTOKEN = '{TOKEN_PLACEHOLDER}'\n"
    assert f"test_x.py holds `{TOKEN_PLACEHOLDER}`" in reads_files(SimpleNamespace(files={"test_x.py": text}))
