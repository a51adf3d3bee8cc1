"""The blocking work behind the routes (run through :func:`~reward_service.api.deps.in_thread`):
request checks, problem resolution, submission, waiting, batch views."""

from __future__ import annotations

import logging
import time

from fastapi import HTTPException
from pydantic import ValidationError

from reward_service.api.batch_store import BatchRecord
from reward_service.api.errors import describe_validation
from reward_service.api.schemas import BatchStatus
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import Dispatcher, JobState, JobView, QueueFull
from reward_service.diversity import group_rewards
from reward_service.models import (
    CocotbStimulus,
    Completion,
    CoverageSpec,
    Design,
    ProblemSpec,
    ScoreRequest,
    ScoreResult,
    Simulator,
)
from reward_service.problems.resolve import resolve_request
from reward_service.problems.store import ProblemStore
from reward_service.settings import Settings

log = logging.getLogger(__name__)


def check_wait(wait: float | None, settings: Settings, default: float) -> float:
    wait = default if wait is None else wait
    if wait > settings.max_wait_s:
        raise HTTPException(422, f"wait must be at most {settings.max_wait_s:g} s, got {wait:g}")
    return wait


def check_files(files: dict[str, str], settings: Settings, where: str, count: int | None = None) -> None:
    """422 when a request carries too many files or a file over ``max_file_kb``."""
    if count is not None and count > settings.max_files:
        raise HTTPException(
            422, f"{where}too many files: {count} design + stimulus files, at most {settings.max_files} per request"
        )
    limit = settings.max_file_kb * 1024
    for name, text in files.items():
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            raise HTTPException(
                422,
                f"{where}file {name!r} is {size / 1024:.0f} KiB, "
                f"larger than the {settings.max_file_kb} KiB limit per file",
            )


def check_request(request: ScoreRequest, settings: Settings, where: str = "") -> None:
    """Files count and per-file size of a request as sent (a problem's own design is not counted)."""
    design = request.design.files if request.design is not None else {}
    stimulus = request.stimulus
    if isinstance(stimulus, Completion):
        stim_files = {"completion.text": stimulus.text}
        count = len(design) + 1
    else:
        stim_files = stimulus.files
        count = len(design) + len(stim_files)
    check_files({**design, **stim_files}, settings, where, count)


def check_design(design: Design, settings: Settings) -> None:
    check_files(design.files, settings, "design: ", len(design.files))


def resolve(request: ScoreRequest, problems: ProblemStore, where: str = "") -> ScoreRequest:
    """The request with its problem resolved by the one rule the CLI and rescore use too
    (:func:`~reward_service.problems.resolve.resolve_request`); 404 for an unknown problem_id,
    422 when the request's fields do not combine with the problem."""
    if request.problem_id is None:
        return request
    problem = problems.get(request.problem_id)
    if problem is None:
        raise HTTPException(
            404,
            f"{where}unknown problem_id {request.problem_id!r}: register it with "
            "POST /v1/problems or POST /v1/problems:load (GET /v1/problems lists them)",
        )
    return resolve_with(request, problem, where)


def resolve_with(request: ScoreRequest, problem: ProblemSpec, where: str = "") -> ScoreRequest:
    """``request`` resolved against ``problem`` (:func:`resolve_request`); 422 when the
    request's fields do not combine with it."""
    try:
        return resolve_request(request, problem)
    except ValidationError as exc:
        detail, _ = describe_validation([dict(e) for e in exc.errors()])
        raise HTTPException(
            422, f"{where}the request does not combine with problem {request.problem_id!r}: {detail}"
        ) from exc


def submit_and_wait(
    request: ScoreRequest, problems: ProblemStore, dispatcher: Dispatcher, metrics: Metrics, wait: float
) -> JobView:
    resolved = resolve(request, problems)
    job_id = dispatcher.submit(resolved)
    metrics.jobs_submitted.inc()
    view = dispatcher.wait(job_id, wait) if wait > 0 else dispatcher.get(job_id)
    view = view or JobView(job_id, JobState.queued)
    if view.state == JobState.done and view.result is not None:
        metrics.observe_result(job_id, view.result)
    return view


