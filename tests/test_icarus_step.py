"""Icarus's one sandbox step (compile + run, simulators/icarus.py ``compile_and_run``), for plain
Icarus and the fast path: how each ending is classified. Exit statuses cannot say it (iverilog's
is an error count modulo 256, a testbench may ``$finish_and_return(124)``), so a limit is the
sandbox's (the CPU budget of each half, split where ``build.rc`` appears) and the build files are
read-only while the testbench runs. Each
case here was misclassified by a first version of the merged step (review findings). Real
Icarus, real sandbox."""

from __future__ import annotations

import subprocess
import time

import pytest

DUT = """module dut(input logic clk, input logic [3:0] a, output logic [3:0] y);
  always_ff @(posedge clk) y <= a + 1;
endmodule
"""
HEAD = """module tb;
  logic clk=0; logic [3:0] a=0, y; integer fd;
  dut uut(.clk(clk), .a(a), .y(y));
  always #1 clk = ~clk;
"""


def tb(body: str) -> str:
    return HEAD + body + "\nendmodule\n"


def score(engine, testbench: str, engine_name: str, **limits):
    request = {
        "design": {"files": {"dut.sv": DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": testbench}},
        "limits": {"run_s": 3, **limits},
    }
    if engine_name == "fast":
        request |= {
            "simulator": "verilator",
            "engine": "fast",
            "coverage": {"scope": "uut", "metrics": ["line", "branch", "toggle"]},
        }
    else:
        request |= {"simulator": "icarus", "coverage": {"metrics": ["functional"]}}
    return engine.score(request)


ENGINES = ["icarus", "fast"]


@pytest.mark.parametrize("engine_name", ENGINES)
def test_a_testbench_rewriting_the_build_files_changes_nothing(engine, engine_name):
    forged = tb("""  initial begin
    fd = $fopen("/work/obj/status/build.rc", "w"); $fdisplay(fd, "137"); $fclose(fd);
    fd = $fopen("/work/obj/status/build.log", "w"); $fdisplay(fd, "forged"); $fclose(fd);
    fd = $fopen("/work/obj/status/build.limit", "w"); $fdisplay(fd, "timeout: sending signal KILL"); $fclose(fd);
    a = 3; #20 $finish;
  end""")
    result = score(engine, forged, engine_name)
    assert result.status == "ok" and result.ended_by == "finish", result.message
    assert result.engine == engine_name and "forged" not in result.log


def test_the_compiled_model_is_read_only_during_the_run(engine):
    """sim.vvp is in the step's one ``chmod`` too: the fast path's host reads it after the run
    (its placeholder check), so the testbench must not be able to rewrite it."""
    body = """  initial begin
    fd = $fopen("/work/obj/sim.vvp", "w"); $display("sim.vvp fd=%0d", fd);
    fd = $fopen("/work/obj/status/build.rc", "a"); $display("build.rc fd=%0d", fd);
    #4 $finish;
  end"""
    result = score(engine, tb(body), "icarus")
    assert result.status == "ok", result.message
    assert "sim.vvp fd=0" in result.log and "build.rc fd=0" in result.log, result.log


@pytest.mark.parametrize("engine_name", ENGINES)
def test_finish_and_return_124_is_not_a_timeout(engine, engine_name):
    result = score(engine, tb("  initial begin a = 3; #20 $finish_and_return(124); end"), engine_name)
    assert result.status == "ok" and result.ended_by == "exit", result.message


@pytest.mark.parametrize("engine_name", ENGINES)
def test_137_compile_errors_are_a_compile_error(engine, engine_name):
    """iverilog exits with its error count modulo 256: 137 errors look like a SIGKILL."""
    body = "  initial begin\n" + "".join(f"    nosuch_{i} = 1;\n" for i in range(137)) + "  end"
    result = score(engine, tb(body), engine_name)
    assert result.status == "compile_error", result.message
    assert "nosuch_0" in result.message


def test_a_long_build_log_is_cut_not_lost(engine):
    """A compile log longer than ``output_kb`` keeps its head and tail; the error stays an error."""
    body = "\n".join(f"  assign undeclared_{i} = nosuch_{i};" for i in range(300))
    result = score(engine, tb(body), "icarus", output_kb=4)
    assert result.status == "compile_error", result.message
    assert "nosuch_0" in result.message and "bytes of output dropped" in result.log


@pytest.mark.parametrize("engine_name", ENGINES)
def test_a_run_ignoring_sigint_ends_at_its_limit(engine, engine_name):
    """A zero-delay loop: SIGINT at the run limit, SIGKILL two seconds later."""
    started = time.monotonic()
    result = score(engine, tb("  initial forever #0 a = ~a;"), engine_name, run_s=2)
    assert result.status == "timeout" and result.ended_by == "timeout", result.message
    assert time.monotonic() - started < 2 + 15


def test_memory_exhausted_while_compiling_is_a_resource_limit(engine):
    body = """  logic [400000:0] w;
  genvar i;
  generate for (i = 0; i < 400000; i++) begin : g
    assign w[i+1] = ~w[i];
  end endgenerate
  initial #5 $finish;"""
    result = score(engine, tb(body), "icarus", memory_mb=64)
    assert result.status == "resource_limit" and "build hit a resource limit (oom)" in result.message, result.message


def test_host_toolchain_names_icarus_as_it_prints_itself_without_an_empty_tag():
    """``iverilog -V`` on Debian prints ``Icarus Verilog version 11.0 (stable) ()``: the result's
    versions (and the rescore report's tools line) say ``11.0 (stable)``."""
    from reward_service.sandbox.toolchain import host_toolchain

    printed = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout.splitlines()[0]
    expected = printed.removeprefix("Icarus Verilog version ").removesuffix("()").strip()
    assert host_toolchain().versions["iverilog"] == expected and "()" not in expected


def test_the_build_files_are_made_writable_again_but_not_through_a_symlink(tmp_path):
    """After the step the work dir must be removable by a worker that is not root: the files the
    step made read-only get their owner's write bit back; a symlink left in their place (the
    step's own) is not followed."""
    from reward_service.simulators.icarus import _STATUS_FILES, _writable_again

    obj, outside = tmp_path / "obj", tmp_path / "outside"
    (obj / "status").mkdir(parents=True)
    outside.write_text("x")
    outside.chmod(0o444)
    (obj / "sim.vvp").write_text("vvp")
    for name in _STATUS_FILES[1:]:
        (obj / "status" / name).write_text("0")
    (obj / "status" / _STATUS_FILES[0]).symlink_to(outside)
    for path in [obj / "sim.vvp", *(obj / "status" / n for n in _STATUS_FILES[1:]), obj / "status", obj]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    _writable_again(obj)
    written = [obj, obj / "status", obj / "sim.vvp", *(obj / "status" / n for n in _STATUS_FILES[1:])]
    assert all(p.stat().st_mode & 0o777 in (0o755, 0o644) for p in written), [oct(p.stat().st_mode) for p in written]
    assert outside.stat().st_mode & 0o777 == 0o444
