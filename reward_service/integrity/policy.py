"""The stimulus policy of a request and the refusal it leads to (docs/integrity.md).

The scoring engine calls :func:`check_stimulus` once per sample, before any simulator runs, for
every engine; violations found become :func:`refusal`'s result, and the DUT parameter overrides
go on the scored result either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reward_service.models import (
    CocotbStimulus,
    Design,
    IntegrityViolation,
    ParameterOverride,
    ScoreRequest,
    ScoreResult,
    Status,
    StimulusRace,
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


@dataclass(frozen=True)
class StimulusCheck:
    """What :func:`check_stimulus` found: the ``violations`` the policy refuses (empty: score the
    sample), the DUT ``parameter_overrides`` the stimulus makes and its testbench-DUT ``races``
    (both reported on the result), and ``scheduled``: the stimulus files as the simulators must
    compile them so those races go the documented way (None: as written;
    :func:`reward_service.integrity.races.scheduled_files`)."""

    violations: list[IntegrityViolation] = field(default_factory=list)
    parameter_overrides: list[ParameterOverride] = field(default_factory=list)
    races: list[StimulusRace] = field(default_factory=list)
    scheduled: dict[str, str] | None = None


def check_stimulus(request: ScoreRequest, design: Design, stimulus: SvTestbench | CocotbStimulus) -> StimulusCheck:
    """Check ``stimulus`` against ``request``'s policy before the sample runs. SystemVerilog
    stimulus (:func:`reward_service.integrity.sv.check`): its writes into the DUT when the policy
    refuses them (:func:`refuses_dut_writes`), an override of a parameter the policy pins
    (kind ``parameter_override``), and every DUT parameter override it makes; under every
    policy, an `` `include`` that read a host file not of the request (kind
    ``include_outside_request``, nothing else reported) and host code run in the simulator
    after preprocessing (kind ``host_code``: `$c` or a DPI import/export however macros spell
    it; nothing else reported). cocotb stimulus
    is checked at its simulator-interface write path while it runs: nothing here."""
    if not isinstance(stimulus, SvTestbench):
        return StimulusCheck()
    from reward_service.integrity import races, sv  # pyslang: loaded on first use

    sources = sv.SvSources(
        design=design.files,
        stimulus=stimulus.files,
        defines=request.build.defines,
        include_dirs=tuple(request.build.include_dirs),
    )
    found = sv.check(sources)
    if found.foreign_files:  # refused under every policy: the file is not part of the request
        return StimulusCheck(
            [
                IntegrityViolation(
                    kind="include_outside_request",
                    target=path,
                    message=f"an `include reads {path}, a file that is not part of the request",
                )
                for path in found.foreign_files
            ]
        )
    if found.host_code:  # refused under every policy: the stimulus could forge its coverage
        return StimulusCheck(
            [
                IntegrityViolation(
                    kind="host_code",
                    file=file,
                    line=line,
                    target=what,
                    message=f"{what} runs host code inside the simulator (Verilator $c / DPI); "
                    "stimulus may not use it, it could forge coverage",
                )
                for file, line, what in found.host_code
            ]
        )
    violations = list(found.violations) if refuses_dut_writes(request) else []
    pinned = set(request.stimulus_policy.pinned_parameters) if request.stimulus_policy else set()
    for site in found.overrides:
        o = site.override
        if o.name in pinned or "*" in pinned:
            violations.append(
                IntegrityViolation(
                    kind="parameter_override",
                    file=site.file,
                    line=site.line,
                    target=f"{o.instance}.{o.name}",
                    message=f"sets pinned parameter {o.name} = {o.value} (the design's: {o.default})",
                )
            )
    violations.sort(key=lambda v: (v.file or "", v.line or 0, v.target, v.kind))
    found_races = [
        StimulusRace(
            kind="read" if r.kind == "read" else "write",
            file=r.file,
            line=r.line,
            signal=r.signal,
            edge=r.edge,
            dut=f"{r.dut_file}:{r.dut_line}",
            dut_scope=r.dut_scope,
            ordered=r.ordered,
        )
        for r in found.races
    ]
    scheduled = races.scheduled_files(stimulus.files, found.schedule_edits) if found.schedule_edits else None
    if (
        scheduled is not None
        and refuses_dut_writes(request)
        and not races.only_delays_added(stimulus.files, found.schedule_edits)
    ):
        # what the simulators compile is checked too: an insertion must never change what the
        # stimulus writes (the check above saw the text as written); when the two texts differ
        # token for token only by the inserted `#0`s they write the same, unchecked
        again = sv.check(replace(sources, stimulus=scheduled))
        seen = {(v.kind, v.target) for v in violations}
        violations += [v for v in again.violations if (v.kind, v.target) not in seen]
        violations.sort(key=lambda v: (v.file or "", v.line or 0, v.target, v.kind))
    return StimulusCheck(violations, [site.override for site in found.overrides], found_races, scheduled)


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
    if any(v.kind == "include_outside_request" for v in violations):
        message = (
            f"refused: an `include of the stimulus names a file that is not part of the request ({text}); "
            "every included file must be one of the request's files (docs/integrity.md)"
        )
    elif any(v.kind == "host_code" for v in violations):
        message = (
            f"refused: the stimulus runs host code inside the simulator ({text}): Verilator $c and DPI "
            "imports/exports are refused under every policy, it could forge coverage (docs/integrity.md)"
        )
    elif all(v.kind == "parameter_override" for v in violations):
        message = f"refused: the stimulus overrides DUT parameters the problem pins ({text}) (docs/integrity.md)"
    else:
        message = (
            f"refused: the stimulus writes into the DUT instead of driving its ports ({text}); "
            "stimulus_policy.dut_writes=allow scores such stimulus (docs/integrity.md)"
        )
    return ScoreResult(status=Status.refused, passed=False, message=message, violations=violations)
