"""Run: write a prepared request's files into a fresh work dir, build and simulate them with a
simulator backend in the sandbox, and measure the run (:mod:`.measure`)."""

from __future__ import annotations

import posixpath
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from reward_service import hdl
from reward_service.integrity import cocotb_guard
from reward_service.models import SvTestbench
from reward_service.sandbox import Sandbox
from reward_service.scoring import workdir
from reward_service.scoring.measure import measure
from reward_service.scoring.types import Prepared, Prover, Scored
from reward_service.settings import Settings
from reward_service.simulators import cocotb_flow, get_simulator
from reward_service.simulators.base import Job, SimulatorBackend


def simulate(
    prepared: Prepared,
    timings: dict[str, float],
    simulator: SimulatorBackend | None,
    sandbox: Sandbox,
    settings: Settings,
    prover: Prover | None = None,
) -> Scored:
    """Simulate ``prepared`` with ``simulator`` (None: the request's) in a fresh work dir under
    ``settings.work_root`` and measure the run (``prover``: the engine's, for proved-unreachable
    points). ``timings`` gets the build, run, simulate and measure stages (ms) and becomes the
    result's ``timings``. Raises ``SandboxError``, ``ToolMissing`` or ``OSError`` for
    infrastructure failures (never for the sample's)."""
    request, stimulus = prepared.request, prepared.stimulus
    simulator = simulator or get_simulator(request.simulator.value)
    root = Path(tempfile.mkdtemp(prefix="rs-", dir=settings.work_root))
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
        design_included = hdl.included_files(prepared.design.files, dirs)
        data = [n for n in files if hdl.is_data_file(n)]
        job = Job(
            root=root,
            design_files=hdl.compilation_units(list(prepared.design.files), included, design_included),
            stimulus_files=hdl.compilation_units(list(stimulus.files), included)
            if isinstance(stimulus, SvTestbench)
            else [n for n in stimulus.files if not hdl.is_data_file(n)],
            include_files=[
                n
                for n in files
                if n.lower().endswith(hdl.HDL_SUFFIXES) and (n in included or n.lower().endswith(hdl.HEADER_SUFFIXES))
            ],
            data_files=data,
            include_dirs=dirs,
            defines=cocotb_flow.build_defines(stimulus.kind, build.defines),
            parameters=dict(build.parameters),
            plusargs=list(build.plusargs),
            limits=request.limits,
            sandbox=sandbox,
            cache_dir=settings.cache_dir,
            seed=request.seed,
            fsm=request.coverage.fsm,
            build_jobs=settings.build_jobs,
            top=getattr(stimulus, "top", None),
            toplevel=getattr(stimulus, "toplevel", None),
            test_module=getattr(stimulus, "test_module", None),
            cocotb_runtime=getattr(stimulus, "runtime", "auto"),
            cocotb_env=dict(getattr(stimulus, "env", {})),
            # Verilator's coverage_off reaches the files a file includes: a stimulus that
            # `includes a design file keeps its coverage (the DUT's points must stay counted)
            stimulus_sources=[]
            if any(n in included and n not in design_included for n in prepared.design.files)
            else [n for n in stimulus.files if n.lower().endswith(hdl.HDL_SUFFIXES)],
        )
        guard_note = None
        if job.toplevel and not isinstance(stimulus, SvTestbench) and cocotb_guard.refuses(request.stimulus_policy):
            job.cocotb_guard_ports, job.cocotb_guard_outputs, guard_note = _guard_ports(
                prepared.design.files, job.toplevel
            )
        t0 = time.perf_counter()
        if isinstance(stimulus, SvTestbench):
            run = simulator.run_sv(job)
        else:
            run = simulator.run_cocotb(job)
        run.notes[:0] = prepared.notes
        if run.run is not None:
            run.notes.extend(_missing_data_notes(files, run.run.output))
        if guard_note:
            run.notes.append(guard_note)
        # "build_cpu"/"run_cpu": the CPU the step used (ms, its whole process tree), what its
        # time limit counts; the Icarus step's build is part of its run step
        for stage, step in (("build", run.build), ("run", run.run)):
            if step is not None:
                timings[stage] = step.duration_ms
                if step.cpu_s is not None:
                    timings[f"{stage}_cpu"] = step.cpu_s * 1000
        timings["simulate"] = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        scored = measure(prepared, simulator, run, sandbox, settings.cache_dir, prover)
        timings["measure"] = (time.perf_counter() - t1) * 1000
        result = scored.result
        result.timings = timings
        result.cache.build = run.build_cached
        result.engine = simulator.name
        return scored
    finally:
        workdir.remove_later(root)  # off this thread: on some disks removal costs as much as the run


def _guard_ports(
    design: Mapping[str, str], toplevel: str
) -> tuple[tuple[str, ...] | None, tuple[str, ...], str | None]:
    """The port names the cocotb write guard lets a test write and those whose writes it drops
    (``toplevel``'s inputs and inouts, and outputs, from the original design files), or None
    and a note for the result when pyslang cannot list them: the run then goes unguarded
    (docs/integrity-cocotb.md, "Not covered"); a design the simulator cannot build either
    fails before any write."""
    try:
        return (
            tuple(cocotb_guard.top_ports(design, toplevel)),
            tuple(cocotb_guard.top_outputs(design, toplevel)),
            None,
        )
    except ValueError as exc:
        return None, (), f"DUT writes were not checked: the toplevel's ports could not be listed ({exc})"


#: A data file the simulation did not find: Verilator's warning, Icarus's error.
_MISSING_DATA = re.compile(
    r"^%Warning: (\S+):0: \$readmem file not found|"
    r"\$readmem[hb]: Unable to open (\S+) for reading",
    re.M,
)


def _missing_data_notes(files: Mapping[str, str], log_text: str) -> list[str]:
    """Notes for the result message naming the data files the simulation could not open:
    those the simulators reported (``$readmem*``) and the literal ``$readmem*``/``$fopen(.., "r")``
    names of HDL files that are not among ``files`` (a failed ``$fopen`` prints nothing)."""
    missing = [a or b for a, b in _MISSING_DATA.findall(log_text)]
    for name, text in files.items():
        if name.lower().endswith(hdl.HDL_SUFFIXES):
            missing += [f for f in hdl.files_read(text) if not f.startswith("/") and posixpath.normpath(f) not in files]
    missing = list(dict.fromkeys(missing))
    if not missing:
        return []
    return [
        f"data file(s) not found: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} "
        "(the simulation reads them relative to the source root; give them with the design or "
        "stimulus files, e.g. --testbench data.hex)"
    ]
