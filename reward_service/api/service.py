"""The blocking work behind the routes (run through :func:`~reward_service.api.deps.in_thread`):
request checks, problem resolution, submission, waiting, batch views."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from fastapi import HTTPException
from pydantic import ValidationError

from reward_service.api.batch_store import BatchRecord
from reward_service.api.errors import describe_validation
from reward_service.api.finished import FinishedResults
from reward_service.api.schemas import BatchStatus
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import Dispatcher, JobState, JobView, QueueFull
from reward_service.diversity import GroupRewards, group_rewards
from reward_service.models import (
    CocotbStimulus,
    Completion,
    CoverageSpec,
    Design,
    ProblemSpec,
    ScoreRequest,
    ScoreResult,
    Simulator,
    Status,
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


@dataclass
class BatchView:
    """A batch as read now. ``texts[i]``: the JSON of sample ``i``'s result (None while it is not
    done); ``objects[i]``: the same result parsed, where this read had it as an object."""

    record: BatchRecord
    state: JobState
    texts: list[str | None]
    objects: list[ScoreResult | None]

    @property
    def done(self) -> int:
        return sum(t is not None for t in self.texts)

    def results(self) -> list[ScoreResult | None]:
        """Every result parsed (those read from :class:`FinishedResults` are parsed here, once)."""
        for n, (text, obj) in enumerate(zip(self.texts, self.objects)):
            if obj is None and text is not None:
                self.objects[n] = ScoreResult.model_validate_json(text)
        return self.objects

    def has_sandbox_error(self) -> bool:
        """Whether a result is a ``sandbox_error`` (those are never kept in
        :class:`FinishedResults`, so each was read, as an object, by this view)."""
        return any(r is not None and r.status == Status.sandbox_error for r in self.objects)

    def group_rewards(self) -> GroupRewards | None:
        """The batch's group rewards once it is done and has groups, else None."""
        batch = self.record
        if self.state != JobState.done or not any(g is not None for g in batch.groups):
            return None
        return group_rewards(self.results(), batch.groups, batch.diversity_weight)

    def status(self) -> BatchStatus:
        batch = self.record
        return BatchStatus(
            batch_id=batch.id,
            state=self.state,
            total=len(self.texts),
            done=self.done,
            job_ids=batch.job_ids,
            groups=batch.groups,
            results=self.results(),
            group_rewards=self.group_rewards(),
        )

    def body(self) -> bytes:
        """:meth:`status` as JSON, the results spliced in from their kept texts (no result is
        parsed or serialised again; the fields are BatchStatus's, ``results`` last)."""
        batch = self.record
        rewards = self.group_rewards()
        head = {
            "batch_id": batch.id,
            "state": self.state.value,
            "total": len(self.texts),
            "done": self.done,
            "job_ids": batch.job_ids,
            "groups": batch.groups,
            "group_rewards": None if rewards is None else rewards.model_dump(mode="json"),
        }
        results = ",".join("null" if t is None else t for t in self.texts)
        return (json.dumps(head, separators=(",", ":"))[:-1] + ',"results":[' + results + "]}").encode()


def read_batch(
    batch: BatchRecord,
    dispatcher: Dispatcher,
    metrics: Metrics,
    wait: float,
    finished: FinishedResults | None = None,
) -> BatchView:
    """Progress and results of a batch, waiting up to ``wait`` seconds for all of it.

    Jobs whose result ``finished`` keeps are not read again; the others are read in one
    :meth:`Dispatcher.get_many`, then waited for in order while time is left (one job at a
    time, as each wait also reads it), and those the deadline cut off read once more."""
    job_ids = batch.job_ids
    texts = [finished.get(j) if finished is not None else None for j in job_ids]
    objects: list[ScoreResult | None] = [None] * len(job_ids)
    views: dict[int, JobView | None] = {}

    def absorb(n: int, view: JobView | None) -> None:
        views[n] = view
        if view is None or view.state != JobState.done or view.result is None:
            return
        metrics.observe_result(job_ids[n], view.result)
        objects[n] = view.result
        texts[n] = text = view.result.model_dump_json()
        if finished is not None and view.result.status != Status.sandbox_error:
            finished.put(job_ids[n], text)

    open_ = [n for n, t in enumerate(texts) if t is None]
    for n, view in zip(open_, dispatcher.get_many([job_ids[n] for n in open_])):
        absorb(n, view)
    deadline = time.monotonic() + wait
    open_ = [n for n in open_ if texts[n] is None]
    for k, n in enumerate(open_ if wait > 0 else []):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            cut = open_[k:]
            for m, view in zip(cut, dispatcher.get_many([job_ids[m] for m in cut])):
                absorb(m, view)
            break
        absorb(n, dispatcher.wait(job_ids[n], remaining))
    # The batch record is the source of truth: a job the dispatcher forgot (a Redis restart
    # lost its marker) is resent from its request copy when one is left.
    for n in open_:
        if texts[n] is None and views.get(n) is None and dispatcher.resend(job_ids[n]):
            views[n] = JobView(job_ids[n], JobState.queued)
    for n in open_:
        if texts[n] is None and views.get(n) is None:  # forgotten: say so instead of "queued" forever
            lost = ScoreResult.infrastructure_failure(
                f"job {job_ids[n]} is unknown to the dispatcher: its result expired or was lost"
            )
            objects[n], texts[n] = lost, lost.model_dump_json()
    if all(t is not None for t in texts):
        state = JobState.done
    elif any(v is not None and v.state != JobState.queued for v in views.values()) or any(t is not None for t in texts):
        state = JobState.running
    else:
        state = JobState.queued
    return BatchView(batch, state, texts, objects)


def batch_view(
    batch: BatchRecord,
    dispatcher: Dispatcher,
    metrics: Metrics,
    wait: float,
    finished: FinishedResults | None = None,
) -> BatchStatus:
    """:func:`read_batch` as a :class:`BatchStatus` (every result parsed)."""
    return read_batch(batch, dispatcher, metrics, wait, finished).status()


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
