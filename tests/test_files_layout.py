"""Data files, folders, includes and build options (issue 9, points 3 and 4).

Our own small reproducers. Every expected value comes from an equivalent twin: the same data
written into the testbench, the class files pasted inline, the parameter or define written into
the source; the twin is scored by the same simulator and its numbers are the test's numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reward_service import hdl
from reward_service.cache import request_key
from reward_service.models import BuildOptions, ScoreRequest

#: An accumulator whose width is a parameter: its toggle points count 2 per bit of d, q, clk.
ACC = """module acc #(parameter W = 4) (input clk, input [W-1:0] d, output reg [W-1:0] q);
  initial q = 0;
  always @(posedge clk) q <= q ^ d;
endmodule
"""
#: Reads its stimulus from data/golden.hex (relative to the source root, as in a checkout).
TB_HEX = """module tb;
  reg clk = 0; reg [3:0] d = 0; wire [3:0] q; reg [3:0] mem [0:3]; integer i;
  acc uut(.clk(clk), .d(d), .q(q));
  initial begin
    $readmemh("data/golden.hex", mem);
    for (i = 0; i < 4; i = i + 1) begin d = mem[i]; #1 clk = 1; #1 clk = 0; $display("step %0d q=%h", i, q); end
    $finish;
  end
endmodule
"""
HEX = "// golden vectors\n1\n2\n4\n8\n"
#: The inline-data twin: the same four values written into the testbench.
TB_INLINE = TB_HEX.replace(
    '$readmemh("data/golden.hex", mem);', "mem[0] = 4'h1; mem[1] = 4'h2; mem[2] = 4'h4; mem[3] = 4'h8;"
)


def sv_request(design: dict, tb: dict, simulator: str = "verilator", **extra) -> dict:
    return {
        "design": {"files": design},
        "stimulus": {"kind": "sv_testbench", "files": tb},
        "simulator": simulator,
        **extra,
    }


def numbers(result) -> dict:
    """What a result measured: (covered, total) per metric and the uncovered points."""
    return {
        "metrics": {k: (m.covered, m.total) for k, m in result.coverage.metrics.items() if m.available},
        "uncovered": sorted((p.file, p.line, p.metric, p.detail) for p in result.uncovered),
    }


def steps(log: str) -> list[str]:
    return [line.strip() for line in log.splitlines() if line.strip().startswith("step ")]


# -- point 3: data files ------------------------------------------------------------------------


def test_readmemh_testbench_scores_as_its_inline_twin_on_verilator(engine):
    with_file = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": TB_HEX, "data/golden.hex": HEX}))
    twin = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": TB_INLINE}))
    assert twin.status == "ok" and with_file.status == "ok", with_file.message
    assert numbers(with_file) == numbers(twin)
    assert with_file.coverage.metrics["toggle"].covered > 2  # the data reached the DUT
    assert steps(with_file.log) == steps(twin.log)
    assert with_file.message == twin.message == ""


def test_readmemh_testbench_runs_as_its_inline_twin_on_icarus(engine):
    with_file = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": TB_HEX, "data/golden.hex": HEX}, "icarus"))
    twin = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": TB_INLINE}, "icarus"))
    assert with_file.status == twin.status == "ok"
    assert steps(with_file.log) == steps(twin.log) and len(steps(twin.log)) == 4
    assert "not found" not in with_file.message


#: A ROM whose contents come from a data file of the design: on the fast path (Icarus with the
#: instrumented DUT) the DUT's $readmemh reads it in the run dir.
ROM = """module rom (input clk, input [1:0] a, output reg [3:0] q);
  reg [3:0] mem [0:3];
  initial $readmemh("rom/init.mem", mem);
  always @(posedge clk) if (mem[a] == 4'h8) q <= 4'hf; else q <= mem[a];
endmodule
"""
ROM_INLINE = ROM.replace(
    'initial $readmemh("rom/init.mem", mem);',
    "initial begin mem[0] = 4'h1; mem[1] = 4'h2; mem[2] = 4'h4; mem[3] = 4'h8; end",
)
TB_ROM = """module tb;
  reg clk = 0; reg [1:0] a = 0; wire [3:0] q; integer i;
  rom uut(.clk(clk), .a(a), .q(q));
  initial begin
    for (i = 0; i < 4; i = i + 1) begin a = i; #1 clk = 1; #1 clk = 0; $display("step %0d q=%h", i, q); end
    $finish;
  end
endmodule
"""


def test_design_data_file_on_the_fast_path_matches_its_inline_twin(engine):
    with_file = engine.score(sv_request({"rom.v": ROM, "rom/init.mem": "1 2 4 8\n"}, {"tb.sv": TB_ROM}, engine="fast"))
    twin = engine.score(sv_request({"rom.v": ROM_INLINE}, {"tb.sv": TB_ROM}, engine="fast"))
    assert with_file.engine == twin.engine == "fast", (with_file.fallback, twin.fallback)
    assert with_file.status == twin.status == "ok"
    assert with_file.coverage.metrics["branch"].covered == twin.coverage.metrics["branch"].covered == 2
    assert numbers(with_file) == numbers(twin) and steps(with_file.log) == steps(twin.log)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_missing_data_file_is_named_in_message(engine, simulator):
    result = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": TB_HEX}, simulator))
    assert result.status == "ok"
    assert "data file(s) not found: data/golden.hex" in result.message


def test_fopen_of_a_missing_file_is_named_in_message(engine):
    tb = """module tb; integer fd; initial begin fd = $fopen("vectors/in.txt", "r"); $display("fd=%0d", fd); $finish; end endmodule\n"""
    result = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": tb}, "icarus"))
    assert result.status == "ok" and "fd=0" in result.log
    assert "data file(s) not found: vectors/in.txt" in result.message


def test_data_files_are_checked_by_name():
    """Suffix list, reserved run-dir names, empty data allowed (no simulation needed)."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    eng = Engine(Settings(result_cache=False))
    base = {"acc.v": ACC}
    bad = eng.score(sv_request(base, {"tb.sv": TB_HEX, "golden.pyc": "x"}))
    assert bad.status == "invalid_input" and "unsupported file type" in bad.message and ".hex" in bad.message
    for name in ("coverage.dat", "rs_fcov.yml", "rs_end.txt"):
        bad = eng.score(sv_request(base, {"tb.sv": TB_HEX, name: "1\n"}))
        assert bad.status == "invalid_input" and "simulation's own outputs" in bad.message, name
    ok = eng.prepare(ScoreRequest.model_validate(sv_request(base, {"tb.sv": TB_HEX, "data/empty.txt": ""})))
    assert ok.stimulus.top == "tb"  # data files take no part in choosing the top


# -- point 4: folders and includes ------------------------------------------------------------


def test_include_scanner_finds_compilation_units():
    files = {
        "tb.sv": '`include "classes/pkt.sv"\n`include "pkg/defs.svh"\nmodule tb; endmodule\n',
        "classes/pkt.sv": '`include "drv.sv"\nclass pkt; endclass\n',
        "classes/drv.sv": "class drv; endclass\n",
        "pkg/defs.svh": "`define W 4\n",
        "pkg/unused.svh": "",
        "other.sv": '// `include "tb.sv"\nmodule other; endmodule\n',
        "data/x.hex": '`include "other.sv"\n',
    }
    dirs = hdl.search_dirs(list(files))
    assert dirs == [".", "classes", "pkg"]
    included = hdl.included_files(files, dirs)
    assert included == {"classes/pkt.sv", "classes/drv.sv", "pkg/defs.svh"}  # comments, data: not includes
    assert hdl.compilation_units(list(files), included) == ["tb.sv", "other.sv"]


#: A testbench made of `include'd class files (a .svh header and a .sv class file).
PKT = """class pkt;
  rand bit [3:0] v;
  function new(bit [3:0] x); v = x; endfunction
endclass
"""
DRV = """class drv;
  function bit [3:0] next(pkt p); return p.v; endfunction
endclass
"""
TB_CLASSES = """`include "classes/pkt.svh"
`include "classes/drv.sv"
module tb;
  reg clk = 0; reg [3:0] d = 0; wire [3:0] q; integer i;
  acc uut(.clk(clk), .d(d), .q(q));
  initial begin
    drv dr = new();
    for (i = 0; i < 4; i = i + 1) begin pkt p = new(4'(1 << i)); d = dr.next(p); #1 clk = 1; #1 clk = 0; end
    $finish;
  end
endmodule
"""


def test_testbench_of_included_class_files_compiles_once_on_verilator(engine):
    files = {"tb.sv": TB_CLASSES, "classes/pkt.svh": PKT, "classes/drv.sv": DRV}
    result = engine.score(sv_request({"acc.v": ACC}, files))
    pasted = TB_CLASSES.replace('`include "classes/pkt.svh"\n', PKT).replace('`include "classes/drv.sv"\n', DRV)
    twin = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": pasted}))
    assert twin.status == "ok" and twin.coverage.metrics["toggle"].covered > 2
    assert result.status == "ok", result.message
    assert numbers(result) == numbers(twin)


REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {"REWARD_SERVICE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "reward_service", *args], capture_output=True, text=True, env=env, timeout=600, cwd=cwd
    )


def lay_out(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


#: Folders as in a checkout: the testbench includes a header by its path from the root, that
#: header includes a sibling, the data file lives in data/; STEPS, W and the plusarg N steer it.
TB_KNOBS = """`include "pkg/defs.svh"
module tb #(parameter W = 4);
  reg clk = 0; reg [W-1:0] d = 0; wire [W-1:0] q; reg [3:0] mem [0:3]; integer i, n;
  acc #(.W(W)) uut(.clk(clk), .d(d), .q(q));
  initial begin
    $readmemh("data/golden.hex", mem);
    if (!$value$plusargs("N=%d", n)) n = 1;
    for (i = 0; i < `STEPS * n; i = i + 1) begin d = {W{1'b0}} | (mem[i % 4] << (i / 4)); #1 clk = 1; #1 clk = 0; end
    $display("W=%0d steps=%0d", W, `STEPS * n);
    $finish;
  end
endmodule
"""
DEFS = '`include "more.svh"\n`ifndef STEPS\n`define STEPS `BASE_STEPS\n`endif\n'
MORE = "`define BASE_STEPS 2\n"


def test_cli_folders_include_data_and_build_options_on_verilator(tmp_path, shared_cache_dir, engine):
    lay_out(
        tmp_path,
        {"rtl/acc.v": ACC, "tb/tb.sv": TB_KNOBS, "pkg/defs.svh": DEFS, "pkg/more.svh": MORE, "data/golden.hex": HEX},
    )
    out = cli(
        "score",
        "-d",
        "rtl/acc.v",
        "-t",
        "tb/tb.sv",
        "-t",
        "pkg/defs.svh",
        "-t",
        "pkg/more.svh",
        "-t",
        "data/golden.hex",
        "--define",
        "STEPS=4",
        "--param",
        "W=8",
        "--plusarg",
        "N=2",
        "--json",
        "--no-cache",
        cwd=tmp_path,
        cache=shared_cache_dir,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok" and "W=8 steps=8" in result["log"]
    # The twin: one flat testbench with the define, parameter, plusarg and data written in.
    flat = (
        TB_KNOBS.replace('`include "pkg/defs.svh"\n', "")
        .replace("parameter W = 4", "parameter W = 8")
        .replace("`STEPS", "4")
        .replace('if (!$value$plusargs("N=%d", n)) n = 1;', "n = 2;")
        .replace('$readmemh("data/golden.hex", mem);', "mem[0] = 4'h1; mem[1] = 4'h2; mem[2] = 4'h4; mem[3] = 4'h8;")
    )
    twin = engine.score(sv_request({"rtl/acc.v": ACC}, {"tb/tb.sv": flat}))
    assert twin.status == "ok" and "W=8 steps=8" in twin.log
    got = {k: (m["covered"], m["total"]) for k, m in result["coverage"]["metrics"].items() if m["available"]}
    assert got == numbers(twin)["metrics"]
    assert got["toggle"][1] == 2 * (1 + 8 + 8)  # clk, d[7:0], q[7:0]: the parameter widened the DUT
    # Without the options the defaults apply: W=4, STEPS from more.svh (2), N=1.
    plain = cli(
        "score",
        "-d",
        "rtl/acc.v",
        "-t",
        "tb/tb.sv",
        "-t",
        "pkg/defs.svh",
        "-t",
        "pkg/more.svh",
        "-t",
        "data/golden.hex",
        "--json",
        "--no-cache",
        "-s",
        "icarus",
        cwd=tmp_path,
        cache=shared_cache_dir,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "W=4 steps=2" in json.loads(plain.stdout)["log"]


def test_build_options_on_icarus_and_fast_path_fallback(engine):
    files = {"tb/tb.sv": TB_KNOBS, "pkg/defs.svh": DEFS, "pkg/more.svh": MORE, "data/golden.hex": HEX}
    build = {"defines": {"STEPS": "3"}, "parameters": {"W": "6"}, "plusargs": ["+N=2"]}
    icarus = engine.score(sv_request({"acc.v": ACC}, files, "icarus", build=build))
    assert icarus.status == "ok" and "W=6 steps=6" in icarus.log, icarus.log
    fast = engine.score(
        sv_request(
            {"acc.v": ACC}, files, build={"parameters": {"W": "6"}}, engine="fast", coverage={"metrics": ["toggle"]}
        )
    )
    assert fast.engine == "verilator" and "parameter overrides (W)" in (fast.fallback or "")
    assert fast.coverage.metrics["toggle"].total == 2 * (1 + 6 + 6)
    # A define the design does not read and a plusarg: the fast path honours both, and its
    # points equal Verilator's for the same request.
    inline = {
        **files,
        "tb/tb.sv": TB_KNOBS.replace(
            '$readmemh("data/golden.hex", mem);', "mem[0] = 4'h1; mem[1] = 4'h2; mem[2] = 4'h4; mem[3] = 4'h8;"
        ).replace("acc #(.W(W)) uut", "acc uut"),
    }
    knobs = {"defines": {"STEPS": "3"}, "plusargs": ["N=2"]}
    ok = engine.score(sv_request({"acc.v": ACC}, inline, build=knobs, engine="fast", coverage={"metrics": ["toggle"]}))
    assert ok.engine == "fast" and ok.fallback is None and "W=4 steps=6" in ok.log
    reference = engine.score(
        sv_request({"acc.v": ACC}, inline, build=knobs, engine="verilator", coverage={"metrics": ["toggle"]})
    )
    assert "W=4 steps=6" in reference.log and numbers(ok) == numbers(reference)
    # A define the design reads goes to Verilator: the DUT is instrumented as written.
    acc_ifdef = ACC.replace("initial q = 0;", "`ifdef ZERO_Q initial q = 0; `endif")
    routed = engine.score(
        sv_request(
            {"acc.v": acc_ifdef},
            inline,
            build={"defines": {"ZERO_Q": None}},
            engine="fast",
            coverage={"metrics": ["toggle"]},
        )
    )
    assert routed.engine == "verilator" and "ZERO_Q" in (routed.fallback or "")


@pytest.mark.parametrize(
    "where", [{"simulator": "icarus"}, {"engine": "verilator"}, {"engine": "fast"}], ids=["icarus", "verilator", "fast"]
)
def test_cocotb_gets_data_files_parameters_and_plusargs(engine, where):
    test = """import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def widths(dut):
    with open("vectors/in.txt") as fh:
        values = [int(v) for v in fh.read().split()]
    assert len(dut.q) == 8, len(dut.q)
    assert cocotb.plusargs.get("MODE") == "fast", cocotb.plusargs
    assert values == [1, 2, 3]
    await Timer(1, "ns")
"""
    result = engine.score(
        {
            "design": {"files": {"acc.v": ACC}, "toplevel": "acc"},
            "stimulus": {
                "kind": "cocotb",
                "test_module": "test_acc",
                "files": {"test_acc.py": test, "vectors/in.txt": "1 2 3\n"},
            },
            **where,
            "build": {"parameters": {"W": "8"}, "plusargs": ["MODE=fast"]},
        }
    )
    assert result.status == "ok", result.message + result.log[-2000:]
    assert [t.passed for t in result.tests] == [True], result.tests
    if "engine" in where:  # the fast path cannot honour the parameter: Verilator, saying why
        assert result.engine == "verilator" and result.coverage.metrics["toggle"].total == 2 * (1 + 8 + 8)
        assert (result.fallback is not None) == (where["engine"] == "fast")


def test_dotdot_path_is_a_usage_error(tmp_path, shared_cache_dir):
    work = tmp_path / "w"
    lay_out(tmp_path, {"acc.v": ACC, "w/tb.sv": TB_INLINE})
    out = cli("score", "-d", "../acc.v", "-t", "tb.sv", cwd=work, cache=shared_cache_dir)
    assert out.returncode == 2
    assert "leaves the current directory" in out.stderr
    bad = cli("score", "-d", str(tmp_path / "acc.v"), "-t", "tb.sv", "--param", "W", cwd=work, cache=shared_cache_dir)
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr
    outside = cli(
        "score",
        "-d",
        str(tmp_path / "acc.v"),
        "-t",
        "tb.sv",
        "--include-dir",
        str(tmp_path),
        cwd=work,
        cache=shared_cache_dir,
    )
    assert outside.returncode == 2 and "inside the current directory" in outside.stderr
    (work / "blob.bin").write_bytes(b"\xff\xfe\x00")
    binary = cli(
        "score", "-d", str(tmp_path / "acc.v"), "-t", "tb.sv", "-t", "blob.bin", cwd=work, cache=shared_cache_dir
    )
    assert binary.returncode == 2 and "binary data is not supported" in binary.stderr


def test_build_options_are_validated_and_part_of_the_result_key():
    for bad in (
        {"defines": {"A B": "1"}},
        {"parameters": {"W": "8; rm"}},
        {"parameters": {"W": "$x"}},
        {"plusargs": ["verilator+seed+3"]},
        {"plusargs": ["a b"]},
        {"include_dirs": ["../up"]},
    ):
        with pytest.raises(ValueError):
            BuildOptions.model_validate(bad)
    assert BuildOptions(plusargs=["+N=2"]).plusargs == ["N=2"]
    req = ScoreRequest.model_validate(sv_request({"acc.v": ACC}, {"tb.sv": TB_INLINE}))
    keys = {
        request_key(r, r.design, r.stimulus, {})
        for r in (
            req,
            req.model_copy(update={"build": BuildOptions(defines={"X": None})}),
            req.model_copy(update={"build": BuildOptions(parameters={"W": "8"})}),
            req.model_copy(update={"build": BuildOptions(plusargs=["N=2"])}),
        )
    }
    assert len(keys) == 4


def test_included_design_file_keeps_its_own_points_on_verilator(engine):
    """A DUT file that is only `include'd is compiled inside its includer; its points carry its
    own request name and equal those of the twin with the file pasted in."""
    wrap = (
        '`include "sub/core.v"\n'
        "module wrap(input clk, input [3:0] d, output [3:0] q); acc u(.clk(clk), .d(d), .q(q)); endmodule\n"
    )
    tb = TB_INLINE.replace("acc uut", "wrap uut")
    metrics = {"metrics": ["line", "toggle"]}
    result = engine.score(sv_request({"wrap.v": wrap, "sub/core.v": ACC}, {"tb.sv": tb}, coverage=metrics))
    twin = engine.score(
        sv_request({"wrap.v": wrap.replace('`include "sub/core.v"\n', ACC)}, {"tb.sv": tb}, coverage=metrics)
    )
    assert result.status == twin.status == "ok"
    assert numbers(result)["metrics"] == numbers(twin)["metrics"]
    assert "sub/core.v" in {p.file for p in result.uncovered}


def test_http_files_and_build_fields(shared_cache_dir):
    """Over HTTP: data files in `files` with their folders, `build` applied; a data file over the
    per-file limit and a malformed `build` are 422 with the reason."""
    import httpx
    from conftest import live_server

    from reward_service.api import create_app
    from reward_service.settings import Settings

    settings = Settings(
        cache_dir=shared_cache_dir, result_cache=False, score_workers=1, max_file_kb=2, warm_on_register=False
    )
    files = {"tb/tb.sv": TB_KNOBS, "pkg/defs.svh": DEFS, "pkg/more.svh": MORE, "data/golden.hex": HEX}
    request = sv_request(
        {"rtl/acc.v": ACC},
        files,
        "icarus",
        build={"defines": {"STEPS": "3"}, "parameters": {"W": "5"}, "plusargs": ["N=2"]},
    )
    with live_server(create_app(settings=settings)) as url, httpx.Client(base_url=url, timeout=300) as api:
        response = api.post("/v1/score", params={"wait": 300}, json=request)
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["status"] == "ok" and "W=5 steps=6" in result["log"]
        big = {**request, "stimulus": {**request["stimulus"], "files": {**files, "data/big.hex": "0\n" * 2000}}}
        response = api.post("/v1/score", params={"wait": 300}, json=big)
        assert response.status_code == 422 and "data/big.hex" in response.text
        bad = {**request, "build": {"parameters": {"W": "5 6"}}}
        response = api.post("/v1/score", params={"wait": 300}, json=bad)
        assert response.status_code == 422 and "build.parameters" in response.text


def test_fast_path_testbench_with_an_include_ends_as_on_verilator(engine):
    """A testbench that `include's a task file: pyslang cannot emulate it alone (kept 4-state, said
    in message), so no $finish marker is printed; the ending is still `finish`, and the points
    equal Verilator's for this testbench."""
    tasks = "task automatic kick(input [3:0] v); begin d = v; #1 clk = 1; #1 clk = 0; end endtask\n"
    tb = (
        "module tb;\n  reg clk = 0; reg [3:0] d = 0; wire [3:0] q;\n  acc uut(.clk(clk), .d(d), .q(q));\n"
        "`include \"tb/tasks.svh\"\n  initial begin kick(4'h5); kick(4'ha); $finish; end\nendmodule\n"
    )
    metrics = {"metrics": ["line", "toggle"]}
    fast = engine.score(
        sv_request({"acc.v": ACC}, {"tb.sv": tb, "tb/tasks.svh": tasks}, engine="fast", coverage=metrics)
    )
    reference = engine.score(sv_request({"acc.v": ACC}, {"tb.sv": tb, "tb/tasks.svh": tasks}, coverage=metrics))
    assert fast.engine == "fast" and fast.status == reference.status == "ok"
    assert fast.ended_by == reference.ended_by == "finish"
    assert numbers(fast) == numbers(reference)


def test_design_data_file_with_engine_auto(tmp_path, shared_cache_dir):
    """engine=auto decides per design with a self-check (Verilator vs fast path): a design data
    file takes part in both runs, and the sample scores as its inline twin does."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    eng = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False, work_root=tmp_path))
    with_file = eng.score(sv_request({"rom.v": ROM, "rom/init.mem": "1 2 4 8\n"}, {"tb.sv": TB_ROM}, engine="auto"))
    twin = eng.score(sv_request({"rom.v": ROM_INLINE}, {"tb.sv": TB_ROM}, engine="auto"))
    assert with_file.engine == "fast", with_file.fallback
    assert numbers(with_file) == numbers(twin) and with_file.status == "ok"


def test_fast_path_parameter_override_beside_a_design_data_file(engine):
    """A testbench overriding the DUT's width, the DUT reading a data file: the fast path still
    sees the override (the data file is not parsed as code) and its points equal Verilator's."""
    romp = (
        "module romp #(parameter W = 4) (input clk, input [1:0] a, output reg [W-1:0] q);\n"
        '  reg [3:0] mem [0:3];\n  initial $readmemh("rom/init.mem", mem);\n'
        "  always @(posedge clk) q <= mem[a];\nendmodule\n"
    )
    tb = TB_ROM.replace("wire [3:0] q", "wire [7:0] q").replace("rom uut", "romp #(.W(8)) uut")
    design = {"romp.v": romp, "rom/init.mem": "1 2 4 8\n"}
    metrics = {"metrics": ["line", "toggle"]}
    fast = engine.score(sv_request(design, {"tb.sv": tb}, engine="fast", coverage=metrics))
    reference = engine.score(sv_request(design, {"tb.sv": tb}, coverage=metrics))
    assert fast.engine == "fast", fast.fallback
    assert reference.coverage.metrics["toggle"].total == 2 * (1 + 2 + 8 + 4 * 4)  # clk, a, q[7:0], mem
    assert numbers(fast) == numbers(reference)


def test_cocotb_model_key_covers_build_options_and_included_files(engine, tmp_path):
    """The cached cocotb DUT model is keyed by the defines and parameters it was built with and
    by the text of design files that are only `include'd (no stale model is reused)."""
    from reward_service.models import Limits
    from reward_service.simulators.base import Job
    from reward_service.simulators.verilator import cocotb_build_args, cocotb_model_key

    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "wrap.v").write_text('`include "sub/core.v"\n')
    (tmp_path / "src" / "sub" / "core.v").write_text(ACC)

    def key(**fields) -> str:
        job = Job(
            root=tmp_path,
            design_files=["wrap.v"],
            stimulus_files=[],
            limits=Limits(),
            sandbox=engine.sandbox,
            cache_dir=tmp_path,
            toplevel="acc",
            include_files=["sub/core.v"],
            **fields,
        )
        return cocotb_model_key(job, cocotb_build_args(job))

    base = key()
    assert len({base, key(parameters={"W": "8"}), key(defines={"X": None}), key(defines={"X": "1"})}) == 4
    (tmp_path / "src" / "sub" / "core.v").write_text(ACC.replace("q ^ d", "q + d"))
    assert key() != base


WRAP_SIBLING = (
    '`include "core.v"\n'
    "module wrap(input clk, input [3:0] d, output [3:0] q); acc u(.clk(clk), .d(d), .q(q)); endmodule\n"
)
COCOTB_WRAP = """import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def drive(dut):
    for v in (1, 2, 4, 8):
        dut.d.value = v
        dut.clk.value = 0
        await Timer(1, "ns")
        dut.clk.value = 1
        await Timer(1, "ns")
"""


@pytest.mark.parametrize("kind", ["sv", "cocotb"])
def test_sibling_include_in_a_design_folder_keeps_its_points(engine, kind):
    """`include "core.v" beside rtl/wrap.v (found through the folder's -I dir): core.v's points
    are counted under its request name, as in the twin with core.v pasted in (the cocotb build
    gave Verilator absolute include dirs, and the points of core.v were lost)."""

    def score(design: dict):
        if kind == "sv":
            return engine.score(
                sv_request(
                    design,
                    {"tb.sv": TB_INLINE.replace("acc uut", "wrap uut")},
                    coverage={"metrics": ["line", "toggle"]},
                )
            )
        return engine.score(
            {
                "design": {"files": design, "toplevel": "wrap"},
                "engine": "verilator",
                "stimulus": {"kind": "cocotb", "test_module": "test_w", "files": {"test_w.py": COCOTB_WRAP}},
                "coverage": {"metrics": ["line", "toggle"]},
            }
        )

    result = score({"rtl/wrap.v": WRAP_SIBLING, "rtl/core.v": ACC})
    twin = score({"rtl/wrap.v": WRAP_SIBLING.replace('`include "core.v"\n', ACC)})
    assert result.status == twin.status == "ok", result.message
    assert numbers(result)["metrics"] == numbers(twin)["metrics"]
    assert twin.coverage.metrics["line"].total == 2
    assert "rtl/core.v" in {p.file for p in result.uncovered}
