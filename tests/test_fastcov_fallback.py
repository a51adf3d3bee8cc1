"""Samples the fast path used to hand to Verilator for reasons of ours, and the fallback
message saying whose fault a fallback is (issue 9 point 8).

- An unpacked-array output port under cocotb: the zero-initialising rewrite wrote ``= '0`` onto
  ``output logic [7:0] q [0:3]`` (not SV), Icarus rejected the instrumented DUT and the
  fallback blamed the user's file. The port is now zeroed by an ``initial foreach``. Icarus 11
  does not connect such ports at all (the other side reads X), so only a cocotb toplevel's own
  array ports stay on the fast path; connected ones go to Verilator, saying so.
- Whose fault: a sample whose instrumented build Icarus rejects is run on plain Icarus as
  written; when that fails too, the message blames the source ("Icarus rejects the testbench:
  <error>"), otherwise our instrumentation ("the fast path could not instrument the design:
  ..."). The expected error text is a bare ``iverilog`` run's.
"""

from __future__ import annotations

import subprocess

import pytest

from reward_service.fastcov.compare import diff_points

METRICS = ["line", "branch", "toggle", "expr"]

REGS = """module regs (input logic clk, input logic we, input logic [1:0] addr, input logic [7:0] d,
             output logic [7:0] q [0:3], output logic any);
  always_ff @(posedge clk) if (we) q[addr] <= d;
  assign any = (q[0] != 0) || (q[3] != 0);
endmodule
"""

TEST_REGS = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


