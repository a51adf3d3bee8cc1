"""Wire schema of reward-service (pydantic v2): requests, results, registered problems.

The same models are used by the engine, the CLI (``--json``), the HTTP API and the client; the
client installs without the server, so this module needs pydantic only.
Field names follow the vocabulary of ``DESIGN.md``: DUT, testbench, stimulus, toplevel,
coverage point, metric, target, completion.
"""

from __future__ import annotations

import enum
import posixpath
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reward_service.engine_choice import EngineName, choose_engine

#: Metric keys. The code metrics are Verilator's coverage point types (the ``t`` key of a
#: ``coverage.dat`` record, see the Verilator manual, "Coverage Analysis"); ``functional`` counts
#: the bins of cocotb-coverage coverpoints and crosses.
Metric = Literal["line", "branch", "toggle", "expr", "user", "fsm_state", "fsm_arc", "functional"]
CODE_METRICS: tuple[str, ...] = ("line", "branch", "toggle", "expr", "user", "fsm_state", "fsm_arc")
ALL_METRICS: tuple[str, ...] = CODE_METRICS + ("functional",)
#: Default metrics: the open-source counterpart of the commercial "Overall Average" (block,
#: branch, toggle, expression). See docs/coverage.md for the known differences.
DEFAULT_METRICS: tuple[Metric, ...] = ("line", "branch", "toggle", "expr")

