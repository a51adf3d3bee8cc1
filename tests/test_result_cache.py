"""The result cache answers an identical request from disk, and only an identical one."""

from __future__ import annotations

from conftest import STIMULUS, cid012_rows, rtl_files

from reward_service.engine import Engine
from reward_service.settings import Settings

PID = "cvdp_copilot_gray_to_binary_0014"


def test_identical_request_hits_and_changed_one_misses(tmp_path, shared_cache_dir):
    engine = Engine(Settings(cache_dir=tmp_path, result_cache=True))
    req = {
        "design": {"files": rtl_files(cid012_rows()[PID])},
        "simulator": "icarus",
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": (STIMULUS / PID / "good.sv").read_text()}},
    }
    first = engine.score(req)
    second = engine.score(req)
    assert first.status == "ok" and first.cache.result is False
    assert second.cache.result is True
    assert second.model_dump(exclude={"cache", "timings"}) == first.model_dump(exclude={"cache", "timings"})
    third = engine.score({**req, "seed": 7})
    assert third.cache.result is False
