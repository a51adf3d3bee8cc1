"""``reward-service`` command line: score one testbench, cocotb test or completion; list problems.

Runs embedded (no Redis, no Docker): simulations run in the bubblewrap sandbox on this machine.
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import os
import posixpath
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO

try:
    import typer
    from rich.console import Console
    from rich.table import Table
    from typer.core import TyperCommand, TyperGroup
except ModuleNotFoundError as exc:  # the bare install is the client (pyproject): no CLI packages
    raise SystemExit(
        f"the reward-service command needs the server install (pip install '.[server]' from a "
        f"checkout, or scripts/install.sh); the server's packages are missing: a client-only install, or none ({exc})"
    ) from None

from reward_service.console import make_console, pipe_width, print_table
from reward_service.models import ScoreResult, Simulator, Status
from reward_service.reports.verdict import proved_points, verdict_text


class Shaping(str, enum.Enum):
    chorus = "chorus"
    ratio = "ratio"
    pass_ = "pass"


class DutWrites(str, enum.Enum):
    refuse = "refuse"
    allow = "allow"


class EngineChoice(str, enum.Enum):
    verilator = "verilator"
    fast = "fast"
    auto = "auto"


def _flags_as_flags(params: list[Any]) -> list[Any]:
    """``params`` with every flag (``--help`` included) given an empty metavar: typer 0.29's rich
    help prints each option's type after it (``<bool>``), which for a flag reads as if it took a
    value (``--json <bool>``)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


@contextlib.contextmanager
def _rich_width(stream: TextIO) -> Iterator[None]:
    """Lay out typer's own output on ``stream`` (--help on stdout, usage errors on stderr) for
    :func:`~reward_service.console.pipe_width` columns when it is not a terminal and ``COLUMNS``
    is unset: the width of the terminal the command runs in (``--help | less``), else
    :data:`~reward_service.console.PIPE_WIDTH` (rich's 80 wraps the examples, option texts and
    error messages mid-phrase in CI logs). typer sizes those consoles by ``rich_utils.MAX_WIDTH``,
    its ``TERMINAL_WIDTH`` setting, which still wins when set."""
    from typer import rich_utils

    saved = rich_utils.MAX_WIDTH
    if not os.environ.get("TERMINAL_WIDTH"):
        rich_utils.MAX_WIDTH = pipe_width(stream)
    try:
        yield
    finally:
        rich_utils.MAX_WIDTH = saved


class _Help:
    """What every reward-service command and group shares: flags shown as flags, --help laid
    out for the width :func:`~reward_service.console.pipe_width` gives stdout."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_as_flags(super().get_params(ctx))  # type: ignore[misc]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with _rich_width(sys.stdout), _trailing_blanks_cut(sys.stdout):
            super().format_help(ctx, formatter)  # type: ignore[misc]


class _RstripLines(io.TextIOBase):
    """Writes lines to ``out`` without their trailing blanks: rich pads the lines outside its
    panels to the console width, which in a pipe is 200 columns of spaces per line."""

    def __init__(self, out: TextIO) -> None:
        self.out, self._partial = out, ""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:  # rich points a broken pipe (``--help | head``) at /dev/null through it
        return self.out.fileno()

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self.out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.out.write(self._partial.rstrip(" "))
            self._partial = ""
        self.out.flush()


@contextlib.contextmanager
def _trailing_blanks_cut(stream: TextIO) -> Iterator[None]:
    """While typer writes --help to ``stream`` (stdout) and it is not a terminal, cut the blanks
    rich pads each line with (a terminal shows them as nothing; a file or log keeps them)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    if tty:
        yield
        return
    cut = _RstripLines(stream)
    with contextlib.redirect_stdout(cut):
        try:
            yield
        finally:
            cut.flush()


class _Command(_Help, TyperCommand):
    """A reward-service command."""


