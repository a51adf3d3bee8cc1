"""Score the samples of a completions file that ``R.jsonl`` does not hold yet.

A *scorer* is any callable ``ScoreRequest -> ScoreResult``: :func:`engine_scorer` (embedded,
simulations on this machine) or :func:`client_scorer` (a running reward-service). The runner
keeps at most ``2 × concurrency`` samples in flight on a thread pool (threads suffice: the work
is sandboxed subprocesses or HTTP waits), and the calling thread alone appends each result to
the :class:`~reward_service.rescore.store.ResultStore` as it finishes.

Resume policy: a sample whose last line in ``R.jsonl`` is final (any status but
``sandbox_error``) is never scored again; a ``sandbox_error`` line is re-tried. A result line
written for a different completion text (``completion_sha256``) is an error: the output belongs
to another completions file. Ctrl-C (``KeyboardInterrupt``) stops the run: the samples waiting
for a worker are dropped, the samples being scored finish and are written (their sandboxes run
in a session of their own, so the terminal's signal does not reach them); a second Ctrl-C drops
those too. The next run continues from the file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from reward_service.errors import RewardServiceError
from reward_service.models import Completion, CoverageReport, RewardSpec, ScoreRequest, ScoreResult, Status
from reward_service.problems.resolve import resolve_request
from reward_service.rescore.store import (
    ResultStore,
    Sample,
    SampleKey,
    is_final,
    problem_digest,
    result_record,
)
from reward_service.reward import shape_reward

__all__ = ["Scorer", "ServiceDown", "engine_scorer", "client_scorer", "plan", "run", "RunOutcome"]

log = logging.getLogger("reward_service.rescore")

Scorer = Callable[[ScoreRequest], ScoreResult]


class ServiceDown(RewardServiceError, RuntimeError):
    """The scoring service cannot be reached (after the client's retries): the run stops."""


def engine_scorer(problems: Mapping[str, Any], settings=None) -> Scorer:
    """Embedded scoring: one :class:`~reward_service.scoring.Engine` (bubblewrap sandbox) shared
    by the worker threads. ``settings`` defaults to the process settings."""
    from reward_service.engine import Engine

    return Engine(settings=settings, problems=problems).score


def client_scorer(base_url: str, api_key: str | None = None, wait_s: float = 60.0) -> Scorer:
    """Scoring by a running reward-service at ``base_url``: one ``POST /v1/score`` per sample
    through the thread-safe :class:`reward_service.client.RewardClient` (retries with backoff on
    connection errors, 429 and 502/503/504; a 202 is long-polled until the job is done), so each
    result is written as soon as it arrives.

    The returned scorer raises :class:`ServiceDown` when the service stays unreachable or refuses
    the API key (401/403): the run stops. A sample the service refuses as too large or malformed
    (413/422) for its stimulus or completion is an ``invalid_input`` result with the service's
    message; a refusal about anything else (the design over the server's file limits, a schema
    the server does not know) stops the run too, since scoring every sample of a problem 0 for
    it would make pass@k silently wrong. Other refusals (500) raise, and the runner records
    them as ``sandbox_error`` (re-tried by the next run).
    """
    from reward_service.client import RequestFailed, RewardClient, ServiceUnavailable

    client = RewardClient(base_url, api_key=api_key)

    def score(request: ScoreRequest) -> ScoreResult:
        try:
            return client.score(request, wait=wait_s)
        except ServiceUnavailable as exc:
            raise ServiceDown(str(exc)) from exc
        except RequestFailed as exc:
            if exc.status_code in (401, 403):
                raise ServiceDown(str(exc)) from exc
            if exc.status_code in (413, 422):
                if _about_the_sample(exc.detail):
                    return _invalid_input(f"the service refused the sample: {exc.detail}"[:500], request.reward)
                raise ServiceDown(
                    f"the service refused a request for a reason that is not the sample's "
                    f"({exc.status_code}: {exc.detail}); fix the problem or the server's limits "
                    "and re-run"
                ) from exc
            raise

    return score


def _invalid_input(message: str, spec: RewardSpec) -> ScoreResult:
    """The ``invalid_input`` result of a sample refused before it was scored, rewarded by
    ``spec`` as any sample without coverage (:func:`reward_service.reward.shape_reward`)."""
    reward = shape_reward(Status.invalid_input, CoverageReport(), False, spec)
    return ScoreResult(status=Status.invalid_input, reward=reward, message=message)


def _about_the_sample(detail: str | None) -> bool:
    """Whether a 413/422 message concerns what the model wrote (the stimulus or completion)."""
    text = (detail or "").lower()
    return ("stimulus" in text or "completion" in text) and "design" not in text


def plan(
    samples: list[Sample], done: Mapping[SampleKey, Mapping[str, Any]], problems: Mapping[str, Any] | None = None
) -> tuple[list[Sample], int, int]:
    """Split ``samples`` by what ``R.jsonl`` holds: ``(to score, already final, sandbox_error
    lines to retry)``. Raises ``ValueError`` when a held result was written for another
    completion text or (given ``problems``) another version of its problem."""
    todo, final, retry, stale, changed = [], 0, 0, [], []
    digests = {pid: problem_digest(p) for pid, p in (problems or {}).items()}
    for sample in samples:
        record = done.get(sample.key)
        if record is None:
            todo.append(sample)
        elif record.get("completion_sha256") not in (None, sample.digest):
            stale.append(sample)
        elif record.get("problem_sha256") not in (None, digests.get(sample.problem_id, record.get("problem_sha256"))):
            changed.append(sample)
        elif is_final(record):
            final += 1
        else:
            retry += 1
            todo.append(sample)
    if stale:
        names = ", ".join(f"{s.problem_id}/{s.sample_id}" for s in stale[:5])
        raise ValueError(
            f"the output file holds results of {len(stale)} sample(s) whose completion text "
            f"differs from the completions file ({names}{', ...' if len(stale) > 5 else ''}); "
            "write to a new --out"
        )
    if changed:
        names = ", ".join(sorted({s.problem_id for s in changed})[:5])
        raise ValueError(
            f"the output file holds results of {len(changed)} sample(s) scored against another "
            f"version of their problem ({names}: design, targets, engine or limits changed in "
            "the problems file); write to a new --out"
        )
    return todo, final, retry


@dataclass
class RunOutcome:
    """What one run did: samples ``scored`` (lines written), ``sandbox_errors`` among them,
    whether it was ``interrupted`` (Ctrl-C) and, when the service went away, ``stopped_by``."""

    scored: int = 0
    sandbox_errors: int = 0
    interrupted: bool = False
    stopped_by: str | None = None


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.2f}/s" if speed else "--/s", style="progress.data.speed")


