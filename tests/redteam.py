"""What the red-team tests (tests/test_redteam_*.py, tests/test_tamper.py) share: the score
request of an SV testbench against a design, the same for the Attenuator of the shared cases,
a result's toggle numbers, and the small design whose output is a wire."""

from __future__ import annotations

from samples import attenuator_rtl

#: A DUT whose output is a wire (``assign y = &c;`` of a 16-bit counter): a short honest run never
#: toggles ``y``, so a testbench that drives the net itself would gain toggle points.
WIRE_DUT = {
    "d.sv": """module d(input clk, input rst, output y);
  reg [15:0] c;
  always @(posedge clk) if (rst) c <= 0; else c <= c + 1;
  assign y = &c;
endmodule
"""
}


def sv_request(design: dict[str, str], tb: str, scope: str, engine: str | None = None, **extra) -> dict:
    """A score request (JSON shape): the ``design`` files (name -> text), the testbench text
    ``tb`` as ``tb.sv``, coverage of the DUT instance ``scope``, the ``engine`` when given, and
    any other request fields in ``extra`` (``simulator``, ``limits``, ...)."""
    return {
        "design": {"files": design},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": scope},
        **({"engine": engine} if engine is not None else {}),
        **extra,
    }


def attenuator_request(tb: str, engine: str | None = None, **extra) -> dict:
    """:func:`sv_request` for the Attenuator (samples.attenuator_rtl), its instance ``uut``."""
    return sv_request(attenuator_rtl(), tb, "uut", engine, **extra)


def toggle(result) -> tuple[int, int] | None:
    """(covered, total) toggle points of a ScoreResult; None when it has no toggle coverage."""
    m = result.coverage.metrics.get("toggle") if result.coverage else None
    return (m.covered, m.total) if m else None