@cocotb.test()
async def writes(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.we.value = 0
    dut.addr.value = 0
    dut.d.value = 0
    await RisingEdge(dut.clk)
    for a, v in [(0, 0x5A), (3, 0xA5), (1, 0xFF)]:
        dut.we.value = 1
        dut.addr.value = a
        dut.d.value = v
        await RisingEdge(dut.clk)
    dut.we.value = 0
    await RisingEdge(dut.clk)
    await Timer(1, unit="ns")
    assert int(dut.any.value) == 1
    assert [int(dut.q[i].value) for i in range(4)] == [0x5A, 0xFF, 0, 0xA5]
"""


def test_an_unpacked_array_output_port_is_zeroed_by_an_initial():
    from reward_service.fastcov.instrument import instrument

    text = instrument({"regs.sv": REGS}, ("line",), "zero_init", "regs").files["regs.sv"]
    assert "q [0:3] = '0" not in text
    assert "initial foreach (q[__rs_i0]) q[__rs_i0] = '0;" in text


@pytest.mark.slow
def test_an_unpacked_array_output_port_stays_on_the_fast_path(engine):
    request = {
        "design": {"files": {"regs.sv": REGS}, "toplevel": "regs"},
        "stimulus": {"kind": "cocotb", "test_module": "test_regs", "files": {"test_regs.py": TEST_REGS}},
        "coverage": {"metrics": METRICS},
    }
    fast_run = engine.scored({**request, "engine": "fast"})
    fast = fast_run.result
    reference_run = engine.scored({**request, "engine": "verilator"})
    reference = reference_run.result
    assert reference.status == "ok" and reference.engine == "verilator", reference.message + reference.log[-2000:]
    assert fast.status == "ok" and fast.engine == "fast" and fast.fallback is None, fast.fallback
    assert (
        [(t.name, t.passed) for t in fast.tests] == [("writes", True)] == [(t.name, t.passed) for t in reference.tests]
    )
    diff = diff_points(fast_run.points, reference_run.points, set(METRICS))
    assert diff.equal, diff.describe(20)


REGS_TB = """module tb;
  logic clk = 0, we = 0; logic [1:0] addr = 0; logic [7:0] d = 0; logic [7:0] q [0:3]; logic any;
  regs dut (.clk(clk), .we(we), .addr(addr), .d(d), .q(q), .any(any));
  always #5 clk = ~clk;
  initial begin
    @(negedge clk); we = 1; addr = 1; d = 8'h0f;
    @(negedge clk); we = 0;
    @(negedge clk); $display("q1=%h", q[1]);
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_an_sv_testbench_on_array_ports_goes_to_verilator(engine, tmp_path):
    """Icarus 11 does not connect unpacked-array ports: a bare run of the testbench reads X
    where Verilator reads the DUT's value, so such a sample must not be scored on Icarus."""
    for name, text in {"regs.sv": REGS, "tb.sv": REGS_TB}.items():
        (tmp_path / name).write_text(text)
    subprocess.run(
        ["iverilog", "-g2012", "-o", "x.vvp", "-s", "tb", "regs.sv", "tb.sv"], cwd=tmp_path, check=True, timeout=60
    )
    bare = subprocess.run(["vvp", "-n", "x.vvp"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "q1=xx" in bare.stdout, bare.stdout
    request = {
        "design": {"files": {"regs.sv": REGS}},
        "engine": "fast",
        "coverage": {"scope": "dut"},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": REGS_TB}},
    }
    result = engine.score(request)
    assert result.status == "ok" and result.engine == "verilator" and "q1=0f" in result.log, result.message
    assert result.fallback == (
        "Icarus 11 does not connect unpacked-array ports (regs.q): their values would "
        "read X on the other side — scored on Verilator"
    )


def test_array_ports_between_dut_modules_go_to_verilator(engine):
    """Inside the DUT too (a cocotb toplevel's own array ports are read directly: fine)."""
    from reward_service.fastcov.routing import unsupported
    from reward_service.models import ScoreRequest

    design = {
        "top.sv": REGS
        + """module top (input logic clk, input logic [7:0] d, output logic y);
  logic [7:0] q [0:3];
  regs u (.clk(clk), .we(1'b1), .addr(2'd0), .d(d), .q(q), .any(y));
endmodule
"""
    }
    cocotb = {"kind": "cocotb", "test_module": "test_regs", "files": {"test_regs.py": TEST_REGS}}
    for toplevel, want in (("top", "regs.q"), ("regs", None)):
        prepared = engine.prepare(
            ScoreRequest.model_validate(
                {"design": {"files": design, "toplevel": toplevel}, "stimulus": cocotb, "engine": "fast"}
            )
        )
        reason = unsupported(prepared)
        assert (
            (reason is None)
            if want is None
            else reason.startswith(f"Icarus 11 does not connect unpacked-array ports ({want})")
        ), reason


# -- whose fault -------------------------------------------------------------------------------
ACC = """module acc (input logic clk, input logic [3:0] a, output logic [3:0] q);
  always_ff @(posedge clk) if (a[0] && a[3]) q <= q + a; else q <= q ^ a;
endmodule
"""

TB = """module tb;
  logic clk = 0; logic [3:0] a = 0, q;
  acc dut (.clk(clk), .a(a), .q(q));
  always #5 clk = ~clk;
  initial begin
    for (int i = 0; i < 16; i++) begin
      @(negedge clk); a = i;
      {stop}
    end
    $finish;
  end
endmodule
"""

#: break/continue in for, nested for, repeat and do-while loops (Icarus 11 has neither).
JUMPS_TB = """module tb;
  logic clk = 0; logic [3:0] a = 0, q;
  acc dut (.clk(clk), .a(a), .q(q));
  always #5 clk = ~clk;
  int n = 0;
  initial begin
    for (int i = 0; i < 16; i++) begin
      @(negedge clk); a = i;
      if (i == 12) break;
      if (i % 3 == 0) continue;
      n++;
      for (int j = 0; j < 4; j++) begin if (j == 2) break; n += 10; end
    end
    $display("n=%0d a=%0d", n, a);
    repeat (3) begin n++; if (n > 0) continue; n = 1000; end
    do begin n++; if (n[0]) continue; n += 100; end while (n < 400);
    $display("n=%0d", n);
    $finish;
  end
endmodule
"""


def _request(tb_text: str) -> dict:
    return {
        "design": {"files": {"acc.sv": ACC}},
        "engine": "fast",
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb_text}},
        "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle"]},
    }


