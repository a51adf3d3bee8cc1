"""The Python client against the real service (uvicorn, embedded dispatcher, Icarus): retries
on 429 (Retry-After honoured) and 502/503 from a real ASGI layer in front of the app, a refused
connection, 4xx not retried, 202 + job polling, batches in request order, async = sync,
sandbox_error kept as such (never 0), problems."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from conftest import REPO, free_port, live_server
from test_api import BROKEN_TB, COUNTER, HANG_TB, QUICK_TB, SLOW_TB, counter_request

from reward_service.api import create_app
from reward_service.client import (
    AsyncRewardClient,
    InfrastructureFailure,
    InvalidRequest,
    RequestFailed,
    RewardClient,
    ScoreTimeout,
    ServiceUnavailable,
    chunks,
)
from reward_service.dispatch.local import LocalDispatcher
from reward_service.engine import Engine
from reward_service.models import Status
from reward_service.sandbox import BwrapSandbox
from reward_service.settings import Settings

NO_CODE = {"kind": "completion", "text": "I would toggle the clock and watch q."}
ATTN_JSONL = REPO / "examples" / "cvdp" / "attenuator.jsonl"


class Scripted:
    """ASGI layer in front of the app: the first requests to ``path`` get the scripted
    ``(status, headers)`` answers (as a proxy or an overloaded service would give), the rest
    reach the app. ``hits`` counts the requests per path that arrived."""

    def __init__(self, app, path: str = "", script: list[tuple[int, dict[str, str]]] | None = None) -> None:
        self.app, self.path, self.script = app, path, list(script or [])
        self.hits: dict[str, int] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.hits[scope["path"]] = self.hits.get(scope["path"], 0) + 1
            if self.script and scope["path"].startswith(self.path):
                status, headers = self.script.pop(0)
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            *[(k.lower().encode(), v.encode()) for k, v in headers.items()],
                        ],
                    }
                )
                await send(
                    {"type": "http.response.body", "body": json.dumps({"detail": f"scripted {status}"}).encode()}
                )
                return
        await self.app(scope, receive, send)


def settings(cache_dir, **extra) -> Settings:
    return Settings(cache_dir=cache_dir, result_cache=False, score_workers=2, warm_on_register=False, **extra)


@pytest.fixture(scope="module")
def scripted(shared_cache_dir):
    front = Scripted(create_app(settings=settings(shared_cache_dir)))
    with live_server(front) as url:
        yield front, url


def comparable(result) -> dict:
    data = result.model_dump(mode="json")
    data.pop("timings"), data.pop("cache")
    return data


# -- retries ------------------------------------------------------------------------------------
def test_429_with_retry_after_then_503_502_are_retried(scripted):
    front, url = scripted
    front.path, front.script = "/v1/score", [(429, {"Retry-After": "1"}), (503, {}), (502, {})]
    before = front.hits.get("/v1/score", 0)
    start = time.monotonic()
    with RewardClient(url, max_retries=5, backoff_s=0.05) as client:
        result = client.score(counter_request(), wait=30)
    assert result.status == Status.ok and "quick q=" in result.log
    assert front.hits["/v1/score"] - before == 4  # 3 scripted answers + the real one
    assert time.monotonic() - start >= 1.0  # Retry-After: 1 was honoured (backoff alone is ~0.2 s)


def test_retries_exhausted_raise_service_unavailable(scripted):
    front, url = scripted
    front.path, front.script = "/v1/batches", [(503, {"Retry-After": "0"})] * 5
    before = front.hits.get("/v1/batches", 0)
    with RewardClient(url, max_retries=2, backoff_s=0.01) as client, pytest.raises(ServiceUnavailable) as info:
        client.score_batch([counter_request()])
    assert info.value.attempts == 3 and info.value.url == url
    assert "503 scripted 503" in str(info.value) and url in str(info.value)
    assert front.hits["/v1/batches"] - before == 3
    front.script = []


def test_connection_refused_is_service_unavailable_after_every_attempt():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with RewardClient(url, max_retries=3, backoff_s=0.01) as client:
        with pytest.raises(ServiceUnavailable) as info:
            client.score(counter_request())
        assert client.health() is False
    assert info.value.attempts == 4 and "ConnectError" in info.value.reason and url in str(info.value)

    async def run():
        async with AsyncRewardClient(url, max_retries=1, backoff_s=0.01) as client:
            return await client.score_batch([counter_request()])

    with pytest.raises(ServiceUnavailable) as info:
        asyncio.run(run())
    assert info.value.attempts == 2


def test_client_errors_are_not_retried(scripted):
    front, url = scripted
    with RewardClient(url, max_retries=5, backoff_s=0.01) as client:
        before = front.hits.get("/v1/score", 0)
        with pytest.raises(RequestFailed) as info:
            client.score({"problem_id": "no-such-problem", "stimulus": NO_CODE})
        assert info.value.status_code == 404 and "unknown problem_id 'no-such-problem'" in info.value.detail
        with pytest.raises(RequestFailed) as info:
            client.score(counter_request(), wait=601)
        assert info.value.status_code == 422 and "wait must be at most 600" in str(info.value)
        assert front.hits["/v1/score"] - before == 2  # one attempt each
        with pytest.raises(RequestFailed) as info:
            client.score_batch([counter_request(), {"problem_id": "no-such-problem", "stimulus": NO_CODE}])
        assert info.value.status_code == 404 and info.value.detail.startswith("requests[1]: unknown problem_id")
        # refused before sending: the request does not validate
        with pytest.raises(InvalidRequest, match=r"requests\[1\]: .*seed"):
            client.score_batch([counter_request(), counter_request(seed=-1)])
        with pytest.raises(InvalidRequest, match="exactly one of `design` or `problem_id`"):
            client.score({**counter_request(), "problem_id": "x"})
        with pytest.raises(ValueError, match="groups has 1 entries for 2 requests"):
            client.score_batch([counter_request()] * 2, groups=["g"])


def test_api_key(shared_cache_dir):
    with live_server(create_app(settings=settings(shared_cache_dir, api_keys=["k1"]))) as url:
        with RewardClient(url, api_key="k1") as client:
            assert client.score(counter_request()).status == Status.ok
        with RewardClient(url) as client, pytest.raises(RequestFailed) as info:
            client.list_problems()
        assert info.value.status_code == 401 and "Authorization: Bearer" in info.value.detail


# -- scoring ------------------------------------------------------------------------------------
def test_202_is_followed_by_polling_the_job_and_timeout(scripted):
    front, url = scripted
    with RewardClient(url) as client:
        before = front.hits.get("/v1/score", 0)
        result = client.score(counter_request(SLOW_TB), wait=0)
        assert result.status == Status.ok and "done q=" in result.log
        assert front.hits["/v1/score"] - before == 1  # answered 202, then polled /v1/jobs/{id}
        with pytest.raises(ScoreTimeout, match="not finished within the timeout of 0.3 s"):
            client.score(counter_request(HANG_TB, limits={"run_s": 5}), wait=0, timeout=0.3)


BATCH = [
    counter_request(),  # ok, "quick q="
    counter_request(BROKEN_TB),  # compile_error
    {**counter_request(), "stimulus": NO_CODE},  # invalid_input
    counter_request(SLOW_TB),  # ok, "done q="
    counter_request(HANG_TB, limits={"run_s": 1}),  # timeout
    counter_request(seed=3),  # ok
]
GROUPS = ["g1", "g2", "g1", None, "g2", "g1"]
STATUSES = ["ok", "compile_error", "invalid_input", "ok", "timeout", "ok"]


def test_batch_results_in_request_order_across_chunks(scripted):
    _, url = scripted
    progress: list[tuple[int, int]] = []
    with RewardClient(url) as client:
        results = client.score_batch(
            BATCH, groups=GROUPS, chunk_size=2, on_progress=lambda d, n: progress.append((d, n))
        )
    assert [r.status for r in results] == STATUSES
    assert "quick q=" in results[0].log and "done q=" in results[3].log
    assert [r.reward for r in results[1:3]] == [0.0, 0.0] and results[4].reward == 0.0
    assert progress[-1] == (6, 6) and all(n == 6 for _, n in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    # the groups were kept whole: g1 = {0, 2, 5} in one batch
    assert chunks(range(6), GROUPS, 2) == [[0, 2, 5], [1, 4], [3]]


def test_async_client_gives_the_same_results(scripted):
    _, url = scripted
    with RewardClient(url) as client:
        sync_batch = client.score_batch(BATCH, groups=GROUPS)
        sync_one = client.score(counter_request(SLOW_TB), wait=0)

    async def run():
        async with AsyncRewardClient(url) as client:
            batch, one = await asyncio.gather(
                client.score_batch(BATCH, groups=GROUPS), client.score(counter_request(SLOW_TB), wait=0)
            )
            return batch, one, await client.health()

    async_batch, async_one, healthy = asyncio.run(run())
    assert healthy
    assert [comparable(r) for r in async_batch] == [comparable(r) for r in sync_batch]
    assert comparable(async_one) == comparable(sync_one)


@pytest.fixture(scope="module")
def broken_sandbox(shared_cache_dir):
    """A service whose sandbox cannot start (bwrap binary missing): every simulation is an
    infrastructure failure. ``hits`` counts the requests that reached it."""
    s = settings(shared_cache_dir)
    engine = Engine(s, sandbox=BwrapSandbox(bwrap="/nonexistent/bwrap"))
    front = Scripted(create_app(LocalDispatcher(engine, workers=2), settings=s))
    with live_server(front) as url:
        yield front, url


def test_sandbox_error_is_a_result_never_zero(broken_sandbox):
    front, url = broken_sandbox
    with RewardClient(url) as client:
        result = client.score(counter_request())
        assert result.status == Status.sandbox_error and result.reward is None and "bwrap" in result.message
        with pytest.raises(InfrastructureFailure) as info:
            client.score(counter_request(), raise_on_infra=True, sample_id="s-1", infra_retries=1)
        assert info.value.sample_id == "s-1" and info.value.index is None and info.value.attempts == 2
        assert info.value.result.status == Status.sandbox_error and "not 0" in str(info.value)

        batch = [{**counter_request(), "stimulus": NO_CODE}, counter_request()]
        results = client.score_batch(batch)
        assert [r.status for r in results] == ["invalid_input", "sandbox_error"]
        assert [r.reward for r in results] == [0.0, None]  # the model's fault is 0, the service's is None
        before = front.hits.get("/v1/batches", 0)
        with pytest.raises(InfrastructureFailure) as info:
            client.score_batch(batch, raise_on_infra=True, sample_ids=["nocode", "tb"], infra_retries=2)
        assert info.value.index == 1 and info.value.sample_id == "tb" and info.value.attempts == 3
        assert "sample index 1 id 'tb'" in str(info.value)
        assert front.hits["/v1/batches"] - before == 3  # the batch, then the failed sample twice


# -- problems -----------------------------------------------------------------------------------
def test_problem_calls(scripted):
    _, url = scripted
    problem = {
        "id": "client-ctr",
        "design": {"files": {"ctr.v": COUNTER}},
        "dut_instance": "uut",
        "simulator": "icarus",
    }
    with RewardClient(url) as client:
        stored = client.register_problem(problem)
        assert stored.design.toplevel == "ctr" and stored.simulator == "icarus"
        assert client.get_problem("client-ctr").dut_instance == "uut"
        assert any(p["id"] == "client-ctr" for p in client.list_problems())
        # a problem_id request keeps the problem's simulator (the client sends only the fields set)
        result = client.score(
            {"problem_id": "client-ctr", "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": BATCH_TB}}}
        )
        assert result.status == Status.ok and result.engine == "icarus"
        client.delete_problem("client-ctr")
        with pytest.raises(RequestFailed) as info:
            client.get_problem("client-ctr")
        assert info.value.status_code == 404
        loaded = client.load_problems_jsonl(ATTN_JSONL)
        assert loaded == {"loaded": 1, "new": loaded["new"], "ids": ["cvdp_copilot_Attenuator_0011"]}
        assert client.get_problem("cvdp_copilot_Attenuator_0011").targets[0].percent == 90


BATCH_TB = counter_request()["stimulus"]["files"]["tb.sv"]


# -- bounds that can be met (issue 11 point 3) ---------------------------------------------------
def variant_tb(k: int) -> str:
    """A quick testbench giving ``k`` rising clock edges: the counter's log says ``quick q=k``."""
    return QUICK_TB.replace("repeat (10)", f"repeat ({2 * k})")


