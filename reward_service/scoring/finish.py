"""Finish: the reward, tool versions and total time of a result, and the naming of the scored
part of a completion (the last stage of :mod:`reward_service.scoring`)."""

from __future__ import annotations

import time

from pydantic import ValidationError

from reward_service.completion import Extraction
from reward_service.models import RewardSpec, ScoreRequest, ScoreResult, Status
from reward_service.reward import shape_reward
from reward_service.sandbox import Sandbox, SandboxError
from reward_service.sandbox.toolchain import versions


def finish(result: ScoreResult, request: ScoreRequest | None, start: float, sandbox: Sandbox) -> ScoreResult:
    """``result`` with its reward (the request's shaping; the default shaping when the request
    did not validate), the tool versions of ``sandbox`` and ``timings["total"]`` in ms since
    ``start`` (a ``time.perf_counter()`` reading)."""
    spec = request.reward if request is not None else RewardSpec()
    result.reward = shape_reward(result.status, result.coverage, result.passed, spec)
    try:
        result.versions = versions(sandbox)
    except SandboxError:  # e.g. the Docker daemon is gone: the result says so already
        result.versions = {"sandbox": sandbox.name}
    result.timings["total"] = (time.perf_counter() - start) * 1000
    return result


def name_block(result: ScoreResult, extraction: Extraction | None) -> ScoreResult:
    """Name the scored part of a completion in ``stimulus_block``, and in ``message`` too when
    the sample failed, other candidate blocks were passed over or a copy of a design module was
    left out (the user must see which)."""
    if extraction is not None:
        result.stimulus_block = extraction.description
        if extraction.notable or result.status != Status.ok:
            result.message = "; ".join(filter(None, [result.message, f"scored {extraction.description}"]))
    return result


def validation_message(exc: ValidationError) -> str:
    """The ``invalid_input`` message of a request that does not validate: its first five errors."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return "invalid request: " + "; ".join(parts)
