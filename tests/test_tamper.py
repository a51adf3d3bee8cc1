"""Reward hacking and host safety: a stimulus cannot forge its coverage, run host code in the
simulator, or make the host read through a symlink (review findings)."""

from __future__ import annotations

import pytest
from redteam import attenuator_request
from samples import attenuator_rtl, attenuator_weak

FORGE = """
  integer fd;
  initial begin
    fd = $fopen("coverage.dat", "w");
    $fdisplay(fd, "# SystemC::Coverage-3");
    $fdisplay(fd, "C '\\001f\\002Attenuator.sv\\001l\\00212\\001t\\002toggle\\001o\\002x\\001h\\002tb_Attenuator.uut' 1");
    $fclose(fd);
    fd = $fopen("rs_end.txt", "w");
    $fdisplay(fd, "finish 0 00000000000000000000000000000000");
    $fclose(fd);
  end
"""


def _req(tb: str, **extra) -> dict:
    return attenuator_request(tb, simulator="verilator", **extra)


def _with(tb: str, extra: str) -> str:
    return tb.replace("module tb_Attenuator;", "module tb_Attenuator;" + extra, 1)


def test_forged_files_are_overwritten_by_the_real_ending(engine):
    r = engine.score(_req(_with(attenuator_weak(), FORGE)))
    assert r.status == "ok"
    assert (r.coverage.metrics["toggle"].covered, r.coverage.metrics["toggle"].total) == (42, 56)
    assert r.reward == pytest.approx(1.9375)


def test_forged_files_then_a_crash_are_ignored(engine):
    bomb = FORGE + "\n  int q[$];\n  initial #1 forever q.push_back(1);\n"
    r = engine.score(_req(_with(attenuator_weak(), bomb), limits={"memory_mb": 256, "run_s": 20}))
    assert r.status == "resource_limit" and r.reward == 0.0
    assert r.coverage.overall is None  # the forged record was not taken


@pytest.mark.parametrize(
    "construct",
    [
        'initial $c("std::_Exit(0);");',
        'import "DPI-C" function int system(input string cmd);',
        'initial $c32("0");',
    ],
)
def test_host_code_in_sv_stimulus_is_refused(engine, construct):
    r = engine.score(_req(_with(attenuator_weak(), "\n  " + construct + "\n")))
    assert r.status == "invalid_input" and "could forge coverage" in r.message


def test_system_runs_no_shell(engine):
    tb = _with(
        attenuator_weak(),
        '\n  integer rc;\n  initial begin rc = $system("echo SHELL_RAN"); $display("rc=%0d", rc); end\n',
    )
    r = engine.score(_req(tb))
    assert r.status == "ok" and "SHELL_RAN" not in r.log
    assert "rc=0" not in r.log


@pytest.mark.parametrize("line", ["os._exit(0)", "open('coverage.dat', 'w')", "import ctypes"])
def test_cocotb_tamper_is_refused(engine, line):
    test = f"import os, cocotb\n\n@cocotb.test()\nasync def t(dut):\n    {line}\n"
    r = engine.score(
        {
            "design": {"files": attenuator_rtl(), "toplevel": "Attenuator"},
            "simulator": "icarus",
            "stimulus": {"kind": "cocotb", "files": {"test_t.py": test}, "test_module": "test_t"},
        }
    )
    assert r.status == "invalid_input" and "could forge coverage" in r.message


def test_symlinked_outputs_are_not_followed(engine):
    test = """import os, cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def t(dut):
    await Timer(1, unit="ns")
    for name in ("rs_" + "fcov.yml", "results" + ".xml"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
    os.symlink("/etc/passwd", "rs_" + "fcov.yml")
"""
    r = engine.score(
        {
            "design": {"files": attenuator_rtl(), "toplevel": "Attenuator"},
            "simulator": "icarus",
            "stimulus": {"kind": "cocotb", "files": {"test_t.py": test}, "test_module": "test_t"},
            "coverage": {"metrics": ["functional"]},
        }
    )
    assert r.status == "ok"
    assert "root:" not in r.message and "root:" not in r.model_dump_json()


def test_nested_file_names_are_invalid_input(engine):
    r = engine.score(
        {
            "design": {"files": {"a.sv": "module a; endmodule"}},
            "stimulus": {"kind": "sv_testbench", "files": {"a.sv/tb.sv": "module tb; a u(); endmodule"}},
        }
    )
    assert r.status == "invalid_input" and "both a file and a directory" in r.message


def test_cocotb_19_on_verilator_moves_to_the_fast_path(engine):
    """cocotb 1.9 runs on Icarus only: a request naming it on Verilator is scored on the fast
    path (Icarus with Verilator's points), saying so (was invalid_input before 0.6.0)."""
    test = "import cocotb\n\n@cocotb.test()\nasync def t(dut):\n    pass\n"
    r = engine.score(
        {
            "design": {"files": attenuator_rtl(), "toplevel": "Attenuator"},
            "simulator": "verilator",
            "stimulus": {
                "kind": "cocotb",
                "files": {"test_t.py": test},
                "test_module": "test_t",
                "runtime": "cocotb-1.9",
            },
        }
    )
    assert r.status == "ok" and r.engine == "fast", r.message
    assert "moved to the fast path" in r.message and "Icarus only" in r.message and "cocotb 1.9" in r.message