class _Group(_Help, TyperGroup):
    """The reward-service command group; its usage errors are laid out as its --help is."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with _rich_width(sys.stderr):
            return super().main(*args, **kwargs)


app = typer.Typer(
    help="Coverage rewards for LLM-written hardware stimulus (Verilator/Icarus, sandboxed).",
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = make_console()
err = make_console(stderr=True)


#: Process exit codes of `score`: 0 ok, 1 the sample failed (compile/runtime/timeout/limits/
#: invalid input), 2 usage error (typer), 3 infrastructure failure (sandbox_error).
EXIT_SAMPLE_FAILED, EXIT_INFRA = 1, 3


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc.strerror}") from exc


def _request_name(path: Path) -> str:
    """The name a file takes in the request: its path relative to the current directory (so
    `include "pkg/defs.svh" and $readmemh("data/x.hex") resolve as in the checkout); an
    absolute path outside it keeps only its base name. A relative path that leaves the current
    directory (``../x.sv``) is a usage error: run from the folder that holds all the files."""
    if path.is_absolute():
        try:
            return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            return path.name
    name = posixpath.normpath(path.as_posix())
    if name == ".." or name.startswith("../"):
        raise typer.BadParameter(
            f"{path}: the path leaves the current directory; run from the folder "
            "that holds the design and testbench (files keep their paths relative to it)"
        )
    return name


def _cocotb_name(path: Path, test_dir: Path) -> str:
    """The name a ``--cocotb`` file takes in the request: its path relative to ``test_dir``, the
    folder of the test module (the first ``--cocotb`` file), which is where cocotb imports the
    test from, so that ``helpers/model.py`` imports as ``helpers.model`` as in the author's
    checkout. A file outside that folder is a usage error (the test could not import it there)."""
    try:
        return path.resolve().relative_to(test_dir).as_posix()
    except ValueError:
        raise typer.BadParameter(
            f"{path}: --cocotb files keep their paths relative to the test module's folder "
            f"({test_dir}), where cocotb imports them from; this file is outside it"
        ) from None


def _files(paths: list[Path], test_dir: Path | None = None) -> dict[str, str]:
    """Request files (name -> text) of ``paths``, named by :func:`_request_name` (relative to
    ``test_dir`` when given: cocotb files, :func:`_cocotb_name`); data files (.hex, .mem, ...)
    must be UTF-8 text."""
    from reward_service import hdl

    out: dict[str, str] = {}
    for p in paths:
        name = _cocotb_name(p, test_dir) if test_dir is not None else _request_name(p)
        if name in out:
            raise typer.BadParameter(f"two files named {name!r}: file names must be unique")
        if hdl.is_data_file(name):
            try:
                out[name] = p.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise typer.BadParameter(
                    f"{p}: data files are text (the request carries files as "
                    f"UTF-8 text; binary data is not supported): {exc.reason}"
                ) from exc
            except OSError as exc:
                raise typer.BadParameter(f"cannot read {p}: {exc.strerror}") from exc
        else:
            out[name] = _read(p)
    return out


def _build_options(defines: list[str], params: list[str], plusargs: list[str], include_dirs: list[Path]) -> dict:
    """The request's ``build`` object from the CLI options (``NAME[=VAL]``, ``NAME=VAL``, ``ARG``,
    dirs); a malformed one is a usage error (exit 2) with the validator's reason."""
    from pydantic import ValidationError

    from reward_service.models import BuildOptions

    build: dict = {}
    if defines:
        build["defines"] = {d.split("=", 1)[0]: (d.split("=", 1)[1] if "=" in d else None) for d in defines}
    if params:
        bad = [p for p in params if "=" not in p]
        if bad:
            raise typer.BadParameter(f"--param {bad[0]!r}: give NAME=VALUE")
        build["parameters"] = dict(p.split("=", 1) for p in params)
    if plusargs:
        build["plusargs"] = list(plusargs)
    if include_dirs:
        for d in include_dirs:  # a folder outside has no place in the request's layout
            if d.is_absolute() and not d.resolve().is_relative_to(Path.cwd().resolve()):
                raise typer.BadParameter(f"--include-dir {d}: give a folder inside the current directory")
        build["include_dirs"] = [_request_name(d) for d in include_dirs]
    try:
        return BuildOptions.model_validate(build).model_dump(exclude_defaults=True) if build else {}
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from exc


@app.command(cls=_Command)
def score(
    design: Annotated[
        list[Path] | None, typer.Option("--design", "-d", help="DUT source file (repeat for several)")
    ] = None,
    testbench: Annotated[
        list[Path] | None, typer.Option("--testbench", "-t", help="SystemVerilog testbench file (repeat)")
    ] = None,
    cocotb: Annotated[
        list[Path] | None,
        typer.Option(
            "--cocotb",
            help="cocotb test module .py (the first is the test module; repeat for helpers, which keep their paths relative to its folder)",
        ),
    ] = None,
    completion: Annotated[
        Path | None,
        typer.Option("--completion", "-c", help="raw LLM completion; the stimulus is extracted from its code blocks"),
    ] = None,
    problems: Annotated[Path | None, typer.Option("--problems", help="CVDP cid012 JSONL holding the problem")] = None,
    problem_id: Annotated[str | None, typer.Option("--problem-id", help="problem id in --problems")] = None,
    dut_instance: Annotated[
        str | None,
        typer.Option(
            "--dut-instance",
            help="DUT instance name the testbench must use, or its path below the top: u_wrap.dut (coverage.scope)",
        ),
    ] = None,
    toplevel: Annotated[str | None, typer.Option("--toplevel", help="DUT module name (cocotb HDL toplevel)")] = None,
    dut_writes: Annotated[
        DutWrites | None,
        typer.Option(
            "--dut-writes",
            help="refuse or allow stimulus that writes into the DUT "
            "(force, hierarchical assignments, bind; docs/integrity.md) \\[default: the problem's; refuse with --dut-instance]",
        ),
    ] = None,
    top: Annotated[
        str | None, typer.Option("--top", help="testbench top module (default: the uninstantiated one)")
    ] = None,
    simulator: Annotated[
        Simulator | None,
        # \\[ : rich markup reads an unescaped "[default: ...]" as a style tag and drops it from --help
        typer.Option(
            "--simulator",
            "-s",
            help="verilator (code coverage) or icarus (test outcomes and functional coverage only) \\[default: verilator; a problem's own]",
        ),
    ] = None,
    engine_choice: Annotated[
        EngineChoice | None,
        typer.Option(
            "--engine",
            help="code-coverage engine: verilator, fast (Icarus + instrumented DUT, Verilator-equal points; falls back to Verilator) or auto (docs/fastcov.md) \\[default: verilator; CVDP problems: auto]",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", "-m", help="metric to measure (repeat); default line, branch, toggle, expr"),
    ] = None,
    target: Annotated[
        float | None, typer.Option("--target", min=0, max=100, help="overall coverage target in percent (e.g. 90)")
    ] = None,
    shaping: Annotated[
        Shaping | None, typer.Option("--shaping", help="reward shaping (docs/coverage.md) \\[default: chorus]")
    ] = None,
    run_s: Annotated[
        float | None,
        typer.Option(
            "--run-s", help="simulation CPU-time limit, seconds (wall-clock backstop 4x + 30 s) \\[default: 30]"
        ),
    ] = None,
    compile_s: Annotated[
        float | None,
        typer.Option(
            "--compile-s", help="build CPU-time limit, seconds (wall-clock backstop 4x + 30 s) \\[default: 120]"
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="simulation seed")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="print the ScoreResult as JSON")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="do not reuse a cached result")] = False,
    show_uncovered: Annotated[int, typer.Option("--uncovered", help="uncovered points to list (human output)")] = 10,
    show_log: Annotated[
        bool,
        typer.Option(
            "--log",
            help="print the simulation log (the result's bounded log, up to 64 KiB of its end; stderr with --json)",
        ),
    ] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="say what the unreachability proof did (CVDP problems prove points no stimulus can cover, "
            "docs/formal.md), also when it excluded nothing",
        ),
    ] = False,
    feedback: Annotated[
        bool,
        typer.Option(
            "--feedback",
            help="print next-turn feedback: uncovered points as text and the annotated DUT source (stderr with --json)",
        ),
    ] = False,
    define: Annotated[
        list[str] | None, typer.Option("--define", "-D", help="preprocessor macro NAME or NAME=VALUE (repeat)")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-P",
            help="top-level parameter override NAME=VALUE of the testbench top (cocotb: the toplevel) (repeat)",
        ),
    ] = None,
    plusarg: Annotated[
        list[str] | None, typer.Option("--plusarg", help="runtime plusarg ARG or ARG=VALUE, passed as +ARG (repeat)")
    ] = None,
    include_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--include-dir", "-I", help="extra `include dir (the files' folders are searched anyway) (repeat)"
        ),
    ] = None,
    lcov: Annotated[
        Path | None,
        typer.Option(
            "--lcov", help="write an lcov tracefile (lines, branches per DUT file; genhtml FILE) (docs/reports.md)"
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="write an HTML report (DUT source annotated per line and metric) as DIR/index.html"
        ),
    ] = None,
) -> None:
    """Score one stimulus against a design (files) or a CVDP problem (--problems/--problem-id).

    Examples (the files ship in examples/cvdp/ of the repository; run from its root):

      reward-service score --design examples/cvdp/Attenuator.sv --testbench examples/cvdp/tb_attenuator.sv --dut-instance uut --simulator verilator --json

      reward-service score --problems examples/cvdp/attenuator.jsonl --problem-id cvdp_copilot_Attenuator_0011 --completion examples/cvdp/completion.md

      reward-service score --design examples/cvdp/Attenuator.sv --cocotb examples/cvdp/test_attenuator.py --toplevel Attenuator --engine fast

    Files keep their paths relative to the current directory (`include "pkg/defs.svh", $readmemh("data/golden.hex")); data files (.hex .mem .dat .txt ...) are given like sources.
    """
    from reward_service.engine import Engine
    from reward_service.problems import load_problems
    from reward_service.settings import get_settings

    # a repeatable option that is not given arrives as None (a None default, not a shared list)
    design, testbench, cocotb, metric = design or [], testbench or [], cocotb or [], metric or []
    define, param, plusarg, include_dir = define or [], param or [], plusarg or [], include_dir or []
    stimuli = [bool(testbench), bool(cocotb), completion is not None]
    if sum(stimuli) != 1:
        raise typer.BadParameter("give exactly one stimulus: --testbench, --cocotb or --completion")
    if bool(design) == bool(problem_id):
        raise typer.BadParameter("give the design files (--design) or a problem (--problems + --problem-id)")
    if problem_id and not problems:
        raise typer.BadParameter("--problem-id needs --problems FILE.jsonl")
    if testbench:
        stimulus: dict = {"kind": "sv_testbench", "files": _files(testbench), "top": top}
    elif cocotb:
        if not toplevel and not problem_id:
            raise typer.BadParameter("--cocotb needs --toplevel (the DUT module the test drives)")
        stimulus = {
            "kind": "cocotb",
            "files": _files(cocotb, test_dir=cocotb[0].resolve().parent),
            "test_module": cocotb[0].stem,
            "toplevel": toplevel,
        }
    else:
        assert completion is not None, "exactly one stimulus is given (checked above)"
        stimulus = {"kind": "completion", "text": _read(completion)}

    problem_set = {}
    if problems:
        try:
            problem_set = load_problems(problems)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(f"--problems: {exc}") from exc
    request: dict = {"stimulus": stimulus, "seed": seed}
    if problem_id:
        if problem_id not in problem_set:
            raise typer.BadParameter(
                f"problem {problem_id!r} is not in {problems} (see `reward-service problems --problems {problems}`)"
            )
        request["problem_id"] = problem_id
    else:
        request["design"] = {"files": _files(design), "toplevel": toplevel}
    coverage: dict = {}
    if dut_instance:
        coverage["scope"] = dut_instance
    if metric:
        coverage["metrics"] = metric
    if target is not None:
        coverage["targets"] = [{"metric": "overall", "percent": target}]
    if coverage:
        request["coverage"] = coverage
    if simulator:
        request["simulator"] = simulator.value
    if engine_choice:
        request["engine"] = engine_choice.value
    if dut_writes:
        request["stimulus_policy"] = {"dut_writes": dut_writes.value}
    if shaping:
        request["reward"] = {"shaping": shaping.value}
    limits = {k: v for k, v in {"run_s": run_s, "compile_s": compile_s}.items() if v is not None}
    if limits:
        request["limits"] = limits
    build = _build_options(define, param, plusarg, include_dir)
    if build:
        request["build"] = build
    if lcov or html:  # the result then carries every point and the DUT sources (docs/reports.md)
        request["report"] = {"points": True}

    settings = get_settings()
    if no_cache:
        settings = settings.model_copy(update={"result_cache": False})
    engine = Engine(settings=settings, problems=problem_set)
    if not json_out:
        with err.status("simulating ..."):
            result = engine.score(request)
    else:
        result = engine.score(request)
    if json_out:
        sys.stdout.write(result.model_dump_json(indent=1) + "\n")
        if show_log:  # the JSON holds it too; a readable copy beside it
            _print_log(result.log, err)
        if explain:  # the JSON holds it too (coverage.unreachable_note)
            err.print(_explain_text(result), markup=False, highlight=False, soft_wrap=True)
    else:
        if target is not None and target <= 1:
            err.print(f"note: --target is in percent; {target:g} means {target:g} %, not {100 * target:g} %")
        targets_given = bool((request.get("coverage") or {}).get("targets")) or problem_id is not None
        _print_result(
            result,
            show_uncovered,
            targets_given,
            show_log,
            explain=explain,
            target_name="TARGET" if problem_id else "target",
            shaping=(shaping or Shaping.chorus).value,
        )
    if lcov or html:
        _write_reports(result, lcov, html, err if json_out else console, "TARGET" if problem_id else "target")
    if feedback:  # reward_service/feedback.py; the DUT sources give the uncovered lines' text
        from reward_service.feedback import annotated_source, feedback_text

        problem = problem_set.get(problem_id) if problem_id else None
        sources = problem.design.files if problem else request["design"]["files"]
        text = feedback_text(result, sources=sources, target_percent=problem.target_percent if problem else target)
        (err if json_out else console).print(
            f"{text}\n\n{annotated_source(sources, result.uncovered)}".rstrip(),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if result.status == Status.sandbox_error:
        raise typer.Exit(EXIT_INFRA)
    if result.status != Status.ok:
        raise typer.Exit(EXIT_SAMPLE_FAILED)


def _write_reports(
    result: ScoreResult, lcov: Path | None, html: Path | None, out: Console, target_name: str = "target"
) -> None:
    """Write the lcov tracefile and the HTML report of ``result`` (scored with report.points);
    a result without points (the request was refused before simulating) writes none, saying so."""
    from reward_service.reports import html as html_report
    from reward_service.reports.lcov import tracefile

    if result.detail is None:
        out.print(
            f"no coverage points to report ({result.status.value}): --lcov/--html not written",
            highlight=False,
            markup=False,
        )
        return
    if lcov:
        lcov.parent.mkdir(parents=True, exist_ok=True)
        lcov.write_text(tracefile(result), encoding="utf-8")
        out.print(
            f"lcov: {lcov} (genhtml --branch-coverage {lcov} -o DIR, run where the DUT files are)",
            highlight=False,
            markup=False,
        )
    if html:
        page = html_report.write(result, html, target_name=target_name)
        out.print(f"html: {page}", highlight=False, markup=False)


#: Statuses whose log is the simulation's own (not a compiler's): it may hold the testbench's verdict.
_SIMULATED = (Status.ok, Status.runtime_error, Status.timeout, Status.resource_limit)
#: Characters of the log ``--log`` prints (its end; the result's log is bounded by limits.output_kb).
LOG_PRINT_CHARS = 64 * 1024
#: Verdict lines of the testbench the human output lists.
VERDICT_LINES = 10


def _print_log(log: str, out: Console) -> None:
    if not log:
        out.print("log: (empty)")
        return
    cut = len(log) - LOG_PRINT_CHARS
    out.print(f"log ({len(log)} characters{f', the first {cut} left out' if cut > 0 else ''}):")
    out.print(log[-LOG_PRINT_CHARS:], markup=False, highlight=False, soft_wrap=True)


def _explain_text(result: ScoreResult) -> str:
    """What the unreachability proof did for ``result`` (``--explain``)."""
    note = result.coverage.unreachable_note
    if note:
        return f"unreachable points: {note}"
    return (
        "unreachable points: no proof was run (only CVDP problems, or requests with "
        "coverage.exclude_unreachable set, prove points unreachable; docs/formal.md)"
    )


def _reward_text(result: ScoreResult, shaping: str) -> str:
    """The reward and, when points were proved unreachable, the figure it is made from."""
    if result.reward is None:
        return "None (infrastructure failure)"
    text = f"{result.reward:.4f}"
    overall = result.coverage.overall
    if proved_points(result) and overall is not None and shaping in ("chorus", "ratio"):
        made = f"1 + raw overall {overall:.4f}" if shaping == "chorus" else f"raw overall {overall:.4f}"
        text += f" ({made}: the reward counts every point, proved unreachable or not)"
    return text


def _print_result(
    result: ScoreResult,
    show_uncovered: int,
    targets_given: bool,
    show_log: bool = False,
    *,
    explain: bool = False,
    target_name: str = "target",
    shaping: str = "chorus",
) -> None:
    colour = "green" if result.status == Status.ok else "red"
    console.print(
        f"status: [{colour}]{result.status.value}[/]" + (f" — {result.message}" if result.message else ""),
        highlight=False,
    )
    reasons: dict[str, list[str]] = {}
    if result.coverage.metrics:
        # the heading as a line of its own: a table title wraps at the (narrow) table's width
        console.print(f"coverage of DUT instance {result.coverage.scope or '(all DUT files)'}", highlight=False)
        proved = proved_points(result)
        table = Table()
        columns = ["metric", "covered", "total", *(["proved unreachable"] if proved else []), "percent"]
        for col in columns:
            table.add_column(col, justify="right" if col != "metric" else "left")
        for name, m in result.coverage.metrics.items():
            extra = [str(m.unreachable) if m.available else "-"] if proved else []
            if not m.available:
                table.add_row(name, "-", "-", *extra, "unavailable")
                reasons.setdefault(m.reason or "", []).append(name)
            else:
                pct = f"{100 * m.ratio:.2f}" if m.ratio is not None else "no points"
                table.add_row(name, str(m.covered), str(m.total), *extra, pct)
        overall, reachable = result.coverage.overall, result.coverage.overall_reachable
        blank = [""] * (len(columns) - 2)
        table.add_row("overall", *blank, f"{100 * overall:.2f}" if overall is not None else "n/a", style="bold")
        if proved and reachable is not None:
            table.add_row("overall, reachable", *blank[:-1], str(proved), f"{100 * reachable:.2f}", style="bold")
        print_table(console, table)
        for reason, names in reasons.items():
            console.print(f"unavailable ({', '.join(names)}): {reason}", highlight=False)
    if result.tests:
        passed = sum(t.passed for t in result.tests)
        console.print(f"cocotb tests: {passed}/{len(result.tests)} passed")
        for t in result.tests:
            if not t.passed:
                console.print(f"  FAILED {t.name}: {(t.message or '').strip()[:300]}", markup=False, highlight=False)
    if result.status in _SIMULATED and result.log:
        from reward_service.log_verdicts import verdict_lines

        verdicts, more = verdict_lines(result.log, VERDICT_LINES)
        if verdicts:
            console.print(f"testbench verdict (lines of the log{f'; {more} more, --log shows all' if more else ''}):")
            for line in verdicts:
                console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    # no engine for a sample refused before it ran (invalid input) or an infrastructure failure
    console.print(f"reward: [bold]{_reward_text(result, shaping)}[/]   engine: {result.engine or '-'}", highlight=False)
    verdict = verdict_text(result, targets_given, target_name)
    hint = " (--target sets one)" if verdict.endswith("no target given") else ""
    console.print(verdict + hint, markup=False, highlight=False)
    note = result.coverage.unreachable_note
    if explain and not (note and note in result.message):  # an exclusion's note is in the status line already
        console.print(_explain_text(result), markup=False, highlight=False, soft_wrap=True)
    if result.fallback:
        console.print(f"fast path not used: {result.fallback}", markup=False, highlight=False)
    for v in result.violations:  # status refused (docs/integrity.md)
        console.print(f"  refused: {v.file}:{v.line} {v.kind} {v.target}", markup=False, highlight=False)
    if result.parameter_overrides:
        shown = ", ".join(f"{o.instance}.{o.name}={o.value} (design: {o.default})" for o in result.parameter_overrides)
        console.print(f"DUT parameters set by the testbench: {shown}", markup=False, highlight=False)
    for race in result.races:  # testbench-DUT races at a clock edge (docs/semantics.md)
        console.print(f"  {race.lint()}", markup=False, highlight=False, soft_wrap=True)
    if result.uncovered and show_uncovered:
        console.print(
            f"uncovered points (first {min(show_uncovered, len(result.uncovered))} of {len(result.uncovered)}):"
        )
        for p in result.uncovered[:show_uncovered]:
            console.print(f"  {p.file}:{p.line} {p.metric} {p.detail}", markup=False, highlight=False)
    if show_log:
        _print_log(result.log, console)
    elif result.status not in (Status.ok,) and result.log:
        console.print("log tail (--log prints more):")
        console.print(result.log[-1500:], markup=False, highlight=False)
    timings = _timings_text(result.timings)
    console.print(f"[dim]timings: {timings}; cache: result={result.cache.result} build={result.cache.build}[/]")


#: Stages timed inside ``simulate`` (shown in brackets after it, not added to the total twice).
_SUB_STAGES = ("build", "run")


def _timings_text(timings: dict[str, float]) -> str:
    """``prepare 1 ms, toolchain 1475 ms, ..., simulate 404 ms (build 0 ms, run 353 ms), ...,
    total 2411 ms``: the top-level stages add up to the total but for a few ms of glue."""
    parts = []
    for name, ms in timings.items():
        if name in _SUB_STAGES and "simulate" in timings:
            continue
        text = f"{name} {ms:.0f} ms"
        if name == "simulate":
            inner = [f"{k} {timings[k]:.0f} ms" for k in _SUB_STAGES if k in timings]
            text += f" ({', '.join(inner)})" if inner else ""
        parts.append(text)
    return ", ".join(parts)


@app.command("problems", cls=_Command)
def list_problems(
    problems: Annotated[Path, typer.Option("--problems", help="CVDP cid012 JSONL")],
    json_out: Annotated[bool, typer.Option("--json", help="print JSON lines")] = False,
    ceiling: Annotated[
        bool,
        typer.Option(
            "--ceiling",
            help="classify every coverage point of each problem's DUT: proved unreachable, witnessed "
            "(a replayed closure testbench covers it) or undecided (docs/formal.md); runs the prover, "
            "the witness search and two replays per design on first use, kept in the cache",
        ),
    ] = False,
    only: Annotated[str | None, typer.Option("--only", help="with --ceiling: problem ids containing this")] = None,
    again: Annotated[bool, typer.Option("--again", help="with --ceiling: run kept closures again")] = False,
) -> None:
    """List the problems of a CVDP JSONL file: id, difficulty, DUT module and instance, target.
    With --ceiling: per problem and metric the points total, unreachable, witnessed and
    undecided."""
    from reward_service.problems import load_problems

    try:
        loaded = load_problems(problems)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"--problems: {exc}") from exc
    if ceiling:
        _print_ceiling([p for p in loaded.values() if not only or only in p.id], json_out, again)
        return
    if json_out:
        for p in loaded.values():
            sys.stdout.write(
                p.model_dump_json(
                    include={"id", "difficulty", "agentic", "dut_instance", "target_percent", "testbench_path"}
                )
                + "\n"
            )
        return
    # the heading as a line of its own: a table title wraps at the table's width
    noun = "problem" if len(loaded) == 1 else "problems"
    console.print(f"{len(loaded)} {noun} in {problems}", highlight=False, markup=False)
    table = Table()
    for col in ("id", "difficulty", "agentic", "DUT module", "instance", "target %"):
        table.add_column(col, overflow="fold", no_wrap=col == "id")
    for p in loaded.values():
        table.add_row(
            p.id,
            p.difficulty or "",
            "yes" if p.agentic else "no",
            p.design.toplevel or "",
            p.dut_instance,
            f"{p.target_percent:g}",
        )
    print_table(console, table)


