"""Reachability witnesses and the closure testbench (issue 23): the witness search runs on the
prover's own AIG (reward_service.formal.witness), its sequence becomes a plain SV testbench,
and a point counts as witnessed only when the engine's replay (fast path and Verilator)
covers it. A claim that does not replay is reported, never counted; a random-stimulus run
with every input free never covers a proved point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CID012, REPO, STIMULUS, cid012_rows, rtl_files

from reward_service import ceiling
from reward_service.formal.aiger import read_aig, simulate, tie_inputs, write_aig
from reward_service.formal.model import build_model
from reward_service.formal.prover import prove, read_map, synthesize
from reward_service.formal.witness import random_steps, search, to_testbench
from reward_service.sandbox import get_sandbox

#: A counter that needs 21 enabled edges to reach 20 (deeper than the first bmc window), an
#: arm that needs 30 (it counts 0..24: proved unreachable), a synchronous reset, a decoder.
DEEP = """module deep(input clk, input rst, input en, input [1:0] op, output reg [4:0] c, output reg done,
            output reg [1:0] st);
  always @(posedge clk) begin
    if (rst) c <= 5'd0;
    else if (en) c <= (c == 5'd24) ? 5'd0 : c + 5'd1;
    done <= (c == 5'd20);
    if (c == 5'd30) done <= 1'b1;
  end
  always @(*) begin
    case (op)
      2'd0: st = 2'd1;
      2'd1: st = 2'd2;
      default: st = 2'd3;
    endcase
  end
endmodule
"""

#: An asynchronous active-low reset, a negedge clock and an arm no state reaches.
NEG = """module neg(input clk, input rst_n, input d, output reg [2:0] sh, output wire all1);
  always @(negedge clk or negedge rst_n)
    if (!rst_n) sh <= 3'b000;
    else if (sh == 3'b111 && sh[0] == 1'b0) sh <= 3'b101;
    else sh <= {sh[1:0], d};
  assign all1 = &sh;
endmodule
"""

DESIGNS = {"deep.sv": DEEP, "neg.sv": NEG}


#: Outside the proof's semantics (two clock edges, a latch): the witness search drives every
#: input at every global step, the clock first.
TWO_EDGES = """module two(input clk, input rst_n, input d, input en, output reg a, output reg b, output reg q);
  always @(posedge clk or negedge rst_n)
    if (!rst_n) a <= 1'b0;
    else a <= d;
  always @(negedge clk) b <= a;
  always @(*) if (en) q = b;
endmodule
"""

#: cid012 designs of the CI tier: proofs that exclude points, one with the issue's `default:`.
CI_TIER = (
    "cvdp_copilot_binary_to_BCD_0030",
    "cvdp_copilot_ring_token_0004",
    "cvdp_copilot_hamming_code_tx_and_rx_0037",
)


def test_the_aig_reads_back_and_simulates_as_abc_counts(tmp_path: Path):
    """The prover's AIG, read and written again, is the same graph; its simulation sets the
    flag of `done <= (c == 20)`'s line only after 21 enabled edges."""
    model = build_model({"deep.sv": DEEP})
    assert synthesize(model, get_sandbox("bwrap"), tmp_path, 60) is None
    aig = read_aig((tmp_path / "model.aig").read_bytes())
    assert read_aig(write_aig(aig)) == aig
    inputs = {
        words[3]: int(words[1])
        for words in map(str.split, (tmp_path / "model.map").read_text().splitlines())
        if words[0] == "input" and words[2] == "0"
    }
    flags = {i for i, names in read_map(tmp_path / "model.map").items() if any("__rs_fm" in w for w, _ in names)}
    steps = []
    for _ in range(30):
        step = [0] * aig.inputs
        step[inputs["en"]] = 1
        steps.append(step)
    seen, state = simulate(aig, list(aig.init), steps)
    assert len(seen) == 30 and len(state) == len(aig.latches)
    # sticky flags: once set, set at every later step
    for o in flags:
        first = next((t for t, values in enumerate(seen) if values[o]), None)
        assert first is None or all(values[o] for values in seen[first:])
    tied = tie_inputs(aig, {inputs["en"]})
    seen_tied, _ = simulate(tied, list(aig.init), steps)
    assert sum(map(sum, seen_tied)) < sum(map(sum, seen))  # without `en` the counter stays at 0


def test_the_search_claims_every_point_not_proved():
    """One sequence from the zero state reaches every point of DEEP but the proved arm (the
    counter's 20 lies deeper than the first window: the search goes on from where it is)."""
    design = {"deep.sv": DEEP}
    proof = prove(design)
    assert proof.status == "proved", proof.reason
    dead = set(proof.unreachable)
    assert dead == {("deep.sv", 7, "branch", "if")}, sorted(dead)
    witness = search(design, skip=dead)
    assert witness.status == "ok", witness.reason
    assert witness.clock == ("clk", "posedge") and not witness.notes
    model = build_model(design)
    modelled = {key for key, provers in model.points if provers}
    # not claimed, covered by the replay all the same: the clock's toggles (the testbench drives
    # the clock, the sequence does not) and a flag synthesis makes a constant 1 (the end of
    # the `always @(*)` block: the map names no constant output)
    unclaimed = {
        ("deep.sv", 1, "toggle", "clk:0->1"),
        ("deep.sv", 1, "toggle", "clk:1->0"),
        ("deep.sv", 9, "line", "block"),
    }
    assert set(witness.claimed) == modelled - dead - unclaimed
    assert len(witness.steps) >= 21
    assert all(set(step) == {"rst", "en", "op"} for step in witness.steps)  # the ports, never the clock
    tb = to_testbench(witness, "dut")
    assert "deep dut (.clk(clk), .rst(rst), .en(en), .op(op), .c(c), .done(done), .st(st));" in tb
    assert tb.count("#5 clk = 1; #5 clk = 0;") == len(witness.steps)


def test_random_steps_drive_every_input_but_the_clock():
    witness = search({"neg.sv": NEG}, max_frames=0)
    assert witness.status == "ok" and witness.clock == ("clk", "negedge"), witness.reason
    rand = random_steps(witness, 50, seed=7)
    assert len(rand.steps) == 50 and {frozenset(s) for s in rand.steps} == {frozenset({"rst_n", "d"})}
    assert len({s["rst_n"] for s in rand.steps}) == 2  # resets included
    assert random_steps(witness, 50, seed=7).steps == rand.steps
    tb = to_testbench(rand, "dut")
    assert "reg clk = 1;" in tb and tb.count("#5 clk = 0; #5 clk = 1;") == 50


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_the_closure_testbench_replays_every_claim(engine, name):
    design = {name: DESIGNS[name]}
    result = ceiling.closure(design, engine=engine)
    assert result.status == "ok", result.reason
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.replayed_on == {"fast": "fast", "verilator": "verilator"}  # both engines really replayed
    assert result.proved_but_covered == []
    assert result.undecided == 0, json.dumps(result.to_json())
    assert sum(m.witnessed for m in result.metrics.values()) >= len(result.witness.claimed)


@pytest.mark.slow
def test_an_async_reset_starts_inactive_so_the_first_step_asserting_it_is_an_edge(engine):
    """thermostat_0003 (a latch: searched with every input free) resets at the witness's first
    step (i_rst = 0, active low, `always @(posedge i_clk or negedge i_rst)`). The model applies
    the reset as a level; a simulator only on i_rst's negedge. The replay's i_rst starts at 1,
    so that step is an edge and the DUT resets as the model did (starting at 0, the AMBIENT arm's
    `else if (i_temp_feedback[2])` claim cannot replay: the DUT never resets)."""
    # a generous budget: the proof and the search stop at wall-clock deadlines (a loaded machine)
    result = ceiling.closure(rtl_files(cid012_rows()["cvdp_copilot_thermostat_0003"]), engine=engine, budget_s=300)
    assert result.status == "ok", result.reason
    assert result.witness.idle == {"i_rst": 1}
    assert result.witness.steps[0]["i_rst"] == 0
    assert result.not_replayed == {"fast": [], "verilator": []}
    # the one point the replay leaves: `default:` of a 3-bit state with 7 states, proved on the
    # every-input-free model (the one-edge model refuses the latch)
    assert result.proof.model == "ticks"
    assert [k[1:] for k in result.proof.unreachable] == [(326, "line", "case")]
    assert result.undecided_keys == []


@pytest.mark.slow
def test_a_design_the_proof_refuses_is_witnessed_with_every_input_free(engine):
    design = {"two.sv": TWO_EDGES}
    assert prove(design).status == "unsupported"
    result = ceiling.closure(design, engine=engine)
    assert result.status == "ok", result.reason
    assert result.witness.clock is None and result.witness.clocks == ["clk"]
    assert result.not_replayed == {"fast": [], "verilator": []}
    assert result.undecided == 0, json.dumps(result.to_json())
    assert sum(m.total for m in result.metrics.values()) == sum(m.witnessed for m in result.metrics.values())


@pytest.mark.slow
def test_a_claim_the_replay_does_not_cover_is_reported_not_counted(engine, monkeypatch):
    """The replay is the judge: a testbench that stops before the step that reaches
    `c == 20` leaves the model's claims of that step uncovered; they are listed (a model bug
    in real use) and not witnessed."""
    real = ceiling.to_testbench

    def short(witness, instance="dut", half_period=5):
        # a flag register claimed at step t was set at the edge of step t - 1: stop before it
        cut = max(witness.claimed.values()) - 1
        short.late = {k for k, step in witness.claimed.items() if step >= cut}
        witness.steps = witness.steps[:cut]
        return real(witness, instance, half_period)

    monkeypatch.setattr(ceiling, "to_testbench", short)
    result = ceiling.closure({"deep.sv": DEEP}, engine=engine)
    assert result.status == "ok", result.reason
    for name in ("fast", "verilator"):
        missing = set(result.not_replayed[name])
        assert missing and missing <= short.late, (name, sorted(missing))
    assert result.undecided >= len(result.not_replayed["verilator"])
    assert result.proved_but_covered == []


@pytest.mark.slow
@pytest.mark.parametrize("pid", CI_TIER)
def test_cid012_closure(engine, pid):
    """The CI tier of the closure: every claim replays, no proved point is covered, and the
    points left undecided are few."""
    result = ceiling.closure(rtl_files(cid012_rows()[pid]), engine=engine)
    assert result.status == "ok", result.reason
    assert not any(result.not_replayed.values()), result.not_replayed
    assert result.proved_but_covered == []
    assert result.undecided == 0, json.dumps(result.to_json())


@pytest.mark.slow
@pytest.mark.parametrize("pid", CI_TIER + tuple(sorted(DESIGNS)))
def test_random_stimulus_never_covers_a_proved_point(engine, pid):
    """Soundness: every input free (resets included), three seeds, both engines."""
    design = {pid: DESIGNS[pid]} if pid in DESIGNS else rtl_files(cid012_rows()[pid])
    result = ceiling.soundness(design, seeds=(1, 2, 3), steps=300, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved > 0
    assert result.covered == []


@pytest.mark.slow
def test_problems_ceiling_and_the_results_undecided_points(tmp_path: Path):
    """`reward-service problems --ceiling --json` classifies ring_token_0004's points (its
    `default:` line proved, every other point witnessed) and keeps the closure; a sample's
    result counts as undecided the points it did not cover, until the closure is kept: then
    none."""
    from reward_service.engine import Engine
    from reward_service.models import SvTestbench
    from reward_service.problems import load_problems
    from reward_service.settings import Settings

    pid = "cvdp_copilot_ring_token_0004"
    engine = Engine(Settings(cache_dir=tmp_path, result_cache=False))
    request = load_problems(CID012)[pid].request(
        SvTestbench(files={"weak.sv": (STIMULUS / pid / "weak.sv").read_text()})
    )
    before = engine.score(request)
    assert before.status == "ok", before.message
    for m, c in before.coverage.metrics.items():
        assert c.undecided == c.total - c.unreachable - c.covered, m  # no proved point is covered
    assert sum(c.undecided or 0 for c in before.coverage.metrics.values()) > 0

    env = {**os.environ, "REWARD_SERVICE_CACHE_DIR": str(tmp_path)}
    args = ["problems", "--problems", str(CID012), "--ceiling", "--only", pid, "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "reward_service", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=900
    )
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert row["id"] == pid and row["status"] == "ok"
    assert row["metrics"] == {
        "line": {"total": 6, "unreachable": 1, "witnessed": 5, "undecided": 0},
        "branch": {"total": 4, "unreachable": 0, "witnessed": 4, "undecided": 0},
        "toggle": {"total": 46, "unreachable": 0, "witnessed": 46, "undecided": 0},
        "expr": {"total": 3, "unreachable": 0, "witnessed": 3, "undecided": 0},
    }
    after = engine.score(request)
    assert all(c.undecided == 0 for c in after.coverage.metrics.values()), after.coverage.metrics
    assert after.coverage.overall == before.coverage.overall  # the figures do not move

    # eval-cvdp --ceiling reads the kept closure: the TARGET is shown attainable, nothing undecided
    completions = tmp_path / "C.jsonl"
    sample = {"problem_id": pid, "sample_id": "weak", "completion": (STIMULUS / pid / "weak.sv").read_text()}
    completions.write_text(json.dumps(sample) + "\n")
    report_json = tmp_path / "report.json"
    args = [
        "eval-cvdp",
        "--completions",
        str(completions),
        "--problems",
        str(CID012),
        "--out",
        str(tmp_path / "R.jsonl"),
    ]
    out = subprocess.run(
        [sys.executable, "-m", "reward_service", *args, "--ceiling", "--report-json", str(report_json)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(report_json.read_text())
    assert report["ceiling"] == {
        "problems": {
            pid: {
                "status": "ok",
                "undecided": 0,
                "shown_attainable_percent": 100.0,
                "target_percent": load_problems(CID012)[pid].target_percent,
                "target_shown_attainable": True,
            }
        },
        "not_shown": [],
    }
    assert "TARGET shown attainable for 1 of 1 problems." in out.stdout
    (record,) = [json.loads(line) for line in (tmp_path / "R.jsonl").read_text().splitlines()]
    assert record["undecided"] == {m: 0 for m in ("line", "branch", "toggle", "expr")}


UNDRIVEN_OUT = """module hole(input clk, input rst, input d, output reg q, output logic [3:0] y, output logic [1:0] z);
  always @(posedge clk) if (rst) q <= 1'b0; else q <= d;
  assign z[0] = q;
endmodule
"""


@pytest.mark.slow
def test_an_output_the_dut_never_drives_is_not_proved(engine):
    """Counterexample first: Verilator 5.052 counts the toggles of a DUT output port no
    statement drives when the testbench drives the net the port is connected to (a real run:
    `y[0..3]` and `z[1]` toggle). The integrity policy refuses such a testbench by default
    (`stimulus_policy.dut_writes`), but `allow` scores it: the prover must never prove them,
    and the closure (ports driven only) leaves them undecided."""
    design = {"hole.sv": UNDRIVEN_OUT}
    proof = prove(design)
    assert not [k for k in proof.unreachable if k[2] == "toggle" and k[3].split("[")[0] in ("y", "z")]
    result = ceiling.closure(design, engine=engine)
    assert result.status == "ok", result.reason
    assert result.proved_but_covered == []
    undecided = sorted(k[3] for k in result.undecided_keys)
    bits = [f"y[{i}]" for i in range(4)] + ["z[1]"]
    assert undecided == sorted(f"{b}:{t}" for b in bits for t in ("0->1", "1->0")), undecided
