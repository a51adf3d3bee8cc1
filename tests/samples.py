"""Score requests built from the real inputs in ../shared/cases, shared by the service tests
(Celery workers, the compose stack)."""

from __future__ import annotations

import functools
import json

from conftest import CID012, STIMULUS

from reward_service.models import CocotbStimulus, ScoreRequest, SvTestbench

ARBITER = "cvdp_copilot_fixed_arbiter_0004"
PIDS = [ARBITER, "cvdp_copilot_gray_to_binary_0014", "cvdp_copilot_Attenuator_0011"]


@functools.lru_cache(maxsize=1)
def problems():
    """The cid012 problems by id (reward_service.problems.load_problems)."""
    from reward_service.problems import load_problems

    return load_problems(CID012)


def icarus_case(pid: str, tb: str = "good", seed: int = 0, simulator: str = "icarus") -> ScoreRequest:
    """A CVDP cid012 problem scored with one of the case testbenches (good, weak, best)."""
    stim = SvTestbench(files={"tb.sv": (STIMULUS / pid / f"{tb}.sv").read_text()})
    return problems()[pid].request(stim, simulator=simulator, seed=seed)


def cocotb_case(pid: str = ARBITER, simulator: str = "icarus") -> ScoreRequest:
    """The case's cocotb test (expected.json "cocotb") against the problem's design."""
    exp = json.loads((STIMULUS / pid / "expected.json").read_text())["cocotb"]
    design = problems()[pid].design
    stim = CocotbStimulus(
        files={exp["file"]: (STIMULUS / pid / exp["file"]).read_text()},
        test_module=exp["test_module"],
        toplevel=exp["hdl_toplevel"],
    )
    return ScoreRequest(design=design, stimulus=stim, simulator=simulator)


def comparable(result, log: bool = True) -> dict:
    """The result without what differs between two runs of the same sample (timings, cache
    hits; cocotb logs hold wall-clock times)."""
    return result.model_dump(mode="json", exclude={"timings", "cache"} | (set() if log else {"log"}))
