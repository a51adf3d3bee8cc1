"""Stimulus extraction from raw LLM completions (reward_service.completion)."""

from __future__ import annotations

import pytest
from conftest import STIMULUS, cid012_rows, rtl_files

from reward_service.completion import ExtractionError, extract, extract_stimulus
from reward_service.models import CocotbStimulus, SvTestbench

ATTENUATOR = "cvdp_copilot_Attenuator_0011"

SMALL_TB = """\
`timescale 1ns/1ps
module tb;
  reg clk = 0;
  always #5 clk = ~clk;
  gray_to_binary #(.WIDTH(4)) uut (.gray_in(g), .binary_out(b));
  initial begin
    repeat (16) @(posedge clk);
    $finish;
  end
endmodule
"""

COCOTB_TEST = """\
import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def walk_inputs(dut):
    for value in range(16):
        dut.gray_in.value = value
        await Timer(1, unit="ns")
"""


def sv_code(result) -> str:
    assert isinstance(result, SvTestbench)
    assert list(result.files) == ["tb.sv"]
    return result.files["tb.sv"]


def test_real_testbench_wrapped_in_prose():
    good = (STIMULUS / ATTENUATOR / "good.sv").read_text()
    text = (
        "Sure! Below is a SystemVerilog testbench for the `Attenuator` module. It instantiates the "
        "module as `uut`, drives a clock and walks `data` through several patterns so that every "
        "state of the FSM is visited.\n\n"
        f"```systemverilog\n{good}```\n\n"
        "### Explanation\n- The `drive_data` task waits for the LOAD -> SHIFT -> LATCH sequence.\n"
        "- Random values cover the toggle bins.\n"
    )
    assert sv_code(extract_stimulus(text)) == good.rstrip() + "\n"


def test_last_complete_block_holding_a_module_wins():
    text = (
        "First, the clock generator you will need:\n\n"
        "```verilog\nalways #5 clk = ~clk;\n```\n\n"
        "A first draft:\n\n"
        "```verilog\nmodule tb;\n  initial $finish;\nendmodule\n```\n\n"
        "And the full testbench:\n\n"
        f"```sv\n{SMALL_TB}```\n\n"
        "Run it with `iverilog -g2012`:\n\n```bash\niverilog -g2012 -o sim tb.sv gray_to_binary.sv\n```\n"
    )
    assert sv_code(extract_stimulus(text)) == SMALL_TB


def test_unclosed_final_block_falls_back_to_earlier_complete_block():
    text = (
        "Here is the testbench:\n\n"
        f"```systemverilog\n{SMALL_TB}```\n\n"
        "And an extended version with more tests:\n\n"
        "```systemverilog\nmodule tb;\n  initial begin\n    repeat (1000) begin\n"  # cut off by max tokens
    )
    assert sv_code(extract_stimulus(text)) == SMALL_TB


def test_only_an_unclosed_block_is_rejected():
    text = "Here is the testbench:\n\n```systemverilog\nmodule tb;\n  initial begin\n"
    with pytest.raises(ExtractionError, match="not closed"):
        extract_stimulus(text)


def test_untagged_fence_and_indented_fence():
    assert sv_code(extract_stimulus(f"Testbench:\n```\n{SMALL_TB}```\n")) == SMALL_TB
    indented = "".join(f"   {line}\n" if line else "\n" for line in SMALL_TB.splitlines())
    text = f"1. The testbench:\n   ```verilog\n{indented}   ```\n"
    assert sv_code(extract_stimulus(text)) == SMALL_TB


def test_bare_code_with_prose_around():
    text = (
        "Here is a testbench that instantiates the module as uut.\n\n"
        f"{SMALL_TB}\n"
        "This testbench walks all sixteen input values.\n"
    )
    assert sv_code(extract_stimulus(text)) == SMALL_TB


