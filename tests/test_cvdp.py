"""CVDP cid012 problem loading (reward_service.problems.cvdp)."""

from __future__ import annotations

import json

import pytest
from conftest import CID012, STIMULUS, case_expected

from reward_service.models import DEFAULT_METRICS, Completion, RewardSpec, ScoreRequest, SvTestbench
from reward_service.problems import Problem, find_toplevel, load_problems

EXPECTED = {p.parent.name: case_expected(p.parent.name) for p in sorted(STIMULUS.glob("*/expected.json"))}


@pytest.fixture(scope="module")
def problems() -> dict[str, Problem]:
    return load_problems(CID012)


def test_all_rows_load(problems):
    assert len(problems) == 82
    assert sum(not p.agentic for p in problems.values()) == 66
    assert sum(p.agentic for p in problems.values()) == 16
    for p in problems.values():
        assert p.design.files and p.design.toplevel, p.id
        assert p.dut_instance.isidentifier(), p.id
        assert 80 <= p.target_percent <= 100, p.id
        assert p.testbench_path.startswith("verif/") and p.testbench_path.endswith(".sv"), p.id
        assert p.difficulty in ("easy", "medium", "hard"), p.id
        assert p.metrics == list(DEFAULT_METRICS)
        assert p.simulator.value == "verilator"
        assert p.prompt.strip()
        # the DUT module is declared in the RTL
        assert any(f"module {p.design.toplevel}" in t for t in p.design.files.values()), p.id


def test_eight_stimulus_problems_match_expected(problems):
    assert len(EXPECTED) == 8
    for pid, exp in EXPECTED.items():
        p = problems[pid]
        assert sorted(p.design.files) == sorted(exp["rtl_files"]), pid
        assert p.dut_instance == exp["dut_instance"], pid
        assert p.target_percent == exp["target_percent"], pid
        if "cocotb" in exp:
            assert p.design.toplevel == exp["cocotb"]["hdl_toplevel"], pid


def test_known_problems(problems):
    att = problems["cvdp_copilot_Attenuator_0011"]
    assert att.design.toplevel == "Attenuator"
    assert att.testbench_path == "verif/Attenuator_tb.sv"
    assert att.difficulty == "easy" and not att.agentic
    # agentic: flat harness dict, several RTL files, toplevel is the one not instantiated
    hdbn = problems["cvdp_agentic_hdbn_codec_0003"]
    assert hdbn.agentic
    assert sorted(hdbn.design.files) == ["hdbn_decoder.sv", "hdbn_encoder.sv", "hdbn_top.sv"]
    assert hdbn.design.toplevel == "hdbn_top"
    assert any(k.startswith("docs/") for k in hdbn.context)
    # DUT instance from TOPLEVEL in src/.env (process.py reads os.getenv("TOPLEVEL"))
    assert problems["cvdp_agentic_async_fifo_compute_ram_application_0004"].dut_instance == "dut"
    # DUT instance from `dut = "door_lock_inst"` ... metrics[dut]
    assert problems["cvdp_agentic_door_lock_0003"].dut_instance == "door_lock_inst"
    # DUT instance from os.getenv("TOP_MODULE", "linear_search_top_inst")
    search = problems["cvdp_agentic_search_algorithm_0001"]
    assert search.dut_instance == "linear_search_top_inst"
    assert search.design.toplevel == "linear_search_top"
    # assert uses metrics["uut"], the failure message metrics['dut']: the assert counts
    assert problems["cvdp_copilot_bcd_adder_0007"].dut_instance == "uut"
    # DUT module not named after its file
    assert problems["cvdp_copilot_gcd_0028"].design.toplevel == "gcd_3_ip"
    assert problems["cvdp_copilot_word_reducer_0012"].design.toplevel == "Bit_Difference_Counter"


def test_request(problems):
    p = problems["cvdp_copilot_Attenuator_0011"]
    tb = SvTestbench(files={"tb.sv": (STIMULUS / p.id / "good.sv").read_text()})
    req = p.request(tb)
    assert isinstance(req, ScoreRequest)
    assert req.design == p.design and req.problem_id is None
    assert req.stimulus == tb
    assert req.coverage.scope == "uut"
    assert req.coverage.metrics == list(DEFAULT_METRICS)
    assert [(t.metric, t.percent) for t in req.coverage.targets] == [("overall", 90.0)]
    assert req.simulator.value == "verilator"
    # overrides and raw completion text
    req2 = p.request("```sv\nmodule tb; endmodule\n```", seed=7, reward=RewardSpec(shaping="ratio"))
    assert isinstance(req2.stimulus, Completion)
    assert req2.seed == 7 and req2.reward.shaping == "ratio"
    # the request survives the wire
    assert ScoreRequest.model_validate_json(req.model_dump_json()) == req


def test_request_of_an_id_the_api_would_not_register(problems):
    """A cid012 file may use any string id (the CLI and rescore load it); its requests are
    the same as under a registrable id, only ``spec()`` (what the API registers) refuses it."""
    p = problems["cvdp_copilot_Attenuator_0011"]
    odd = p.model_copy(update={"id": "my set/Attenuator 11"})
    assert odd.request("text") == p.request("text")
    with pytest.raises(ValueError, match="id"):
        odd.spec()


def test_find_toplevel_prefers_prompt_on_ties():
    files = {"a.sv": "module alpha(input x); endmodule\nmodule beta(input y); endmodule\n"}
    assert find_toplevel(files, "Write a testbench for the `beta` module.") == "beta"
    with pytest.raises(ValueError, match="cannot tell"):
        find_toplevel(files, "Write a testbench.")
    # an instantiation (with parameters) rules a module out; comments do not count
    files = {
        "top.sv": "module top; leaf #(.W(2)) u0 (.a(1)); endmodule\n// leaf x();\n",
        "leaf.sv": "module leaf #(parameter W=1)(input a); /* top t(); */ endmodule\n",
    }
    assert find_toplevel(files) == "top"


def test_malformed_rows_raise_with_line_number(tmp_path):
    good = CID012.read_text().splitlines()[0]
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n\n{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: bad cid012 row"):
        load_problems(path)

    row = json.loads(good)
    del row["harness"]["files"]["src/.env"]
    path.write_text(good + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r":2: .*src/\.env"):
        load_problems(path)

    row = json.loads(good)
    row["harness"]["files"] = {k: v for k, v in row["harness"]["files"].items() if not k.endswith(".sv")}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r":1: .*no RTL file"):
        load_problems(path)

    path.write_text(good + "\n" + good + "\n")
    with pytest.raises(ValueError, match=r":2: duplicate problem id"):
        load_problems(path)

    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r":1: .*JSON object"):
        load_problems(path)
