"""Stimulus extraction from raw LLM completions (reward_service.completion)."""

from __future__ import annotations

import pytest

from conftest import STIMULUS
from reward_service.completion import ExtractionError, extract_stimulus
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
        "`include \"defs.svh\"\n"
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
