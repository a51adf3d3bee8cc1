"""Red-team session 11: reproducers of reward holes found in review (each a strict xfail until
the engine refuses it; the honest score it is compared with is measured, not assumed)."""

from __future__ import annotations

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files

PID = "cvdp_copilot_Attenuator_0011"
RTL = rtl_files(cid012_rows()[PID])
WEAK = (STIMULUS / PID / "weak.sv").read_text()  # 42 of 56 toggle points, reward 1.9375

# Verilator's inline C++ ($c) reached through a macro: the screen (_SV_HOST_CODE in
# scoring/prepare.py) matches `$c(` on the raw text, but `$c` and its `(` meet only after
# preprocessing. The C++ sets every coverage counter of the model (the DUT's included).
FORGE_ALL = "for (auto& c : vlSymsp->TOP.__Vcoverage) c = 7;"
HIDDEN_HOST_CODE = {
    "define_names_dollar_c": f'\n`define HC $c\n  initial #1 `HC("{FORGE_ALL}");\n',
    "define_supplies_paren": f'\n`define LP (\n  initial #1 $c `LP "{FORGE_ALL}");\n',
}


def _req(tb: str, eng: str) -> dict:
    return {
        "design": {"files": RTL},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
        "coverage": {"scope": "uut"},
        "engine": eng,
    }


def _toggle(r) -> tuple[int, int]:
    m = r.coverage.metrics["toggle"]
    return m.covered, m.total


@pytest.mark.xfail(
    strict=True,
    reason="hole: `$c` hidden behind a macro passes the host-code screen (raw-text regex) and "
    "its C++ forges every coverage counter: toggle 42/56 -> 56/56, reward 1.9375 -> 2.0",
)
@pytest.mark.parametrize("form", sorted(HIDDEN_HOST_CODE))
@pytest.mark.parametrize("eng", ["verilator", "auto"])
def test_macro_hidden_dollar_c_forging_coverage_is_refused(engine, form: str, eng: str) -> None:
    honest = engine.score(_req(WEAK, eng))
    assert honest.status == "ok" and _toggle(honest) == (42, 56)
    forged = engine.score(
        _req(WEAK.replace("module tb_Attenuator;", "module tb_Attenuator;" + HIDDEN_HOST_CODE[form], 1), eng)
    )
    # what the engine must do: refuse it like the plain `$c(` (tests/test_tamper.py)
    assert forged.status == "invalid_input" and "could forge coverage" in forged.message, (
        forged.status,
        forged.reward,
        _toggle(forged) if forged.coverage else None,
    )


@pytest.mark.xfail(
    strict=True,
    reason="hole: a DPI import whose `import` keyword comes from a macro passes the host-code screen; "
    "libc's system() is then called from the testbench (rc=32512: it ran, the sandbox has no /bin/sh)",
)
def test_macro_hidden_dpi_import_is_refused(engine) -> None:
    dpi = (
        "\n`define IMP import\n"
        '  `IMP "DPI-C" function int system(input string cmd);\n'
        '  int rc; initial begin rc = system("true"); $display("rc=%0d", rc); end\n'
    )
    r = engine.score(_req(WEAK.replace("module tb_Attenuator;", "module tb_Attenuator;" + dpi, 1), "verilator"))
    assert r.status == "invalid_input" and "could forge coverage" in r.message, (r.status, r.reward, r.log[-300:])


@pytest.mark.xfail(
    strict=True,
    reason="hole: the own-failure pattern `^[^\\n]*undefined reference to `__real__...` is not anchored at a "
    "linker line, so gcc quoting a failing line of the sample's own C++ ($c via a macro) makes its "
    "compile_error (reward 0) a sandbox_error (no reward, retried)",
)
def test_quoted_own_failure_text_is_not_a_sandbox_error(engine) -> None:
    bad = '\n`define HC $c\n  initial #1 `HC("int rs_a = ; /* undefined reference to `__real__ZN19VerilatedCovContext_x */");\n'
    r = engine.score(_req(WEAK.replace("module tb_Attenuator;", "module tb_Attenuator;" + bad, 1), "verilator"))
    # the sample's own error: refused host code, or at least its compile_error, never ours
    assert r.status in ("invalid_input", "compile_error"), (r.status, r.message[:200])
