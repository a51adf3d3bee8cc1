"""Red-team session 13: the port-net rule where pyslang does not bind, net declarations that
drive, and the syntax fallback's own crash (docs/integrity.md)."""

from __future__ import annotations

import pytest
from redteam import WIRE_DUT, sv_request, toggle

from reward_service.integrity import sv

# redteam.WIRE_DUT: honest toggle 13/38 on fast and Verilator
DUT = WIRE_DUT
HELPER = "module h(output o, input t); assign (supply1, supply0) o = t; endmodule\n"
MONITOR = "module m(input i, output o); assign o = i; endmodule\n"


def _tb(decl: str, extra: str, before: str = "") -> str:
    return (
        "`timescale 1ns/1ps\n" + before + "module tb;\n"
        "  reg clk = 0, rst = 1; reg t = 0; always #3 t = ~t;\n"
        f"  {decl}\n"
        "  d dut(.clk(clk), .rst(rst), .y(y));\n"
        f"  {extra}\n"
        "  always #5 clk = ~clk;\n"
        "  initial begin #20 rst = 0; #200 $finish; end\n"
        "endmodule\n"
    )


HONEST = _tb("wire y;", "")

#: name -> (testbench, (kind, line, target) refused). Measured before the fix, each scored
#: `ok` with toggle 15/38 (supply1: 14/38 on fast, 13/38 on Verilator) against the honest 13/38.
FORGES = {
    # `y` used before its declaration: pyslang leaves both connections unbound (Invalid) and
    # reports UsedBeforeDeclared; Icarus and Verilator build it
    "used_before_declared_helper": (_tb("", "h hh(.o(y), .t(t)); wire y;", HELPER), ("port_connection", 7, "tb.dut.y")),
    "used_before_declared_ordered": (_tb("", "h hh(y, t); wire y;", HELPER), ("port_connection", 7, "tb.dut.y")),
    "used_before_declared_buf": (
        _tb("", "buf (supply1, supply0) b(y, t); wire y;"),
        ("port_connection", 6, "tb.dut.y"),
    ),
    # a generate block whose condition reads a parameter declared after it: pyslang does not
    # elaborate the helper (an UninstantiatedDef), the simulators do
    "uninstantiated_helper": (
        _tb("wire y;", "if (Q == 1) begin : g h hh(.o(y), .t(t)); end localparam Q = 1;", HELPER),
        ("port_connection", 7, "tb.dut.y"),
    ),
    # no pyslang error at all: a net declaration assignment is a continuous assignment of the
    # net, a supply net type drives it
    "net_declaration_assignment": (_tb("wire (supply1, supply0) y = t;", ""), ("continuous_assign", 4, "tb.dut.y")),
    "supply1_net": (_tb("supply1 y;", ""), ("net_type", 4, "tb.dut.y")),
}


def _req(tb: str, eng: str) -> dict:
    return sv_request(DUT, tb, "dut", eng)


@pytest.mark.parametrize("eng", ["fast", "verilator"])
@pytest.mark.parametrize("form", sorted(FORGES))
def test_drivers_of_the_dut_output_net_are_refused(engine, form: str, eng: str) -> None:
    tb, refused = FORGES[form]
    r = engine.score(_req(tb, eng))
    print("\nRES", form, eng, r.status, (r.message or "")[:300], toggle(r))
    assert r.status == "refused", (r.status, toggle(r))
    assert (refused[0], refused[1], refused[2]) in {(v.kind, v.line, v.target) for v in r.violations}
    assert r.reward == 0.0


#: honest testbenches of the same shapes: a monitor's input on the DUT's output net (bound and
#: unbound by pyslang), pull and supply nets and net declaration assignments on other nets
CONTROLS = {
    "monitor_used_before_declared": _tb("", "wire w; m mm(.i(y), .o(w)); wire y;", MONITOR),
    "monitor_uninstantiated": _tb(
        "wire y; wire w;", "if (Q == 1) begin : g m mm(y, w); end localparam Q = 1;", MONITOR
    ),
    "other_nets": _tb("wire y; wire (supply1, supply0) z = t; tri1 q; supply0 s;", ""),
}