VARIANTS = 8


@pytest.fixture(scope="module")
def cached_service(tmp_path_factory):
    """The embedded service with the result cache on and its default bounds; the VARIANTS
    requests simulated once each (their single-call results are the expected values), so a
    step of thousands of samples of them is cheap (cache hits) and still checkable in order."""
    app = create_app(
        settings=Settings(cache_dir=tmp_path_factory.mktemp("rs-cache"), score_workers=2, warm_on_register=False)
    )
    with live_server(app) as url, RewardClient(url) as client:
        expected = [client.score(counter_request(variant_tb(k)), wait=60) for k in range(VARIANTS)]
        yield url, expected


@pytest.mark.parametrize("n", [1100, 2048])
def test_a_codev_scale_step_all_comes_back_in_order(cached_service, n):
    url, expected = cached_service
    assert [r.status for r in expected] == [Status.ok] * VARIANTS
    assert [f"quick q={k}" in r.log for k, r in enumerate(expected)] == [True] * VARIANTS
    requests = [counter_request(variant_tb(i % VARIANTS)) for i in range(n)]
    with RewardClient(url) as client:
        limits = client.limits()
        results = client.score_batch(requests, timeout=600)
    assert limits["batch_limit"] == 4096 and limits["queue_bound"] >= limits["max_batch"]
    assert len(results) == n
    assert [comparable(r) for r in results] == [comparable(expected[i % VARIANTS]) for i in range(n)]


