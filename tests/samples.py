"""Score requests built from the real inputs in ../shared/cases, shared by the service tests
(Celery workers, the compose stack)."""

from __future__ import annotations

import functools
import json

from conftest import ADVERSARIAL, CID012, STIMULUS, cid012_rows, rtl_files

from reward_service.models import CocotbStimulus, ScoreRequest, SvTestbench

ARBITER = "cvdp_copilot_fixed_arbiter_0004"
ATTENUATOR = "cvdp_copilot_Attenuator_0011"
PIDS = [ARBITER, "cvdp_copilot_gray_to_binary_0014", ATTENUATOR]


@functools.lru_cache(maxsize=1)
def problems():
    """The cid012 problems by id (reward_service.problems.load_problems)."""
    from reward_service.problems import load_problems

    return load_problems(CID012)


@functools.cache
def attenuator_rtl() -> dict[str, str]:
    """The Attenuator's RTL files by name (read at first use, not at import: a module using it
    still collects on a checkout without the shared cases)."""
    return rtl_files(cid012_rows()[ATTENUATOR])


@functools.cache
def attenuator_weak() -> str:
    """The Attenuator's weak.sv stimulus case: 42 of 56 toggle points (reward 1.9375)."""
    return (STIMULUS / ATTENUATOR / "weak.sv").read_text()


@functools.cache
def adversarial_counter() -> str:
    """dut_counter.v of adversarial case 12: an 8-bit counter, the small design of the cocotb tests."""
    return (ADVERSARIAL / "12-hang-no-finish-zero-delay" / "dut_counter.v").read_text()


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