def _print_ceiling(problems: list[Any], json_out: bool, again: bool) -> None:
    """``problems --ceiling``: each problem's closure (reward_service.ceiling), a JSON line or
    a table row per problem as it finishes."""
    from reward_service.ceiling import problem_ceilings, shown_attainable

    fields = ("total", "unreachable", "witnessed", "undecided")
    table = Table()
    for col in ("id", "metric", *fields, "shown attainable %", "target %"):
        table.add_column(col, overflow="fold", no_wrap=col == "id")
    for p, summary in problem_ceilings(problems, again):
        metrics = {m: {f: summary["metrics"].get(m, {}).get(f, 0) for f in fields} for m in p.metrics}
        if json_out:
            line = {"id": p.id, "target_percent": p.target_percent, "status": summary["status"], "metrics": metrics}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
            continue
        for m, c in metrics.items():
            # what the witnessed points show attainable on the reachable figure (undecided ones may add)
            shown = shown_attainable(summary, [m])
            text = "-" if shown is None else f"{shown:.2f}"
            table.add_row(p.id, m, *(str(c[f]) for f in fields), text, f"{p.target_percent:g}")
    if not json_out:
        print_table(console, table)


@app.command(cls=_Command)
def serve(
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="embedded mode: parallel simulations (default: one per core); with a broker "
            "(REWARD_SERVICE_BROKER_URL): API processes (default: 1)",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "info",
) -> None:
    """Run the HTTP API (OpenAPI at /docs; see docs/api.md).

    Without REWARD_SERVICE_BROKER_URL it runs embedded: one process scores requests in its own pool under the bubblewrap sandbox, with in-memory problems and jobs.

    With a broker URL the API only queues work for the Celery workers and keeps problems and batches in Redis.

      reward-service serve --port 8000 --workers 4
    """
    import uvicorn

    from reward_service.settings import get_settings

    settings = get_settings()
    if settings.broker_url:
        uvicorn.run(
            "reward_service.api.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers or 1,
            log_level=log_level,
        )
        return
    from reward_service.api import create_app

    if workers:
        settings = settings.model_copy(update={"score_workers": workers})
    uvicorn.run(create_app(settings=settings), host=host, port=port, log_level=log_level)