MAX_FILE_NAME = 255


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_relative_path(name: str) -> str:
    """Reject file names that could leave the work dir (``../x``, ``/etc/x``, ``a/../../b``)."""
    if not name or len(name) > MAX_FILE_NAME:
        raise ValueError(f"file name must be 1..{MAX_FILE_NAME} characters: {name!r}")
    if "\x00" in name or "\\" in name:
        raise ValueError(f"file name contains a NUL or backslash: {name!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        # a newline in a name splits the records of line-based reports (lcov's SF:) and logs
        raise ValueError(f"file name contains a control character: {name!r}")
    if ":" in name:
        # the simulators start their error lines with a file name: `%Error: Internal Error: x.sv`
        # would read as our tool's own crash (a sandbox_error) instead of the sample's error
        raise ValueError(f"file name contains a colon: {name!r}")
    if name.startswith("/") or posixpath.isabs(name):
        raise ValueError(f"file name must be a relative path, got absolute path {name!r}")
    norm = posixpath.normpath(name)
    if norm == "." or norm.startswith("../") or norm == ".." or "/../" in f"/{name}/":
        raise ValueError(f"file name must stay inside the work dir: {name!r}")
    if norm[0] in "-+":
        # names are passed to the simulators as arguments: `-Ipath` or `+incdir+..` would be read
        # as an option (checked after normpath, which turns `./-x.sv` into `-x.sv`)
        raise ValueError(f"file name may not start with '-' or '+': {name!r}")
    return norm


def _check_files(files: dict[str, str]) -> dict[str, str]:
    return {_check_relative_path(name): text for name, text in files.items()}


class _HasFiles(_Strict):
    files: dict[str, str] = Field(min_length=1, description="relative path -> source text")

    @field_validator("files")
    @classmethod
    def _safe_paths(cls, files: dict[str, str]) -> dict[str, str]:
        return _check_files(files)


class Simulator(enum.StrEnum):
    """The simulator that runs the stimulus."""

    verilator = "verilator"
    icarus = "icarus"


class Status(enum.StrEnum):
    """Outcome of one score request (SandboxFusion-style request level status).

    ``ok``: simulated, coverage measured (a failing assertion or cocotb test is still ``ok``;
    see ``tests``). ``compile_error``: the simulator rejected the design or stimulus.
    ``runtime_error``: the simulation crashed and produced no coverage. ``timeout``: the run or
    build hit its wall-clock limit (coverage up to the kill is reported for information).
    ``resource_limit``: memory, process, file-size or output limit hit. ``invalid_input``: the
    request itself is unusable (no code in a completion, VHDL, bad path, missing DUT instance).
    ``sandbox_error``: an infrastructure failure; never the model's fault, never reward 0.
    ``refused``: the stimulus breaks the request's :class:`StimulusPolicy` (it writes into the
    DUT instead of driving its ports, or makes stimulus code carry a DUT file's name; the
    result's ``violations`` name each one): reward = the failure value, never passed, cached
    like any other fault of the model (docs/integrity.md).
    """

    ok = "ok"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    resource_limit = "resource_limit"
    invalid_input = "invalid_input"
    sandbox_error = "sandbox_error"
    refused = "refused"


class Design(_HasFiles):
    """The DUT: RTL files by relative path, and optionally the DUT module name (``toplevel``)."""

    toplevel: str | None = Field(None, description="DUT module name (needed for cocotb stimulus)")


class SvTestbench(_HasFiles):
    """A SystemVerilog testbench that instantiates the DUT; ``top`` defaults to the module
    that no other module instantiates."""

    kind: Literal["sv_testbench"] = "sv_testbench"
    top: str | None = None


_RESERVED_ENV = (
    "PATH",
    "HOME",
    "TMPDIR",
    "LD_",
    "PYTHON",
    "COCOTB",
    "GPI",
    "PYGPI",
    "LIBPYTHON",
    "VIRTUAL_ENV",
    "VERILATOR",
    "RS_",
    "PYTEST",  # PYTEST_PLUGINS/PYTEST_ADDOPTS would load installed plugins into the test step
    "TOPLEVEL",
    "MODULE",
    "TESTCASE",
)


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for key, value in env.items():
        if not key.replace("_", "A").isalnum() or not key.isupper() or key[0].isdigit():
            raise ValueError(f"environment variable names are upper-case identifiers: {key!r}")
        if key.startswith(_RESERVED_ENV):
            raise ValueError(f"environment variable {key!r} is reserved (it steers Python, cocotb or the loader)")
        if len(value) > 4096:
            raise ValueError(f"environment variable {key!r} is longer than 4096 characters")
    return env


class CocotbStimulus(_HasFiles):
    """A cocotb test module (Python) driving the DUT as HDL toplevel."""

    kind: Literal["cocotb"] = "cocotb"
    test_module: str = Field(description="module name, e.g. 'test_dut' for test_dut.py")
    toplevel: str | None = Field(None, description="HDL toplevel (the DUT module); defaults to design.toplevel")
    env: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="extra environment variables for the test (e.g. a test-selection knob the "
        "test reads with os.getenv); names that steer Python, cocotb or the loader are refused",
    )
    runtime: Literal["auto", "cocotb-2.1", "cocotb-1.9"] = Field(
        "auto",
        description="cocotb runtime: 'auto' picks cocotb 1.9 when the test uses 1.x-only "
        "idioms (cocotb.runner, BinaryValue, TestFailure, .integer, units=), else 2.1",
    )

    @field_validator("env")
    @classmethod
    def _safe_env(cls, env: dict[str, str]) -> dict[str, str]:
        return _check_env(env)


class Completion(_Strict):
    """A raw LLM completion; the stimulus is extracted from its code blocks
    (see :func:`reward_service.completion.extract_stimulus`)."""

    kind: Literal["completion"] = "completion"
    text: str


Stimulus = Annotated[SvTestbench | CocotbStimulus | Completion, Field(discriminator="kind")]


class Target(_Strict):
    """Pass criterion: ``100 * ratio(metric) >= percent`` (unrounded)."""

    metric: Literal["overall", "line", "branch", "toggle", "expr", "user", "fsm_state", "fsm_arc", "functional"] = (
        "overall"
    )
    percent: float = Field(ge=0, le=100)