@pytest.mark.parametrize("form", sorted(CONTROLS))
def test_reading_the_dut_output_net_stays_free(engine, form: str) -> None:
    honest = engine.score(_req(HONEST, "fast"))
    r = engine.score(_req(CONTROLS[form], "fast"))
    print("\nRES", form, r.status, (r.message or "")[:300], toggle(r), toggle(honest))
    assert honest.status == "ok" and toggle(honest) == (13, 38)
    assert r.status == "ok", (r.status, r.message)
    assert toggle(r) == toggle(honest)


def _check(tb: str, more: dict | None = None) -> set[tuple[str, int | None, str]]:
    found = sv.check(sv.SvSources(design=DUT, stimulus={"tb.sv": tb, **(more or {})}, defines={}))
    return {(v.kind, v.line, v.target) for v in found.violations}


INOUT = "module hio(inout io, input t); assign (supply1, supply0) io = t; endmodule\n"


@pytest.mark.parametrize(
    "extra",
    [
        "hio hh(.io(dut.c[0]), .t(t));",  # an inout port on a DUT variable: pyslang's InOutVarPortConn
        "hio hh(dut.c[1], t);",
        "hio hh(.io(tb.dut.c), .t(t));",
    ],
)
def test_inout_connection_to_a_dut_variable_is_refused_by_the_fallback(extra: str) -> None:
    """pyslang cannot bind an inout connection to a variable (and Icarus 11 and Verilator
    reject it today): the syntax fallback reads the connection's path through the DUT."""
    assert ("port_connection", 7, "tb.dut.c") in _check(_tb("wire y;", extra, INOUT))


def test_input_connection_of_a_dut_variable_stays_free() -> None:
    assert _check(_tb("wire y; wire w;", "m mm(.i(dut.c[0]), .o(w)); hio hh(.io(w), .t(t));", MONITOR + INOUT)) == set()


def test_uninstantiated_helper_is_seen_without_the_syntax_fallback(monkeypatch) -> None:
    """The elaborated walk alone reports an UninstantiatedDef's output connection (a generate
    condition pyslang evaluates otherwise than a simulator would leave no error to fall back on)."""
    monkeypatch.setattr(sv._Checker, "_syntax_port_nets", lambda self: None)
    sv._CACHE.clear()
    tb, refused = FORGES["uninstantiated_helper"]
    assert refused in _check(tb)
    assert _check(CONTROLS["monitor_uninstantiated"]) == set()
    sv._CACHE.clear()


# `release x;` with any pyslang error: the syntax fallback read `.expr` of the release
# statement's syntax (it has `.variable`) and raised; the sample was a sandbox_error ("internal
# error: AttributeError"), which trainers drop: a hack that forces the DUT and adds a release
# and an unbound name escaped its refusal (and any weak sample could opt out of its reward).
RELEASE_UBD = _tb("wire y;", "initial begin #30 force rst = 1; #10 release rst; z = 1; end reg z;")
RELEASE_HACK = _tb("wire y;", "initial begin #30 force dut.c = 16'hfffe; #10 release dut.c; z = 1; end reg z;")


@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_release_with_a_pyslang_error_is_scored(engine, eng: str) -> None:
    r = engine.score(_req(RELEASE_UBD, eng))
    print("\nRES", eng, r.status, (r.message or "")[:300], toggle(r))
    assert r.status == "ok", (r.status, r.message)
    assert toggle(r) == (6, 38)  # rst held high by the force: fewer toggles than the honest 13
    hack = engine.score(_req(RELEASE_HACK, eng))
    assert hack.status == "refused", (hack.status, hack.message)
    assert [(v.kind, v.line, v.target) for v in hack.violations] == [
        ("force", 6, "tb.dut.c")
    ]  # one per line and target


