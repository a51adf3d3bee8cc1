"""The scoring engine: prepare -> build -> run -> measure -> reward.

Plain Python with no web or queue code inside, so it runs the same in the CLI, a worker and
tests. :meth:`Engine.score` never raises for bad input: every outcome is a :class:`ScoreResult`
with its status (``sandbox_error`` for infrastructure failures, ``reward=None``).
"""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from reward_service import hdl
from reward_service.cache import ResultCache, request_key
from reward_service.completion import Extraction, ExtractionError, extract
from reward_service.coverage import parse_coverage_dat, parse_functional_yaml, summarise
from reward_service.coverage.instances import in_scope, instance_names, merge_instances
from reward_service.coverage.points import CoveragePoint
from reward_service.coverage.verilator_dat import CoverageFileError
from reward_service.models import (
    CocotbStimulus, Completion, Design, RewardSpec, ScoreRequest, ScoreResult, Status, SvTestbench,
)
from reward_service.reward import shape_reward, targets_met
from reward_service.safe_io import UnsafeOutput
from reward_service.sandbox import Sandbox, SandboxError, get_sandbox
from reward_service.settings import Settings, get_settings
from reward_service.simulators import get_simulator
from reward_service.simulators.base import Job, SimRun
from reward_service.simulators.toolchain import ToolMissing, versions

log = logging.getLogger(__name__)


#: Outcomes that depend on the machine (load, infrastructure), not only on the inputs.
_NOT_CACHED = {Status.sandbox_error, Status.timeout, Status.resource_limit}


class InvalidInput(ValueError):
    """The request cannot be simulated as given (reported as ``invalid_input``).
    ``stimulus_block``: the part of a completion that was checked, when there was one."""

    stimulus_block: str | None = None


@dataclass
class Prepared:
    """A request resolved to concrete files: design, stimulus, and what to measure."""

    request: ScoreRequest
    design: Design
    stimulus: SvTestbench | CocotbStimulus
    #: where a completion's stimulus came from (None for stimulus given as files)
    extraction: Extraction | None = None