class CoverageSpec(_Strict):
    """What to measure. ``scope`` is the DUT instance name that the testbench must use
    (e.g. ``uut``), or its path below the top through instances and generate blocks
    (``u_wrap.dut``); only points of the DUT's own files count."""

    scope: str | None = Field(
        None, description="DUT instance name in the testbench, or its path below the top (u_wrap.dut, l_gen.dut)"
    )
    metrics: list[Metric] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    targets: list[Target] = Field(default_factory=list)
    weights: dict[str, float] | None = Field(
        None, description="optional metric weights for `overall` (default: unweighted mean)"
    )
    fsm: bool = Field(False, description="also build with Verilator FSM coverage (crashes on some RTL)")
    exclude_unreachable: bool | None = Field(
        None,
        description="points proved unreachable (yosys + ABC, docs/formal.md): None = not proved; "
        "False = proved and reported (`unreachable`, `overall_reachable`), targets judged "
        "on the raw figure; True = targets judged on the figure without the proved points "
        "and `uncovered` never lists one. CVDP problems default to True (CVDP's own "
        "grading did not exclude points)",
    )


class RewardSpec(_Strict):
    """Reward shaping (DESIGN.md "Reward shaping").

    ``chorus``: 0 when the sample yields no coverage (no code, compile error, crash without
    coverage, timeout unless ``timeout_scores``), else ``1 + overall``. ``ratio``: overall in
    [0, 1], failures score ``failure_value``. ``pass``: 1 when every target is met, else 0.
    """

    shaping: Literal["chorus", "ratio", "pass"] = "chorus"
    failure_value: float = 0.0
    timeout_scores: bool = Field(False, description="chorus: score a timed-out run on its coverage")


class Limits(_Strict):
    """Per-sample resource limits (CPU seconds, MiB, KiB). A step whose CPU budget is not used
    up by a wall-clock backstop (4 x the budget + 30 s) ends as the sample's ``timeout`` when it
    slept by itself, else as ``sandbox_error`` (docs/sandbox.md, "Time limits")."""

    compile_s: float = Field(
        120.0, gt=0, le=1800, description="CPU seconds of the build's processes (all of them, children included)"
    )
    run_s: float = Field(
        30.0, gt=0, le=3600, description="CPU seconds of the simulation's processes (cocotb's start-up included)"
    )
    memory_mb: int = Field(2048, ge=64, le=16384)
    output_kb: int = Field(256, ge=1, le=65536, description="captured log bytes kept (head + tail)")
    file_mb: int = Field(64, ge=1, le=4096, description="largest file the simulation may write")
    processes: int = Field(64, ge=4, le=4096)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A define or parameter value: one token of printable ASCII. Every tool gets an argv list, yet
#: whitespace, backslash, backtick and ``$`` are refused: no literal needs them, and they would
#: read differently in a make variable or a command file.
_VALUE = re.compile(r"[A-Za-z0-9_'\".:+\-*/()\[\]{},=<>!&|^~%#@?]{1,256}")
_PLUSARG = re.compile(r"[A-Za-z_][A-Za-z0-9_\-.]*(?:[=+][!-~]{0,255})?")


def _check_identifier(name: str, what: str) -> str:
    if not _IDENTIFIER.fullmatch(name) or len(name) > 128:
        raise ValueError(f"{what} names are Verilog identifiers (letters, digits, _): {name!r}")
    return name


def _check_value(name: str, value: str, what: str) -> str:
    if not _VALUE.fullmatch(value) or "\\" in value:
        raise ValueError(
            f"{what} {name}: the value must be 1..256 printable characters without "
            f"whitespace, backslash, backtick or $: {value!r}"
        )
    return value


