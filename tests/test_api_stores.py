"""Problem and batch stores (in memory and on a real redis-server), problem resolution and the
group diversity term; the API on Redis stores, and a Redis outage answered with 503."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from conftest import CID012
from test_api import StubDispatcher, serving

from reward_service.api import create_app
from reward_service.api.batch_store import BatchRecord, InMemoryBatchStore, RedisBatchStore
from reward_service.diversity import group_diversity, group_rewards
from reward_service.models import (
    CoverageReport,
    MetricCoverage,
    ScoreRequest,
    ScoreResult,
    Status,
    UncoveredPoint,
)
from reward_service.problems.cvdp import load_problems
from reward_service.problems.store import (
    InMemoryProblemStore,
    ProblemSpec,
    ProblemStoreError,
    RedisProblemStore,
    resolve_request,
)
from reward_service.settings import Settings

DESIGN = {"files": {"ctr.v": "module ctr(input clk); endmodule\n"}, "toplevel": "ctr"}


def spec(pid: str = "p1", **extra) -> ProblemSpec:
    return ProblemSpec(
        id=pid,
        design=DESIGN,
        dut_instance="uut",
        targets=[{"metric": "overall", "percent": 80}],
        limits={"run_s": 5, "memory_mb": 512},
        **extra,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path_factory.mktemp("redis")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


# -- stores -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_problem_store_roundtrip(kind, request):
    if kind == "memory":
        store = InMemoryProblemStore()
    else:
        store = RedisProblemStore(request.getfixturevalue("redis_url"), prefix=f"t-{time.time_ns()}:")
    assert store.get("p1") is None and store.ids() == [] and store.list() == []
    assert store.put(spec("p1")) is True
    assert store.put(spec("p1")) is False
    assert store.put_many([spec("p0"), spec("p2"), spec("p1")]) == 2
    assert store.ids() == ["p0", "p1", "p2"]
    assert store.get("p1") == spec("p1") and [p.id for p in store.list()] == ["p0", "p1", "p2"]
    assert store.delete("p1") is True and store.delete("p1") is False and store.get("p1") is None
    assert store.ping() == "ok"
    cvdp = load_problems(CID012)
    store.put_many([ProblemSpec.from_cvdp(p) for p in cvdp.values()])
    back = store.get("cvdp_copilot_Attenuator_0011")
    assert back is not None and back.prompt == cvdp["cvdp_copilot_Attenuator_0011"].prompt
    store.close()


def test_redis_store_down_raises_store_error():
    store = RedisProblemStore(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ProblemStoreError, match="unavailable"):
        store.get("p1")
    assert "unavailable" in store.ping()


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_batch_store_roundtrip(kind, request):
    if kind == "memory":
        store = InMemoryBatchStore(keep=2)
    else:
        store = RedisBatchStore(request.getfixturevalue("redis_url"), prefix=f"t-{time.time_ns()}:", ttl_s=60)
    records = [
        BatchRecord(id=f"b{i}", job_ids=["j1", "j2"], groups=["g", None], diversity_weight=0.5) for i in range(3)
    ]
    for r in records:
        store.put(r)
    assert store.get("b2") == records[2] and store.get("nope") is None
    if kind == "memory":
        assert store.get("b0") is None  # only the newest `keep` are kept
    else:
        assert 0 < store.client.ttl(f"{store.prefix}batch:b2") <= 60


# -- problem resolution -------------------------------------------------------------------------
def test_resolution_overrides_field_by_field():
    problem = spec("p1", reward={"shaping": "ratio"})
    stim = {"kind": "completion", "text": "x"}
    plain = resolve_request(ScoreRequest(problem_id="p1", stimulus=stim), problem)
    assert plain.design is not None and plain.problem_id is None
    assert plain.coverage.scope == "uut" and plain.coverage.targets[0].percent == 80
    assert plain.limits.run_s == 5 and plain.limits.memory_mb == 512 and plain.reward.shaping == "ratio"

    given = ScoreRequest.model_validate(
        {
            "problem_id": "p1",
            "stimulus": stim,
            "simulator": "icarus",
            "seed": 7,
            "coverage": {"metrics": ["line"]},
            "limits": {"run_s": 1},
            "reward": {"failure_value": -1},
        }
    )
    r = resolve_request(given, problem)
    assert r.simulator == "icarus" and r.seed == 7
    assert r.coverage.metrics == ["line"] and r.coverage.scope == "uut" and r.coverage.targets[0].percent == 80
    assert r.limits.run_s == 1 and r.limits.memory_mb == 512  # merged, not replaced
    assert r.reward.shaping == "ratio" and r.reward.failure_value == -1

    # the CVDP Problem works the same way
    cvdp = load_problems(CID012)["cvdp_copilot_Attenuator_0011"]
    r = resolve_request(ScoreRequest(problem_id=cvdp.id, stimulus=stim), cvdp)
    assert r.coverage.scope == "uut" and r.design == cvdp.design


# -- group diversity ----------------------------------------------------------------------------
def result(total: int, uncovered: list[int], status: Status = Status.ok) -> ScoreResult:
    """A result over points 0..total-1 of metric `line` with the given points uncovered."""
    covered = total - len(uncovered)
    return ScoreResult(
        status=status,
        reward=1 + covered / total if status == Status.ok else 0.0,
        coverage=CoverageReport(
            metrics={"line": MetricCoverage(covered=covered, total=total, ratio=covered / total)},
            overall=covered / total if status == Status.ok else None,
        ),
        uncovered=[UncoveredPoint(file="d.sv", line=i, metric="line", detail="block") for i in uncovered],
    )


def test_group_diversity_matches_the_definition():
    # 4 points; a covers {0,1,2}, b covers {0,1}, c covers {0,3}: point 0 by 3, 1 by 2, 2 by 1, 3 by 1
    a, b, c = result(4, [3]), result(4, [2, 3]), result(4, [1, 2])
    values, why = group_diversity([a, b, c])
    assert why is None
    assert values == pytest.approx([(1 / 3 + 1 / 2 + 1) / 3, (1 / 3 + 1 / 2) / 2, (1 / 3 + 1) / 2])
    # identical samples share everything: 1/n
    assert group_diversity([a, a])[0] == pytest.approx([0.5, 0.5])
    # failed samples get 0 and do not count in n
    values, _ = group_diversity([a, result(4, [], Status.compile_error)])
    assert values == pytest.approx([1.0, 0.0])
    # a truncated uncovered list makes the covered set unknown
    truncated = result(4, [2, 3])
    truncated.uncovered = truncated.uncovered[:1]
    assert group_diversity([a, truncated])[0] is None


def test_group_diversity_with_proved_unreachable_points_left_out():
    # 5 points, point 4 proved unreachable; exclude_unreachable=True leaves it out of `uncovered`:
    # nobody covers it, so the group's diversity is that of the 4 reachable points
    def excluding(uncovered: list[int]) -> ScoreResult:
        r = result(5, [*uncovered, 4])
        r.coverage.metrics["line"].unreachable = 1
        r.uncovered = [p for p in r.uncovered if p.line != 4]
        return r

    a, b = excluding([3]), excluding([2, 3])
    values, why = group_diversity([a, b])
    assert why is None
    assert values == pytest.approx(group_diversity([result(4, [3]), result(4, [2, 3])])[0])
    assert values == pytest.approx([(1 / 2 + 1 / 2 + 1) / 3, (1 / 2 + 1 / 2) / 2])
    # one sample listing the proved point and another not: the covered sets cannot be compared
    listed = result(5, [3, 4])
    listed.coverage.metrics["line"].unreachable = 1
    values, why = group_diversity([a, listed])
    assert values is None and "proved unreachable" in why


def test_group_rewards_add_the_weighted_term():
    a, b = result(4, [3]), result(4, [2, 3])
    broken = result(4, [], Status.sandbox_error)
    broken.reward = None
    out = group_rewards([a, b, broken, a], ["g", "g", "g", None], weight=0.5)
    da, db = group_diversity([a, b])[0]
    assert out.diversity[:2] == pytest.approx([da, db])
    assert out.diversity[2] == 0.0 and out.diversity[3] is None
    assert out.rewards == pytest.approx([a.reward + 0.5 * da, b.reward + 0.5 * db, None, a.reward])
    # a group with a sample not done yet gets no term (a note says why); the others keep theirs
    out = group_rewards([a, None, a, b], ["g", "g", "h", "h"], weight=0.5)
    assert out.notes == {"g": "a sample of the group has no result"}
    assert out.diversity[:2] == [None, None] and out.diversity[2:] == pytest.approx([da, db])
    assert out.rewards == pytest.approx([a.reward, None, a.reward + 0.5 * da, b.reward + 0.5 * db])


# -- the API on Redis stores --------------------------------------------------------------------
def test_api_with_redis_stores_and_a_redis_outage(redis_url, shared_cache_dir):
    settings = Settings(cache_dir=shared_cache_dir, redis_url=redis_url, redis_prefix=f"t-{time.time_ns()}:")
    with serving(create_app(StubDispatcher(RuntimeError("unused")), settings=settings)) as client:
        body = spec("redis-p").model_dump(mode="json")
        assert client.post("/v1/problems", json=body).status_code == 201
        assert client.get("/v1/problems/redis-p").json()["limits"]["run_s"] == 5
        assert [p["id"] for p in client.get("/v1/problems").json()["problems"]] == ["redis-p"]
        ready = client.get("/readyz").json()
        assert ready["checks"]["problem_store"] == "ok" and ready["checks"]["batch_store"] == "ok"
    # the same data from another app (another API process)
    with serving(create_app(StubDispatcher(RuntimeError("unused")), settings=settings)) as client:
        assert client.get("/v1/problems/redis-p").status_code == 200

    down = Settings(cache_dir=shared_cache_dir, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with serving(create_app(StubDispatcher(RuntimeError("unused")), settings=down)) as client:
        listed = client.get("/v1/problems")
        assert listed.status_code == 503 and listed.headers["retry-after"] == "5"
        assert "store is unavailable" in listed.json()["detail"] and "Traceback" not in listed.text
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "unavailable" in ready.json()["checks"]["problem_store"]


# -- dispatcher choice from settings ------------------------------------------------------------
def test_broker_url_selects_the_celery_dispatcher(monkeypatch, shared_cache_dir):
    import sys
    import types

    from reward_service.api.backends import ConfigurationError, build_dispatcher
    from reward_service.dispatch.local import LocalDispatcher

    embedded = build_dispatcher(Settings(cache_dir=shared_cache_dir, score_workers=1))
    assert isinstance(embedded, LocalDispatcher)
    embedded.close()

    settings = Settings(cache_dir=shared_cache_dir, broker_url="redis://127.0.0.1:1/0")
    monkeypatch.setitem(sys.modules, "reward_service.dispatch.celery", None)  # not importable
    with pytest.raises(ConfigurationError, match="REWARD_SERVICE_BROKER_URL is set"):
        build_dispatcher(settings)
    built = []
    fake = types.ModuleType("reward_service.dispatch.celery")
    fake.CeleryDispatcher = type("CeleryDispatcher", (), {"__init__": lambda self, s: built.append(s)})
    monkeypatch.setitem(sys.modules, "reward_service.dispatch.celery", fake)
    assert isinstance(build_dispatcher(settings), fake.CeleryDispatcher)
    assert built == [settings]
    assert settings.store_url == "redis://127.0.0.1:1/0"  # the stores follow the broker's Redis


def test_broker_outage_is_503_with_retry_after(monkeypatch, tmp_path):
    """Service mode with Redis down: the API answers 503 + Retry-After, not a 500."""
    from fastapi.testclient import TestClient

    from reward_service.api.main import create_app
    from reward_service.settings import get_settings

    monkeypatch.setenv("REWARD_SERVICE_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens
    monkeypatch.setenv("REWARD_SERVICE_CACHE_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        # as a context manager: the app's shutdown closes the dispatcher it built, whose lease
        # reaper thread otherwise logged a failed round every second for the rest of the run
        with TestClient(create_app(), raise_server_exceptions=False) as client:
            r = client.post(
                "/v1/score?wait=1",
                json={
                    "design": {"files": {"a.sv": "module a; endmodule"}},
                    "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": "module tb; a u(); endmodule"}},
                },
            )
        assert r.status_code == 503 and r.headers["Retry-After"] == "5"
        assert r.json() == {"detail": "the job queue is unavailable, retry later"}
    finally:
        get_settings.cache_clear()


def test_batch_with_forgotten_jobs_completes_with_sandbox_error():
    """A job the dispatcher no longer knows (result expired or lost) ends the batch with an
    explicit sandbox_error for that sample instead of leaving it "queued" forever."""
    from reward_service.api.service import batch_view
    from reward_service.api.telemetry import Metrics

    batch = BatchRecord(id="b1", job_ids=["gone-1", "gone-2"], groups=[None, None])
    status = batch_view(batch, StubDispatcher(), Metrics(lambda: 0), wait=0)
    assert status.state == "done" and status.done == 2
    assert [r.status for r in status.results] == ["sandbox_error", "sandbox_error"]
    assert all(r.reward is None and "expired or was lost" in r.message for r in status.results)


def test_a_registered_cvdp_problem_resolves_as_the_cli_resolves_it():
    """The API scores a problem_id request through ProblemSpec (registered rows), the CLI and
    rescore through cvdp.Problem: the same completion must give the same request, targets
    and the exclusion of proved-unreachable points included (they decide `passed`)."""
    problem = load_problems(CID012)["cvdp_copilot_ring_token_0004"]
    via_api = ProblemSpec.from_cvdp(problem).request("```verilog\nmodule tb; endmodule\n```")
    via_cli = problem.request("```verilog\nmodule tb; endmodule\n```")
    assert via_api.coverage == via_cli.coverage and via_api.coverage.exclude_unreachable is True
    assert via_api.model_dump(exclude={"limits", "reward"}) == via_cli.model_dump(exclude={"limits", "reward"})
