"""The ``rescore`` and ``eval-cvdp`` commands (registered in :mod:`reward_service.cli`).

Both run the same steps — load problems and completions, resume from ``R.jsonl``, score what is
missing (embedded or through ``--server``), summarise — and differ only in what they print.
Exit status: 0 every sample has a final result; 2 usage error or bad input (nothing scored);
3 infrastructure failures remain (``sandbox_error`` results, or the service went away) — re-run
to retry them; 130 interrupted (Ctrl-C) — re-run to continue.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from reward_service.console import make_console
from reward_service.models import ALL_METRICS
from reward_service.rescore.report import metric_mapping, render_cvdp_table, render_markdown, summarise
from reward_service.rescore.runner import RunOutcome, client_scorer, engine_scorer, plan, run
from reward_service.rescore.store import CompletionSet, ResultStore, read_completions

__all__ = ["rescore_cmd", "eval_cvdp_cmd", "parse_ks"]

EXIT_INFRA, EXIT_INTERRUPTED = 3, 130
err = make_console(stderr=True)


def parse_ks(text: str) -> list[int]:
    """``"1,5,10"`` -> ``[1, 5, 10]`` (sorted, unique, 1 always included). Raises
    ``typer.BadParameter`` for anything but positive integers."""
    try:
        ks = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise typer.BadParameter(f"--k takes comma-separated positive integers, got {text!r}") from None
    if any(k < 1 for k in ks):
        raise typer.BadParameter(f"--k values must be >= 1, got {text!r}")
    return sorted(ks | {1})


@dataclass
class _Options:
    problems: Path
    completions: Path
    out: Path
    server: str | None
    api_key: str | None
    concurrency: int | None
    ks: list[int]
    quiet: bool
    verbose: bool
    no_cache: bool
    n: int | None = None


def _setup_logging(verbose: bool) -> None:
    if not verbose:
        return
    logger = logging.getLogger("reward_service.rescore")
    logger.setLevel(logging.INFO)
    if err.is_terminal:
        from rich.logging import RichHandler

        handler: logging.Handler = RichHandler(console=err, show_time=False, show_path=False)
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)


def _first_n(completions: CompletionSet, n: int) -> CompletionSet:
    kept = []
    seen: dict[str, int] = {}
    for sample in completions.samples:
        seen[sample.problem_id] = seen.get(sample.problem_id, 0) + 1
        if seen[sample.problem_id] <= n:
            kept.append(sample)
    short = sorted(pid for pid, count in seen.items() if count < n)
    if short:
        err.print(
            f"note: {len(short)} problem(s) have fewer than --n {n} samples (e.g. {short[0]}); "
            "their Pass@1 averages the samples they have",
            highlight=False,
        )
    return CompletionSet(samples=kept, duplicates=completions.duplicates)


def _execute(opts: _Options) -> tuple[dict[str, Any], RunOutcome, dict[str, Any]]:
    """Load, resume, score, summarise. Returns ``(report, outcome, problems)``; raises
    ``typer.BadParameter`` for bad input before anything is scored."""
    from reward_service.problems import load_problems
    from reward_service.settings import get_settings

    _setup_logging(opts.verbose)
    try:
        problems = load_problems(opts.problems)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"--problems: {exc}") from exc
    try:
        completions = read_completions(opts.completions, problems)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"--completions: {exc}") from exc
    if opts.n is not None:
        completions = _first_n(completions, opts.n)
    for line in completions.duplicates[:10]:
        err.print(f"duplicate: {line}", highlight=False, markup=False)
    if len(completions.duplicates) > 10:
        err.print(f"... and {len(completions.duplicates) - 10} more duplicate lines", highlight=False)
    store = ResultStore(opts.out)
    with contextlib.ExitStack() as stack:
        unlocked: OSError | None = None
        try:
            stack.enter_context(store.locked())
        except ValueError as exc:
            raise typer.BadParameter(f"--out: {exc}") from exc
        except OSError as exc:  # e.g. a read-only place: fine for a report of finished results
            unlocked = exc
        try:
            held = store.load()
            todo, final, retry = plan(completions.samples, held, problems)
            if todo:
                if unlocked is not None:
                    raise unlocked
                store.open()  # an unwritable --out fails now, not after the first sample
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(f"--out: {exc}") from exc
        others = len(held.keys() - {s.key for s in completions.samples})
        if others:
            err.print(
                f"note: {opts.out} also holds {others} results of samples not in {opts.completions} "
                "(left out of the report)",
                highlight=False,
                markup=False,
            )
        if not opts.quiet:
            err.print(
                f"{len(completions.samples)} samples of {len({s.problem_id for s in completions.samples})} "
                f"problems: {final} already in {opts.out}, {retry} infrastructure failures to retry, "
                f"{len(todo)} to score ({'server ' + opts.server if opts.server else 'embedded'})",
                highlight=False,
                markup=False,
            )
        outcome = RunOutcome()
        if todo:
            if opts.server:
                try:
                    scorer = client_scorer(opts.server, api_key=opts.api_key)
                except ImportError as exc:
                    raise typer.BadParameter(f"--server needs reward_service.client: {exc}") from exc
                concurrency = opts.concurrency or 8
            else:
                settings = get_settings()
                if opts.no_cache:
                    settings = settings.model_copy(update={"result_cache": False})
                scorer = engine_scorer(problems, settings)
                concurrency = opts.concurrency or os.cpu_count() or 1
            outcome = run(
                todo, problems, scorer, store, concurrency=concurrency, show_progress=not opts.quiet, console=err
            )
        report = summarise(completions.samples, store.load(), problems, opts.ks, duplicates=len(completions.duplicates))
        store.close()
    return report, outcome, problems


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    if path:
        path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def _finish(report: dict[str, Any], outcome: RunOutcome) -> None:
    if outcome.interrupted:
        err.print(
            f"interrupted: {outcome.scored} samples scored in this run are kept; re-run the same command to continue",
            highlight=False,
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    if outcome.stopped_by:
        err.print(
            f"stopped: the service is unreachable ({outcome.stopped_by}); {outcome.scored} samples "
            "scored in this run are kept; re-run to continue",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(EXIT_INFRA)
    if report["sandbox_errors"]:
        err.print(
            f"{report['sandbox_errors']} samples hit infrastructure failures (sandbox_error); they are "
            "not counted as failures; re-run the same command to retry them",
            highlight=False,
        )
        raise typer.Exit(EXIT_INFRA)


_Problems = Annotated[Path, typer.Option("--problems", help="CVDP cid012 JSONL holding the problems")]
_Completions = Annotated[
    Path,
    typer.Option(
        "--completions", help='JSONL, one sample a line: {"problem_id", "sample_id", "completion"} (raw model text)'
    ),
]
_Server = Annotated[
    str | None,
    typer.Option(
        "--server", help="score through a running reward-service at this URL (default: embedded, on this machine)"
    ),
]
_ApiKey = Annotated[
    str | None, typer.Option("--api-key", envvar="REWARD_SERVICE_API_KEY", help="bearer API key for --server")
]
_Concurrency = Annotated[
    int | None,
    typer.Option(
        "--concurrency", "-j", min=1, help="samples scored at once (default: one per core embedded, 8 with --server)"
    ),
]
_ReportJson = Annotated[Path | None, typer.Option("--report-json", help="write the summary as JSON")]
_ReportMd = Annotated[Path | None, typer.Option("--report-md", help="write the summary as Markdown")]
_ReportHtml = Annotated[
    Path | None,
    typer.Option(
        "--report-html", help="write the summary as an HTML page: pass@k, per-problem coverage (docs/reports.md)"
    ),
]
# metavar="": shown as bare flags in --help (typer 0.2x prints `<bool>` after them)
_Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", metavar="", help="no progress bar or start line (warnings still go to stderr)")
]
_Verbose = Annotated[bool, typer.Option("--verbose", "-v", metavar="", help="log one line per scored sample (stderr)")]
_NoCache = Annotated[bool, typer.Option("--no-cache", metavar="", help="embedded: do not reuse cached results")]


def _write_html(path: Path | None, report: dict, title: str) -> None:
    if path:
        from reward_service.reports.rescore_html import write

        write(report, path, title)


def rescore_cmd(
    problems: _Problems,
    completions: _Completions,
    out: Annotated[Path, typer.Option("--out", help="results JSONL (appended; an existing file is resumed)")],
    server: _Server = None,
    api_key: _ApiKey = None,
    concurrency: _Concurrency = None,
    k: Annotated[str, typer.Option("--k", help="k values of pass@k, comma-separated")] = "1,5,10",
    report_json: _ReportJson = None,
    report_md: _ReportMd = None,
    report_html: _ReportHtml = None,
    quiet: _Quiet = False,
    verbose: _Verbose = False,
    no_cache: _NoCache = False,
) -> None:
    """Score a file of completions against CVDP problems into pass@k and coverage (resumable).

    Each finished sample is appended to --out at once; running the same command again skips the samples already there (and retries infrastructure failures), so an interrupted run continues. The Markdown summary goes to stdout. See docs/rescoring.md.

      reward-service rescore --problems examples/cvdp/attenuator.jsonl --completions examples/rescore/completions.jsonl --k 1,2,4 --out /tmp/results.jsonl --report-json /tmp/report.json
    """
    opts = _Options(problems, completions, out, server, api_key, concurrency, parse_ks(k), quiet, verbose, no_cache)
    report, outcome, _ = _execute(opts)
    _write_json(report_json, report)
    markdown = render_markdown(report)
    if report_md:
        report_md.write_text(markdown, encoding="utf-8")
    _write_html(report_html, report, "Rescoring report")
    typer.echo(markdown)
    _finish(report, outcome)


def _ceilings(problems: list[Any]) -> dict[str, Any]:
    """The ``ceiling`` section of an eval-cvdp report: per problem its closure's ``status``,
    ``undecided`` points (all metrics), the overall it shows attainable on the reachable figure
    (:func:`~reward_service.ceiling.shown_attainable`, percent) and whether that meets its
    TARGET; then the ids whose TARGET is ``not_shown`` attainable. Closures come from the local
    cache (``reward-service problems --ceiling`` keeps them) or are run now."""
    from reward_service.ceiling import problem_ceilings, shown_attainable

    per: dict[str, Any] = {}
    for p, summary in problem_ceilings(problems):
        shown = shown_attainable(summary, list(p.metrics))
        per[p.id] = {
            "status": summary["status"],
            "undecided": sum(summary.get("metrics", {}).get(m, {}).get("undecided", 0) for m in p.metrics),
            "shown_attainable_percent": shown,
            "target_percent": p.target_percent,
            "target_shown_attainable": shown is not None and p.target_percent is not None and shown >= p.target_percent,
        }
    return {"problems": per, "not_shown": [pid for pid, c in per.items() if not c["target_shown_attainable"]]}


def eval_cvdp_cmd(
    completions: _Completions,
    problems: Annotated[
        Path | None,
        typer.Option(
            "--problems",
            help="cid012 JSONL (default: $REWARD_SERVICE_CASES/cvdp/cid012.jsonl, else "
            "../shared/cases/cvdp/cid012.jsonl)",
        ),
    ] = None,
    n: Annotated[int | None, typer.Option("--n", min=1, help="samples per problem: the first N of each")] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="results JSONL, resumed when it exists (default: <completions>.cvdp-results.jsonl)"),
    ] = None,
    server: _Server = None,
    api_key: _ApiKey = None,
    concurrency: _Concurrency = None,
    report_json: _ReportJson = None,
    report_md: _ReportMd = None,
    report_html: _ReportHtml = None,
    quiet: _Quiet = False,
    verbose: _Verbose = False,
    no_cache: _NoCache = False,
    ceiling: Annotated[
        bool,
        typer.Option(
            "--ceiling",
            metavar="",
            help="also each problem's attainable ceiling (proved + witnessed points, docs/formal.md): "
            "kept closures are read, missing ones run here (up to minutes per design)",
        ),
    ] = False,
) -> None:
    """CVDP-ECov evaluation: Pass@1 and mean coverage of the cid012 problems, non-agentic and agentic apart.

    The table LLM4Cov (arXiv 2602.16953) and CHORUS (arXiv 2608.10090) report, with our open-source metric mapping stated. Runs the same resumable scoring as `rescore`.

      reward-service eval-cvdp --completions examples/rescore/cid012_completions.jsonl --n 2 --out /tmp/cvdp-results.jsonl
    """
    if problems is None:
        cases = os.environ.get("REWARD_SERVICE_CASES")
        problems = Path(cases) / "cvdp" / "cid012.jsonl" if cases else Path("../shared/cases/cvdp/cid012.jsonl")
        if not problems.is_file():
            raise typer.BadParameter(
                f"no cid012 file at {problems} (relative to the current directory): "
                "pass --problems FILE or set REWARD_SERVICE_CASES",
                param_hint="--problems",
            )
    out = out or completions.with_name(completions.stem + ".cvdp-results.jsonl")
    opts = _Options(problems, completions, out, server, api_key, concurrency, [1], quiet, verbose, no_cache, n=n)
    report, outcome, loaded = _execute(opts)
    metrics = [m for m in ALL_METRICS if any(m in p.metrics for p in loaded.values())]
    report["problems_in_file"] = len(loaded)
    report["metric_mapping"] = metric_mapping(metrics)
    if ceiling:
        report["ceiling"] = _ceilings([loaded[pid] for pid in report["by_problem"]])
    _write_json(report_json, report)
    table = render_cvdp_table(report, metrics, problems_total=len(loaded))
    if report_md:
        report_md.write_text(table + "\n" + render_markdown(report, title="Details"), encoding="utf-8")
    _write_html(report_html, report, "CVDP-ECov (cid012) evaluation")
    if not quiet:
        err.print(f"results: {out}", highlight=False, markup=False)
    typer.echo(table)
    _finish(report, outcome)