@pytest.fixture(scope="module")
def small_queue(tmp_path_factory):
    """An embedded service whose queue holds 300 jobs (less than max_batch)."""
    app = create_app(
        settings=Settings(
            cache_dir=tmp_path_factory.mktemp("rs-cache"), score_workers=2, warm_on_register=False, max_queue=300
        )
    )
    with live_server(app) as url:
        yield url


def test_a_batch_over_the_queue_bound_is_413_and_the_client_sizes_its_chunks(small_queue):
    import httpx

    with RewardClient(small_queue) as client:
        limits = client.limits()
        assert (limits["batch_limit"], limits["queue_bound"], limits["max_batch"]) == (300, 300, 4096)
        too_big = {"requests": [counter_request(variant_tb(1))] * 301, "wait": 0}
        response = httpx.post(f"{small_queue}/v1/batches", json=too_big, timeout=60)
        assert response.status_code == 413 and "Retry-After" not in response.headers
        assert "queue bound of 300" in response.json()["detail"]
        # 700 samples in chunks of 300: the later chunks wait (429) for the earlier ones to drain
        expected = [client.score(counter_request(variant_tb(k)), wait=60) for k in range(3)]
        results = client.score_batch([counter_request(variant_tb(i % 3)) for i in range(700)], timeout=600)
    assert [comparable(r) for r in results] == [comparable(expected[i % 3]) for i in range(700)]


