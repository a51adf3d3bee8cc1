"""Verilator's ``expr`` points on the fast path (reward_service/fastcov/expr*.py, issue 5).

- Enumeration: the points the expression kind declares equal, key by key (file, line, column,
  comment), the points the selected Verilator itself declares -- read from the ``__vlCoverInsert`` calls
  of the C++ it generates (``verilator --cc`` without building: well under a second) -- on the
  construct suite in ``tests/fastcov_designs/expr/`` and on the DUTs of the 24 case testbenches.
- Agreement (slow, real runs): the fast path (instrumented DUT on Icarus) covers exactly the
  ``expr`` points Verilator covers, point by point, on the 24 case testbenches and on the
  construct suite driven by the framework's self-check testbench.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import ALLOW_DUT_WRITES, STIMULUS, case_expected, cid012_rows, needs_cases, rtl_files, stimulus_dirs

from reward_service.fastcov.expr import begin_blocks_are_lists
from reward_service.fastcov.expr_ir import emit_const
from reward_service.fastcov.instrument import instrument
from reward_service.fastcov.unit import Unsupported
from reward_service.sandbox.toolchain import verilator_root

DESIGNS = Path(__file__).with_name("fastcov_designs") / "expr"
CASES = [d.name for d in stimulus_dirs() if (d / "expected.json").exists()]
#: Verilator 5.48 writes ``__vlCoverInsert(&(vlSymsp->__Vcoverage[N]), first, "file", ...``, 5.052
#: (REWARD_SERVICE_VERILATOR=pinned) also ``__vlCoverInsert(vlSelf->__Vcoverage + N, first, true, "file", ...``.
_INSERT = re.compile(
    r"__vlCoverInsert\((?:&\(vlSymsp->__Vcoverage\[\d+\]\)|\w+->__Vcoverage \+ \d+), first, (?:(?:true|false), )?"
    r'"((?:[^"\\]|\\.)*)", (\d+), '
    r'(\d+), "(?:[^"\\]|\\.)*", "v_expr/[^"]*", "((?:[^"\\]|\\.)*)"'
)


def verilator_expr_points(files: dict[str, str]) -> set[tuple[str, int, int, str]]:
    """(file, line, column, comment) of every ``expr`` point Verilator declares for the design
    (its generated C++; identical points of several instances are one)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = Path(tmp) / "src", Path(tmp) / "obj"
        src.mkdir()
        for name, text in files.items():
            (src / name).write_text(text)
        argv = [
            str(verilator_root() / "bin" / "verilator"),
            "--cc",
            "--timing",
            "--coverage-line",
            "--coverage-toggle",
            "--coverage-expr",
            "--coverage-user",
            "-Wno-fatal",
            "-Wno-lint",
            "-Wno-style",
            "-Wno-MULTITOP",
            "-Mdir",
            str(obj),
            *sorted(n for n in files if n.endswith((".sv", ".v"))),
        ]
        proc = subprocess.run(
            argv,
            cwd=src,
            env={**os.environ, "VERILATOR_ROOT": str(verilator_root())},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        found = set()
        for cpp in obj.glob("*.cpp"):
            for m in _INSERT.finditer(cpp.read_text()):
                comment = m.group(4).encode().decode("unicode_escape")
                found.add((os.path.basename(m.group(1)), int(m.group(2)), int(m.group(3)), comment))
        return found


def fast_expr_points(files: dict[str, str]) -> set[tuple[str, int, int, str]]:
    """The same key for every ``expr`` point the expression kind declares."""
    inst = instrument(files, ("expr",))
    return {
        (p.file, p.line, p.column, p.comment)
        for table in inst.tables.values()
        for p in table.points
        if p.metric == "expr"
    }


#: constructs Icarus cannot compile (so neither can the fast path run them): enumeration only
VERILATOR_ONLY = {"verilator_only.sv"}


def construct_files(runnable: bool = False) -> list[str]:
    return sorted(p.name for p in DESIGNS.glob("*.sv") if not (runnable and p.name in VERILATOR_ONLY))


def case_dut(problem: str) -> dict[str, str]:
    return rtl_files(cid012_rows()[problem])


# -- enumeration ----------------------------------------------------------------------------------


@pytest.mark.parametrize("design", construct_files())
def test_construct_points_equal_verilators(design):
    files = {design: (DESIGNS / design).read_text()}
    want = verilator_expr_points(files)
    got = fast_expr_points(files)
    assert want, "the construct design should have expression points"
    assert got == want, {"verilator only": sorted(want - got)[:10], "fast only": sorted(got - want)[:10]}


@needs_cases
@pytest.mark.parametrize("problem", CASES)
def test_case_dut_points_equal_verilators(problem):
    files = case_dut(problem)
    expected = case_expected(problem)
    want = verilator_expr_points(files)
    got = fast_expr_points(files)
    assert got == want, {"verilator only": sorted(want - got)[:10], "fast only": sorted(got - want)[:10]}
    # the totals recorded with real Verilator runs (one record per key and instance path)
    assert len(want) == next(iter(expected["testbenches"].values()))["coverage"]["expr"]["total"]


def test_points_carry_verilators_keys():
    """Spot check of the model on one line: what a root, its terms and its points look like."""
    files = {"k.sv": "module k(input logic a, b, c, output logic y);\n  assign y = (a | b) & ~c;\nendmodule\n"}
    assert fast_expr_points(files) == {
        ("k.sv", 2, 22, "(a==1 && c==0) => 1"),
        ("k.sv", 2, 22, "(b==1 && c==0) => 1"),
        ("k.sv", 2, 22, "(c==1) => 0"),
        ("k.sv", 2, 22, "(a==0 && b==0) => 0"),
    }


@pytest.mark.parametrize(
    "width,signed,bits,text",
    [
        (4, False, "1010", "4'ha"),
        (32, True, "0" * 32, "32'sh0"),
        (8, False, "0000xx01", "8'bxx01"),
        (4, False, "zzzz", "4'bzzzz"),
        (64, False, "0" * 63 + "1", "64'h1"),
    ],
)
def test_constants_print_as_v3number_does(width, signed, bits, text):
    assert emit_const(width, signed, bits) == text


@pytest.mark.parametrize(
    "body,reason",
    [
        ("always @(posedge clk) fork y <= a & b; join", "fork"),
        ("always @(posedge clk) begin /* verilator coverage_block_off */ y <= a & b; end", "coverage_block_off"),
        ("always @(posedge clk) begin begin : blk logic t; t = a; y <= t & b; end y <= a; end", "begin block"),
        ("always @(posedge clk) y <= a & $urandom;", None),
    ],
)
def test_constructs_it_cannot_place_exactly_are_refused(body, reason):
    """What cannot be enumerated or instrumented exactly raises Unsupported (the request then
    goes to Verilator with the reason); a term Verilator itself refuses just has no points.
    A term naming a begin block's variable is placed exactly where the selected Verilator makes
    the block a statement list of its own (5.052: the check goes inside the block)."""
    files = {"r.sv": f"module r(input logic clk, a, b, output logic y);\n  {body}\nendmodule\n"}
    if reason == "begin block" and begin_blocks_are_lists():
        points = fast_expr_points(files)
        assert len(points) == 3 and points == verilator_expr_points(files)
        return
    if reason is None:
        assert fast_expr_points(files) == verilator_expr_points(files) == set()
        return
    with pytest.raises(Unsupported, match=reason):
        fast_expr_points(files)


@pytest.mark.parametrize("design", construct_files(runnable=True))
def test_instrumented_constructs_compile_on_icarus(design, tmp_path):
    inst = instrument({design: (DESIGNS / design).read_text()}, ("expr",))
    for name, text in inst.files.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        ["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), *sorted(inst.files)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- agreement with Verilator, point by point (real runs) -----------------------------------------


def _expr_points(scored) -> dict[tuple, bool]:
    points = {}
    for p in scored.points:
        if p.metric == "expr":
            key = (p.file, p.line, p.detail, p.hier)
            points[key] = points.get(key, False) or p.covered
    return points


def _agreement(engine, files: dict[str, str], stimulus: dict[str, str], scope: str):
    request = {
        "design": {"files": files},
        "stimulus": {"kind": "sv_testbench", "files": stimulus},
        "coverage": {"scope": scope, "metrics": ["expr"]},
        "stimulus_policy": ALLOW_DUT_WRITES,  # the engines' agreement, DUT writes included
    }
    fast_run = engine.scored({**request, "simulator": "icarus", "engine": "fast"})
    reference_run = engine.scored({**request, "simulator": "verilator", "engine": "verilator"})
    fast, reference = fast_run.result, reference_run.result
    assert fast.engine == "fast", fast.fallback
    assert fast.status == reference.status == "ok", (fast.message, reference.message)
    return _expr_points(fast_run), _expr_points(reference_run)


@pytest.mark.slow
@needs_cases
@pytest.mark.parametrize("problem,tb", [(p, tb) for p in CASES for tb in ("weak", "good", "best")])
def test_case_testbench_covers_the_same_expr_points(engine, problem, tb):
    expected = case_expected(problem)
    info = expected["testbenches"][tb]
    fast, reference = _agreement(
        engine,
        case_dut(problem),
        {info["file"]: (STIMULUS / problem / info["file"]).read_text()},
        expected["dut_instance"],
    )
    assert fast == reference, {
        k: (fast.get(k), reference.get(k)) for k in fast.keys() | reference.keys() if fast.get(k) != reference.get(k)
    }
    assert sum(reference.values()) == info["coverage"]["expr"]["covered"]


@pytest.mark.slow
@pytest.mark.parametrize("design", construct_files(runnable=True))
def test_construct_covers_the_same_expr_points(engine, design):
    from reward_service.fastcov.choice import SELF_CHECK_INSTANCE, self_check_testbench

    files = {design: (DESIGNS / design).read_text()}
    fast, reference = _agreement(engine, files, {"rs_selfcheck.sv": self_check_testbench(files)}, SELF_CHECK_INSTANCE)
    assert fast == reference, {
        k: (fast.get(k), reference.get(k)) for k in fast.keys() | reference.keys() if fast.get(k) != reference.get(k)
    }
    assert 0 < sum(reference.values()) < len(reference), "the self-check stimulus should cover some, not all"


def test_parameter_sets_with_other_points_are_refused():
    """Verilator makes one copy of a module per parameter set; when the copies have different
    expression points (``v[i[1:0]+:1]`` vs ``v[i[2:0]+:1]``) one flag cannot stand for both."""
    files = {
        "pp.sv": (
            "module leaf #(parameter W = 4) (input logic a, input logic [W-1:0] v, input logic [7:0] i, output logic y);\n"
            "  assign y = a && v[i];\nendmodule\n"
            "module pp (input logic a, input logic [7:0] v, i, output logic [1:0] y);\n"
            "  leaf #(.W(4)) u0 (.a(a), .v(v[3:0]), .i(i), .y(y[0]));\n"
            "  leaf #(.W(8)) u1 (.a(a), .v(v), .i(i), .y(y[1]));\nendmodule\n"
        )
    }
    assert len(verilator_expr_points(files)) == 5  # (a==0) => 0 in both copies
    with pytest.raises(Unsupported, match="other parameter values"):
        fast_expr_points(files)


@pytest.mark.slow
@needs_cases  # the cocotb corpus is one of the shared cases
@pytest.mark.parametrize("item_id", __import__("test_fastcov_cases").COCOTB_ITEMS)
def test_cocotb_item_covers_the_same_expr_points(engine, item_id):
    """cocotb stimulus (engineers' tests from the cocotb corpus) on the instrumented DUT."""
    from test_cocotb_corpus import ROWS
    from test_cocotb_corpus import request as corpus_request

    request = corpus_request(ROWS[item_id], runtime="cocotb-2.1")
    request["coverage"] = {"metrics": ["expr"]}
    fast_run = engine.scored({**request, "engine": "fast"})
    reference_run = engine.scored({**request, "engine": "verilator"})
    fast, reference = fast_run.result, reference_run.result
    assert fast.engine == "fast" and fast.status == reference.status == "ok", (fast.fallback, fast.message)
    assert _expr_points(fast_run) == _expr_points(reference_run)