def test_bare_code_multiple_modules_from_first_to_last_endmodule():
    code = (
        '`include "defs.svh"\n'
        "`timescale 1ns/1ps\n\n"
        "module stim_gen(output logic [3:0] v);\n  initial v = 0;\nendmodule\n\n"
        "module tb;\n  logic [3:0] v;\n  stim_gen g(.v(v));\nendmodule : tb\n"
    )
    text = f"The testbench has two modules.\n\n{code}\nThat is all.\n"
    assert sv_code(extract_stimulus(text)) == code


def test_think_section_is_stripped():
    text = (
        "<think>\nThe user wants a testbench. Maybe:\n```verilog\nmodule wrong;\nendmodule\n```\n"
        "No, better to instantiate the DUT.\n</think>\n\n"
        f"```verilog\n{SMALL_TB}```\n"
    )
    assert sv_code(extract_stimulus(text)) == SMALL_TB
    # a module only inside the reasoning is not an answer
    with pytest.raises(ExtractionError):
        extract_stimulus("<think>\n```verilog\nmodule tb;\nendmodule\n```\n</think>\nI could not finish.")
    # "</think>" without its opening tag (the tag was in the chat template)
    assert sv_code(extract_stimulus(f"reasoning about coverage...\n</think>\n```sv\n{SMALL_TB}```")) == SMALL_TB


def test_only_reasoning_is_rejected():
    with pytest.raises(ExtractionError, match="reasoning"):
        extract_stimulus("<think>\nLet me think about the FSM states...\n</think>\n  \n")
    with pytest.raises(ExtractionError, match="reasoning"):
        extract_stimulus("<think>\nLet me write module tb; ... endmodule but first")  # cut off


def test_python_cocotb_block():
    text = f"A cocotb test for the DUT:\n\n```python\n{COCOTB_TEST}```\n\nRun it with the cocotb runner.\n"
    result = extract_stimulus(text, toplevel="gray_to_binary")
    assert isinstance(result, CocotbStimulus)
    assert result.files == {"test_stimulus.py": COCOTB_TEST}
    assert result.test_module == "test_stimulus"
    assert result.toplevel == "gray_to_binary"
    # without a toplevel the engine falls back to design.toplevel
    assert extract_stimulus(text).toplevel is None


def test_real_cocotb_test_untagged_and_bare():
    code = (STIMULUS / "cvdp_copilot_fixed_arbiter_0004" / "test_cvdp_copilot_fixed_arbiter_0004.py").read_text()
    result = extract_stimulus(f"```\n{code}```")
    assert isinstance(result, CocotbStimulus)
    assert result.files["test_stimulus.py"] == code.rstrip() + "\n"
    bare = extract_stimulus(code, toplevel="fixed_priority_arbiter")
    assert isinstance(bare, CocotbStimulus)
    assert bare.files["test_stimulus.py"] == code.rstrip() + "\n"


def test_python_block_without_cocotb_test_is_not_a_stimulus():
    text = "```python\nprint('hello')\n```\n"
    with pytest.raises(ExtractionError, match="none of the 1 code block"):
        extract_stimulus(text)


def test_vhdl_is_rejected():
    vhdl = (
        "library ieee;\nuse ieee.std_logic_1164.all;\n\nentity tb is\nend entity;\n\n"
        "architecture sim of tb is\nbegin\nend architecture;\n"
    )
    for text in (f"Here is a VHDL testbench:\n```vhdl\n{vhdl}```\n", f"```\n{vhdl}```", vhdl):
        with pytest.raises(ExtractionError, match="VHDL is not supported"):
            extract_stimulus(text)


def test_no_code():
    with pytest.raises(ExtractionError, match="no code found"):
        extract_stimulus("I'm sorry, I cannot write a testbench for this module without its ports.")
    with pytest.raises(ExtractionError, match="no code block holds|none of the"):
        extract_stimulus("```verilog\nalways #5 clk = ~clk;\n```")


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty(text):
    with pytest.raises(ExtractionError, match="empty"):
        extract_stimulus(text)