@app.command(cls=_Command)
def mcp(
    url: Annotated[
        str | None,
        typer.Option("--url", help="a running service (http://HOST:PORT); default: an embedded one in this process"),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="REWARD_SERVICE_API_KEY", help="bearer key of --url")
    ] = None,
    problems: Annotated[
        Path | None, typer.Option("--problems", help="register this CVDP cid012 JSONL's problems first")
    ] = None,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (default; for assistants) or http (streamable HTTP)")
    ] = "stdio",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port of --transport http")] = 8765,
) -> None:
    """Serve the episode tools (reset, read_file, simulate, submit, state) over MCP (docs/episodes.md).

    reward-service mcp --problems examples/cvdp/attenuator.jsonl

    reward-service mcp --url http://127.0.0.1:8000
    """
    from reward_service.mcp_server import EpisodeClient, build_mcp, service_client

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("--transport is stdio or http", param_hint="--transport")
    jsonl = _read(problems).encode() if problems is not None else None
    client = EpisodeClient(service_client(url, api_key), problems_jsonl=jsonl)
    server = build_mcp(client)
    if transport == "http":
        server.run(transport="http", port=port, show_banner=False)
    else:
        server.run(show_banner=False)


# Batch rescoring and the CVDP-ECov evaluation live in reward_service/rescore/commands.py.
from reward_service.rescore.commands import eval_cvdp_cmd, rescore_cmd  # noqa: E402

app.command("rescore", cls=_Command)(rescore_cmd)
app.command("eval-cvdp", cls=_Command)(eval_cvdp_cmd)


if __name__ == "__main__":
    app()
