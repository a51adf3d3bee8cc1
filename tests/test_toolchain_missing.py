"""A tool the request needs that the sandbox lacks is a ``sandbox_error`` naming the tool and how
to install it (ours, never the sample's 0, never cached), not a message about the sandbox."""

from __future__ import annotations

import dataclasses

from samples import icarus_case

from reward_service.engine import Engine
from reward_service.sandbox.bwrap import BwrapSandbox
from reward_service.settings import Settings

PID = "cvdp_copilot_gray_to_binary_0014"


class NoYosysSandbox(BwrapSandbox):
    """bubblewrap whose toolchain has no yosys (as a host without it probes)."""

    def toolchain(self):
        return dataclasses.replace(super().toolchain(), yosys=None)


def request():
    req = icarus_case(PID, "best", simulator="verilator").model_copy(update={"engine": "fast"})
    assert req.coverage.exclude_unreachable is True  # a CVDP problem's default
    return req


def test_the_prover_without_yosys_is_a_sandbox_error_naming_it(tmp_path):
    engine = Engine(Settings(cache_dir=tmp_path, result_cache=True), sandbox=NoYosysSandbox())
    result = engine.score(request())
    assert result.status == "sandbox_error" and result.reward is None
    assert "yosys is not installed" in result.message and "scripts/install.sh" in result.message, result.message
    assert engine.score(request()).cache.result is False  # never cached


def test_the_same_request_with_yosys_proves(tmp_path):
    result = Engine(Settings(cache_dir=tmp_path, result_cache=False), sandbox=BwrapSandbox()).score(request())
    assert result.status == "ok", result.message
    assert result.coverage.unreachable_note == (
        "every coverage point counts: the unreachability proof found no point that no stimulus can cover"
    )
