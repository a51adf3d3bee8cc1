"""cocotb tests and completions as people write them (issue 24): helper packages keep their
folders, COCOTB_SIM is defined as cocotb defines it, a cocotb 1.x test runs on the runtime it
was written for whatever the engine, multi-block completions, DUTs below a wrapper.

Every reproducer here is our own code. Expected values are worked out independently: the
package layout scores as the same test with its helper inlined (one file), the DUT built
with ``COCOTB_SIM`` scores as the same DUT with the branch written in, a DUT two levels down
scores as the same DUT at the top."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO, live_server

ALU = """module pk_alu(input clk, input rst, input [1:0] op, input [7:0] a, input [7:0] b,
              output reg [7:0] y, output reg z);
  always @(posedge clk)
    if (rst) begin
      y <= 8'd0;
      z <= 1'b1;
    end else begin
      case (op)
        2'd0: y <= a + b;
        2'd1: y <= a - b;
        2'd2: y <= a & b;
        default: y <= a ^ b;
      endcase
      z <= (op == 2'd0) ? ((a + b) & 8'hff) == 0 : 1'b0;
    end
endmodule
"""

#: The reference model, as a helper module of a package (``helpers/model.py``).
MODEL = """def expected(op, a, b):
    return [(a + b) & 0xFF, (a - b) & 0xFF, a & b, a ^ b][op]
"""

TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, ReadOnly
{imports}

@cocotb.test()
async def alu_ops(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.op.value = 0
    dut.a.value = 0
    dut.b.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    for op, a, b in [(0, 3, 4), (1, 9, 2), (2, 0xF0, 0x3C), (3, 0xAA, 0x0F), (0, 0xFF, 0x01), (1, 0, 1)]:
        dut.op.value = op
        dut.a.value = a
        dut.b.value = b
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.y.value) == expected(op, a, b), (op, a, b, int(dut.y.value))
        await RisingEdge(dut.clk)
"""

#: The test importing its model from a package whose ``__init__.py`` is empty.
PACKAGED = {
    "test_alu.py": TEST.format(imports="from helpers.model import expected"),
    "helpers/__init__.py": "",
    "helpers/model.py": MODEL,
}
#: The same test with the model inlined: the independent twin of the package layout.
FLAT = {"test_alu.py": TEST.format(imports=MODEL)}


def alu_request(files: dict[str, str], engine: str, **extra) -> dict:
    return {
        "design": {"files": {"pk_alu.v": ALU}, "toplevel": "pk_alu"},
        "stimulus": {"kind": "cocotb", "files": files, "test_module": "test_alu"},
        "simulator": "verilator",
        "engine": engine,
        "coverage": {"metrics": ["line", "toggle"]},
        **extra,
    }


def figures(result: dict) -> dict[str, tuple[int, int]]:
    return {m: (v["covered"], v["total"]) for m, v in result["coverage"]["metrics"].items()}


def assert_packaged_like_flat(packaged: dict, flat: dict) -> None:
    assert packaged["status"] == "ok", (packaged["status"], packaged["message"])
    assert [(t["name"], t["passed"]) for t in packaged["tests"]] == [("alu_ops", True)], packaged["tests"]
    assert figures(packaged) == figures(flat)
    assert packaged["reward"] == flat["reward"] and packaged["reward"] > 1.0


# ---------------------------------------------------------------------------------------------
# 1. files keep their folders