# coverage.dat opened by the testbench in append mode and never closed: its buffer is flushed
# when the process exits, after rs_main wrote the real file, so the forged records landed after
# Verilator's (the parser sums records): toggle 173/198 (160 made-up points, all covered)
# against the honest 13/38, reward 1.9537 against 1.8208. rs_main now writes under a name only
# it knows and renames the file over coverage.dat: the testbench's handle is to the old file.
APPEND_FORGE = r"""
  integer fds[0:3]; integer i, k;
  initial begin
    for (k = 0; k < 4; k = k + 1) begin
      fds[k] = $fopen("coverage.dat", "a");
      for (i = 0; i < 40; i = i + 1)
        $fwrite(fds[k], "C '\001f\002d.sv\001l\0022\001n\0020\001t\002toggle\001page\002v_toggle/d\001o\002fake%0d_%0d\001h\002tb.dut' 1\n", k, i);
    end
  end
"""
RW_FORGE = r"""
  integer fd;
  initial begin
    fd = $fopen("coverage.dat", "w"); $fclose(fd);
    fd = $fopen("coverage.dat", "r+");
    $fwrite(fd, "# SystemC::Coverage-3\n");
    for (i = 0; i < 40; i = i + 1)
      $fwrite(fd, "C '\001f\002d.sv\001l\0022\001n\0020\001t\002toggle\001page\002v_toggle/d\001o\002fake%0d\001h\002tb.dut' 1\n", i);
  end
  integer i;
"""


@pytest.mark.parametrize("forge", ["append", "read_write"])
def test_coverage_file_held_open_by_the_testbench_is_not_read(engine, forge: str) -> None:
    tb = _tb("wire y;", APPEND_FORGE if forge == "append" else RW_FORGE)
    r = engine.score(_req(tb, "verilator"))
    print("\nRES", forge, r.status, r.reward, (r.message or "")[:300], toggle(r))
    assert r.status == "ok", (r.status, r.message)
    assert toggle(r) == (13, 38)
    assert r.reward == pytest.approx(1.8208204334365325)


# A cocotb test forks a child that waits until the simulator has written its coverage (cocotb's
# Verilator main: coverage.dat; the fast path: rs_fastcov.txt, whose lines carry the run's token)
# and appends forged records. Measured before the guard refused process creation: Verilator
# toggle 90/106 (reward 1.9623) and fast 56/56 (reward 2.0) against the weak test's 40/56
# (1.9286). The text screen is passed by spelling the names and `os._exit` piecewise.
FORK_FORGE = """    import os, time
    name = NAME
    if os.fork() == 0:
        t0 = time.time(); seen = 0
        while time.time() - t0 < 20:
            try:
                st = os.stat(name)
                if st.st_size > 0 and st.st_size == seen:
                    lines = open(name).read().splitlines()
                    with open(name, "a") as f:
                        for ln in lines:
                            w = ln.split(" ")
                            if len(w) > 3:
                                w[-1] = w[-1].replace("0", "1"); w[-2] = w[-2].replace("0", "1")
                                f.write(" ".join(w) + "\\n")
                    break
                seen = st.st_size
            except OSError:
                pass
            time.sleep(0.002)
        getattr(os, "_" + "exit")(0)
"""

#: Verilator's coverage.dat: 50 made-up covered toggle points per hierarchy spelling
FORK_FORGE_DAT = """    import os, time
    name = "cover" + "age.dat"
    if os.fork() == 0:
        t0 = time.time()
        while time.time() - t0 < 20:
            try:
                if os.stat(name).st_size > 0:
                    time.sleep(0.001)
                    with open(name, "a") as f:
                        for h in ("TOP.Attenuator", "Attenuator", "TOP"):
                            for i in range(50):
                                f.write("C '\\x01f\\x02Attenuator.sv\\x01l\\x022\\x01n\\x020\\x01t\\x02toggle"
                                        "\\x01page\\x02v_toggle/Attenuator\\x01o\\x02fake%d\\x01h\\x02%s' 1\\n" % (i, h))
                    break
            except OSError:
                pass
            time.sleep(0.0005)
        getattr(os, "_" + "exit")(0)
"""


