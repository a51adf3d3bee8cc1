"""The long poll of a batch (``GET /v1/batches/{id}?wait=``) on a real Redis with the Celery
dispatcher: the open jobs are read in one round trip (``get_many``), a finished result is read and
serialised once per API process (``FinishedResults``), and the answer is the BatchStatus it always
was. The results are real engine results, stored as a worker stores them (``finish``)."""

from __future__ import annotations

import json
import shutil

import pytest
from samples import icarus_case
from test_redis_restart import RedisProc

from reward_service.api.batch_store import BatchRecord
from reward_service.api.finished import FinishedResults
from reward_service.api.service import read_batch
from reward_service.api.telemetry import Metrics
from reward_service.dispatch.base import JobState
from reward_service.dispatch.celery import CeleryDispatcher
from reward_service.models import ScoreResult
from reward_service.settings import Settings

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")


class Counting(CeleryDispatcher):
    """The real dispatcher, counting the job ids it reads."""

    reads = 0

    def get(self, job_id):
        self.reads += 1
        return super().get(job_id)

    def get_many(self, job_ids):
        self.reads += len(job_ids)
        return super().get_many(job_ids)


@pytest.fixture
def dispatcher(tmp_path):
    server = RedisProc(tmp_path, aof=False)
    server.start()
    d = Counting(Settings(broker_url=server.url), reaper=False)
    try:
        yield d
    finally:
        d.close()
        server.stop()


@pytest.fixture(scope="module")
def real_results(engine) -> list[ScoreResult]:
    """Two real fast-path results of different samples."""
    out = [engine.score(icarus_case("cvdp_copilot_gray_to_binary_0014", tb)) for tb in ("weak", "best")]
    assert [r.status for r in out] == ["ok", "ok"]
    return out


def test_get_many_reads_as_get_does(dispatcher, real_results):
    """Done, queued, unknown and malformed ids across more than one pipelined chunk (512)."""
    queued = dispatcher.submit_many([icarus_case("cvdp_copilot_gray_to_binary_0014", "good", seed=s) for s in range(3)])
    done = [f"{n:064x}" for n in range(1, 601)]
    for n, job_id in enumerate(done):
        dispatcher.finish(job_id, real_results[n % 2])
    ids = [*done[:300], queued[0], "f" * 64, "not-a-job-id", *done[300:], *queued[1:]]
    one_by_one = [dispatcher.get(j) for j in ids]
    many = dispatcher.get_many(ids)
    assert [(v.state, v.result) if v else None for v in many] == [
        (v.state, v.result) if v else None for v in one_by_one
    ]
    assert [v.state if v else None for v in many[299:303]] == [JobState.done, JobState.queued, None, None]
    assert many[0].result == real_results[0] and many[1].result == real_results[1]


def test_a_long_poll_reads_each_finished_result_once(dispatcher, real_results):
    done = [f"{n:064x}" for n in range(1, 31)]
    for job_id in done:
        dispatcher.finish(job_id, real_results[int(job_id, 16) % 2])
    queued = dispatcher.submit_many(
        [icarus_case("cvdp_copilot_gray_to_binary_0014", "good", seed=s) for s in range(10)]
    )
    ids = done + queued
    batch = BatchRecord(id="b", job_ids=ids, groups=["g1"] * 20 + ["g2"] * 20, diversity_weight=0.5)
    finished = FinishedResults()
    metrics = Metrics(lambda: 0)

    first = read_batch(batch, dispatcher, metrics, wait=0, finished=finished)
    assert (first.state, first.done, len(finished), dispatcher.reads) == (JobState.running, 30, 30, 40)
    assert json.loads(first.body())["results"][30:] == [None] * 10
    dispatcher.reads = 0
    for job_id in queued:  # as the worker would
        dispatcher.finish(job_id, real_results[0])
    second = read_batch(batch, dispatcher, metrics, wait=0, finished=finished)
    assert (second.state, dispatcher.reads, len(finished)) == (JobState.done, 10, 40)
    dispatcher.reads = 0
    third = read_batch(batch, dispatcher, metrics, wait=5, finished=finished)
    assert (third.state, dispatcher.reads) == (JobState.done, 0)

    body = json.loads(third.body())
    status = read_batch(batch, dispatcher, metrics, wait=0).status()  # no cache: every result read
    assert body == status.model_dump(mode="json")
    assert body["group_rewards"] is not None and len(body["results"]) == 40
    assert body["results"][0] == real_results[1].model_dump(mode="json")  # job 1 is odd
    assert body["results"][39] == real_results[0].model_dump(mode="json")


def test_a_sandbox_error_is_read_again_until_a_rerun_replaces_it(dispatcher, real_results):
    request = icarus_case("cvdp_copilot_gray_to_binary_0014", "weak")
    (job_id,) = dispatcher.submit_many([request])
    dispatcher.finish(job_id, ScoreResult.infrastructure_failure("worker lost"))  # as the reaper does
    batch = BatchRecord(id="b", job_ids=[job_id], groups=[None])
    finished = FinishedResults()
    view = read_batch(batch, dispatcher, Metrics(lambda: 0), wait=0, finished=finished)
    assert view.state == JobState.done and view.has_sandbox_error() and len(finished) == 0
    assert dispatcher.submit_many([request]) == [job_id]  # resubmitted: the failed result is dropped
    view = read_batch(batch, dispatcher, Metrics(lambda: 0), wait=0, finished=finished)
    assert view.state == JobState.queued and not view.has_sandbox_error()
    dispatcher.finish(job_id, real_results[0])  # the re-run's result
    view = read_batch(batch, dispatcher, Metrics(lambda: 0), wait=0, finished=finished)
    assert view.results() == [real_results[0]] and finished.get(job_id) == real_results[0].model_dump_json()


def test_finished_results_keep_at_most_their_bound():
    kept = FinishedResults(max_chars=10)
    kept.put("a", "12345")
    kept.put("b", "12345")
    assert kept.get("a") == "12345"  # now the most recently used
    kept.put("c", "1234")
    assert (kept.get("a"), kept.get("b"), kept.get("c"), len(kept)) == ("12345", None, "1234", 2)
    kept.put("big", "x" * 11)
    assert kept.get("big") is None and len(kept) == 2