@pytest.mark.parametrize("engine_name", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_helper_package_with_empty_init_scores_like_the_inlined_helper(engine, engine_name):
    packaged = engine.score(alu_request(PACKAGED, engine_name)).model_dump(mode="json")
    flat = engine.score(alu_request(FLAT, engine_name)).model_dump(mode="json")
    assert flat["status"] == "ok" and flat["engine"] == ("fast" if engine_name == "fast" else "verilator")
    assert_packaged_like_flat(packaged, flat)


def test_an_empty_hdl_or_test_file_is_still_refused(engine):
    result = engine.score(alu_request({**PACKAGED, "helpers/model.py": " \n"}, "fast"))
    assert result.status == "invalid_input" and result.message == "stimulus file 'helpers/model.py' is empty"
    result = engine.score(alu_request(PACKAGED, "fast", design={"files": {"pk_alu.v": ALU, "e.v": ""}}))
    assert result.status == "invalid_input" and result.message == "design file 'e.v' is empty"


def _cli(*args: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {"REWARD_SERVICE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "reward_service", *args],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        timeout=600,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


@pytest.mark.parametrize("engine_name", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_cli_keeps_cocotb_folders_relative_to_the_test_module(engine, tmp_path, shared_cache_dir, engine_name):
    """The checkout: ``tb/test_alu.py``, ``tb/helpers/{__init__,model}.py``, run from its parent
    with relative paths; the helpers take their paths relative to the test module's folder."""
    (tmp_path / "pk_alu.v").write_text(ALU)
    _write(tmp_path / "tb", PACKAGED)
    cocotb = [a for n in PACKAGED for a in ("--cocotb", f"tb/{n}")]
    out = _cli(
        "score",
        "--design",
        "pk_alu.v",
        *cocotb,
        "--toplevel",
        "pk_alu",
        "--engine",
        engine_name,
        "--metric",
        "line",
        "--metric",
        "toggle",
        "--json",
        cache=shared_cache_dir,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    flat = engine.score(alu_request(FLAT, engine_name)).model_dump(mode="json")
    assert_packaged_like_flat(json.loads(out.stdout), flat)


def test_cli_refuses_a_cocotb_file_outside_the_test_module_folder(tmp_path, shared_cache_dir):
    (tmp_path / "pk_alu.v").write_text(ALU)
    _write(tmp_path / "tb", {"test_alu.py": PACKAGED["test_alu.py"]})
    _write(tmp_path, {"model.py": MODEL})
    out = _cli(
        "score",
        "--design",
        "pk_alu.v",
        "--cocotb",
        "tb/test_alu.py",
        "--cocotb",
        "model.py",
        "--toplevel",
        "pk_alu",
        cache=shared_cache_dir,
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "outside it" in out.stderr, out.stderr


@pytest.fixture(scope="module")
def api(shared_cache_dir) -> Iterator[httpx.Client]:
    """The embedded service (LocalDispatcher, bubblewrap), no result cache."""
    from reward_service.api import create_app
    from reward_service.settings import Settings

    settings = Settings(cache_dir=shared_cache_dir, result_cache=False, score_workers=2, warm_on_register=False)
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=600) as client:
        yield client


@pytest.mark.parametrize("engine_name", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_http_helper_package_scores_like_the_inlined_helper(api, engine, engine_name):
    response = api.post("/v1/score", params={"wait": 600}, json=alu_request(PACKAGED, engine_name))
    assert response.status_code == 200, response.text
    flat = engine.score(alu_request(FLAT, engine_name)).model_dump(mode="json")
    assert_packaged_like_flat(response.json(), flat)


# ---------------------------------------------------------------------------------------------
# 2. COCOTB_SIM is defined as cocotb defines it

#: A timer whose cocotb build counts to 5 and keeps a tick counter (the `ifdef COCOTB_SIM
#: branch), where the plain build counts to 200.
TIMER = """module cs_timer(input clk, input rst, output reg tick, output reg [7:0] cnt);
`ifdef COCOTB_SIM
  localparam [7:0] LIMIT = 8'd5;
`else
  localparam [7:0] LIMIT = 8'd200;
`endif
  always @(posedge clk)
    if (rst) begin
      cnt <= 8'd0;
      tick <= 1'b0;
    end else if (cnt == LIMIT) begin
      cnt <= 8'd0;
      tick <= 1'b1;
    end else begin
      cnt <= cnt + 8'd1;
      tick <= 1'b0;
    end
{extra}endmodule
"""
TICKS = """`ifdef COCOTB_SIM
  reg [3:0] ticks;
  always @(posedge clk)
    if (rst) ticks <= 4'd0;
    else if (tick) ticks <= ticks + 4'd1;
`endif
"""


def timer_as_built(cocotb_sim: bool) -> str:
    """The timer with the preprocessor's choice written in (no `ifdef left): the design cocotb
    builds (``cocotb_sim``) or the plain one."""
    lines, keep, out = TIMER.format(extra=TICKS).splitlines(keepends=True), [True], []
    for line in lines:
        word = line.strip()
        if word == "`ifdef COCOTB_SIM":
            keep.append(cocotb_sim)
        elif word == "`else":
            keep[-1] = not keep[-1]
        elif word == "`endif":
            keep.pop()
        elif all(keep):
            out.append(line)
    return "".join(out)


TIMER_TEST = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge


@cocotb.test()
async def ticks(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 40)
    await RisingEdge(dut.clk)
"""


def timer_request(design: str, engine: str, test: str = TIMER_TEST) -> dict:
    return {
        "design": {"files": {"cs_timer.v": design}, "toplevel": "cs_timer"},
        "stimulus": {"kind": "cocotb", "files": {"test_timer.py": test}, "test_module": "test_timer"},
        "simulator": "verilator",
        "engine": engine,
        "coverage": {"metrics": ["line", "branch", "toggle"]},
    }


@pytest.mark.slow
def test_cocotb_sim_branch_is_the_design_cocotb_builds_on_every_engine(engine):
    """fast, verilator and auto score the `ifdef COCOTB_SIM design as the design with that
    branch written in; the plain branch would score otherwise (the check can fail)."""
    design = TIMER.format(extra=TICKS)
    got = {}
    for name in ("fast", "verilator", "auto"):
        result = engine.score(timer_request(design, name)).model_dump(mode="json")
        assert result["status"] == "ok" and result["fallback"] is None, (name, result["message"], result["fallback"])
        assert result["engine"] == ("verilator" if name == "verilator" else "fast")
        got[name] = (figures(result), result["reward"])
        built = engine.score(timer_request(timer_as_built(True), name)).model_dump(mode="json")
        assert got[name] == (figures(built), built["reward"]), name
        plain = engine.score(timer_request(timer_as_built(False), name)).model_dump(mode="json")
        assert figures(plain) != got[name][0], name
    assert got["fast"] == got["verilator"] == got["auto"]


def test_cocotb_sim_given_by_hand_stays_on_the_fast_path(engine):
    request = timer_request(TIMER.format(extra=TICKS), "fast")
    by_hand = engine.score({**request, "build": {"defines": {"COCOTB_SIM": "1"}}})
    implied = engine.score(request)
    assert by_hand.status == "ok" and by_hand.engine == "fast" and by_hand.fallback is None, by_hand.fallback
    assert by_hand.coverage.model_dump() == implied.coverage.model_dump()


# ---------------------------------------------------------------------------------------------
# 3. a cocotb 1.x test runs on the runtime it was written for, whatever the engine

#: Our cocotb 1.x test: ``cocotb.fork``, ``handle <= value``, ``units=``, ``.integer``. On
#: cocotb 2.1 it dies at t=0 (``module 'cocotb' has no attribute 'fork'``).
TIMER_TEST_1X = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


@cocotb.test()
async def ticks(dut):
    cocotb.fork(Clock(dut.clk, 10, units="ns").start())
    dut.rst <= 1
    await Timer(20, units="ns")
    dut.rst <= 0
    for _ in range(40):
        await RisingEdge(dut.clk)
    assert dut.cnt.value.integer <= 5
"""


@pytest.mark.slow
def test_cocotb_1x_test_scores_alike_on_every_engine(engine):
    """The issue's done-when: a 1.x test on an `ifdef COCOTB_SIM design gets the same status
    and coverage on fast, verilator and auto, of the design as cocotb builds it (the test's
    own assertion holds only with COCOTB_SIM's 5-count), run on cocotb 1.9."""
    design = TIMER.format(extra=TICKS)
    got = {}
    for name in ("fast", "verilator", "auto"):
        result = engine.score(timer_request(design, name, test=TIMER_TEST_1X)).model_dump(mode="json")
        assert result["status"] == "ok", (name, result["message"])
        assert [(t["name"], t["passed"]) for t in result["tests"]] == [("ticks", True)], (name, result["tests"])
        assert result["engine"] == "fast" and "ran on cocotb 1.9" in result["message"], (name, result["message"])
        if name != "fast":
            assert f"engine {name} asked: moved to the fast path" in result["message"], result["message"]
        got[name] = (figures(result), result["reward"])
    assert got["fast"] == got["verilator"] == got["auto"]
    built = engine.score(timer_request(timer_as_built(True), "fast", test=TIMER_TEST_1X)).model_dump(mode="json")
    assert got["fast"] == (figures(built), built["reward"])


@pytest.mark.slow
def test_cocotb_1x_test_on_cocotb_2_is_never_ok(engine):
    """A metric only Verilator measures keeps the sample there (the fast path falls back), where
    cocotb 2.1 runs the 1.x test and it dies at t=0: our choice's failure, a sandbox_error
    (reward None), not ``ok`` with reward 1.0 as before."""
    request = timer_request(TIMER.format(extra=TICKS), "verilator", test=TIMER_TEST_1X)
    request["coverage"]["metrics"] = ["line", "user"]
    result = engine.score(request)
    assert result.engine == "verilator" and result.fallback == "the fast path does not measure user"
    assert result.status == "sandbox_error" and result.reward is None, (result.status, result.message)
    assert (
        "the cocotb test died on the API of cocotb-2.1, the runtime we picked: module 'cocotb' has no attribute 'fork'"
        in result.message
    )
    assert "it was written for cocotb-1.9" in result.message


def test_undetected_version_that_dies_on_cocotb_2_is_run_on_1_9_and_a_named_one_is_the_tests(engine):
    """No 1.x idiom auto knows (a getattr'd ``fork``): cocotb 2.1 was a guess, so on Icarus the
    test runs again on cocotb 1.9, which has ``fork``, and that run is scored. The same test with
    ``runtime: cocotb-2.1`` named by the request: the test's own failure."""
    test = TIMER_TEST.replace(
        'cocotb.start_soon(Clock(dut.clk, 10, "ns").start())',
        'getattr(cocotb, "fo" + "rk")(Clock(dut.clk, 10, "ns").start())',
    )
    result = engine.score(timer_request(TIMER.format(extra=TICKS), "fast", test=test))
    assert result.status == "ok" and result.reward is not None and result.reward > 1.0, (result.status, result.message)
    assert "auto found no idiom of either cocotb version in it and guessed" in result.message
    assert "run again on cocotb-1.9, the run scored" in result.message
    assert "ran on cocotb 1.9" in result.message
    named = timer_request(TIMER.format(extra=TICKS), "fast", test=test)
    named["stimulus"]["runtime"] = "cocotb-2.1"
    result = engine.score(named)
    assert result.status == "ok" and [(t.name, t.passed) for t in result.tests] == [("ticks", False)]
    assert result.tests[0].message == "module 'cocotb' has no attribute 'fork'"


def test_a_failure_message_naming_cocotb_api_cannot_drop_the_sample(engine):
    """Red team: a test of neither version's idioms that fails with a message spelling a cocotb
    API death (``assert False, "module 'cocotb' has no attribute 'nope'"``) was a sandbox_error
    (reward None: dropped instead of scored). It now runs again on cocotb 1.9, fails the same
    way there, and that run is scored: ``ok`` with its coverage, the test failed."""
    test = TIMER_TEST.replace(
        'cocotb.start_soon(Clock(dut.clk, 10, "ns").start())',
        'cocotb.start_soon(Clock(dut.clk, 10, "ns").start())\n'
        "    assert False, \"module 'cocotb' has no attribute 'nope'\"",
    )
    assert test != TIMER_TEST
    result = engine.score(timer_request(TIMER.format(extra=TICKS), "fast", test=test))
    assert result.status == "ok" and result.reward is not None, (result.status, result.message)
    assert [t.passed for t in result.tests] == [False]
    assert "run again on cocotb-1.9, the run scored" in result.message


# ---------------------------------------------------------------------------------------------
# 4. multi-block completions

PKG = """package pk_ops;
  typedef enum logic [1:0] {OP_ADD, OP_SUB, OP_AND, OP_XOR} op_t;
  function automatic logic [7:0] model(logic [1:0] op, logic [7:0] a, logic [7:0] b);
    case (op)
      OP_ADD: return a + b;
      OP_SUB: return a - b;
      OP_AND: return a & b;
      default: return a ^ b;
    endcase
  endfunction
endpackage
"""
PKG_TB = """module tb;
  import pk_ops::*;
  logic clk = 0, rst = 1;
  logic [1:0] op;
  logic [7:0] a, b, y, want;
  logic z;
  int errors = 0;
  pk_alu dut(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));
  always #5 clk = ~clk;
  initial begin
    op = 0; a = 0; b = 0;
    repeat (2) @(posedge clk);
    rst = 0;
    for (int i = 0; i < 24; i++) begin
      op = i % 4;
      a = i * 37;
      b = i * 11 + 3;
      @(posedge clk);
      #1 want = model(op, a, b);
      if (y !== want) errors++;
    end
    $display("errors=%0d", errors);
    $finish;
  end
endmodule
"""


def completion_request(text: str, engine: str) -> dict:
    return {
        "design": {"files": {"pk_alu.v": ALU}, "toplevel": "pk_alu"},
        "stimulus": {"kind": "completion", "text": text},
        "simulator": "verilator",
        "engine": engine,
        "coverage": {"metrics": ["line", "toggle"], "scope": "dut"},
    }


@pytest.mark.parametrize("engine_name", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_two_block_completion_scores_as_the_two_files(engine, engine_name):
    text = (
        "First the package with the reference model:\n\n```systemverilog\n" + PKG + "```\n\n"
        "Then the testbench:\n\n```systemverilog\n" + PKG_TB + "```\n"
    )
    result = engine.score(completion_request(text, engine_name)).model_dump(mode="json")
    files = {"pk_ops.sv": PKG, "tb.sv": PKG_TB}
    separate = engine.score(
        {**completion_request("", engine_name), "stimulus": {"kind": "sv_testbench", "files": files}}
    ).model_dump(mode="json")
    assert separate["status"] == "ok" and "errors=0" in separate["log"], separate["message"]
    assert result["status"] == "ok", (result["message"], result["stimulus_block"])
    assert (figures(result), result["reward"], result["engine"]) == (
        figures(separate),
        separate["reward"],
        separate["engine"],
    )
    assert result["stimulus_block"] == (
        f"code block 2 of 2 (```systemverilog, {len(PKG_TB.splitlines())} lines): the testbench (module tb; "
        "instantiates pk_alu), "
        "scored together with block 1 (package pk_ops, as tb_block1.sv) that it uses"
    )


def test_cocotb_completion_with_its_helper_module_scores_as_the_files(engine):
    test = TEST.format(imports="from alu_model import expected")
    text = (
        "The reference model, `alu_model.py`:\n\n```python\n" + MODEL + "```\n\n"
        "The test:\n\n```python\n" + test + "```\n\nRun it with:\n\n```python\nprint('make')\n```\n"
    )
    request = alu_request({}, "fast")
    result = engine.score({**request, "stimulus": {"kind": "completion", "text": text}}).model_dump(mode="json")
    flat = engine.score(alu_request(FLAT, "fast")).model_dump(mode="json")
    assert_packaged_like_flat(result, flat)
    assert result["stimulus_block"] == (
        f"code block 2 of 3 (```python, {len(test.strip().splitlines())} lines): a cocotb test, scored together with block 1 "
        "(module alu_model, as alu_model.py) that it imports; not used: block 3 (Python the test does not import)"
    )


def test_a_draft_testbench_is_not_taken_as_a_companion():
    from reward_service.completion import extract

    text = "```systemverilog\n" + PKG_TB + "```\n\nFixed:\n\n```systemverilog\n" + PKG + PKG_TB + "```\n"
    got = extract(text, design_modules={"pk_alu"})
    assert list(got.stimulus.files) == ["tb.sv"]
    assert got.description.endswith("not used: block 1 (the testbench (module tb; instantiates pk_alu))")


# ---------------------------------------------------------------------------------------------
# 5. scoping by path

#: The package testbench driving the ALU directly (``dut`` under the top) ...
DIRECT_TB = PKG_TB
#: ... and through a wrapper (``u_wrap.dut``: two levels below the top) ...
WRAPPED_TB = PKG_TB.replace(
    "  pk_alu dut(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));",
    "  pk_wrap u_wrap(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));",
) + (
    "module pk_wrap(input clk, input rst, input [1:0] op, input [7:0] a, input [7:0] b,\n"
    "               output [7:0] y, output z);\n"
    "  pk_alu dut(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));\n"
    "endmodule\n"
)
#: ... and in a generate block (``l_functional.DUT``).
GENERATE_TB = PKG_TB.replace(
    "  pk_alu dut(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));",
    "  if (1) begin : l_functional\n    pk_alu DUT(.clk(clk), .rst(rst), .op(op), .a(a), .b(b), .y(y), .z(z));\n  end",
)


def scoped_request(tb: str, scope: str, engine: str) -> dict:
    return {
        "design": {"files": {"pk_alu.v": ALU}, "toplevel": "pk_alu"},
        "stimulus": {"kind": "sv_testbench", "files": {"pk_ops.sv": PKG, "tb.sv": tb}},
        "simulator": "verilator",
        "engine": engine,
        "coverage": {"metrics": ["line", "branch", "toggle"], "scope": scope},
    }


@pytest.mark.parametrize("engine_name", ["fast", pytest.param("verilator", marks=pytest.mark.slow)])
def test_dut_below_the_top_scores_like_the_dut_at_the_top(engine, engine_name):
    direct = engine.score(scoped_request(DIRECT_TB, "dut", engine_name)).model_dump(mode="json")
    assert direct["status"] == "ok" and direct["engine"] == engine_name, (direct["message"], direct["fallback"])
    for tb, scope in [(WRAPPED_TB, "u_wrap.dut"), (WRAPPED_TB, "tb.u_wrap.dut"), (GENERATE_TB, "l_functional.DUT")]:
        got = engine.score(scoped_request(tb, scope, engine_name)).model_dump(mode="json")
        assert got["status"] == "ok" and got["engine"] == engine_name, (scope, got["message"], got["fallback"])
        assert (figures(got), got["reward"]) == (figures(direct), direct["reward"]), scope
        assert got["coverage"]["scope_found"] is True


def test_a_wrong_path_names_the_instances_that_exist(engine):
    result = engine.score(scoped_request(WRAPPED_TB, "u_wrapper.dut", "fast"))
    assert result.status == "invalid_input"
    assert result.message == (
        "the testbench must instantiate the DUT as `u_wrapper.dut` (found instance(s): dut): no instance or "
        "generate block `u_wrapper`; a DUT below the top `tb` is named by its path of instances and "
        "generate blocks, e.g. u_wrap.dut"
    )
    # each part exists, but not as a path: the elaborated hierarchy says so, naming the path
    result = engine.score(scoped_request(WRAPPED_TB, "dut", "fast"))
    assert result.status == "invalid_input"
    assert result.message == (
        "the DUT is not instantiated as `dut` under `tb` (found: u_wrap, u_wrap.dut); "
        "a DUT below the top is named by its path: `u_wrap.dut`"
    )


# ---------------------------------------------------------------------------------------------
# 6. clear words


def sv_request(tb: str, engine: str | None, simulator: str = "verilator") -> dict:
    request = {
        "design": {"files": {"pk_alu.v": ALU}, "toplevel": "pk_alu"},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "simulator": simulator,
        "coverage": {"metrics": ["line", "toggle"]},
    }
    return {**request, "engine": engine} if engine else request


UVM_TB = """`include "uvm_macros.svh"
module tb;
  import uvm_pkg::*;
  logic clk = 0;
  pk_alu dut(.clk(clk), .rst(1'b1), .op(2'd0), .a(8'd0), .b(8'd0), .y(), .z());
  initial run_test();
endmodule
"""


def test_uvm_testbench_is_named_unsupported(engine):
    result = engine.score(sv_request(UVM_TB, "verilator"))
    assert result.status == "compile_error"
    assert result.message.endswith(
        "(UVM testbenches are not supported: no UVM library (uvm_pkg) is compiled in; write a plain "
        "SystemVerilog testbench or a cocotb test)"
    ), result.message


def test_a_legal_construct_the_simulator_rejects_is_named_unsupported(engine):
    """An untyped mailbox is legal SystemVerilog; Verilator rejects it with an error about class
    parameters that does not say so."""
    tb = UVM_TB.replace('`include "uvm_macros.svh"\n', "").replace("  import uvm_pkg::*;\n", "  mailbox mb = new();\n")
    tb = tb.replace("  initial run_test();", "  initial begin\n    mb.put(3);\n    $finish;\n  end")
    result = engine.score(sv_request(tb, "verilator"))
    assert result.status == "compile_error", result.message
    assert result.message.endswith(
        "(Verilator does not support an untyped mailbox (`mailbox mb`), which SystemVerilog allows: "
        "give it a type (`mailbox #(int) mb`))"
    ), result.message


STAMPED_TB = """module tb;
  logic clk = 0;
  pk_alu dut(.clk(clk), .rst(1'b0), .op(2'd0), .a(8'd1), .b(8'd2), .y(), .z());
  always #5 clk = ~clk;
  initial begin
    repeat (30) begin
      @(posedge clk);
      $display("[%0t ns] %%Error: tb.sv: check %0d failed", $time, 7);
    end
    $finish;
  end
endmodule
"""


def test_time_stamped_error_lines_are_counted_beyond_the_cap(engine):
    result = engine.score(sv_request(STAMPED_TB, None, "icarus"))
    assert result.status == "ok", result.message
    assert "the log reports 30 error line(s), first: [5 ns] %Error: tb.sv: check 7 failed" in result.message


def test_fallback_reasons_read_as_words():
    from reward_service.fastcov.unit import kind_phrase

    assert kind_phrase("Invalid", "statement") == "a statement that does not elaborate (pyslang could not resolve it)"
    assert kind_phrase("ProceduralAssign", "statement") == "a procedural assign statement"
    assert kind_phrase("Inside", "expression") == "an inside expression"


def test_the_chosen_top_is_named_when_there_were_several(engine):
    tb = STAMPED_TB.replace("repeat (30)", "repeat (2)") + "module spare_checker;\nendmodule\n"
    result = engine.score(sv_request(tb, None, "icarus"))
    assert result.status == "ok", result.message
    assert (
        "the testbench has 2 top module candidates (modules nothing instantiates: tb, spare_checker): "
        "simulated `tb` (set stimulus.top / --top to choose)"
    ) in result.message, result.message


def test_cocotb_1_9_named_on_verilator_moves_to_the_fast_path(engine):
    request = timer_request(TIMER.format(extra=TICKS), "verilator", test=TIMER_TEST_1X)
    request["stimulus"]["runtime"] = "cocotb-1.9"
    result = engine.score(request)
    assert result.status == "ok" and result.engine == "fast", result.message
    assert result.message.startswith(
        "engine verilator asked: moved to the fast path (Icarus, Verilator's coverage points) since the "
        "request names the cocotb 1.9 runtime and the cocotb 1.9 runtime runs on Icarus only; ran on cocotb 1.9"
    ), result.message


def test_a_helper_module_and_interface_block_join_the_testbench_and_a_namesake_signal_does_not():
    from reward_service.completion import extract

    helper = "module stim_gen(output logic [7:0] v);\n  initial v = 8'd5;\nendmodule\n"
    bus = "interface alu_if;\n  logic [7:0] a;\nendinterface\n"
    other = "module counter(input clk);\nendmodule\n"
    tb = (
        "module tb;\n  logic [7:0] v;\n  logic counter;\n  alu_if bus();\n  stim_gen g(.v(v));\n"
        "  pk_alu dut(.clk(1'b0), .rst(1'b1), .op(2'd0), .a(v), .b(v), .y(), .z());\nendmodule\n"
    )
    text = "".join(f"```systemverilog\n{b}```\n\n" for b in (helper, bus, other, tb))
    got = extract(text, design_modules={"pk_alu"})
    assert list(got.stimulus.files) == ["tb_block1.sv", "tb_block2.sv", "tb.sv"]
    assert got.description == (
        "code block 4 of 4 (```systemverilog, 7 lines): the testbench (module tb; instantiates pk_alu), "
        "scored together with block 1 (module stim_gen, as tb_block1.sv), block 2 (interface alu_if, as "
        "tb_block2.sv) that it uses; not used: block 3 an empty module stub (module counter)"
    )


def test_unreachability_is_not_proved_on_a_design_other_than_the_one_built(engine):
    """The proof models the design as written; with COCOTB_SIM read by it, it would be the
    other branch's points: none is excluded, and the prover's note says why."""
    request = timer_request(TIMER.format(extra=TICKS), "fast")
    request["coverage"]["exclude_unreachable"] = True
    result = engine.score(request)
    assert result.status == "ok"
    note = result.coverage.unreachable_note or ""
    assert "no point excluded as unreachable: the design reads COCOTB_SIM" in note, note
    assert all(m.unreachable == 0 for m in result.coverage.metrics.values())
    plain = engine.score({**request, "coverage": {**request["coverage"], "exclude_unreachable": None}})
    assert result.coverage.metrics == plain.coverage.metrics