def test_extraction_error_is_a_value_error():
    assert issubclass(ExtractionError, ValueError)


# -- choosing the testbench over an echoed DUT (issue 9, point 6) -------------------------------

#: The DUT interface as models echo it back after (or before) the testbench.
GRAY_STUB = """\
module gray_to_binary #(parameter WIDTH = 4) (
  input  logic [WIDTH-1:0] gray_in,
  output logic [WIDTH-1:0] binary_out
);
endmodule
"""
#: The DUT restated with a body (the design's own module, e.g. copied from the prompt).
GRAY_RESTATED = """\
module gray_to_binary #(parameter WIDTH = 4) (input logic [WIDTH-1:0] gray_in, output logic [WIDTH-1:0] binary_out);
  always_comb begin
    binary_out[WIDTH-1] = gray_in[WIDTH-1];
    for (int i = WIDTH-2; i >= 0; i--) binary_out[i] = binary_out[i+1] ^ gray_in[i];
  end
endmodule
"""
GRAY_MODULES = {"gray_to_binary"}


def lines(code: str) -> int:
    return len(code.rstrip().splitlines())


@pytest.mark.parametrize("design_modules", [GRAY_MODULES, None], ids=["design-known", "stub-heuristic"])
def test_testbench_followed_by_echoed_stub(design_modules):
    text = (
        f"Here is the testbench:\n\n```systemverilog\n{SMALL_TB}```\n\n"
        f"It assumes the DUT interface:\n\n```verilog\n{GRAY_STUB}```\n"
    )
    got = extract(text, design_modules=design_modules)
    assert sv_code(got.stimulus) == SMALL_TB
    assert got.block == f"code block 1 of 2 (```systemverilog, {lines(SMALL_TB)} lines)"
    assert got.role.startswith("the testbench (module tb")
    assert got.skipped and got.skipped[0].startswith("block 2 ")
    assert got.description.startswith(f"code block 1 of 2 (```systemverilog, {lines(SMALL_TB)} lines): the testbench")
    assert "not used: block 2" in got.description


def test_stub_then_testbench_and_restated_dut_then_testbench():
    for first in (GRAY_STUB, GRAY_RESTATED):
        text = f"The DUT:\n```sv\n{first}```\nThe testbench:\n```sv\n{SMALL_TB}```\n"
        got = extract(text, design_modules=GRAY_MODULES)
        assert sv_code(got.stimulus) == SMALL_TB
        assert got.block.startswith("code block 2 of 2 (```sv,")
        assert got.skipped == ("block 1 restates the DUT (module gray_to_binary)",)
    # the restated DUT after the testbench: still the testbench (the old rule took the last block)
    text = f"```sv\n{SMALL_TB}```\nFor reference, the DUT:\n```sv\n{GRAY_RESTATED}```\n"
    assert sv_code(extract_stimulus(text, design_modules=GRAY_MODULES)) == SMALL_TB


def test_of_two_testbenches_the_later_wins():
    """Documented rule: among blocks of the same role the LAST one is scored (the revised answer),
    whatever comes after it (here an echoed stub)."""
    revised = SMALL_TB.replace("repeat (16)", "repeat (32)")
    text = (
        f"First attempt:\n```systemverilog\n{SMALL_TB}```\nRevised:\n```systemverilog\n{revised}```\n"
        f"Interface:\n```systemverilog\n{GRAY_STUB}```\n```bash\niverilog -g2012 tb.sv\n```\n"
    )
    got = extract(text, design_modules=GRAY_MODULES)
    assert sv_code(got.stimulus) == revised
    assert got.block == f"code block 2 of 4 (```systemverilog, {lines(revised)} lines)"
    assert len(got.skipped) == 2 and got.skipped[0].startswith("block 1 (the testbench")