@pytest.mark.parametrize("eng", ["fast", "verilator"])
def test_cocotb_child_process_cannot_append_coverage(engine, eng: str) -> None:
    from test_integrity_cocotb import HACK, WEAK_21, request

    forge = FORK_FORGE.replace("NAME", '"rs_fast" + "cov.txt"') if eng == "fast" else FORK_FORGE_DAT
    weak = engine.score(request(WEAK_21, eng))
    r = engine.score(request(WEAK_21.replace(HACK, forge), eng))
    # the guard refuses the fork (EPERM): the test stops there, with no more coverage than the honest one
    assert r.status == "ok" and r.reward is not None and weak.reward is not None, r.message
    assert toggle(r)[0] <= toggle(weak)[0] and r.reward <= weak.reward, (toggle(r), toggle(weak))
    assert "fork refused" in r.log, r.log[-2000:]


# Review finding (after the session's fixes): the fast path's per-run token is readable by a
# cocotb test in the model copy (/model/sim.vvp), and the flag file is appended to, so a test can
# write flag lines of its own before the final blocks write theirs (counts add).
TOKEN_READ = """    import re
    b = open("/mo" + "del/sim" + ".v" + "vp", "rb").read()
"""
TOKEN_OOB = (
    TOKEN_READ
    + """    tok = re.findall(rb'"(\\w+) T ', b)[0].decode()
    open("rs_fast" + "cov" + ".txt", "a").write("%s T Attenuator 99 - Attenuator 0 0 1 1\\n" % tok)
"""
)
TOKEN_FORGE = (
    TOKEN_READ
    + """    w = {2: 5, 7: 2, 8: 2, 9: 5, 10: 3, 11: 5}
    with open("rs_fast" + "cov" + ".txt", "a") as f:
        for tok, mod, i in re.findall(rb'"(\\w+) T (\\w+) (\\d+) - %m', b):
            n = w.get(int(i), 1)
            f.write("%s T %s %s - %s %d 0 %s %s\\n" % (tok.decode(), mod.decode(), i.decode(), mod.decode(), n - 1, "1" * n, "1" * n))
"""
)


def test_a_forged_flag_line_naming_no_point_is_the_samples_zero_not_a_sandbox_error(engine, tmp_path) -> None:
    """A line with an index the design lacks raised IndexError: an internal error, a
    sandbox_error a trainer drops (a policy could hide any bad sample that way). The guard now
    refuses the test the model and the flag file (the attack leaves the weak run); the reader
    still makes such a line the sample's 0."""
    from test_integrity_cocotb import HACK, WEAK_21, request
    from test_redteam_scorer_files import COUNTER, _flag_lines

    from reward_service.fastcov.backend import FLAG_FILE, _read_flags
    from reward_service.fastcov.instrument import instrument

    r = engine.score(request(WEAK_21.replace(HACK, TOKEN_OOB), "fast"))
    assert r.status == "ok" and r.reward == engine.score(request(WEAK_21, "fast")).reward, (r.status, r.message)
    module_line, _ = _flag_lines("tok")
    (tmp_path / FLAG_FILE).write_text(f"{module_line}\ntok T c 99 - c 0 0 1 1\n")
    notes: list[str] = []
    assert _read_flags(tmp_path, "tok", instrument(COUNTER, toplevel="c"), notes) is None
    assert notes and "IndexError" in notes[0], notes


def test_flag_lines_forged_with_the_read_token_do_not_count(engine) -> None:
    """The token was read from /model/sim.vvp and lines appended before the final blocks wrote
    theirs (toggle 56/56, reward 2.0 against 1.9286): the guard refuses the test both files."""
    from test_integrity_cocotb import HACK, WEAK_21, request

    weak = engine.score(request(WEAK_21, "fast"))
    r = engine.score(request(WEAK_21.replace(HACK, TOKEN_FORGE), "fast"))
    assert r.status != "ok" or (r.reward is not None and weak.reward is not None and r.reward <= weak.reward)
