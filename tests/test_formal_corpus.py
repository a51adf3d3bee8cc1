"""The unreachability proofs (reward_service.formal) checked against engineers' testbenches: the
cocotb corpus (shared/cases/cvdp/cocotb_corpus.jsonl, read as tests/test_cocotb_corpus.py
reads it). A point the prover calls unreachable must never be covered by any of the corpus's
cocotb tests (a proof of a covered point would raise pass rates), and the engine, judging with
``exclude_unreachable``, excludes exactly the proved points: never a covered one, never one the
run did not enumerate.

The items: every corpus item whose design's proof runs to a verdict and proves some point
unreachable (bench/formal_cid012.py --corpus, 5 s per step: of the 112 designs 62 are proved,
8 in part, 19 time out, 23 are unsupported -- memories, latches, several clock edges, yosys
errors; 41 prove some point), less those decided only in part or by the one-by-one runs (their
verdicts depend on the load: up to 100 s each), Min_Hamming_Distance_Finder_0001 (its cocotb
test hits the 120 s limit on the fast path) and word_change_detector_0015 (this test found its
36 proved points covered: a signal with two drivers, now refused by the prover). Each runs on the fast path (Verilator's points on
Icarus); three run on Verilator too, so the proof's keys are also checked against Verilator's
own coverage.dat records. Proofs are cached in the shared test cache (``<cache>/formal``, as
the engine caches them), so a second run only simulates.
"""

from __future__ import annotations

import pytest
from test_cocotb_corpus import ROWS, outcome, request

from reward_service.fastcov.expr import begin_blocks_are_lists
from reward_service.formal.exclude import key_of
from reward_service.formal.prover import prove

CODE = ("line", "branch", "toggle", "expr")

#: item -> points its design's proof calls unreachable (expression points included: bcd_adder's
#: two ``add_sub ?`` conditions, tied to 0 by its top; multiplexer's ``HAS_DEFAULT && ...`` with
#: the parameter 0; load_store_unit's ``!two_transactions`` = 0 in an ``else if`` reached only
#: with ``two_transactions`` 0; cic_decimator's ``for (int i = 0; i < M-1; ...)`` body in its
#: comb-stage generate block, M = 1, since generate-block flags are modelled)
ITEMS: dict[str, int] = {
    "cvdp_agentic_axi4lite_to_pcie_config_0005": 105,
    "cvdp_agentic_bcd_adder_0004__rtl_from__cvdp_agentic_bcd_adder_0011": 7,
    "cvdp_agentic_bcd_adder_0011": 7,
    "cvdp_agentic_cic_decimator_0001__rtl_from__cvdp_agentic_cic_decimator_0004": 3,
    "cvdp_agentic_cic_decimator_0004": 3,
    "cvdp_agentic_csr_using_apb_interface_0001__rtl_from__cvdp_agentic_csr_using_apb_interface_0010": 16,
    "cvdp_agentic_csr_using_apb_interface_0010": 16,
    "cvdp_agentic_door_lock_0001__rtl_from__cvdp_agentic_door_lock_0003": 1,
    "cvdp_agentic_door_lock_0005": 1,
    "cvdp_agentic_fixed_arbiter_0004": 1,
    "cvdp_agentic_multiplexer_0001__rtl_from__cvdp_agentic_multiplexer_0003": 2,
    "cvdp_agentic_multiplexer_0003": 2,
    "cvdp_agentic_nbit_swizzling_0001__rtl_from__cvdp_agentic_nbit_swizzling_0005": 1,
    "cvdp_agentic_sorter_0007": 6,
    "cvdp_agentic_ttc_lite_0001__rtl_from__cvdp_agentic_ttc_lite_0007": 32,
    "cvdp_agentic_ttc_lite_0004": 32,
    "cvdp_agentic_universal_shift_reg_0001__rtl_from__cvdp_agentic_universal_shift_reg_0003": 1,
    "cvdp_copilot_64b66b_decoder_0020": 16,
    "cvdp_copilot_64b66b_encoder_0020": 2,
    "cvdp_copilot_IIR_filter_0015": 290,
    "cvdp_copilot_binary_to_BCD_0034": 25,
    "cvdp_copilot_coffee_machine_0003": 2,
    "cvdp_copilot_cont_adder_0040": 2,
    "cvdp_copilot_encoder_8b10b_0023": 67,
    "cvdp_copilot_gcd_0033": 2,
    "cvdp_copilot_gf_multiplier_0045": 9,
    "cvdp_copilot_load_store_unit_0016": 42,
    "cvdp_copilot_mem_allocator_0006": 2,
    "cvdp_copilot_montgomery_0006": 24,
    "cvdp_copilot_ring_token_0009": 1,
    "cvdp_copilot_sorter_0066": 4,
    "cvdp_copilot_static_branch_predict_0032": 8,
    # + 36 toggles of map_idx's constant bits (each element a lane of MAPPING): the element bits
    # a constant 0 holds never toggle, a constant 1 never falls (its rise is time 0's settling)
    "cvdp_copilot_swizzler_0023": 37,
    "cvdp_copilot_ttc_lite_0013": 32,
    "cvdp_copilot_ttc_lite_0016": 32,
    "cvdp_copilot_vending_machine_0009": 8,
    "cvdp_copilot_wb2ahb_0005": 12,
}
#: The counts that differ under Verilator 5.052's expression point model (REWARD_SERVICE_VERILATOR=
#: pinned): it counts a begin block's points at the block's end (docs/fastcov-expr.md), so the
#: prover can place the checks of a ``for`` body's block (5.48: the loop's own list, left out) and
#: sees a case item's block only in its item. swizzler: ``map_idx[i] >= 0`` and ``map_idx[i] < N``
#: false (a 3-bit index, N = 8); axi4lite: ``wstrb_reg[i]`` set in PCIE_WRITE's loop, ``arready``
#: 1 in READ_ADDR's ``arvalid && !arready``, ``pcie_cfg_rd_en`` 0 in SEND_READ_RESPONSE's condition.
ON_PINNED: dict[str, int] = {"cvdp_agentic_axi4lite_to_pcie_config_0005": 108, "cvdp_copilot_swizzler_0023": 39}