def test_cocotb_test_with_echoed_dut():
    for text in (
        f"```python\n{COCOTB_TEST}```\nThe DUT it drives:\n```verilog\n{GRAY_STUB}```\n",
        f"```verilog\n{GRAY_RESTATED}```\n```python\n{COCOTB_TEST}```\n",
    ):
        got = extract(text, toplevel="gray_to_binary", design_modules=GRAY_MODULES)
        assert isinstance(got.stimulus, CocotbStimulus)
        assert got.stimulus.files == {"test_stimulus.py": COCOTB_TEST}
        assert got.role == "a cocotb test"
        assert got.skipped == (
            f"block {2 if text.startswith('```python') else 1} restates the DUT (module gray_to_binary)",
        )


def test_only_the_dut_restated_is_no_stimulus():
    with pytest.raises(
        ExtractionError,
        match=r"no code block holds a testbench: code block 1 of 1 "
        r"\(```verilog, 5 lines\) restates the DUT \(module gray_to_binary\)",
    ):
        extract(f"```verilog\n{GRAY_STUB}```\n", design_modules=GRAY_MODULES)


def test_helper_module_without_dut_is_below_a_testbench():
    helper = "module stim_gen(output logic [3:0] v);\n  initial v = 4'd3;\nendmodule\n"
    got = extract(f"```sv\n{SMALL_TB}```\n```sv\n{helper}```\n", design_modules=GRAY_MODULES)
    assert sv_code(got.stimulus) == SMALL_TB
    assert got.skipped == ("block 2 (Verilog module(s) stim_gen, none instantiating the DUT)",)


def test_bare_code_is_named():
    got = extract(f"Here it is.\n\n{SMALL_TB}\nDone.\n", design_modules=GRAY_MODULES)
    assert got.block == f"bare code ({lines(SMALL_TB)} lines, no code fence)"
    assert got.skipped == ()


def _interface_stub(rtl: str) -> str:
    """The DUT's header as a model echoes it back: ``module X (ports);`` + ``endmodule``."""
    start = rtl.index("module ")
    return rtl[start : rtl.index(");", start) + 2] + "\nendmodule\n"


def _attenuator_stub() -> str:
    return _interface_stub(rtl_files(cid012_rows()[ATTENUATOR])["Attenuator.sv"])


def _attenuator_request(text: str, simulator: str = "verilator") -> dict:
    return {
        "design": {"files": rtl_files(cid012_rows()[ATTENUATOR])},
        "stimulus": {"kind": "completion", "text": text},
        "simulator": simulator,
        "coverage": {"scope": "uut"},
    }


@pytest.mark.slow
def test_end_to_end_testbench_plus_echoed_stub_scores_the_testbench(engine):
    """Before: invalid_input "declares no top module" (the stub was taken). Now the testbench is
    scored with exactly the coverage a bare Verilator run of good.sv gives (expected.json), and
    the result names the block."""
    import json

    good = (STIMULUS / ATTENUATOR / "good.sv").read_text()
    want = json.loads((STIMULUS / ATTENUATOR / "expected.json").read_text())["testbenches"]["good"]
    text = (
        f"The testbench:\n\n```systemverilog\n{good}```\n\n"
        f"It drives this interface:\n\n```systemverilog\n{_attenuator_stub()}```\n"
    )
    result = engine.score(_attenuator_request(text))
    assert result.status == "ok", result.message
    got = {m: {"covered": c.covered, "total": c.total} for m, c in result.coverage.metrics.items()}
    assert got == want["coverage"]
    block = f"code block 1 of 2 (```systemverilog, {lines(good)} lines): the testbench"
    assert result.stimulus_block.startswith(block)
    assert "not used: block 2 restates the DUT (module Attenuator)" in result.stimulus_block
    assert f"scored {block}" in result.message  # another block was passed over: said in the message too


