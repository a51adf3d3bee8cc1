"""Property tests (hypothesis) of the parsers that read untrusted bytes: Verilator's
``coverage.dat``, cocotb-coverage's YAML export (both written inside the sandbox, where the
stimulus runs), completion extraction (the model's text) and the CVDP JSONL loader (a client's
body on ``POST /v1/problems:load``). Each either returns a well-formed value or raises its
documented error type, never another exception; inputs are bounded so every example is fast.
The regression tests at the end are the bugs these properties found (issue 11, item 6)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_service.completion import ExtractionError, extract
from reward_service.coverage.functional import parse_functional_yaml
from reward_service.coverage.points import CoveragePoint
from reward_service.coverage.verilator_dat import CoverageFileError, parse_coverage_dat
from reward_service.models import CocotbStimulus, SvTestbench
from reward_service.problems.cvdp import Problem, _rows, load_problems

# derandomize: the same examples every run (CI stays reproducible); database=None: no .hypothesis/ in the tree
PROPS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

_TMP = Path(tempfile.mkdtemp(prefix="rs-parser-props-"))


def _write(name: str, data: bytes) -> Path:
    path = _TMP / name
    path.write_bytes(data)
    return path


def _well_formed_points(points: list) -> None:
    for p in points:
        assert isinstance(p, CoveragePoint)
        assert isinstance(p.line, int) and p.line >= 0
        assert isinstance(p.count, int) and isinstance(p.at_least, int)
        assert isinstance(p.metric, str) and isinstance(p.file, str) and isinstance(p.detail, str)


# -- coverage.dat ---------------------------------------------------------------------------------
_KEYS = st.sampled_from(["f", "l", "n", "t", "page", "o", "h", "S", "lineno", "filename", "type", ""])
_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(0, 10**30).map(str),
    st.sampled_from(["line", "toggle", "branch", "block", "dut.sv", "²", "٣", "-1"]),
)
_PAIRS = st.lists(st.tuples(_KEYS, _VALUE), max_size=8).map(lambda kv: "".join(f"\x01{k}\x02{v}" for k, v in kv))
_COUNT = st.one_of(
    st.integers(0, 2**64).map(str), st.text("0123456789٣²x -", min_size=1, max_size=8), st.just("9" * 5000)
)
_RECORD = st.one_of(st.builds(lambda k, c: f"C '{k}' {c}", _PAIRS, _COUNT), st.text(max_size=40))


@PROPS
@given(
    header=st.sampled_from(["# SystemC::Coverage-3", "# SystemC::Coverage-2", "", "garbage"]),
    records=st.lists(_RECORD, max_size=12),
    dut=st.one_of(st.none(), st.just({"dut.sv"})),
)
def test_coverage_dat_returns_points_or_coverage_file_error(header, records, dut):
    path = _write("coverage.dat", "\n".join([header, *records]).encode("utf-8", "surrogatepass"))
    try:
        points = parse_coverage_dat(path, dut)
    except CoverageFileError:
        return
    _well_formed_points(points)


@PROPS
@given(st.binary(max_size=2000))
def test_coverage_dat_raw_bytes(data):
    path = _write("coverage.dat", b"# SystemC::Coverage-3\n" + data)
    try:
        _well_formed_points(parse_coverage_dat(path))
    except CoverageFileError:
        pass


# -- cocotb-coverage YAML -------------------------------------------------------------------------
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=True), st.text(max_size=8)
)
_YAML_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)
_ITEM = st.fixed_dictionaries({"bins:_hits": _YAML_VALUE}, optional={"at_least": _YAML_VALUE, "weight": _SCALAR})


def _yaml_text(doc) -> str:
    import yaml

    return yaml.safe_dump(doc, allow_unicode=True)


@PROPS
@given(st.one_of(st.dictionaries(st.text(max_size=10), st.one_of(_ITEM, _YAML_VALUE), max_size=5), _YAML_VALUE))
def test_functional_yaml_shapes(doc):
    path = _write("coverage.yml", _yaml_text(doc).encode())
    try:
        points = parse_functional_yaml(path)
    except ValueError:
        return
    _well_formed_points(points)
    assert all(p.metric == "functional" for p in points)


_YAML_BITS = st.sampled_from(
    [
        "a:\n",
        "  bins:_hits:\n",
        "    b: 3\n",
        "  at_least: 2\n",
        "[",
        "]",
        "{",
        "}",
        "&x ",
        "*x ",
        "!!python/object:os.system ",
        ".inf",
        ".nan",
        "- ",
        ": ",
        "'",
        '"',
        "\t",
        "---\n",
        "%YAML 1.1\n",
        "? ",
        "|\n",
        "!!binary ",
        "\x00",
        "\ufeff",
    ]
)


@PROPS
@given(st.one_of(st.lists(_YAML_BITS, max_size=30).map("".join).map(str.encode), st.binary(max_size=500)))
def test_functional_yaml_raw_text(data):
    path = _write("coverage.yml", data)
    try:
        _well_formed_points(parse_functional_yaml(path))
    except ValueError:
        pass


# -- completion extraction ------------------------------------------------------------------------
_COMPLETION_BITS = st.sampled_from(
    [
        "```",
        "```systemverilog\n",
        "```python\n",
        "```vhdl\n",
        "~~~\n",
        "````\n",
        "\n",
        "   ",
        "module tb;\n",
        "module dut(input clk);\n",
        "endmodule\n",
        "dut uut(.clk(clk));\n",
        "@cocotb.test()\n",
        "async def t(dut):\n",
        "<think>",
        "</think>",
        "`timescale 1ns/1ps\n",
        "entity e is\n",
        "/* ",
        " */",
        "// module x\n",
        '"module y"',
        "initial begin $finish; end\n",
        "\r\n",
        "\u2028",
        "\x00",
        "#(",
        "(",
        ")",
        ";",
    ]
)


@PROPS
@given(
    text=st.one_of(st.lists(_COMPLETION_BITS, max_size=40).map("".join), st.text(max_size=400)),
    design=st.one_of(st.none(), st.just(["dut"]), st.just(["dut", "sub"])),
)
def test_extract_returns_stimulus_or_extraction_error(text, design):
    try:
        got = extract(text, toplevel="dut", design_modules=design)
    except ExtractionError as exc:
        assert str(exc)
        return
    stimulus = got.stimulus
    assert isinstance(stimulus, (SvTestbench, CocotbStimulus))
    (code,) = stimulus.files.values()
    assert code.endswith("\n") and not code.endswith("\n\n")
    if isinstance(stimulus, SvTestbench):
        assert "endmodule" in code
    else:
        assert "@cocotb.test" in code
    assert got.description


def test_extract_non_string_is_extraction_error():
    for value in (None, 3, b"module tb; endmodule", ["x"]):
        with pytest.raises(ExtractionError):
            extract(value)  # type: ignore[arg-type]


# -- CVDP JSONL loader ----------------------------------------------------------------------------
def _row(**over) -> dict:
    row = {
        "id": "cvdp_x_0001",
        "categories": ["cid012", "easy"],
        "input": {"prompt": "Write a testbench for `ctr`, instance `uut`.", "context": {}},
        "output": {"response": "", "context": {"verif/tb.sv": ""}},
        "harness": {
            "files": {
                "src/ctr.sv": "module ctr(input clk); endmodule\n",
                "src/.env": "TARGET = 80\n",
                "src/process.py": 'assert metrics["uut"]["Overall Average"] >= 80\n',
            }
        },
    }
    row.update(over)
    return row


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
_FIELDS = st.sampled_from(["id", "categories", "input", "output", "harness", "patch", "prompt", "context"])


@PROPS
@given(st.dictionaries(_FIELDS, _JSON, max_size=6))
def test_cvdp_row_mutations(over):
    line = json.dumps(_row(**over))
    try:
        problems = _rows([line], "x.jsonl")
    except ValueError as exc:
        assert str(exc).startswith("x.jsonl:1: ")
        return
    (problem,) = problems.values()
    assert isinstance(problem, Problem) and problem.design.toplevel


@PROPS
@given(st.lists(st.one_of(st.text(max_size=80), _JSON.map(json.dumps)), max_size=5))
def test_cvdp_arbitrary_lines(lines):
    try:
        problems = _rows(lines, "x.jsonl")
    except ValueError as exc:
        assert str(exc).startswith("x.jsonl:")
        return
    assert all(isinstance(p, Problem) for p in problems.values())


def test_cvdp_good_row_loads():
    (problem,) = _rows([json.dumps(_row())], "x.jsonl").values()
    assert (problem.design.toplevel, problem.dut_instance, problem.target_percent, problem.difficulty) == (
        "ctr",
        "uut",
        80.0,
        "easy",
    )


# -- regressions: bugs the properties found -------------------------------------------------------
def test_coverage_dat_unicode_digit_line_is_coverage_file_error():
    # "²".isdigit() is True but int("²") raised a bare ValueError
    path = _write("coverage.dat", "# SystemC::Coverage-3\nC '\x01f\x02dut.sv\x01l\x02²\x01t\x02line' 3\n".encode())
    with pytest.raises(CoverageFileError, match="bad line number"):
        parse_coverage_dat(path)


def test_coverage_dat_huge_count_is_coverage_file_error():
    # int() refuses more than 4300 digits (a bare ValueError); a count Verilator writes has <= 20
    path = _write(
        "coverage.dat",
        ("# SystemC::Coverage-3\nC '\x01f\x02dut.sv\x01l\x021\x01t\x02line' " + "9" * 5000 + "\n").encode(),
    )
    with pytest.raises(CoverageFileError, match="5000 digits"):
        parse_coverage_dat(path)
    path = _write(
        "coverage.dat",
        ("# SystemC::Coverage-3\nC '\x01f\x02dut.sv\x01l\x02" + "1" * 5000 + "\x01t\x02line' 1\n").encode(),
    )
    with pytest.raises(CoverageFileError, match="bad line number"):
        parse_coverage_dat(path)
    # a 20-digit (64-bit) count still reads
    path = _write(
        "coverage.dat",
        ("# SystemC::Coverage-3\nC '\x01f\x02dut.sv\x01l\x027\x01t\x02line' " + str(2**64 - 1) + "\n").encode(),
    )
    (point,) = parse_coverage_dat(path)
    assert (point.line, point.count) == (7, 2**64 - 1)


@pytest.mark.parametrize("text", ["a:\n  bins:_hits: {x: 1}\n  at_least: .inf\n", "a:\n  bins:_hits: {x: .inf}\n"])
def test_functional_yaml_infinity_is_value_error(text):
    # int(float("inf")) raised OverflowError, not the documented ValueError
    with pytest.raises(ValueError, match="bad shape"):
        parse_functional_yaml(_write("coverage.yml", text.encode()))


def test_functional_yaml_deep_nesting_is_value_error():
    # PyYAML composes recursively: RecursionError escaped
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_functional_yaml(_write("coverage.yml", b"[" * 5000 + b"]" * 5000))


def test_cvdp_deep_json_is_value_error(tmp_path):
    # json.loads raised RecursionError, which load_problems let through without file:line
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"deep\.jsonl:2: bad cid012 row: JSON nested too deeply"):
        load_problems(path)


def test_cvdp_categories_not_a_list():
    # a dict of categories raised KeyError (categories[1]), outside the loader's error types
    (problem,) = _rows([json.dumps(_row(categories={"a": 1, "b": 2}))], "x.jsonl").values()
    assert problem.difficulty is None
    (problem,) = _rows([json.dumps(_row(categories="cid012"))], "x.jsonl").values()
    assert problem.difficulty is None