#: run on Verilator too: the proof's keys against Verilator's own coverage.dat records (the last
#: two have a fully decoded 2-bit case in a combinational block, evaluated before the cocotb
#: test drives its selector: the fast path must not count its ``default``, as Verilator does not)
ON_VERILATOR = {
    "cvdp_copilot_gcd_0033",
    "cvdp_agentic_nbit_swizzling_0001__rtl_from__cvdp_agentic_nbit_swizzling_0005",
    "cvdp_copilot_load_store_unit_0016",
}

pytestmark = pytest.mark.skipif(not ROWS, reason="the cocotb corpus is not there")


@pytest.fixture(scope="module")
def proofs(shared_cache_dir):
    """One proof per item, in the engine's cache (the verdict does not depend on the stimulus)."""
    out = {}
    for item_id in ITEMS:
        row = ROWS[item_id]
        out[item_id] = prove(
            {p: row["rtl"][p] for p in row["rtl_sources_order"]}, row["toplevel"], cache_dir=shared_cache_dir / "formal"
        )
    return out


def _cases():
    for item_id in sorted(ITEMS):
        yield pytest.param(item_id, "fast", id=f"{item_id}-fast")
        if item_id in ON_VERILATOR:
            yield pytest.param(item_id, "verilator", id=f"{item_id}-verilator")


@pytest.mark.slow
@pytest.mark.parametrize("item_id,engine_name", list(_cases()))
def test_no_covered_point_of_the_corpus_is_proved_unreachable(engine, proofs, item_id, engine_name):
    row, proof = ROWS[item_id], proofs[item_id]
    dead = set(proof.unreachable)
    want = ON_PINNED.get(item_id, ITEMS[item_id]) if begin_blocks_are_lists() else ITEMS[item_id]
    assert proof.status == "proved" and sum(u for _, u in proof.per_metric.values()) == want
    req = request(row, simulator="verilator")
    req["engine"] = engine_name
    req["coverage"] = {"exclude_unreachable": True}
    scored = engine.scored(req)
    result = scored.result
    assert result.status == "ok", outcome(result)
    assert len(result.tests) == row["expected_icarus"]["tests"] and all(t.passed for t in result.tests), outcome(result)
    code = [p for p in scored.points if p.metric in CODE]
    assert len(code) == sum(m.total for m in result.coverage.metrics.values()) > 0
    keys = {key_of(p) for p in code}
    # the proof speaks of the run's points: every proved key is one the run enumerated
    assert dead <= keys, sorted(dead - keys)[:5]
    covered = {key_of(p) for p in code if p.covered}
    assert not covered & dead, sorted(covered & dead)
    # the engine applied the proof to the cocotb toplevel and excluded exactly the proved points
    assert "every coverage point counts" not in (result.coverage.unreachable_note or ""), (
        result.coverage.unreachable_note
    )
    for metric, entry in result.coverage.metrics.items():
        assert entry.unreachable == sum(1 for p in code if p.metric == metric and key_of(p) in dead), metric
    assert sum(m.unreachable for m in result.coverage.metrics.values()) == sum(1 for p in code if key_of(p) in dead) > 0
    assert not {(u.file, u.line, u.metric, u.detail) for u in result.uncovered} & dead
    assert result.coverage.overall_reachable >= result.coverage.overall