def test_a_job_the_service_lost_is_resubmitted_and_said_so(shared_cache_dir, caplog):
    """GET /v1/jobs/{id} answering 404 for a job the client submitted (the service forgot it)
    makes the client submit the sample again and log which job was lost."""
    import logging
    import threading

    dispatcher = LocalDispatcher(Engine(settings(shared_cache_dir)), workers=1)
    caplog.set_level(logging.WARNING, logger="reward_service.client")
    with live_server(create_app(dispatcher, settings=settings(shared_cache_dir))) as url, RewardClient(url) as client:
        forgotten: list[str] = []

        def forget_first_job():
            deadline = time.monotonic() + 60
            while not dispatcher._jobs and time.monotonic() < deadline:
                time.sleep(0.01)
            job_id, _ = dispatcher._jobs.popitem(last=False)  # the service loses it
            forgotten.append(job_id)

        thread = threading.Thread(target=forget_first_job)
        thread.start()
        result = client.score(counter_request(SLOW_TB), wait=0, timeout=120)
        thread.join()
    assert result.status == Status.ok and "done q=" in result.log
    lost = [r.getMessage() for r in caplog.records if "lost job" in r.getMessage()]
    assert len(lost) == 1 and forgotten[0] in lost[0] and "resubmitting" in lost[0]
    assert len(dispatcher._jobs) == 1  # the resubmitted one
    dispatcher.close()