@pytest.mark.slow
def test_break_and_continue_in_the_testbench_stay_on_the_fast_path(engine):
    """The testbench's break/continue become ``disable`` of named blocks on the fast path: same
    behaviour (the testbench's own output equals Verilator's run) and the same points."""
    request = _request(JUMPS_TB)
    fast_run = engine.scored(request)
    fast = fast_run.result
    reference_run = engine.scored({**request, "engine": "verilator"})
    reference = reference_run.result
    assert reference.status == "ok", reference.message
    assert fast.status == "ok" and fast.engine == "fast" and fast.fallback is None, fast.fallback
    said = [line.strip() for line in reference.log.splitlines() if line.strip().startswith("n=")]
    assert len(said) == 2 and said == [line.strip() for line in fast.log.splitlines() if line.strip().startswith("n=")]
    diff = diff_points(fast_run.points, reference_run.points, {"line", "branch", "toggle"})
    assert diff.equal, diff.describe(20)


def _bare_iverilog_error(tmp_path, files: dict[str, str]) -> str:
    """The first ``file:line: ...`` line of a bare ``iverilog -g2012`` run (must fail)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    run = subprocess.run(
        ["iverilog", "-g2012", "-o", str(tmp_path / "x.vvp"), "-s", "tb", *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0, run.stdout + run.stderr
    return next(line for line in (run.stdout + run.stderr).splitlines() if line.startswith(tuple(files)))


@pytest.mark.slow
def test_a_testbench_icarus_rejects_is_the_source(engine, tmp_path):
    """A concurrent assertion (Icarus 11: "sorry: concurrent_assertion_item not supported")
    fails on plain Icarus too: the testbench's (or Icarus's) limit, not ours."""
    tb_text = TB.format(stop="").replace("endmodule", "  a_p: assert property (@(posedge clk) a <= 4'd15);\nendmodule")
    error = _bare_iverilog_error(tmp_path, {"acc.sv": ACC, "tb.sv": tb_text})
    assert "concurrent_assertion_item not supported" in error
    result = engine.score(_request(tb_text))
    assert result.status == "ok" and result.engine == "verilator", result.message
    assert result.fallback.startswith("Icarus rejects the testbench: "), result.fallback
    assert error in result.fallback and result.fallback.endswith(" — scored on Verilator"), (error, result.fallback)


@pytest.mark.slow
def test_an_instrumented_build_icarus_rejects_is_ours(engine, monkeypatch):
    """A fault of the instrumentation (injected: the written DUT gets a stray token, as the
    unpacked-port bug wrote ``= '0``) while the sources as written compile: the message
    blames the fast path, not the user's file."""
    from reward_service.fastcov.backend import FastSimulator

    prepare = FastSimulator.prepare

    def broken(self, job, emulation):
        out = prepare(self, job, emulation)
        path = job.src / "acc.sv"
        path.write_text(path.read_text().replace("endmodule", "= '0; endmodule", 1))
        return out

    monkeypatch.setattr(FastSimulator, "prepare", broken)
    result = engine.score(_request(TB.format(stop="")))
    assert result.status == "ok" and result.engine == "verilator", result.message
    assert result.fallback.startswith(
        "the fast path could not instrument the design: Icarus rejects the instrumented build (acc.sv:"
    ), result.fallback
    assert result.fallback.endswith("not the sources as written — scored on Verilator"), result.fallback


def test_an_uninstrumentable_design_says_it_is_ours(engine):
    from reward_service.fastcov.routing import unsupported
    from reward_service.models import ScoreRequest

    design = {"acc.sv": ACC.replace("module acc", "interface bus; logic v; endinterface\nmodule acc")}
    prepared = engine.prepare(
        ScoreRequest.model_validate({**_request(TB.format(stop="")), "design": {"files": design}})
    )
    assert unsupported(prepared) == (
        "the fast path could not instrument the design: acc.sv: InterfaceDeclaration "
        "in the design is not instrumented — scored on Verilator"
    )


GEN_IMPLICIT = """module inv(input logic a, output logic o);
  assign o = ~a;
endmodule
module gen(input logic a, output logic [1:0] y);
  for (genvar i = 0; i < 2; i++) begin : g
    inv u(.a(a), .o(w));
    assign y[i] = w;
  end
endmodule
"""
GEN_TB = """module tb;
  logic a;
  logic [1:0] y;
  gen dut(.a(a), .y(y));
  initial begin
    a = 0;
    #1 a = 1;
    #1 if (y !== 2'b00) $display("FAIL");
    $finish;
  end
endmodule
"""


def test_an_implicit_net_in_a_generate_block_goes_to_verilator(engine):
    """Its toggle watcher would go after a declaration it does not have (the instrumentation
    crashed on it): Verilator scores the sample, saying why."""
    result = engine.score(
        {
            "design": {"files": {"gen.sv": GEN_IMPLICIT}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": GEN_TB}},
            "coverage": {"scope": "dut", "metrics": ["line", "toggle"]},
            "engine": "fast",
            "limits": {"run_s": 20},
        }
    )
    assert result.status == "ok" and result.engine == "verilator", result.message
    assert result.fallback == (
        "the fast path could not instrument the design: gen.sv:6: implicit net w in a generate block "
        "— scored on Verilator"
    ), result.fallback
    assert result.coverage.metrics["toggle"].total > 0


RACE_DUT = """module bl(input clk, input d, output reg c, output reg t, output reg y);
  always @(posedge clk) y <= (t ^ c) ? d : 1'b0;
  always @(posedge clk) begin c <= ~c; t = c; end
endmodule
"""
RACE_TB = """module tb; reg clk=0,d=0; wire c,t,y; integer n;
  bl dut(.clk(clk),.d(d),.c(c),.t(t),.y(y));
  initial begin for (n=0;n<8;n=n+1) begin d=n[1]; #1 clk=1; #1 clk=0; end $finish; end
endmodule
"""


def test_a_race_at_a_clock_edge_goes_to_verilator(engine, monkeypatch):
    """``t`` is written with ``=`` in one clocked process and read by another: which process
    runs first at the edge is up to the simulator. With the reader written first, the fast path
    (Icarus) missed ``(t==1 && c==1) => 0`` of ``t ^ c``, which Verilator covers; the sample is
    Verilator's."""
    result = engine.score(
        {
            "design": {"files": {"bl.sv": RACE_DUT}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": RACE_TB}},
            "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle", "expr"]},
            "engine": "fast",
            "limits": {"run_s": 20},
        }
    )
    assert result.status == "ok" and result.engine == "verilator", result.message
    assert result.fallback == (
        "the design has a race at a clock edge the fast path may order unlike Verilator: bl.sv: `t` is "
        "assigned with `=` in a clocked procedure (line 3) and read by another process of the same module: "
        "which one runs first at the edge is a race — scored on Verilator"
    ), result.fallback
    missed = {u.detail for u in result.uncovered if u.metric == "expr"}
    assert "(t==1 && c==1) => 0" not in missed and missed, missed  # Verilator covers it
    # Why: with the race check off, the fast path runs it and misses that point.
    import reward_service.fastcov.screen as screen

    monkeypatch.setattr(screen, "design_race", lambda files, defines=None: None)
    fast = engine.score(
        {
            "design": {"files": {"bl.sv": RACE_DUT}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": RACE_TB}},
            "coverage": {"scope": "dut", "metrics": ["line", "branch", "toggle", "expr"]},
            "engine": "fast",
            "limits": {"run_s": 21},  # another result-cache key than the request above
        }
    )
    assert fast.status == "ok" and fast.engine == "fast", fast.fallback
    assert "(t==1 && c==1) => 0" in {u.detail for u in fast.uncovered if u.metric == "expr"}


def test_the_cocotb_corpus_item_with_a_clock_edge_race_goes_to_verilator():
    from test_cocotb_corpus import ROWS

    from reward_service.fastcov.screen import design_race

    race = design_race(ROWS["cvdp_copilot_ir_receiver_0013"]["rtl"])
    assert race is not None and "assigned with `=` in a clocked procedure" in race, race