def test_end_to_end_failure_names_the_block(engine):
    """A completion whose testbench uses another instance name: invalid_input, and the message
    says which block was checked (no simulation needed)."""
    tb = (
        "module tb;\n  reg clk, reset; reg [4:0] data; wire a, b, c;\n"
        "  Attenuator dut (.clk(clk), .reset(reset), .data(data), .ATTN_CLK(a), .ATTN_DATA(b), .ATTN_LE(c));\n"
        "  initial $finish;\nendmodule\n"
    )
    result = engine.score(_attenuator_request(f"```verilog\n{tb}```\n```verilog\n{_attenuator_stub()}```\n"))
    assert result.status == "invalid_input"
    assert "must instantiate the DUT as `uut`" in result.message
    assert (
        "(scored code block 1 of 2 (```verilog, 5 lines): the testbench (module tb; instantiates Attenuator)"
        in result.message
    )
    assert result.stimulus_block.startswith("code block 1 of 2 (```verilog, 5 lines)")
    only_stub = engine.score(_attenuator_request(f"```verilog\n{_attenuator_stub()}```\n"))
    assert only_stub.status == "invalid_input" and "restates the DUT (module Attenuator)" in only_stub.message


def test_design_module_pasted_beside_the_testbench_is_left_out():
    """One block with the DUT copied above the testbench: the copy is left out (Icarus rejects a
    second declaration of the design's module), line numbers kept; a module named in a comment stays."""
    block = f"// gray_to_binary below is copied from the prompt\n{GRAY_RESTATED}\n{SMALL_TB}"
    got = extract(f"```systemverilog\n{block}```\n", design_modules=GRAY_MODULES)
    code = sv_code(got.stimulus)
    assert got.dropped == ("gray_to_binary",)
    assert len(code.splitlines()) == len(block.rstrip().splitlines())
    assert code.endswith(SMALL_TB)
    assert code.startswith(
        "// gray_to_binary below is copied from the prompt\n"
        "// module gray_to_binary: left out, the design's own is simulated\n"
    )
    assert "always_comb" not in code
    assert got.notable and "its copy of the design's module gray_to_binary is left out" in got.description
    # without the design's module names nothing is left out
    assert extract(f"```systemverilog\n{block}```\n").dropped == ()


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_end_to_end_dut_pasted_with_the_testbench(engine, simulator):
    """Before: Icarus compile_error "'Attenuator' has already been declared" while Verilator took
    one of the two declarations. Now both simulate the design's own DUT; Verilator's coverage is
    that of a bare run of good.sv alone (expected.json)."""
    import json

    good = (STIMULUS / ATTENUATOR / "good.sv").read_text()
    rtl = rtl_files(cid012_rows()[ATTENUATOR])["Attenuator.sv"]
    want = json.loads((STIMULUS / ATTENUATOR / "expected.json").read_text())["testbenches"]["good"]
    result = engine.score(_attenuator_request(f"Complete code:\n```systemverilog\n{rtl}\n{good}```\n", simulator))
    assert result.status == "ok", result.message
    assert "its copy of the design's module Attenuator is left out" in result.stimulus_block
    assert "left out" in result.message
    if simulator == "verilator":
        got = {m: {"covered": c.covered, "total": c.total} for m, c in result.coverage.metrics.items()}
        assert got == want["coverage"]
    else:
        assert want["icarus_compiles_and_runs"] is True


def test_bare_testbench_with_the_dut_restated_around_it():
    text = (
        f"The DUT:\n\n{GRAY_RESTATED}\nA testbench for it:\n\n{SMALL_TB}\n"
        f"It assumes the interface\n\n{GRAY_STUB}\nas given.\n"
    )
    got = extract(text, design_modules=GRAY_MODULES)
    assert sv_code(got.stimulus) == SMALL_TB
    assert got.dropped == ()
    # without the design's names: first module to last endmodule, as before
    assert sv_code(extract_stimulus(text)).startswith("module gray_to_binary")
