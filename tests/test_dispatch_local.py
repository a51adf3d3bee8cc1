"""LocalDispatcher: a job whose engine raised stays readable (sandbox_error), and the queue
depth is a counter that returns to 0."""

from __future__ import annotations

import pytest

from reward_service.dispatch.local import LocalDispatcher
from reward_service.models import ScoreRequest


class RaisingEngine:
    def score(self, request):
        raise RuntimeError("boom")


def test_engine_exception_becomes_sandbox_error_and_is_readable_again():
    d = LocalDispatcher(RaisingEngine(), workers=1)
    req = ScoreRequest.model_validate(
        {
            "design": {"files": {"a.sv": "module a; endmodule"}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; endmodule"}},
        }
    )
    job = d.submit(req)
    first = d.wait(job, 10)
    assert first.state == "done" and first.result.status == "sandbox_error" and first.result.reward is None
    assert "boom" not in first.result.message  # no internals to clients
    assert d.get(job).result.status == "sandbox_error"  # readable again, no re-raise
    assert d.queue_depth() == 0
    d.close()


def _request() -> ScoreRequest:
    return ScoreRequest.model_validate(
        {
            "design": {"files": {"a.sv": "module a; endmodule"}},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; endmodule"}},
        }
    )


def test_finished_results_are_bounded_by_count_and_age():
    import time

    d = LocalDispatcher(RaisingEngine(), workers=1, keep_results=3, result_ttl_s=3600)
    ids = []
    for _ in range(5):
        ids.append(d.submit(_request()))
        assert d.wait(ids[-1], 10).state == "done"
    d.submit(_request())  # pruning happens on submit: the 6 jobs are cut to the newest 3
    assert [d.get(i) is None for i in ids] == [True, True, True, False, False]
    d.close()

    d = LocalDispatcher(RaisingEngine(), workers=1, keep_results=100, result_ttl_s=0.2)
    old = d.submit(_request())
    assert d.wait(old, 10).state == "done"
    time.sleep(0.3)
    new = d.submit(_request())
    assert d.get(old) is None and d.get(new) is not None  # expired vs fresh (pending or done)
    d.close()


def test_a_pending_background_job_does_not_stop_pruning():
    import threading

    class Blocking(RaisingEngine):
        def __init__(self):
            self.release = threading.Event()

        def score(self, request):
            if request.seed == 99:
                self.release.wait(30)
            return super().score(request)

    engine = Blocking()
    d = LocalDispatcher(engine, workers=1, keep_results=3)
    warm = d.submit_background(_request().model_copy(update={"seed": 99}))
    ids = []
    for _ in range(6):  # one at a time: a submit prunes what finished before it
        ids.append(d.submit(_request()))
        assert d.wait(ids[-1], 10).state == "done"
    d.submit(_request())
    assert d.get(warm).state != "done"  # still pending, kept
    assert sum(d.get(i) is not None for i in ids) < len(ids)  # finished ones pruned behind it
    engine.release.set()
    d.close()


def test_background_work_only_uses_half_the_queue_bound():
    import threading

    from reward_service.dispatch.base import QueueFull

    class Blocking(RaisingEngine):
        release = threading.Event()

        def score(self, request):
            self.release.wait(30)
            return super().score(request)

    d = LocalDispatcher(Blocking(), workers=1, max_queue=4)
    d.submit_background(_request().model_copy(update={"seed": 1}))
    d.submit_background(_request().model_copy(update={"seed": 2}))
    with pytest.raises(QueueFull):  # half of 4 is taken by background work
        d.submit_background(_request().model_copy(update={"seed": 3}))
    d.submit_many([_request(), _request()])  # scoring still has its half
    Blocking.release.set()
    d.close()


def test_a_submission_larger_than_the_bound_is_too_large_not_queue_full():
    from reward_service.dispatch.base import BatchTooLarge, QueueFull

    d = LocalDispatcher(RaisingEngine(), workers=1, max_queue=3)
    with pytest.raises(BatchTooLarge) as exc:
        d.submit_many([_request().model_copy(update={"seed": s}) for s in range(4)])
    assert not isinstance(exc.value, QueueFull) and "queue bound of 3" in str(exc.value)
    assert d.queue_depth() == 0
    d.close()
