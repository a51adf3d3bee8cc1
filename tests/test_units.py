"""Unit tests of the pure parts: coverage.dat parsing, summary, reward shaping, output capture,
source inspection."""

from __future__ import annotations

import pytest

from reward_service import hdl
from reward_service.coverage import parse_coverage_dat, parse_functional_yaml, summarise
from reward_service.models import CoverageReport, MetricCoverage, RewardSpec, Status, Target
from reward_service.reward import shape_reward, targets_met
from reward_service.sandbox.output import BoundedOutput


def _rec(f: str, line: int, t: str, o: str, h: str, count: int) -> str:
    key = f"\x01f\x02{f}\x01l\x02{line}\x01n\x021\x01t\x02{t}\x01page\x02v_{t}/m\x01o\x02{o}\x01h\x02{h}"
    return f"C '{key}' {count}\n"


def test_coverage_dat_keeps_dut_files_only_and_counts_points(tmp_path):
    dat = tmp_path / "coverage.dat"
    dat.write_text(
        "# SystemC::Coverage-3\n"
        + _rec("dut.sv", 3, "line", "block", "tb.uut", 5)
        + _rec("dut.sv", 4, "branch", "if", "tb.uut", 0)
        + _rec("dut.sv", 5, "toggle", "q[0]:0->1", "tb.uut", 1)
        + _rec("tb.sv", 9, "line", "block", "tb", 7)
    )
    points = parse_coverage_dat(dat, {"dut.sv"})
    assert len(points) == 3
    report, uncovered = summarise(points, ["line", "branch", "toggle", "expr"])
    assert (report.metrics["line"].covered, report.metrics["line"].total) == (1, 1)
    assert (report.metrics["branch"].covered, report.metrics["branch"].total) == (0, 1)
    assert report.metrics["expr"].total == 0 and report.metrics["expr"].ratio is None
    assert report.overall == pytest.approx((1 + 0 + 1) / 3)  # expr has no points: left out
    assert [(u.file, u.line, u.metric) for u in uncovered] == [("dut.sv", 4, "branch")]


def test_unavailable_metric_is_not_zero():
    report, _ = summarise([], ["line", "functional"], unavailable={"line": "icarus has none"})
    assert report.metrics["line"].available is False and report.metrics["line"].reason == "icarus has none"
    assert report.overall is None


def test_weights():
    from reward_service.coverage.points import CoveragePoint

    pts = [CoveragePoint("line", "d.sv", 1, "", "h", 1), CoveragePoint("toggle", "d.sv", 2, "", "h", 0)]
    report, _ = summarise(pts, ["line", "toggle"], weights={"line": 3.0, "toggle": 1.0})
    assert report.overall == pytest.approx(0.75)


def test_bad_coverage_file_raises(tmp_path):
    from reward_service.coverage.verilator_dat import CoverageFileError

    bad = tmp_path / "coverage.dat"
    bad.write_text("hello\n")
    with pytest.raises(CoverageFileError):
        parse_coverage_dat(bad)


def test_functional_yaml_bins(tmp_path):
    y = tmp_path / "cov.yml"
    y.write_text(
        "top:\n  type: CoverItem\n  size: 3\ntop.a:\n  at_least: 2\n  bins:_hits:\n    0: 2\n    1: 1\n    2: 0\n"
    )
    points = parse_functional_yaml(y)
    assert [p.covered for p in points] == [True, False, False]


def _report(overall: float | None) -> CoverageReport:
    return CoverageReport(metrics={"line": MetricCoverage(covered=1, total=2, ratio=0.5)}, overall=overall)


@pytest.mark.parametrize(
    "status,overall,shaping,want",
    [
        (Status.ok, 0.8, "chorus", 1.8),
        (Status.ok, 0.0, "chorus", 1.0),
        (Status.compile_error, None, "chorus", 0.0),
        (Status.timeout, 0.9, "chorus", 0.0),
        (Status.runtime_error, 0.5, "chorus", 0.0),
        (Status.ok, 0.8, "ratio", 0.8),
        (Status.invalid_input, None, "ratio", -1.0),
        (Status.sandbox_error, None, "chorus", None),
    ],
)
def test_reward_shaping(status, overall, shaping, want):
    spec = RewardSpec(shaping=shaping, failure_value=-1.0)
    assert shape_reward(status, _report(overall), False, spec) == (pytest.approx(want) if want is not None else None)


def test_timeout_scores_option_and_pass_shaping():
    assert shape_reward(Status.timeout, _report(0.5), False, RewardSpec(timeout_scores=True)) == 1.5
    assert shape_reward(Status.ok, _report(0.5), True, RewardSpec(shaping="pass")) == 1.0
    assert shape_reward(Status.ok, _report(0.5), False, RewardSpec(shaping="pass")) == 0.0


def test_targets_compare_unrounded():
    report = _report(0.8999999)
    assert not targets_met(report, [Target(metric="overall", percent=90)])
    assert targets_met(_report(0.9), [Target(metric="overall", percent=90)])
    assert not targets_met(report, [Target(metric="toggle", percent=1)])  # metric absent


def test_bounded_output_keeps_head_and_tail():
    out = BoundedOutput(10)
    for i in range(100):
        out.feed(f"{i:03d}".encode())
    text = out.text()
    assert text.startswith("00000") and text.endswith("8099")
    assert out.total == 300 and out.dropped == 290 and "290 bytes of output dropped" in text


def test_hdl_top_and_instances():
    tb = "module tb; // dut x();\n  mydut #(.W(4)) uut (.a(a));\n  initial $dumpvars(0, tb);\nendmodule\n"
    assert hdl.top_modules([tb]) == ["tb"]
    assert hdl.instantiates(tb, "mydut", "uut") and not hdl.instantiates(tb, None, "x")
    assert hdl.instance_names(tb, "mydut") == ["uut"]
    assert hdl.is_vhdl("a.vhd", "") and not hdl.is_vhdl("a.sv", "module a; endmodule")


def test_capped_uncovered_list_keeps_code_points_before_toggle_bits():
    from reward_service.coverage.points import CoveragePoint

    toggles = [CoveragePoint("toggle", "dut.sv", 2, f"data[{i}]:0->1", "tb.dut", 0) for i in range(10)]
    code = [
        CoveragePoint("line", "dut.sv", 30, "block", "tb.dut", 0),
        CoveragePoint("expr", "dut.sv", 31, "(a==0) => 0", "tb.dut", 0),
        CoveragePoint("branch", "dut.sv", 29, "if", "tb.dut", 0),
    ]
    report, uncovered = summarise(toggles + code, ["line", "branch", "toggle", "expr"], max_uncovered=5)
    assert [(u.metric, u.line) for u in uncovered] == [
        ("toggle", 2),
        ("toggle", 2),
        ("branch", 29),
        ("line", 30),
        ("expr", 31),
    ]
    assert report.metrics["toggle"].total == 10 and report.metrics["toggle"].covered == 0
    _, everything = summarise(toggles + code, ["line", "branch", "toggle", "expr"], max_uncovered=100)
    assert len(everything) == 13 and everything[0].metric == "toggle"  # file/line order when not capped
