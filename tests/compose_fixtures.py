"""The ``docker compose`` stack for the tests that need it (tests/test_compose_stack.py,
tests/test_chaos.py, tests/test_soak.py): bring it up under its own project name, ports and
volumes, wait for ``/readyz``, and take it down (``down -v``) at the end.

Images come from ``scripts/build_images.sh`` (``.ci/run`` runs it before the tests).
tests/compose.test.yml exposes the stack's Redis to the test on a free host port (job
statistics, fault injection) and keeps the workers' cache on a volume kept between runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from conftest import free_port

REPO = Path(__file__).resolve().parents[1]
IMAGES = ("reward-service:latest", "reward-service-worker:latest", "redis:7.0-bookworm")
SANDBOX_LABEL = "reward-service.sandbox"  # reward_service.sandbox.reaper.LABEL
OWNER_LABEL = "reward-service.owner"
TEST_CACHE_VOLUME = "reward-service-test-worker-cache"  # tests/compose.test.yml
TEST_OVERRIDE = REPO / "tests" / "compose.test.yml"


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) when present, else Debian's ``docker-compose`` (v1.29)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def docker_client():
    """A docker-py client of the local daemon, or None when no daemon answers."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception:  # no daemon (or no SDK): the caller skips
        return None


@dataclass
class Stack:
    """A running compose project: the API's base URL, its Redis as seen from the host, the
    compose command line (project name and files included) and its environment."""

    url: str
    redis_url: str
    command: list[str]
    env: dict[str, str]
    project: str
    docker: object

    def compose(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run ``docker compose <args>`` for this project; AssertionError with its output when
        it fails and ``check``."""
        proc = subprocess.run(
            [*self.command, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=REPO
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def containers(self, service: str, stopped: bool = False):
        """The project's containers of ``service`` (running ones, and stopped ones with
        ``stopped``), sorted by name."""
        found = self.docker.containers.list(
            all=stopped,
            filters={"label": [f"com.docker.compose.project={self.project}", f"com.docker.compose.service={service}"]},
        )
        return sorted(found, key=lambda c: c.name)

    def sim_leftovers(self) -> list[str]:
        """Sim containers (running or not) and per-step volumes made by this stack's workers."""
        hosts = {c.attrs["Config"]["Hostname"] for c in self.containers("worker", stopped=True)}
        return [f"{kind} {ident[:12]}" for kind, ident in sim_objects(self.docker, hosts)]

    def logs(self, *services: str, tail: int = 300) -> str:
        """The last ``tail`` lines of each service's log (all services unless named)."""
        return self.compose("logs", "--no-color", "--tail", str(tail), *services, check=False).stdout

    def wait_ready(self, timeout: float = 180) -> httpx.Response:
        """Poll ``/readyz`` until it answers 200; AssertionError with the last answer and the
        stack's logs after ``timeout`` seconds."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                last = httpx.get(f"{self.url}/readyz", timeout=10)
                if last.status_code == 200:
                    return last
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(1)
        raise AssertionError(f"stack not ready in {timeout:g} s: {getattr(last, 'text', last)}\n{self.logs()}")


def sim_objects(client, hosts: set[str]) -> list[tuple[str, str]]:
    """("container" | "volume", id) of sandbox objects whose owner label names one of ``hosts``
    (a worker's host name is its container's short id)."""

    def mine(labels: dict | None) -> bool:
        return (labels or {}).get(OWNER_LABEL, "").partition("/")[0] in hosts

    label = {"label": f"{SANDBOX_LABEL}=1"}
    containers = client.api.containers(all=True, filters=label)
    volumes = client.api.volumes(filters=label).get("Volumes") or []
    return [("container", c["Id"]) for c in containers if mine(c.get("Labels"))] + [
        ("volume", v["Name"]) for v in volumes if mine(v.get("Labels"))
    ]


def remove_sim_objects(client, hosts: set[str]) -> None:
    import docker

    for kind, ident in sim_objects(client, hosts):  # containers first: they hold the volumes
        try:
            if kind == "container":
                client.api.remove_container(ident, v=True, force=True)
            else:
                client.api.remove_volume(ident, force=True)
        except docker.errors.NotFound:  # went with its container (v=True)
            pass


#: Scores the JSON requests on stdin (one per line) with the worker's own engine (its sandbox, its
#: cache volume) and prints one status line each.
_WARM = """
import json, sys
from reward_service.engine import Engine
from reward_service.settings import Settings
engine = Engine(Settings(result_cache=False))
for line in sys.stdin:
    r = engine.score(json.loads(line))
    print("RS_WARM " + json.dumps([r.status, (r.message or "")[:300], r.log[-1500:] if r.status != "ok" else ""]))