class Engine:
    """Scores :class:`ScoreRequest` s. ``problems`` maps problem ids to objects with a
    ``request(stimulus)`` method (see :mod:`reward_service.problems`)."""

    def __init__(self, settings: Settings | None = None, sandbox: Sandbox | None = None,
                 problems: Mapping[str, Any] | None = None) -> None:
        self.settings = settings or get_settings()
        self.sandbox = sandbox or get_sandbox(self.settings.sandbox, self.settings)
        self.problems = dict(problems or {})
        self.results = ResultCache(self.settings.cache_dir / "results") if self.settings.result_cache else None

    # -- public -----------------------------------------------------------------------------
    def score(self, request: ScoreRequest | Mapping[str, Any]) -> ScoreResult:
        """Score one sample. Bad input -> ``invalid_input``; infrastructure failure ->
        ``sandbox_error`` (reward None); never raises for either."""
        start = time.perf_counter()
        try:
            if not isinstance(request, ScoreRequest):
                request = ScoreRequest.model_validate(request)
            prepared = self.prepare(request)
        except ValidationError as exc:
            return self._finish(ScoreResult(status=Status.invalid_input, message=_validation_message(exc)),
                                None, start)
        except (InvalidInput, ExtractionError) as exc:
            return self._finish(ScoreResult(status=Status.invalid_input, message=str(exc),
                                            stimulus_block=getattr(exc, "stimulus_block", None)),
                                request if isinstance(request, ScoreRequest) else None, start)
        timings = {"prepare": (time.perf_counter() - start) * 1000}
        try:
            t0 = time.perf_counter()
            tool_versions = versions(self.sandbox)  # probed once per process (seconds), then cached
            timings["toolchain"] = (time.perf_counter() - t0) * 1000
            key = request_key(prepared.request, prepared.design, prepared.stimulus, tool_versions)
            cached = self.results.get(key) if self.results is not None else None
            if cached is not None:
                cached.cache.result = True
                cached.timings = {**timings, "total": (time.perf_counter() - start) * 1000}
                return _name_block(cached, prepared.extraction)
            result = self._score_with_engine(prepared, timings)
            if prepared.request.report.points:  # asked for: lcov/HTML reports (reward_service.reports)
                from reward_service.reports.detail import coverage_detail

                result.detail = coverage_detail(
                    result._points, prepared.design.files,
                    [m for m, c in result.coverage.metrics.items() if c.available])
        except (SandboxError, ToolMissing, OSError) as exc:
            log.exception("sandbox failure")
            result = ScoreResult(status=Status.sandbox_error, message=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not look like the model's fault
            log.exception("internal error while scoring")
            result = ScoreResult(status=Status.sandbox_error, message=f"internal error: {type(exc).__name__}")
        result = self._finish(result, prepared.request, start)
        if self.results is not None and result.status not in _NOT_CACHED:
            self.results.put(key, result)
        # after the cache: another completion holding the same code keeps its own block name
        return _name_block(result, prepared.extraction)

    def prepare(self, request: ScoreRequest) -> Prepared:
        """Resolve problem id, completion text and the testbench top; check the inputs.
        Raises :class:`InvalidInput` or :class:`ExtractionError`."""
        if request.problem_id is not None:
            problem = self.problems.get(request.problem_id)
            if problem is None:
                raise InvalidInput(f"unknown problem_id {request.problem_id!r}")
            overrides = {k: getattr(request, k) for k in request.model_fields_set
                         if k not in ("problem_id", "design", "stimulus", "coverage")}
            base = problem.request(request.stimulus, **overrides)
            if "coverage" in request.model_fields_set:  # given coverage fields override the problem's
                given = request.coverage.model_dump(include=request.coverage.model_fields_set)
                overrides["coverage"] = base.coverage.model_copy(update=given)
                base = problem.request(request.stimulus, **overrides)
            request = base
        design = request.design
        assert design is not None
        design_modules = {m for text in design.files.values() for m in hdl.module_names(text)}
        stimulus, extraction = request.stimulus, None
        if isinstance(stimulus, Completion):
            extraction = extract(stimulus.text, toplevel=design.toplevel, design_modules=design_modules)
            stimulus = extraction.stimulus
        try:
            prepared = self._checked(request, design, stimulus, design_modules)
        except InvalidInput as exc:
            if extraction is None:
                raise
            named = InvalidInput(f"{exc} (scored {extraction.description})")
            named.stimulus_block = extraction.description
            raise named from exc
        prepared.extraction = extraction
        return prepared

    def _checked(self, request: ScoreRequest, design: Design, stimulus: SvTestbench | CocotbStimulus,
                 design_modules: set[str]) -> Prepared:
        """Check a resolved request's files and find the testbench top (``prepare``'s second
        half). Raises :class:`InvalidInput`."""
        _check_sources(design.files, "design")
        _check_sources(stimulus.files, "stimulus")
        _check_layout(list(design.files) + list(stimulus.files))
        _screen_stimulus(stimulus)
        dirs = hdl.search_dirs([*design.files, *stimulus.files], request.build.include_dirs)
        for name, macros in hdl.design_macros_set_by(dict(stimulus.files), dict(design.files), dirs).items():
            # the included design file is preprocessed after the stimulus's text: its macros would
            # change the DUT (a width, say) and so its coverage
            raise InvalidInput(f"the stimulus `includes design file {name!r} and sets macro(s) "
                               f"{', '.join(macros)} that it reads, which would change the DUT; set "
                               "design macros with build.defines (CLI --define) instead")
        if isinstance(stimulus, SvTestbench):
            stim_texts = [t for n, t in stimulus.files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)]
            top = stimulus.top or hdl.choose_top(stim_texts, design_modules)
            if top is None:
                raise InvalidInput("the testbench declares no top module (a module that nothing instantiates)")
            if not any(top in hdl.module_names(t) for t in stim_texts):
                raise InvalidInput(f"testbench top module {top!r} is not declared in the stimulus files")
            stimulus = stimulus.model_copy(update={"top": top})
            scope = request.coverage.scope
            if scope and not any(hdl.instantiates(t, None, scope) for t in stim_texts):
                found = sorted({i for t in stim_texts for m in design_modules for i in hdl.instance_names(t, m)})
                hint = f" (found instance(s): {', '.join(found)})" if found else " (no DUT instance found)"
                raise InvalidInput(f"the testbench must instantiate the DUT as `{scope}`{hint}")
        else:
            toplevel = stimulus.toplevel or design.toplevel
            if not toplevel:
                raise InvalidInput("cocotb stimulus needs a HDL toplevel (stimulus.toplevel or design.toplevel)")
            if toplevel not in design_modules:
                raise InvalidInput(f"HDL toplevel {toplevel!r} is not a module of the design")
            on_icarus = request.simulator.value == "icarus" and request.engine in (None, "fast") \
                or request.engine == "fast"
            if stimulus.runtime == "cocotb-1.9" and not on_icarus:
                raise InvalidInput("the cocotb 1.9 runtime runs on Icarus only: use simulator=icarus "
                                   "(CLI --simulator icarus) or engine=fast (--engine fast), or "
                                   "stimulus.runtime cocotb-2.1")
            if f"{stimulus.test_module}.py" not in stimulus.files:
                raise InvalidInput(f"test_module {stimulus.test_module!r} has no file {stimulus.test_module}.py")
            stimulus = stimulus.model_copy(update={"toplevel": toplevel})
        return Prepared(request=request, design=design, stimulus=stimulus)

    # -- internals ----------------------------------------------------------------------------
    def _score_with_engine(self, prepared: Prepared, timings: dict[str, float]) -> ScoreResult:
        """``request.engine`` fast/auto: the fast path with its fallback (docs/fastcov.md);
        otherwise ``request.simulator`` simulates."""
        if prepared.request.engine in ("fast", "auto"):
            t0 = time.perf_counter()
            from reward_service.fastcov import routing

            loaded = (time.perf_counter() - t0) * 1000
            if loaded > 1:  # the first fast sample of a process imports pyslang (~0.3 s)
                timings["fast_import"] = loaded
            return routing.simulate(self, prepared, timings)
        if prepared.request.engine == "verilator":
            return self._simulate(prepared, timings, simulator=get_simulator("verilator"))
        return self._simulate(prepared, timings)

    def _simulate(self, prepared: Prepared, timings: dict[str, float], simulator=None) -> ScoreResult:
        """Simulate with ``simulator`` (default: the request's) in a fresh work dir."""
        request, stimulus = prepared.request, prepared.stimulus
        simulator = simulator or get_simulator(request.simulator.value)
        root = Path(tempfile.mkdtemp(prefix="rs-", dir=self.settings.work_root))
        try:
            src = root / "src"
            files = {**prepared.design.files, **stimulus.files}
            for name, text in files.items():
                path = src / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            # Only compilation units go to the compiler: headers and `include'd files are
            # compiled where they are included (docs/coverage.md, "Files and folders").
            build = request.build
            dirs = hdl.search_dirs(list(files), build.include_dirs)
            included = hdl.included_files(files, dirs)
            data = [n for n in files if hdl.is_data_file(n)]
            job = Job(
                root=root, design_files=hdl.compilation_units(list(prepared.design.files), included),
                stimulus_files=hdl.compilation_units(list(stimulus.files), included)
                if isinstance(stimulus, SvTestbench) else [n for n in stimulus.files if not hdl.is_data_file(n)],
                include_files=[n for n in files if n.lower().endswith(hdl.HDL_SUFFIXES)
                               and (n in included or n.lower().endswith(hdl.HEADER_SUFFIXES))],
                data_files=data, include_dirs=dirs, defines=dict(build.defines),
                parameters=dict(build.parameters), plusargs=list(build.plusargs),
                limits=request.limits, sandbox=self.sandbox, cache_dir=self.settings.cache_dir,
                seed=request.seed, fsm=request.coverage.fsm, build_jobs=self.settings.build_jobs,
                top=getattr(stimulus, "top", None), toplevel=getattr(stimulus, "toplevel", None),
                test_module=getattr(stimulus, "test_module", None),
                cocotb_runtime=getattr(stimulus, "runtime", "auto"),
                cocotb_env=dict(getattr(stimulus, "env", {})),
            )
            t0 = time.perf_counter()
            if isinstance(stimulus, SvTestbench):
                run = simulator.run_sv(job)
            else:
                run = simulator.run_cocotb(job)
            if run.run is not None:
                run.notes.extend(_missing_data_notes(files, run.run.output))
            if run.build is not None:
                timings["build"] = run.build.duration_ms
            if run.run is not None:
                timings["run"] = run.run.duration_ms
            timings["simulate"] = (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            result = self._measure(prepared, simulator, run, job)
            timings["measure"] = (time.perf_counter() - t1) * 1000
            result.timings = timings
            result.cache.build = run.build_cached
            result.engine = simulator.name
            return result
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _measure(self, prepared: Prepared, simulator, run: SimRun, job: Job) -> ScoreResult:
        request = prepared.request
        spec = request.coverage
        if run.build_failed:
            build = run.build
            assert build is not None
            if build.timed_out:
                return ScoreResult(status=Status.timeout, log=build.output,
                                   message=f"build exceeded its {request.limits.compile_s:g} s limit")
            if build.oom or build.pids_exhausted:
                return ScoreResult(status=Status.resource_limit, log=build.output,
                                   message=f"build hit a resource limit ({build.limit_hit})")
            message = f"{simulator.name} rejected the design or stimulus: {_first_error(build.output)}"
            groups = _covergroups(prepared.stimulus)
            if groups and simulator.name in ("icarus", "fast"):  # both compile with Icarus
                use = "--engine verilator / engine" if simulator.name == "fast" else "--simulator verilator / simulator"
                message = (f"{simulator.name} rejected the design or stimulus: Icarus Verilog 11 does not "
                           f"support covergroups, and the testbench declares {groups} (use {use}=verilator, "
                           f"where they compile but are not measured); first error: {_first_error(build.output)}")
            return ScoreResult(status=Status.compile_error, log=build.output, message=message)
        runres = run.run
        assert runres is not None
        points: list[CoveragePoint] = []
        notes: list[str] = list(run.notes)
        if run.coverage_dat is not None:
            try:
                points = parse_coverage_dat(run.coverage_dat, set(prepared.design.files))
            except (CoverageFileError, UnsafeOutput, OSError) as exc:
                notes.append(str(exc))
        fast_points = getattr(run, "points", None)  # the fast path's flags (fastcov.backend)
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
            dut_scope = f"{prepared.stimulus.top}.{spec.scope}"
            dut_hiers = {p.hier for p in points if p.identity}
            scope_found = any(in_scope(h, dut_scope) for h in dut_hiers)
            if dut_hiers and not scope_found:
                report, _ = summarise(merge_instances(points), list(spec.metrics), unavailable, spec.weights)
                report.scope, report.scope_found = spec.scope, False
                found = instance_names(dut_hiers, prepared.stimulus.top)
                return ScoreResult(status=Status.invalid_input, coverage=report, log=runres.output,
                                   message=f"the DUT is not instantiated as `{spec.scope}` under "
                                           f"`{prepared.stimulus.top}` (found: {', '.join(found)})")
        points = merge_instances(points, dut_scope)
        report, uncovered = summarise(points, list(spec.metrics), unavailable, spec.weights)
        report.scope, report.scope_found = spec.scope, scope_found
        judged = report  # what the targets are judged on
        if spec.exclude_unreachable is not None and has_code_coverage:
            judged, uncovered, note = self._reachable(prepared, points, report, unavailable, uncovered)
            if note:
                notes.append(note)
        log_text = runres.output
        status, message = self._classify(run, runres, simulator.name, has_code_coverage, tests,
                                         request.limits.run_s)
        if status == Status.ok and report.overall is None and unavailable:
            # the metrics' own reasons say what would measure them (never "use Verilator" to a
            # Verilator user: a covergroup or a missing bin export is not fixed by a simulator)
            reasons = "; ".join(dict.fromkeys(unavailable.values()))
            notes.append(f"none of the requested metrics ({', '.join(spec.metrics)}) can be measured "
                         f"with {simulator.name}, so the sample yields no coverage (reward "
                         f"{'0' if request.reward.shaping == 'chorus' else 'failure value'}): {reasons}")
        if notes:
            message = "; ".join([message, *notes]) if message else "; ".join(notes)
        result = ScoreResult(status=status, message=message, coverage=report, uncovered=uncovered,
                             tests=tests, log=log_text, ended_by=run.ended_by)
        result.passed = status == Status.ok and targets_met(judged, spec.targets)
        result._points = points
        return result

    def _reachable(self, prepared: Prepared, points, report, unavailable, uncovered):
        """The report targets are judged on, the uncovered points and a note, with the points
        proved unreachable (docs/formal.md) counted in ``report`` and, when the request's
        ``exclude_unreachable`` is True, left out of the judged figure and of ``uncovered``."""
        from reward_service.formal.exclude import annotate
        from reward_service.formal.verdicts import applicable

        request, spec = prepared.request, prepared.request.coverage
        dead, _, why = applicable(prepared.design, prepared.stimulus, spec.scope, request.build.parameters,
                                  self.sandbox, self.settings.cache_dir / "formal")
        if dead is None:
            return report, uncovered, f"no point excluded as unreachable ({why})"
        reach, reach_uncovered = annotate(report, points, dead, list(spec.metrics), unavailable, spec.weights)
        if spec.exclude_unreachable:
            return reach, reach_uncovered, ""
        return report, uncovered, ""

    @staticmethod
    def _classify(run: SimRun, runres, sim_name: str, has_cov: bool, tests, run_s: float) -> tuple[Status, str]:
        if runres.output_flood:
            return Status.resource_limit, f"output flood: more than {runres.output_bytes // (1 << 20)} MiB written to stdout/stderr"
        if runres.oom:
            return Status.resource_limit, "memory limit exceeded (the simulation was killed)"
        if runres.pids_exhausted:
            return Status.resource_limit, "process limit exceeded (fork bomb?)"
        if runres.timed_out or run.ended_by == "timeout":
            hint = "" if tests else " (does the testbench end with $finish?)"
            return Status.timeout, (f"the simulation hit its {run_s:g} s run-time limit{hint}; coverage "
                                    "up to the kill is reported for information")
        if _file_too_large(runres):
            return Status.resource_limit, "a file written by the simulation exceeded the file-size limit"
        if run.not_run is not None:  # a cocotb run that ran no test: nothing the stimulus did is measured
            return run.not_run
        if sim_name in ("verilator", "fast") and not has_cov and run.results_xml is None:
            return Status.runtime_error, f"the simulation crashed without coverage data (exit {runres.exit_code}): {_first_error(runres.output)}"
        if run.ended_by == "error":
            return Status.runtime_error, (f"simulator runtime error: {_first_error(runres.output)} "
                                          "(coverage up to the error is reported for information)")
        if runres.exit_code is not None and runres.exit_code < 0:
            return Status.runtime_error, f"the simulation was killed by signal {-runres.exit_code}"
        ended = {"stop": "ended by $stop", "fatal": "ended by $fatal",
                 "no_events": "ended with no events left (no $finish)",
                 "sim_ended_early": "the HDL ended the simulation while the cocotb test was running"}
        notes = [ended.get(run.ended_by or "", "")]
        failed = [t for t in tests if not t.passed]
        if failed:
            notes.append(f"{len(failed)} of {len(tests)} cocotb tests failed")
        errors = _error_lines(runres.output)
        if errors:
            notes.append(f"the log reports {len(errors)} error line(s), first: {errors[0]}")
        return Status.ok, "; ".join(n for n in notes if n)

    def _finish(self, result: ScoreResult, request: ScoreRequest | None, start: float) -> ScoreResult:
        spec = request.reward if request is not None else RewardSpec()
        result.reward = shape_reward(result.status, result.coverage, result.passed, spec)
        try:
            result.versions = versions(self.sandbox)
        except SandboxError:  # e.g. the Docker daemon is gone: the result says so already
            result.versions = {"sandbox": self.sandbox.name}
        result.timings["total"] = (time.perf_counter() - start) * 1000
        return result


def _name_block(result: ScoreResult, extraction: Extraction | None) -> ScoreResult:
    """Name the scored part of a completion in ``stimulus_block``, and in ``message`` too when
    the sample failed, other candidate blocks were passed over or a copy of a design module was
    left out (the user must see which)."""
    if extraction is not None:
        result.stimulus_block = extraction.description
        if extraction.notable or result.status != Status.ok:
            result.message = "; ".join(filter(None, [result.message, f"scored {extraction.description}"]))
    return result


#: Why ``functional`` has no points when the SV stimulus declares covergroups. Measured
#: (tests/test_covergroups.py): Verilator 5.48 compiles a covergroup with COVERIGN warnings
#: ("Ignoring unsupported: covergroup"), writes no record of it to coverage.dat and
#: get_coverage() returns 0.00; Icarus 11 rejects the syntax. Only cocotb-coverage bins count.
COVERGROUPS_UNMEASURED = "covergroups are not measured by Verilator 5.48"
_NO_BINS = "the stimulus exported no cocotb-coverage bins"
_FUNCTIONAL_HOW = ("functional coverage counts the bins of cocotb-coverage coverpoints and crosses "
                   "that a cocotb test exports (docs/coverage.md)")


def _covergroups(stimulus: SvTestbench | CocotbStimulus) -> str:
    """The covergroups the stimulus's HDL files declare, as ``cg, cg2 (tb.sv)``; "" if none."""
    found = [f"{', '.join(names)} ({name})" for name, text in stimulus.files.items()
             if name.lower().endswith(hdl.HDL_SUFFIXES) and (names := hdl.covergroups(text))]
    return "; ".join(found)


def _no_functional_reason(stimulus: SvTestbench | CocotbStimulus) -> str:
    """Why a requested ``functional`` metric has no points: the stimulus's covergroups are not
    measured (named), or it exported no cocotb-coverage bins."""
    groups = _covergroups(stimulus)
    if groups:
        return (f"{COVERGROUPS_UNMEASURED} (it ignores them with a COVERIGN warning; the testbench "
                f"declares {groups}) and Icarus 11 cannot compile them; {_FUNCTIONAL_HOW}")
    return f"{_NO_BINS}; {_FUNCTIONAL_HOW}"


def _check_layout(names: list[str]) -> None:
    """All files go into one source dir: no two may share a name, and no name may be a
    directory of another (``a.sv`` and ``a.sv/tb.sv``)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"two files are named {name!r} (design and stimulus share one directory)")
        seen.add(name)
    dirs = {str(parent) for name in names for parent in PurePosixPath(name).parents if str(parent) != "."}
    both = sorted(dirs & seen)
    if both:
        raise InvalidInput(f"{both[0]!r} is both a file and a directory of other files")


#: Names the simulation's own outputs take in its cwd (Verilator's rs_main, cocotb, the fast
#: path): a data file may not stand there before the run.
_RESERVED_RUN_NAMES = ("coverage.dat", "results.xml")


def _check_sources(files: Mapping[str, str], what: str) -> None:
    """Each file is HDL, cocotb Python or a data file (hdl.DATA_SUFFIXES, text, copied into the
    simulation's cwd and never compiled). Raises :class:`InvalidInput`."""
    for name, text in files.items():
        if hdl.is_data_file(name):
            if name in _RESERVED_RUN_NAMES or name.startswith("rs_"):
                raise InvalidInput(f"{what} data file {name!r}: the name is one of the simulation's own "
                                   "outputs in its run dir (rename it or put it in a folder)")
            continue  # an empty data file is a valid (empty) input
        if hdl.is_vhdl(name, text):
            raise InvalidInput(f"{what} file {name!r} is VHDL: only Verilog/SystemVerilog (and cocotb Python) are supported")
        if not text.strip():
            raise InvalidInput(f"{what} file {name!r} is empty")
        if not name.lower().endswith(hdl.HDL_SUFFIXES + (".py",)):
            raise InvalidInput(f"{what} file {name!r}: unsupported file type (expected .v/.sv/.vh/.svh, "
                               f".py, or a data file: {' '.join(hdl.DATA_SUFFIXES)})")


#: A data file the simulation did not find: Verilator's warning, Icarus's error.
_MISSING_DATA = re.compile(r"^%Warning: (\S+):0: \$readmem file not found|"
                           r"\$readmem[hb]: Unable to open (\S+) for reading", re.M)


def _missing_data_notes(files: Mapping[str, str], log_text: str) -> list[str]:
    """Notes for the result message naming the data files the simulation could not open:
    those the simulators reported (``$readmem*``) and the literal ``$readmem*``/``$fopen(.., "r")``
    names of HDL files that are not among ``files`` (a failed ``$fopen`` prints nothing)."""
    missing = [a or b for a, b in _MISSING_DATA.findall(log_text)]
    for name, text in files.items():
        if name.lower().endswith(hdl.HDL_SUFFIXES):
            missing += [f for f in hdl.files_read(text)
                        if not f.startswith("/") and posixpath.normpath(f) not in files]
    missing = list(dict.fromkeys(missing))
    if not missing:
        return []
    return [f"data file(s) not found: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} "
            "(the simulation reads them relative to the source root; give them with the design or "
            "stimulus files, e.g. --testbench data.hex)"]


#: SV constructs that run host code inside the simulator process (Verilator's inline C++ and
#: DPI imports of libc): with them a testbench could forge its own coverage record and exit.
#: Matched on comment- and string-stripped text, where a DPI import reads `import ""`.
_SV_HOST_CODE = re.compile(r"\$c(?:pure)?\d*\s*\(|\b(?:import|export)\s+\"\"")
#: cocotb code that touches the scorer's own outputs or leaves the simulator abruptly.
_COCOTB_TAMPER = re.compile(r"coverage\.dat|rs_fcov|rs_end|results\.xml|\bctypes\b|\bos\._exit\b|/proc/self")


def _screen_stimulus(stimulus: SvTestbench | CocotbStimulus) -> None:
    """Refuse stimulus that could tamper with its own coverage measurement (reward hacking).
    Raises :class:`InvalidInput` naming the construct."""
    for name, text in stimulus.files.items():
        if isinstance(stimulus, SvTestbench) or not name.endswith(".py"):
            m = _SV_HOST_CODE.search(hdl.strip_comments(text))
            if m:
                what = "a DPI import" if m.group(0).startswith(("import", "export")) else f"`{m.group(0)}`"
                raise InvalidInput(f"{name}: {what} runs host code inside the simulator (Verilator $c / "
                                   "DPI); stimulus may not use it, it could forge coverage")
        else:
            m = _COCOTB_TAMPER.search(text)
            if m:
                raise InvalidInput(f"{name}: the test refers to `{m.group(0)}`, which touches the scorer's "
                                   "own outputs or ends the simulator abruptly; refused (it could forge coverage)")


def _file_too_large(runres) -> bool:
    return runres.exit_code in (-25, 153) or "File size limit exceeded" in runres.output


def _first_error(log_text: str) -> str:
    for line in log_text.splitlines():
        low = line.lower()
        if "%error" in low or ": error" in low or "syntax error" in low or low.startswith("error"):
            return line.strip()[:500]
    lines = [l for l in log_text.splitlines() if l.strip()]
    return lines[-1].strip()[:500] if lines else "(no output)"


_ERROR_LINE = re.compile(r"^(?:\[\d+\] )?(?:%Error|%Fatal|ERROR:|FATAL:|VCD Error|Error:)", re.M)


def _error_lines(log_text: str, limit: int = 20) -> list[str]:
    """Error lines of a simulation log (Icarus ``ERROR:``/``VCD Error``, Verilator ``%Error``)."""
    out = []
    for m in _ERROR_LINE.finditer(log_text):
        end = log_text.find("\n", m.start())
        line = log_text[m.start(): end if end >= 0 else None].strip()
        if "Verilog $stop" not in line:  # Verilator's note on an ordinary $stop ending
            out.append(line[:300])
        if len(out) >= limit:
            break
    return out


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return "invalid request: " + "; ".join(parts)


_DEFAULT: Engine | None = None


def score(request: ScoreRequest | Mapping[str, Any], problems: Mapping[str, Any] | None = None) -> ScoreResult:
    """Score one request with a process-wide default :class:`Engine`."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Engine()
    if problems:
        _DEFAULT.problems.update(problems)
    return _DEFAULT.score(request)
