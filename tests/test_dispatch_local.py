"""LocalDispatcher: a job whose engine raised stays readable (sandbox_error), and the queue
depth is a counter that returns to 0."""

from __future__ import annotations

from reward_service.dispatch.local import LocalDispatcher
from reward_service.models import ScoreRequest


class RaisingEngine:
    def score(self, request):
        raise RuntimeError("boom")


def test_engine_exception_becomes_sandbox_error_and_is_readable_again():
    d = LocalDispatcher(RaisingEngine(), workers=1)
    req = ScoreRequest.model_validate({"design": {"files": {"a.sv": "module a; endmodule"}},
                                       "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; endmodule"}}})
    job = d.submit(req)
    first = d.wait(job, 10)
    assert first.state == "done" and first.result.status == "sandbox_error" and first.result.reward is None
    assert "boom" not in first.result.message  # no internals to clients
    assert d.get(job).result.status == "sandbox_error"  # readable again, no re-raise
    assert d.queue_depth() == 0
    d.close()