def job_view(job_id: str, dispatcher: Dispatcher, metrics: Metrics, wait: float) -> JobView | None:
    view = dispatcher.wait(job_id, wait) if wait > 0 else dispatcher.get(job_id)
    if view is not None and view.state == JobState.done and view.result is not None:
        metrics.observe_result(job_id, view.result)
    return view


def batch_view(batch: BatchRecord, dispatcher: Dispatcher, metrics: Metrics, wait: float) -> BatchStatus:
    """Progress and results of a batch, waiting up to ``wait`` seconds for all of it."""
    deadline = time.monotonic() + wait
    views: list[JobView | None] = []
    for job_id in batch.job_ids:
        remaining = deadline - time.monotonic()
        views.append(dispatcher.wait(job_id, remaining) if remaining > 0 else dispatcher.get(job_id))
    # The batch record is the source of truth: a job the dispatcher forgot (a Redis restart
    # lost its marker) is resent from its request copy when one is left.
    for n, (job_id, view) in enumerate(zip(batch.job_ids, views)):
        if view is None and dispatcher.resend(job_id):
            views[n] = JobView(job_id, JobState.queued)
    results: list[ScoreResult | None] = []
    for job_id, view in zip(batch.job_ids, views):
        if view is None:  # the dispatcher forgot the job: say so instead of "queued" forever
            results.append(
                ScoreResult.infrastructure_failure(
                    f"job {job_id} is unknown to the dispatcher: its result expired or was lost"
                )
            )
        elif view.state == JobState.done and view.result is not None:
            metrics.observe_result(job_id, view.result)
            results.append(view.result)
        else:
            results.append(None)
    done = sum(r is not None for r in results)
    complete = done == len(results)
    if complete:
        state = JobState.done
    elif any(v is not None and v.state != JobState.queued for v in views):
        state = JobState.running
    else:
        state = JobState.queued
    rewards = None
    if complete and any(g is not None for g in batch.groups):
        rewards = group_rewards(results, batch.groups, batch.diversity_weight)
    return BatchStatus(
        batch_id=batch.id,
        state=state,
        total=len(results),
        done=done,
        job_ids=batch.job_ids,
        groups=batch.groups,
        results=results,
        group_rewards=rewards,
    )


#: A do-nothing cocotb test: scoring it builds (and caches) the problem's DUT model.
_WARMUP_TEST = "import cocotb\n\n\n@cocotb.test()\nasync def rs_warmup(dut):\n    pass\n"


def warm_build(problem: ProblemSpec, dispatcher: Dispatcher) -> str | None:
    """Queue a build of ``problem``'s Verilator DUT model (DESIGN.md: registering a problem
    warms the build), so that cocotb samples of it only run (the model's key holds the FSM option
    but not the requested metrics). When the problem's engine picks the fast path, the warm-up scores there
    with ``metrics=["line"]``: that instrumented build is cached per metric set, so samples
    asking for other metrics do not reuse it. Returns the job id, or None when the problem's
    simulator is not Verilator (its cocotb Icarus build, 0.13-0.17 s of a sample, is cached as
    well, but not warmed here), no DUT module is known, or the queue is full (warming is best
    effort)."""
    if problem.simulator != Simulator.verilator or not problem.toplevel:
        return None
    request = ScoreRequest(  # engine=auto: also makes the design's engine decision (fastcov.choice)
        design=problem.design,
        simulator=Simulator.verilator,
        engine=problem.engine,
        stimulus=CocotbStimulus(
            files={"rs_warmup.py": _WARMUP_TEST},
            test_module="rs_warmup",
            toplevel=problem.toplevel,
            runtime="cocotb-2.1",
        ),
        # with the problem's exclude_unreachable, scoring it also runs (and caches) the
        # design's unreachability proof (docs/formal.md), so no sample of it waits for yosys
        coverage=CoverageSpec(metrics=["line"], exclude_unreachable=problem.exclude_unreachable),
        limits=problem.limits,
    )
    try:
        return dispatcher.submit_background(request)  # behind every scoring job
    except QueueFull:
        return None
    except Exception:
        log.warning("warm-up build of problem %s could not be queued", problem.id, exc_info=True)
        return None