"""


def warm_worker_cache(st: Stack, requests: Sequence) -> None:
    """Score ``requests`` (ScoreRequests, each expected ``ok``) in one worker container with
    its own engine, outside any Celery time limit, to fill the workers' shared cache volume
    (ccache of Verilator builds, built cocotb models, unreachability proofs): on a fresh
    machine the first build under a busy test run can take minutes, more than the short
    limits of tests/compose.test.yml allow. Later builds only compile the design."""
    slow = {"compile_s": 1800}
    lines = [
        request.model_copy(update={"limits": request.limits.model_copy(update=slow)}).model_dump_json()
        for request in requests
    ]
    proc = subprocess.run(
        [*st.command, "exec", "-T", "--index", "1", "worker", "python", "-c", _WARM],
        input="\n".join(lines) + "\n",
        env=st.env,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
    )
    statuses = [json.loads(line[8:])[0] for line in proc.stdout.splitlines() if line.startswith("RS_WARM ")]
    assert proc.returncode == 0 and statuses == ["ok"] * len(lines), (
        f"warming the worker cache failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


@contextlib.contextmanager
def compose_stack(
    log_dir: Path, *, overrides: Sequence[Path] = (), workers: int = 2, warm: Callable[[Stack], None] | None = None
) -> Iterator[Stack]:
    """docker-compose.yml + tests/compose.test.yml (+ ``overrides``, later files win) as a
    project of its own (``rstest<pid>``, free host ports for the API and Redis), ``workers``
    worker containers; ready (``/readyz`` 200) and ``warm``\\ ed before it is yielded. On exit
    the project's logs go to ``log_dir/<project>.log`` and it is taken down with its volumes.

    Skips the test when no Docker daemon answers; AssertionError when Compose or the images
    are missing, or the stack is not ready within 180 s."""
    import docker

    client = docker_client()
    if client is None:
        pytest.skip("no Docker daemon reachable")
    command = compose_command()
    assert command, "Docker Compose is missing: scripts/install.sh installs it"
    missing = [name for name in IMAGES if not client.images.list(name=name)]
    assert not missing, f"images {missing} missing: run scripts/build_images.sh"
    project = f"rstest{os.getpid()}x{time.monotonic_ns() % 10**6}"
    try:  # the workers' cache, kept between runs (tests/compose.test.yml); Docker fills it from the image
        client.volumes.get(TEST_CACHE_VOLUME)
    except docker.errors.NotFound:
        client.volumes.create(TEST_CACHE_VOLUME)
    api_port, redis_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("REWARD_SERVICE_")},
        "REWARD_SERVICE_PORT": str(api_port),
        "REWARD_SERVICE_BIND": "127.0.0.1",
        "RS_TEST_REDIS_PORT": str(redis_port),
    }
    files = [REPO / "docker-compose.yml", TEST_OVERRIDE, *overrides]
    st = Stack(
        url=f"http://127.0.0.1:{api_port}",
        redis_url=f"redis://127.0.0.1:{redis_port}/0",
        command=[*command, "-p", project, *(a for f in files for a in ("-f", str(f)))],
        env=env,
        project=project,
        docker=client,
    )
    hosts: set[str] = set()
    try:
        st.compose("up", "-d", "--scale", f"worker={workers}")
        st.wait_ready()
        hosts = {c.attrs["Config"]["Hostname"] for c in st.containers("worker")}
        if warm is not None:
            warm(st)
        yield st
    finally:
        hosts |= {c.attrs["Config"]["Hostname"] for c in st.containers("worker", stopped=True)}
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"{project}.log").write_text(st.logs())
        st.compose("down", "-v", "--remove-orphans", "-t", "10", check=False)
        # With the Docker sandbox (docker-compose.docker-sandbox.yml) a SIGKILLed worker may leave
        # a sim container behind (a surviving worker's reaper removes it after its deadline; the
        # stack is gone by then): the test cleans up its own. The default stack makes none.
        remove_sim_objects(client, hosts)


def essence(result) -> dict:
    """What must agree between two scorings of the same inputs (a ScoreResult or its JSON):
    status, reward, passed, coverage, tests, engine, simulator; not timings, logs, versions."""
    if not isinstance(result, dict):
        result = result.model_dump(mode="json")
    keys = ["status", "reward", "passed", "coverage", "tests", "engine", "simulator"]
    if result.get("status") == "timeout":
        # a timed-out run's coverage is "up to the kill, for information" (its reward is the
        # failure value): how far it got depends on the machine's load, not on the inputs
        keys.remove("coverage")
    return {k: result.get(k) for k in keys}


def busy_worker(stack: Stack, redis_client, jobs: Container[str] | None = None) -> tuple[object, bytes] | None:
    """A worker container running a job now (one of ``jobs``, job ids, when given) and that
    job's lease key, or None. A lease (``<host> <pid> <nonce>``, reward_service.dispatch.leases)
    is held exactly while a worker runs the job; the job's marker keeps saying ``running
    <host> <pid>`` after the job is done, so it cannot tell a busy worker from an idle one."""
    by_host = {c.attrs["Config"]["Hostname"]: c for c in stack.containers("worker")}
    for key in redis_client.scan_iter("reward-service:job:*:lease"):
        job_id = key.decode().removeprefix("reward-service:job:").removesuffix(":lease")
        if jobs is not None and job_id not in jobs:
            continue
        value = redis_client.get(key)
        if value:
            host = value.split()[0].decode()
            if host in by_host:
                return by_host[host], key
    return None


def wait_healthy(container, timeout: float = 120) -> None:
    """Wait until a worker ``container`` runs and its healthcheck (the liveness file) passes;
    AssertionError after ``timeout`` seconds."""
    deadline, health = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        container.reload()
        health = container.attrs["State"].get("Health", {}).get("Status")
        if container.status == "running" and health == "healthy":
            return
        time.sleep(1)
    raise AssertionError(f"worker {container.name} not healthy in {timeout:g} s: {container.status} {health}")


def kill_mid_job(stack: Stack, redis_client, jobs: Container[str] | None = None) -> object | None:
    """SIGKILL a worker container while it runs a job (one of ``jobs``, job ids, when given):
    it is frozen first (docker pause) and killed only if it still holds the job's lease then and
    the job has no stored result, so the kill cannot land just after the job finished (CI runs
    lost that race under load).
    Returns the container, or None when no worker was busy."""
    import docker

    found = busy_worker(stack, redis_client, jobs)
    if found is None:
        return None
    victim, key = found
    try:
        victim.pause()
    except docker.errors.APIError:  # it may have just gone idle or been restarted
        return None
    value = redis_client.get(key) or b""
    job_id = key.decode().removeprefix("reward-service:job:").removesuffix(":lease")
    # the lease is released just after the result is stored: a kill between the two leaves
    # nothing to run again (a CI run met it), so the job must also have no result yet
    stored = redis_client.exists(f"celery-task-meta-{job_id}")
    if value and value.split()[0].decode() == victim.attrs["Config"]["Hostname"] and not stored:
        victim.kill(signal="SIGKILL")
        return victim
    victim.unpause()
    return None