class BuildOptions(_Strict):
    """How the design and stimulus are built and run, as a user's own simulator command line
    would say it (docs/api.md, "Files, folders and build options"). Applied by every engine:
    Verilator, Icarus, cocotb builds and the fast path (which hands a sample to Verilator when
    it cannot honour them, e.g. parameters).

    ``defines``: preprocessor macros, ``NAME`` -> value (None: defined without a value;
    ``-DNAME[=VAL]``). ``parameters``: overrides of the top module's parameters (the SV
    testbench's top, or the cocotb HDL toplevel; Verilator ``-GNAME=VAL``, Icarus
    ``-Ptop.NAME=VAL``), values as Verilog literals (``8``, ``8'hff``, ``"str"``).
    ``plusargs``: runtime plusargs without the leading ``+`` (``VERBOSE``, ``SEED=3``), read by
    ``$test$plusargs``/``$value$plusargs``. ``include_dirs``: extra `include search dirs,
    relative to the source root (the root and every folder holding sources are searched anyway).
    """

    defines: dict[str, str | None] = Field(default_factory=dict, max_length=64)
    parameters: dict[str, str] = Field(default_factory=dict, max_length=64)
    plusargs: list[str] = Field(default_factory=list, max_length=64)
    include_dirs: list[str] = Field(default_factory=list, max_length=32)

    @field_validator("defines")
    @classmethod
    def _safe_defines(cls, defines: dict[str, str | None]) -> dict[str, str | None]:
        for name, value in defines.items():
            _check_identifier(name, "define")
            if value is not None:
                _check_value(name, value, "define")
        return defines

    @field_validator("parameters")
    @classmethod
    def _safe_parameters(cls, parameters: dict[str, str]) -> dict[str, str]:
        for name, value in parameters.items():
            _check_identifier(name, "parameter")
            _check_value(name, value, "parameter")
        return parameters

    @field_validator("plusargs")
    @classmethod
    def _safe_plusargs(cls, plusargs: list[str]) -> list[str]:
        out = []
        for arg in plusargs:
            arg = arg[1:] if arg.startswith("+") else arg
            if not _PLUSARG.fullmatch(arg) or "\\" in arg:
                raise ValueError(
                    f"a plusarg is a name, optionally =value or +value, printable, no "
                    f"whitespace or backslash, at most 256 characters: {arg!r}"
                )
            if arg.lower().startswith("verilator"):
                raise ValueError(
                    f"plusarg {arg!r} is reserved: +verilator+ options steer the simulator itself (seed, coverage file)"
                )
            out.append(arg)
        return out

    @field_validator("include_dirs")
    @classmethod
    def _safe_dirs(cls, dirs: list[str]) -> list[str]:
        # "." (CLI -I .) is the source root, searched anyway: dropped, not refused as outside
        return [_check_relative_path(d) for d in dirs if posixpath.normpath(d) != "."]


class StimulusPolicy(_Strict):
    """What a stimulus may do besides driving the DUT's ports (docs/integrity.md).

    ``dut_writes``: ``refuse`` scores a stimulus that writes into the DUT (``force``,
    ``assign``/``deassign``, hierarchical assignments, ``bind``, ``defparam``, system tasks
    writing DUT variables, cocotb writes to non-port handles) as ``refused``; ``allow`` scores it
    (engineers scoring their own directed tests); unset (None): refuse wherever the DUT scope is
    known (``coverage.scope`` given, every CVDP problem), else allow. ``pinned_parameters``:
    parameters of the DUT instance the stimulus may not override (``#(.W(3))``; ``*``: all);
    overriding one to another value is refused whatever ``dut_writes`` says."""

    dut_writes: Literal["refuse", "allow"] | None = None
    pinned_parameters: list[str] = Field(default_factory=list, max_length=256)


class ReportOptions(_Strict):
    """What the result carries for coverage reports beyond its summary (docs/reports.md).

    ``points``: fill :attr:`ScoreResult.detail` with every coverage point of the DUT (metric,
    file, line, detail, hit count) and the DUT's source texts, which the lcov and HTML reports
    are made from (CLI ``--lcov``/``--html``, ``GET /v1/jobs/{id}/coverage.info`` and
    ``/report.html``). Off by default: an RL step's results stay small.
    """

    points: bool = False


