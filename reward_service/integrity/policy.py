"""The stimulus policy of a request and the refusal it leads to (docs/integrity.md).

The scoring engine calls :func:`check_stimulus` once per sample, before any simulator runs, for
every engine; a non-empty answer becomes :func:`refusal`'s result.
"""

from __future__ import annotations

from reward_service.models import (
    CocotbStimulus,
    Design,
    IntegrityViolation,
    ScoreRequest,
    ScoreResult,
    Status,
    SvTestbench,
)


def refuses_dut_writes(request: ScoreRequest) -> bool:
    """Whether ``request`` (resolved against its problem, which fills ``stimulus_policy`` in
    when the request leaves it out) refuses writes into the DUT: its ``stimulus_policy.dut_writes``
    when set, else refuse when the DUT scope is known (``coverage.scope``), else allow."""
    policy = request.stimulus_policy
    if policy is not None and policy.dut_writes is not None:
        return policy.dut_writes == "refuse"
    return bool(request.coverage.scope)


def check_stimulus(
    request: ScoreRequest, design: Design, stimulus: SvTestbench | CocotbStimulus
) -> list[IntegrityViolation]:
    """The writes into the DUT that ``request``'s policy refuses, found before the sample runs
    (SystemVerilog stimulus: :func:`reward_service.integrity.sv.dut_writes`); empty when the
    policy allows them or for cocotb stimulus (checked at its simulator-interface write path
    while it runs)."""
    if not isinstance(stimulus, SvTestbench) or not refuses_dut_writes(request):
        return []
    from reward_service.integrity.sv import SvSources, dut_writes  # pyslang: loaded on first use

    return dut_writes(
        SvSources(
            design=design.files,
            stimulus=stimulus.files,
            defines=request.build.defines,
            include_dirs=tuple(request.build.include_dirs),
        )
    )


#: Violations a refusal message names before it says how many more there are.
MESSAGE_VIOLATIONS = 8


def refusal(violations: list[IntegrityViolation]) -> ScoreResult:
    """The ``refused`` result of a sample with ``violations`` (non-empty): not passed, its
    message naming each write as ``file:line kind target`` (the first :data:`MESSAGE_VIOLATIONS`),
    every violation in ``violations``. The reward is set where every result gets it
    (:func:`reward_service.scoring.finish.finish`: the shaping's failure value)."""
    shown = [f"{v.file}:{v.line} {v.kind} {v.target}" if v.file else f"{v.kind} {v.target}" for v in violations]
    more = len(shown) - MESSAGE_VIOLATIONS
    text = "; ".join(shown[:MESSAGE_VIOLATIONS]) + (f"; and {more} more" if more > 0 else "")
    return ScoreResult(
        status=Status.refused,
        passed=False,
        message=(
            f"refused: the stimulus writes into the DUT instead of driving its ports ({text}); "
            "stimulus_policy.dut_writes=allow scores such stimulus (docs/integrity.md)"
        ),
        violations=violations,
    )
