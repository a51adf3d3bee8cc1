"""The build cache of cocotb DUT models (reward_service.simulators.cocotb_flow.cached_model) on
Verilator, against the real simulator: a stimulus file the design `include`s is part of the
model's key, so changing its text rebuilds the model (before, the stale one was reused); a
timed-out build and a build failure of ours (sandbox_error) are never published."""

from __future__ import annotations

import secrets
import uuid

import pytest
from test_cocotb_flow import TEST_B, log_of, make_job, model_key, outcomes, run_cocotb

from reward_service.engine import Engine
from reward_service.sandbox import SandboxError
from reward_service.settings import Settings
from reward_service.simulators import verilator

#: the counter steps by STEP, which the design takes from the stimulus's `include'd file
DUT = """module ctr(input logic clk, input logic rst, input logic en, output logic [3:0] q);
  `include "step.vh"
  always_ff @(posedge clk)
    if (rst) q <= 4'd0;
    else if (en) q <= q + STEP;
endmodule
"""
STEP_1 = "localparam logic [3:0] STEP = 4'd1;\n"
STEP_0 = "localparam logic [3:0] STEP = 4'd0;\n"

# TEST_B counts three cycles and asserts q == 3: true for STEP 1 only (STEP 0: q stays 0, no
# bit of q toggles)


def request(step: str, nonce: str) -> dict:
    """A Verilator cocotb request of the counter with ``step`` as the stimulus's ``step.vh``;
    ``nonce`` is an unused define: a key of this test run only (the test cache dir persists)."""
    return {
        "design": {"files": {"ctr.sv": DUT}, "toplevel": "ctr"},
        "stimulus": {
            "kind": "cocotb",
            "files": {"test_ctr.py": TEST_B, "step.vh": step},
            "test_module": "test_ctr",
        },
        "coverage": {"metrics": ["line", "toggle"]},
        "limits": {"run_s": 120},
        "build": {"defines": {"RS_TEST_NONCE": nonce}},
        "simulator": "verilator",
    }


@pytest.mark.slow
def test_changed_included_stimulus_file_rebuilds_the_verilator_model(shared_cache_dir, tmp_path):
    """Same design, same flags, another text of the `include'd stimulus file: the model is built
    anew (cache.build false) and the test and coverage follow the new text, as a build of it
    under another key measures. The unchanged text again is a cache hit (the cache is on)."""
    scorer = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False, work_root=tmp_path))
    nonce = secrets.token_hex(8)

    first = scorer.score(request(STEP_1, nonce))
    assert first.status == "ok" and first.engine == "verilator", first.message + first.log
    assert not first.cache.build and outcomes(first) == [("count", True)]
    again = scorer.score(request(STEP_1, nonce))
    assert again.cache.build and outcomes(again) == [("count", True)], again.message
    assert again.coverage == first.coverage

    changed = scorer.score(request(STEP_0, nonce))
    assert changed.status == "ok", changed.message + changed.log
    # a stale model (STEP 1) would pass the test and toggle q[1:0]
    assert not changed.cache.build and outcomes(changed) == [("count", False)], changed.message
    reference = scorer.score(request(STEP_0, secrets.token_hex(8)))
    assert not reference.cache.build and outcomes(reference) == [("count", False)]
    assert changed.coverage == reference.coverage
    assert changed.coverage.metrics["toggle"].covered < first.coverage.metrics["toggle"].covered


TOGGLE_TEST = "import cocotb\nfrom cocotb.triggers import Timer\n\n@cocotb.test()\nasync def t(dut):\n    await Timer(1, unit='ns')\n"


def toggler(root, cache_dir, mark: str, **limits):
    """A cocotb job of a one-flop design whose comment is ``mark`` (a fresh uuid: a model key
    no other test builds); ``limits`` as :class:`~reward_service.models.Limits`."""
    design = {
        "dut.sv": f"// {mark}\nmodule dut(input logic clk, output logic q);\n  always_ff @(posedge clk) q <= ~q;\nendmodule\n"
    }
    return make_job(root, design, {"test_t.py": TOGGLE_TEST}, "dut", "test_t", cache_dir, **limits)


def unpublished(cache_dir, key: str) -> bool:
    """Whether the cache holds neither the model of ``key`` nor a temp dir of its build."""
    models = cache_dir / "models"
    return not (models / key).exists() and not list(models.glob(f"tmp-{key[:16]}-*"))


@pytest.mark.slow
def test_timed_out_verilator_build_is_not_published(tmp_path, shared_cache_dir):
    """A build killed by the compile limit leaves nothing in the cache (no model, no temp dir);
    the same design with the default limit then builds (no stale or partial model is found)."""
    mark = str(uuid.uuid4())
    job = toggler(tmp_path / "slow", shared_cache_dir, mark, compile_s=0.2)
    out = run_cocotb(job, "verilator")
    assert out.build_failed and out.build.timed_out and not out.build_cached and out.run is None, log_of(out)
    assert unpublished(shared_cache_dir, model_key(job))
    again = toggler(tmp_path / "again", shared_cache_dir, mark)
    assert model_key(again) == model_key(job)  # the limits are not part of the key
    out = run_cocotb(again, "verilator")
    assert not out.build_failed and not out.build_cached and out.results_xml is not None, log_of(out)
    assert (shared_cache_dir / "models" / model_key(again) / "dut").is_file()


@pytest.mark.slow
def test_own_verilator_build_failure_is_a_sandbox_error_and_not_published(monkeypatch, tmp_path, shared_cache_dir):
    """Our own build failure (a forced include before the precompiled header of a split model,
    the flag order that broke larger models) raises SandboxError out of the cocotb flow, and
    the cache keeps neither a model nor the temp dir of the build."""
    flags = [*verilator.COCOTB_FLAGS, "-CFLAGS", "-include", "-CFLAGS", "stdio.h", "--output-split", "50"]
    monkeypatch.setattr(verilator, "COCOTB_FLAGS", flags)
    job = toggler(tmp_path / "job", shared_cache_dir, str(uuid.uuid4()), compile_s=900)
    with pytest.raises(SandboxError, match=r"\(DUT model\).*Vtop__pch\.h\.(fast|slow)"):
        run_cocotb(job, "verilator")
    assert unpublished(shared_cache_dir, model_key(job))