def _request(problems: Mapping[str, Any], sample: Sample) -> ScoreRequest | ScoreResult:
    """The full request of a sample, resolved as the API and the CLI resolve a ``problem_id``
    request (:func:`~reward_service.problems.resolve.resolve_request`), or the
    ``invalid_input`` result of a completion that cannot form one."""
    try:
        given = ScoreRequest(problem_id=sample.problem_id, stimulus=Completion(text=sample.completion))
        return resolve_request(given, problems[sample.problem_id])
    except ValidationError as exc:  # the completion cannot even form a request
        # no request formed: the default reward rule, as the engine applies to a request that
        # does not validate (reward_service.scoring.finish)
        return _invalid_input(f"invalid request: {exc.errors()[0]['msg']}", RewardSpec())


def _score(scorer: Scorer, problems: Mapping[str, Any], sample: Sample) -> ScoreResult:
    request = _request(problems, sample)
    if isinstance(request, ScoreResult):
        return request
    try:
        return scorer(request)
    except ServiceDown:
        raise
    except Exception as exc:
        log.warning("scoring %s/%s failed: %r", sample.problem_id, sample.sample_id, exc)
        return ScoreResult.infrastructure_failure(f"scoring failed: {type(exc).__name__}: {exc}"[:500])


def run(
    samples: list[Sample],
    problems: Mapping[str, Any],
    scorer: Scorer,
    store: ResultStore,
    *,
    concurrency: int = 1,
    show_progress: bool = True,
    console: Console | None = None,
) -> RunOutcome:
    """Score ``samples`` (see :func:`plan`) with up to ``concurrency`` at once, appending each
    result to ``store`` as it finishes. Returns the :class:`RunOutcome`; never raises for a
    sample (a scorer exception other than :class:`ServiceDown` is recorded as ``sandbox_error``).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    outcome = RunOutcome()
    console = console or Console(stderr=True)
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[passed]} passed, {task.fields[infra]} infra errors"),
        console=console,
        disable=not show_progress or not console.is_terminal,
    )
    digests = {pid: problem_digest(p) for pid, p in problems.items()}
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rescore")
    queue: Iterator[Sample] = iter(samples)
    in_flight: dict[Future, Sample] = {}
    passed = 0

    def fill() -> None:
        while len(in_flight) < 2 * concurrency:
            sample = next(queue, None)
            if sample is None:
                return
            in_flight[pool.submit(_score, scorer, problems, sample)] = sample

    def record(fut: Future) -> None:
        nonlocal passed
        sample = in_flight.pop(fut)
        if fut.cancelled():
            return
        try:
            result = fut.result()
        except ServiceDown as exc:
            outcome.stopped_by = outcome.stopped_by or str(exc)
            return
        if outcome.interrupted and result.status == Status.sandbox_error:
            # the Ctrl-C can reach a step being spawned at that instant (before it is in a
            # session of its own): ours, and re-scored by the next run like any sample not written
            return
        store.append(result_record(sample, result, digests.get(sample.problem_id)))
        outcome.scored += 1
        outcome.sandbox_errors += result.status == Status.sandbox_error
        passed += result.passed
        log.info("scored %s %s %s", sample.problem_id, sample.sample_id, result.status.value)
        progress.update(task, advance=1, passed=passed, infra=outcome.sandbox_errors)

    try:
        with progress:
            task = progress.add_task("rescoring", total=len(samples), passed=0, infra=0)
            fill()
            while in_flight:
                try:
                    finished, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        record(fut)
                    if outcome.stopped_by is not None:
                        break  # the samples still in flight wait on the same dead service
                    if not outcome.interrupted:
                        fill()
                except KeyboardInterrupt:
                    if outcome.interrupted:
                        raise
                    # First Ctrl-C: the sandboxes run in their own session and did not get the
                    # signal, so the samples being scored finish validly; only queued ones are dropped.
                    outcome.interrupted = True
                    for fut in [f for f in in_flight if f.cancel()]:
                        in_flight.pop(fut)
                    console.print(
                        f"interrupted: finishing the {len(in_flight)} samples being scored (Ctrl-C again to drop them)",
                        highlight=False,
                    )
    except KeyboardInterrupt:  # second Ctrl-C: results still running are not written
        console.print(
            f"dropped {len(in_flight)} samples being scored; exiting when their simulations end", highlight=False
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        store.close()
    return outcome