class ScoreRequest(_Strict):
    """One sample to score: a design (or a registered problem) plus a stimulus."""

    design: Design | None = None
    problem_id: str | None = None
    stimulus: Stimulus
    simulator: Simulator = Simulator.verilator
    coverage: CoverageSpec = Field(default_factory=CoverageSpec)
    reward: RewardSpec = Field(default_factory=RewardSpec)
    limits: Limits = Field(default_factory=Limits)
    seed: int = Field(0, ge=0, lt=2**31, description="simulation seed (Verilator +verilator+seed+, cocotb seed)")
    build: BuildOptions = Field(
        default_factory=BuildOptions, description="defines, top-level parameters, plusargs, include dirs"
    )
    engine: EngineName | None = Field(
        None,
        description="code-coverage engine: 'verilator' (the reference), 'fast' (Icarus with an "
        "instrumented DUT, Verilator-equal points, falls back to Verilator when it cannot "
        "run the sample), 'auto' (fast when the design passed its self-check against "
        "Verilator, decided once per design); unset: `simulator` decides (docs/fastcov.md)",
    )
    report: ReportOptions = Field(
        default_factory=ReportOptions,
        description="report.points: the result carries every coverage point and "
        "the DUT sources (`detail`), for lcov/HTML reports",
    )
    stimulus_policy: StimulusPolicy | None = Field(
        None,
        description="what the stimulus may do to the DUT besides driving its ports "
        "(docs/integrity.md); unset: the problem's, else writes into a known DUT scope are refused",
    )

    @model_validator(mode="after")
    def _design_or_problem(self) -> ScoreRequest:
        if (self.design is None) == (self.problem_id is None):
            raise ValueError("give exactly one of `design` or `problem_id`")
        return self


#: Problem ids: letters, digits and ``_ . - :`` (CVDP ids such as ``cvdp_copilot_Attenuator_0011``).
PROBLEM_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,200}$"


