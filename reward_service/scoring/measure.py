"""Measure: turn a simulator run into a result and its coverage points: build failures, the
DUT instance's points, per-metric summary, proved-unreachable points, targets, status."""

from __future__ import annotations

import re
from pathlib import Path

from reward_service import hdl
from reward_service.coverage import parse_coverage_dat, parse_functional_yaml, summarise
from reward_service.coverage.instances import in_scope, instance_paths, merge_instances
from reward_service.coverage.points import CoveragePoint
from reward_service.coverage.verilator_dat import CoverageFileError
from reward_service.models import (
    CocotbStimulus,
    ScoreResult,
    Status,
    SvTestbench,
)
from reward_service.reward import check_targets, targets_met
from reward_service.safe_io import UnsafeOutput
from reward_service.sandbox import Sandbox, SandboxError
from reward_service.scoring.classify import classify, first_error, tool_internal_error, unsupported_note
from reward_service.scoring.types import Prepared, Prover, Scored
from reward_service.simulators.base import SimRun, SimulatorBackend


def measure(
    prepared: Prepared,
    simulator: SimulatorBackend,
    run: SimRun,
    sandbox: Sandbox,
    cache_dir: Path,
    prover: Prover | None = None,
) -> Scored:
    """The result of ``run`` (``simulator``'s run of ``prepared``) with the points behind it:
    the build's failure, or the DUT instance's coverage (``coverage.dat``, the fast path's flags,
    cocotb-coverage bins) summarised per metric, the points proved unreachable (``prover``, the
    engine's plug-in, runs in ``sandbox`` with its verdicts cached under ``cache_dir/formal``),
    the targets judged, and the status (:func:`~reward_service.scoring.classify.classify`).
    Raises ``SandboxError`` when the request asks for proved points (``exclude_unreachable``)
    and the engine was given no prover."""
    request = prepared.request
    spec = request.coverage
    if run.build_failed:
        build = run.build
        assert build is not None
        if build.timed_out:
            return Scored(
                ScoreResult(
                    status=Status.timeout,
                    log=build.output,
                    message=f"build exceeded its {request.limits.compile_s:g} CPU-second limit",
                )
            )
        if build.oom or build.pids_exhausted:
            return Scored(
                ScoreResult(
                    status=Status.resource_limit,
                    log=build.output,
                    message=f"build hit a resource limit ({build.limit_hit})",
                )
            )
        internal = tool_internal_error(build.output)
        if internal is not None and not _renames_files(prepared.stimulus):
            raise SandboxError(
                f"{simulator.name}'s build stopped on an internal error of the tool, not of the sample: {internal}"
            )
        message = f"{simulator.name} rejected the design or stimulus: {first_error(build.output)}"
        groups = _covergroups(prepared.stimulus)
        if groups and simulator.name in ("icarus", "fast"):  # both compile with Icarus
            use = "--engine verilator / engine" if simulator.name == "fast" else "--simulator verilator / simulator"
            message = (
                f"{simulator.name} rejected the design or stimulus: Icarus Verilog 11 does not "
                f"support covergroups, and the testbench declares {groups} (use {use}=verilator, "
                f"where they compile but are not measured); first error: {first_error(build.output)}"
            )
        note = unsupported_note(list(prepared.stimulus.files.values()), build.output)
        if note:
            message = f"{message} ({note})"
        return Scored(ScoreResult(status=Status.compile_error, log=build.output, message=message))
    runres = run.run
    assert runres is not None
    if run.violations:  # the stimulus wrote into the DUT: nothing it made the DUT do is measured
        return Scored(
            ScoreResult(
                status=Status.refused,
                message="; ".join([v.message for v in run.violations[:5]] + run.notes),
                violations=run.violations,
                tests=run.tests,
                log=runres.output,
                ended_by=run.ended_by,
            )
        )
    points: list[CoveragePoint] = []
    notes: list[str] = list(run.notes)
    if run.coverage_dat is not None:
        try:
            points = parse_coverage_dat(run.coverage_dat, set(prepared.design.files))
        except (CoverageFileError, UnsafeOutput, OSError) as exc:
            notes.append(str(exc))
    fast_points = run.points  # the fast path's flags (fastcov.backend)
    if fast_points is not None:
        points = list(fast_points)
    for path in run.functional:
        try:
            points.extend(parse_functional_yaml(path))
        except (ValueError, OSError) as exc:  # UnsafeOutput is a ValueError
            notes.append(f"functional coverage export unreadable: {exc}")
    tests = run.tests
    unavailable = simulator.unavailable(list(spec.metrics), spec.fsm)
    if "functional" in spec.metrics and not run.functional:
        unavailable["functional"] = _no_functional_reason(prepared.stimulus)
    has_code_coverage = run.coverage_dat is not None or fast_points is not None
    # The DUT instance's own coverage: code points come per instance (Verilator records the
    # instance in `h`); only the DUT instance's hierarchy counts when the request names it
    # (a cocotb toplevel is the DUT as a whole), merged as Verilator merges instances.
    scope_found, dut_scope = None, None
    if spec.scope and has_code_coverage and isinstance(prepared.stimulus, SvTestbench):
        top = prepared.stimulus.top
        assert top is not None  # prepare() found the testbench top
        dut_scope = f"{top}.{spec.scope}"
        dut_hiers = {p.hier for p in points if p.identity}
        scope_found = any(in_scope(h, dut_scope) for h in dut_hiers)
        if dut_hiers and not scope_found:
            report, _ = summarise(merge_instances(points), list(spec.metrics), unavailable, spec.weights)
            report.scope, report.scope_found = spec.scope, False
            found = instance_paths(dut_hiers, top)
            # the testbench's instances of design modules and the paths to them (not their insides)
            design_modules = {m for t in prepared.design.files.values() for m in hdl.module_names(t)}
            named = {
                n for t in prepared.stimulus.files.values() for m in design_modules for n in hdl.instance_names(t, m)
            }
            ends = [f for f in found if f.split(".")[-1] in named]
            found = [f for f in found if any(e == f or e.startswith(f + ".") for e in ends)] or found
            paths = [f for f in found if f.split(".")[-1] == spec.scope.split(".")[-1]]
            path_hint = f"; a DUT below the top is named by its path: `{paths[0]}`" if paths else ""
            return Scored(
                ScoreResult(
                    status=Status.invalid_input,
                    coverage=report,
                    log=runres.output,
                    message=f"the DUT is not instantiated as `{spec.scope}` under `{top}` "
                    f"(found: {', '.join(found[:20])}{' ...' if len(found) > 20 else ''}){path_hint}",
                )
            )
    points = merge_instances(points, dut_scope)
    report, uncovered = summarise(points, list(spec.metrics), unavailable, spec.weights)
    report.scope, report.scope_found = spec.scope, scope_found
    judged = report  # what the targets are judged on
    cacheable = True
    proved: dict[tuple[str, int, str, str], str] = {}
    if spec.exclude_unreachable is not None and has_code_coverage:
        if prover is None:
            raise SandboxError("the request asks for proved-unreachable points and this engine was given no prover")
        judged, uncovered, proved, cacheable = prover(
            prepared, points, report, unavailable, uncovered, sandbox, cache_dir
        )
        if judged is not report:  # points excluded: the user must see it where the result is read
            notes.append(report.unreachable_note or "")
    log_text = runres.output
    status, message = classify(run, runres, simulator.name, has_code_coverage, tests, request.limits.run_s)
    if status == Status.ok and report.overall is None and unavailable:
        # the metrics' own reasons say what would measure them (never "use Verilator" to a
        # Verilator user: a covergroup or a missing bin export is not fixed by a simulator)
        reasons = "; ".join(dict.fromkeys(unavailable.values()))
        notes.append(
            f"none of the requested metrics ({', '.join(spec.metrics)}) can be measured "
            f"with {simulator.name}, so the sample yields no coverage (reward "
            f"{'0' if request.reward.shaping == 'chorus' else 'failure value'}): {reasons}"
        )
    if notes:
        message = "; ".join([message, *notes]) if message else "; ".join(notes)
    result = ScoreResult(
        status=status,
        message=message,
        coverage=report,
        uncovered=uncovered,
        tests=tests,
        log=log_text,
        ended_by=run.ended_by,
    )
    result.passed = status == Status.ok and targets_met(judged, spec.targets)
    if status == Status.ok and report.overall is not None:
        result.targets = check_targets(judged, spec.targets, "reachable" if judged is not report else "raw")
    return Scored(result, points, cacheable=cacheable, unreachable=proved)


