"""The common simulator interface (after cocotb's runner: one small class per simulator with
``build`` and ``run`` steps, argv lists, every step in the sandbox under a time limit)."""

from __future__ import annotations

import abc
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from reward_service.coverage.points import CoveragePoint
from reward_service.models import IntegrityViolation, Limits, Status, TestOutcome
from reward_service.sandbox import ExecResult, Sandbox


@dataclass
class Job:
    """One sample laid out on disk. ``root`` (host) holds ``src/`` with the design and stimulus
    files (at their relative paths as given), and receives ``obj/`` (build) and ``run/``
    (simulation). ``design_files``/``stimulus_files`` are the compilation units (what the
    compiler is given; for cocotb stimulus, its Python and other non-data files);
    ``include_files`` the HDL files that are only `include'd (headers, included sources);
    ``data_files`` the data files, which every backend copies into its simulation's cwd at the
    same relative paths (``$readmemh("data/x.hex")`` reads them as in the user's checkout).
    ``include_dirs`` (relative to ``src``) are the `include search dirs (:func:`hdl.search_dirs`);
    ``defines``/``parameters``/``plusargs`` come from the request's ``build`` options."""

    root: Path
    design_files: list[str]
    stimulus_files: list[str]
    limits: Limits
    sandbox: Sandbox
    cache_dir: Path
    seed: int = 0
    top: str | None = None  # SV testbench top module
    toplevel: str | None = None  # DUT module (cocotb HDL toplevel)
    test_module: str | None = None  # cocotb test module
    cocotb_runtime: str = "auto"  # "auto", "cocotb-2.1" or "cocotb-1.9" (CocotbStimulus.runtime)
    cocotb_env: dict[str, str] = field(default_factory=dict)  # CocotbStimulus.env (validated)
    fsm: bool = False
    build_jobs: int = 2
    include_files: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    defines: dict[str, str | None] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    plusargs: list[str] = field(default_factory=list)
    #: Every HDL file of the stimulus (compilation units and included files): code that is not
    #: the DUT's, which Verilator builds without coverage instrumentation.
    stimulus_sources: list[str] = field(default_factory=list)
    #: cocotb: the toplevel's input and inout port names when the stimulus policy refuses
    #: writes into the DUT (the write guard lets a test write only these,
    #: docs/integrity-cocotb.md); None: no guard.
    cocotb_guard_ports: tuple[str, ...] | None = None
    #: cocotb, guarded: the toplevel's output port names (the guard drops their writes).
    cocotb_guard_outputs: tuple[str, ...] = ()

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def define_args(self) -> list[str]:
        """``-DNAME[=VAL]`` per define (Verilator and Icarus spell them alike)."""
        return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines.items()]

    def include_args(self) -> list[str]:
        """``-I<dir>`` per include dir, relative to ``src`` (the build's cwd: relative names keep
        Verilator's coverage.dat naming the files as the request does). The root itself needs
        none: both tools look up a relative include name in their cwd."""
        return [f"-I{d}" for d in self.include_dirs if d != "."]

    def plusarg_args(self) -> list[str]:
        """The runtime plusargs, ``+ARG`` each."""
        return [f"+{a}" for a in self.plusargs]

    def stage_data_files(self, run_dir: Path) -> None:
        """Copy the data files from ``src`` into ``run_dir`` (the simulation's cwd) at their
        relative paths."""
        for name in self.data_files:
            dst = run_dir / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.src / name, dst)


@dataclass
class SimRun:
    """What one simulator run produced. ``build``/``run`` are the sandbox results of the two
    steps (``run`` is None when the build failed); paths point into the job's run dir."""

    build: ExecResult | None = None
    run: ExecResult | None = None
    build_failed: bool = False
    coverage_dat: Path | None = None
    functional: list[Path] = field(default_factory=list)
    results_xml: Path | None = None
    ended_by: str | None = None
    build_cached: bool = False
    tests: list[TestOutcome] = field(default_factory=list)  # cocotb outcomes (from results_xml)
    notes: list[str] = field(default_factory=list)  # for the result message
    #: (status, message) when a cocotb run ran no test (import error, no test defined, every
    #: test skipped, no results.xml): the result is that failure whatever coverage exists.
    not_run: tuple[Status, str] | None = None
    #: Code-coverage points the backend read itself (the fast path's flags); None: the points
    #: are those of ``coverage_dat``, if any.
    points: list[CoveragePoint] | None = None
    #: The writes into the DUT the stimulus policy refused (cocotb's write guard): the result
    #: is ``refused`` with these, whatever else the run produced.
    violations: list[IntegrityViolation] = field(default_factory=list)


class SimulatorBackend(abc.ABC):
    """A simulator: runs an SV testbench or a cocotb test against the design."""

    name: str = "abstract"
    #: Metrics this simulator can measure, and why the others cannot be.
    measures: tuple[str, ...] = ()
    unavailable_reason: str = ""

    @abc.abstractmethod
    def run_sv(self, job: Job) -> SimRun:
        """Build the design + SV testbench (top ``job.top``) and simulate it."""

    @abc.abstractmethod
    def run_cocotb(self, job: Job) -> SimRun:
        """Build the design (cached per design) and run the cocotb test module against it."""

    def unavailable(self, metrics: list[str], fsm: bool = False) -> dict[str, str]:
        """Requested metrics this simulator cannot measure -> the reason (never scored as 0).
        ``fsm``: FSM coverage was requested (coverage.fsm)."""
        return {m: self.unavailable_reason for m in metrics if m not in self.measures}