class ProblemSpec(BaseModel):
    """A registered problem (``POST /v1/problems``). Requests naming its ``id`` get its design,
    coverage spec (scope = ``dut_instance``, ``metrics``, ``targets``), simulator, limits and
    reward shaping; fields given in the request override them
    (:func:`reward_service.problems.resolve.resolve_request`)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=PROBLEM_ID_PATTERN)
    design: Design = Field(description="RTL files and the DUT module (design.toplevel)")
    dut_instance: str | None = Field(None, description="DUT instance name the testbench must use (coverage scope)")
    metrics: list[Metric] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    targets: list[Target] = Field(default_factory=list)
    simulator: Simulator = Simulator.verilator
    engine: EngineName | None = Field(
        None, description="code-coverage engine of its samples (unset: `simulator` decides; CVDP problems: auto)"
    )
    limits: Limits = Field(default_factory=Limits)
    reward: RewardSpec = Field(default_factory=RewardSpec)
    exclude_unreachable: bool | None = Field(
        None, description="coverage.exclude_unreachable of its samples (docs/formal.md; CVDP problems: true)"
    )
    stimulus_policy: StimulusPolicy | None = Field(
        None, description="stimulus_policy of its samples (docs/integrity.md); a request's own overrides it"
    )
    # metadata (CVDP rows bring them; informational for clients)
    difficulty: str | None = None
    prompt: str | None = None
    context: dict[str, str] = Field(default_factory=dict)
    testbench_path: str | None = None

    @property
    def toplevel(self) -> str | None:
        return self.design.toplevel

    @classmethod
    def from_cvdp(cls, problem: Any) -> ProblemSpec:
        """The spec of a CVDP cid012 problem (a :class:`reward_service.problems.cvdp.Problem`:
        its ``spec()``)."""
        spec: ProblemSpec = problem.spec()
        return spec

    def request(self, stimulus: SvTestbench | CocotbStimulus | Completion | str, **overrides: Any) -> ScoreRequest:
        """A :class:`ScoreRequest` scoring ``stimulus`` (a raw completion text is wrapped in
        :class:`Completion`) on this problem; ``overrides`` replace top-level fields of the
        request (e.g. ``reward=RewardSpec(shaping="ratio")``, ``seed=3``). Without an ``engine``
        override the problem's engine applies on Verilator only
        (:func:`~reward_service.engine_choice.choose_engine`). Raises
        ``pydantic.ValidationError`` for invalid overrides."""
        if isinstance(stimulus, str):
            stimulus = Completion(text=stimulus)
        fields: dict[str, Any] = {
            "design": self.design,
            "stimulus": stimulus,
            "simulator": self.simulator,
            "engine": self.engine,
            "coverage": CoverageSpec(
                scope=self.dut_instance,
                metrics=list(self.metrics),
                targets=list(self.targets),
                exclude_unreachable=self.exclude_unreachable,
            ),
            "limits": self.limits,
            "reward": self.reward,
            "stimulus_policy": self.stimulus_policy,
        }
        fields.update(overrides)
        if "engine" not in overrides:
            fields["engine"] = choose_engine(
                Simulator(fields["simulator"]), given=False, problem_engine=self.engine
            ).engine
        return ScoreRequest(**fields)


class MetricCoverage(BaseModel):
    """Coverage of one metric: ``covered`` of ``total`` points; ``ratio`` in [0, 1].
    ``available`` is False (with ``reason``) when the simulator cannot measure the metric:
    such a metric is left out of ``overall``, never counted as 0."""

    covered: int = 0
    total: int = 0
    ratio: float | None = None
    available: bool = True
    reason: str | None = None
    unreachable: int = Field(
        0,
        description="points of `total` proved unreachable (coverage.exclude_unreachable "
        "set; docs/formal.md); they stay in `total` and `ratio`",
    )
    undecided: int | None = Field(
        None,
        description="points of `total` neither proved unreachable, nor covered by this sample, nor "
        "witnessed by the design's closure testbench (`reward-service problems --ceiling` keeps one "
        "per design; docs/formal.md); None: no proof applied",
    )


class CoverageReport(BaseModel):
    """Coverage per metric of the DUT; ``scope`` is the DUT instance checked and
    ``scope_found`` whether the simulated hierarchy had it (None when not checked)."""

    metrics: dict[str, MetricCoverage] = Field(default_factory=dict)
    overall: float | None = Field(None, description="mean ratio of requested metrics with points, [0, 1]")
    scope: str | None = None
    scope_found: bool | None = None
    overall_reachable: float | None = Field(
        None,
        description="`overall` with the points proved unreachable left out of every metric (None: "
        "not proved, coverage.exclude_unreachable unset or the proof does not apply)",
    )
    unreachable_note: str | None = Field(
        None,
        description="what the unreachability proof did for this sample, in plain words: which "
        "points it excluded, or why none was (None: coverage.exclude_unreachable unset, no proof "
        "run). `message` repeats it only when points were excluded (docs/formal.md)",
    )


class TargetCheck(BaseModel):
    """One target judged: ``metric`` (``overall`` or a metric name) and its ``percent``; the
    ``figure`` it was judged on, ``raw`` (every point counts) or ``reachable`` (points proved
    unreachable left out, coverage.exclude_unreachable true); ``value`` that figure in percent
    (None: the metric has no points or is unavailable); ``met``: ``value >= percent``
    (unrounded)."""

    metric: str
    percent: float
    figure: Literal["raw", "reachable"] = "raw"
    value: float | None = None
    met: bool = False


class UncoveredPoint(BaseModel):
    """An uncovered coverage point, for feedback: ``line`` is 1-based in ``file`` (0 for a
    functional bin, whose ``file`` is the coverage export); ``detail`` is Verilator's comment
    (``o``: signal bit and edge for toggle, condition for branch/expr) or the bin name."""

    file: str
    line: int
    metric: str
    detail: str
    hier: str | None = None


class ParameterOverride(BaseModel):
    """A parameter of a DUT instance that the SV stimulus instantiates with another value than
    the design's own (``#(.W(3))``, docs/integrity.md): the ``instance`` path, parameter
    ``name``, its ``value`` and the design's ``default`` (None when the design alone does not
    elaborate that module at the top), as SystemVerilog constants."""

    instance: str
    name: str
    value: str
    default: str | None = None


class IntegrityViolation(BaseModel):
    """One thing a stimulus did that its :class:`StimulusPolicy` refuses (docs/integrity.md).
    ``kind``: e.g. ``force``, ``procedural_assign``, ``continuous_assign``, ``bind``,
    ``defparam``, ``system_task``, ``line_directive``, ``cocotb_write``; ``file``/``line``
    (1-based) where the stimulus does it, when known; ``target``: the DUT object written
    (hierarchical path) or the DUT file name claimed."""

    kind: str
    file: str | None = None
    line: int | None = None
    target: str
    message: str = ""


class StimulusRace(BaseModel):
    """A testbench-DUT race at a clock edge, named the way a lint would (docs/semantics.md):
    ``kind`` ``write`` (the testbench writes with ``=`` a signal a DUT process woken by the same
    edge reads) or ``read`` (the testbench reads a signal such a DUT process writes with ``=``);
    ``file``/``line`` (1-based) of the testbench's access, the testbench-side ``signal``
    (hierarchical path), the clock ``edge`` (``posedge tb.clk``), the DUT process (``dut``:
    ``file:line``, in instance ``dut_scope``); ``ordered``: the sample was scored with the race
    decided the documented way (the testbench after the DUT's edge processes) on every engine;
    False when the analysis could not make the text follow it (a control from a macro, in
    ``always_ff``, or inside an assignment)."""

    kind: Literal["write", "read"]
    file: str
    line: int
    signal: str
    edge: str
    dut: str
    dut_scope: str
    ordered: bool = True

    def lint(self) -> str:
        """One line as a lint prints it: ``tb.sv:8: race: ...``."""
        if self.kind == "write":
            what = f"blocking write to {self.signal} at {self.edge}, which the DUT reads at that edge ({self.dut})"
        else:
            what = f"read of {self.signal} at {self.edge}, which the DUT writes with '=' at that edge ({self.dut})"
        how = (
            "scored as if the testbench ran after the DUT's edge processes (write with '<=' or drive at the other edge)"
            if self.ordered
            else "not ordered: engines may disagree"
        )
        return f"{self.file}:{self.line}: race: {what}; {how}"


class TestOutcome(BaseModel):
    """One cocotb test: name, passed, the failure message, simulated time in ns."""

    __test__ = False  # not a pytest test class
    name: str
    passed: bool
    message: str | None = None
    sim_time_ns: float | None = None


class CacheInfo(BaseModel):
    """Which caches answered: ``result`` (the whole result came from the result cache),
    ``build`` (a built cocotb DUT model was reused)."""

    result: bool = False
    build: bool = False


class ShadowCheck(BaseModel):
    """A fast-path sample also scored on Verilator and diffed point by point (docs/fastcov.md):
    ``differences`` counts points whose key or covered state differs, per metric in ``metrics``."""

    agreed: bool
    differences: int = 0
    metrics: dict[str, int] = Field(default_factory=dict)
    message: str | None = None


class PointRecord(BaseModel):
    """One coverage point of :class:`CoverageDetail`: ``metric``, ``file`` (a DUT file; for a
    functional bin the coverage export), 1-based ``line`` (0 for a bin), ``detail`` (Verilator's
    comment: ``if``/``else`` for a branch, ``sig[3]:0->1`` for a toggle bit, the term for expr;
    the bin name), ``count`` (hits, summed over the DUT's instances) and ``covered``."""

    metric: str
    file: str
    line: int
    detail: str
    count: int
    covered: bool
    unreachable: str | None = Field(
        None,
        description="how the point was proved unreachable when it was (docs/formal.md): "
        "`constant` (its condition is false for every input and state), `invariant` (no "
        "reachable state gets there), `stuck at 0` / `stuck at 1` (a toggle bit that never "
        "leaves that value); None: not proved, or the proof does not apply to the sample",
    )


class CoverageDetail(BaseModel):
    """The points behind a result's ``coverage`` (all of them, not only the uncovered ones) and
    the DUT's HDL source texts by file name: what lcov and HTML reports are made from
    (:mod:`reward_service.reports`). Counting ``points`` per metric gives ``coverage.metrics``."""

    points: list[PointRecord] = Field(default_factory=list)
    sources: dict[str, str] = Field(default_factory=dict)


class ScoreResult(BaseModel):
    """The answer to a :class:`ScoreRequest`. ``reward`` is None only for ``sandbox_error``."""

    status: Status
    message: str = ""
    reward: float | None = None
    passed: bool = False
    targets: list[TargetCheck] = Field(
        default_factory=list,
        description="each target of the request judged: the figure it was judged on and its value "
        "(`passed` is all of them met; empty when the request had none or the sample yielded "
        "no coverage)",
    )
    coverage: CoverageReport = Field(default_factory=CoverageReport)
    uncovered: list[UncoveredPoint] = Field(default_factory=list)
    tests: list[TestOutcome] = Field(default_factory=list)
    log: str = ""
    timings: dict[str, float] = Field(default_factory=dict, description="milliseconds per stage")
    cache: CacheInfo = Field(default_factory=CacheInfo)
    versions: dict[str, str] = Field(default_factory=dict)
    engine: str | None = Field(
        None, description="what measured it: verilator, icarus, or fast (Icarus with the instrumented DUT)"
    )
    ended_by: str | None = Field(None, description="finish, stop, fatal, timeout, killed, exit, ...")
    fallback: str | None = Field(
        None, description="why a requested fast/auto engine was not used (the sample was scored by Verilator instead)"
    )
    shadow: ShadowCheck | None = Field(None, description="the shadow check of this fast-path sample, if sampled")
    stimulus_block: str | None = Field(
        None,
        description="for a completion: the part of its text that was scored and why, e.g. "
        "'code block 2 of 3 (```systemverilog, 45 lines): the testbench (module tb; "
        "instantiates dut); not used: block 3 restates the DUT (module dut)' "
        "(reward_service.completion); None for stimulus given as files",
    )
    detail: CoverageDetail | None = Field(
        None,
        description="every coverage point of the DUT with its hit count, and the DUT sources; "
        "only when the request asked (report.points), for lcov/HTML reports",
    )
    violations: list[IntegrityViolation] = Field(
        default_factory=list,
        description="status refused: each write into the DUT (or DUT file name claimed) the stimulus policy refuses",
    )
    parameter_overrides: list[ParameterOverride] = Field(
        default_factory=list,
        description="SV stimulus: each DUT instance parameter the testbench sets to another value than the design's",
    )
    races: list[StimulusRace] = Field(
        default_factory=list,
        description="SV stimulus: each testbench-DUT race at a clock edge (a lint-style warning; the sample "
        "is scored with the race decided one documented way on every engine, docs/semantics.md)",
    )

    @classmethod
    def infrastructure_failure(
        cls,
        reason: str,
        *,
        timings: dict[str, float] | None = None,
        versions: dict[str, str] | None = None,
        engine: str | None = None,
    ) -> ScoreResult:
        """The ``sandbox_error`` result of a sample the service failed to score: ``reason``
        (the message) says what broke; ``reward`` is None (an infrastructure failure is never a
        reward, not even 0; :func:`reward_service.reward.shape_reward`), nothing is measured.
        ``timings`` (ms per stage reached), ``versions`` (tool versions) and ``engine`` are
        given where they are known. Every ``sandbox_error`` result is made here but one: a
        cocotb run whose runner failed (:func:`~reward_service.scoring.classify.classify`) is
        measured like any run that happened, and keeps its log."""
        return cls(
            status=Status.sandbox_error,
            message=reason,
            reward=None,
            timings=dict(timings or {}),
            versions=dict(versions or {}),
            engine=engine,
        )