#: Why ``functional`` has no points when the SV stimulus declares covergroups. Measured
#: (tests/test_covergroups.py): Verilator 5.052 records a covergroup's bins (``t=covergroup``, in
#: the testbench's file: the stimulus's own bins, never DUT points) and get_coverage() returns
#: 0.00; Verilator 5.48 ignores covergroups (COVERIGN "Ignoring unsupported: covergroup", no
#: record); Icarus 11 rejects the syntax. Only cocotb-coverage bins count.
COVERGROUPS_UNMEASURED = "covergroups are not scored"
_NO_BINS = "the stimulus exported no cocotb-coverage bins"
_FUNCTIONAL_HOW = (
    "functional coverage counts the bins of cocotb-coverage coverpoints and crosses "
    "that a cocotb test exports (docs/coverage.md)"
)


#: A `` `line `` directive whose file name holds a colon: the simulators begin their error lines
#: with that name, so it could spell a tool's own message (request file names cannot hold one).
_COLON_LINE = re.compile(r'`line\b[ \t]+\S+[ \t]+"[^"\n]*:')


def _renames_files(stimulus: SvTestbench | CocotbStimulus) -> bool:
    """Whether the stimulus's HDL text could put a forged tool message at the start of a build
    log line (a `` `line `` name with a colon): then no such line is taken as the tool's own."""
    return any(_COLON_LINE.search(t) for n, t in stimulus.files.items() if n.lower().endswith(hdl.HDL_SUFFIXES))


def _covergroups(stimulus: SvTestbench | CocotbStimulus) -> str:
    """The covergroups the stimulus's HDL files declare, as ``cg, cg2 (tb.sv)``; "" if none."""
    found = [
        f"{', '.join(names)} ({name})"
        for name, text in stimulus.files.items()
        if name.lower().endswith(hdl.HDL_SUFFIXES) and (names := hdl.covergroups(text))
    ]
    return "; ".join(found)


def _no_functional_reason(stimulus: SvTestbench | CocotbStimulus) -> str:
    """Why a requested ``functional`` metric has no points: the stimulus's covergroups are not
    measured (named), or it exported no cocotb-coverage bins."""
    groups = _covergroups(stimulus)
    if groups:
        return (
            f"{COVERGROUPS_UNMEASURED} (their bins are the testbench's own, which Verilator records "
            f"in the testbench's file or ignores; the testbench declares {groups}) and Icarus 11 "
            f"cannot compile them; {_FUNCTIONAL_HOW}"
        )
    return f"{_NO_BINS}; {_FUNCTIONAL_HOW}"
