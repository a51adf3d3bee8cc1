"""Red-team session 11: reproducers of reward holes found in review, each now refused (the honest
score it is compared with is measured, not assumed)."""

from __future__ import annotations

import pytest
from redteam import attenuator_request, toggle
from samples import attenuator_weak

# Verilator's inline C++ ($c) reached through a macro: the screen (_SV_HOST_CODE in
# scoring/prepare.py) matches `$c(` on the raw text, but `$c` and its `(` meet only after
# preprocessing. The C++ sets every coverage counter of the model (the DUT's included).
FORGE_ALL = "for (auto& c : vlSymsp->TOP.__Vcoverage) c = 7;"
HIDDEN_HOST_CODE = {
    "define_names_dollar_c": f'\n`define HC $c\n  initial #1 `HC("{FORGE_ALL}");\n',
    "define_supplies_paren": f'\n`define LP (\n  initial #1 $c `LP "{FORGE_ALL}");\n',
}


@pytest.mark.parametrize("form", sorted(HIDDEN_HOST_CODE))
@pytest.mark.parametrize("eng", ["verilator", "auto"])
def test_macro_hidden_dollar_c_forging_coverage_is_refused(engine, form: str, eng: str) -> None:
    honest = engine.score(attenuator_request(attenuator_weak(), eng))
    assert honest.status == "ok" and toggle(honest) == (42, 56)
    forged = engine.score(
        attenuator_request(
            attenuator_weak().replace("module tb_Attenuator;", "module tb_Attenuator;" + HIDDEN_HOST_CODE[form], 1), eng
        )
    )
    # refused like the plain `$c(` (tests/test_tamper.py: invalid_input by the raw-text screen;
    # here by the integrity check on the preprocessed tokens: refused, under every policy)
    assert forged.status == "refused" and "could forge coverage" in forged.message, (
        forged.status,
        forged.reward,
        toggle(forged) if forged.coverage else None,
    )


def test_macro_hidden_dpi_import_is_refused(engine) -> None:
    dpi = (
        "\n`define IMP import\n"
        '  `IMP "DPI-C" function int system(input string cmd);\n'
        '  int rc; initial begin rc = system("true"); $display("rc=%0d", rc); end\n'
    )
    r = engine.score(
        attenuator_request(
            attenuator_weak().replace("module tb_Attenuator;", "module tb_Attenuator;" + dpi, 1), "verilator"
        )
    )
    assert r.status == "refused" and "could forge coverage" in r.message, (r.status, r.reward, r.log[-300:])
    assert [(v.kind, v.target) for v in r.violations] == [("host_code", "a DPI import/export")]


def test_quoted_own_failure_text_is_not_a_sandbox_error(engine) -> None:
    bad = '\n`define HC $c\n  initial #1 `HC("int rs_a = ; /* undefined reference to `__real__ZN19VerilatedCovContext_x */");\n'
    r = engine.score(
        attenuator_request(
            attenuator_weak().replace("module tb_Attenuator;", "module tb_Attenuator;" + bad, 1), "verilator"
        )
    )
    # the sample's own error: refused host code, or at least its compile_error, never ours
    assert r.status in ("refused", "compile_error"), (r.status, r.message[:200])


def test_own_failure_lines_are_the_linkers_not_quoted_source() -> None:
    """The build-failure classifier takes a missing-symbol line of the linker as ours, never a
    source line the compiler quotes (a sample's text)."""
    from reward_service.simulators.verilator import _OWN_FAILURE

    ours = [
        "Vtop__ALL.o:(.text+0x1f): undefined reference to `vl_stop_maybe(char const*, int, bool)'",
        "rs_main.cpp:(.text.startup+0x3c): undefined reference to `__real__ZN19VerilatedCovContext8_insertiEPj'",
        "/usr/bin/ld: rs_main.o: undefined reference to `__real__ZN19VerilatedCovContext8_insertiEPj'",
    ]
    quoted = [
        "   42 |   int rs_a = ; /* undefined reference to `__real__ZN19VerilatedCovContext_x */",
        "Vtb.cpp:42:5: error: x undefined reference to `vl_stop_maybe'",
    ]
    assert [bool(_OWN_FAILURE.search(line)) for line in ours + quoted] == [True] * 3 + [False] * 2
