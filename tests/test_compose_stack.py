"""The ``docker compose`` stack end to end: docker-compose.yml
brings up Redis, the API and two worker containers; the workers run every simulation step in a
fresh bubblewrap sandbox inside their own hardened container (REWARD_SERVICE_SANDBOX=bwrap,
non-root, read-only, no capabilities, docker/seccomp/worker.json, no Docker socket).

Images come from ``scripts/build_images.sh`` (``.ci/run`` runs it before the tests). The stack is
started once for this module under its own compose project name, ports and volumes, and taken
down (``down -v``) at the end; tests/compose.test.yml exposes its Redis to the test (job
statistics) and shortens the Celery time limits so that a SIGKILLed worker's jobs are
redelivered within the test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from compose_fixtures import Stack, compose_stack, essence, kill_mid_job, wait_healthy, warm_worker_cache
from conftest import ADVERSARIAL, CID012, STIMULUS, cid012_rows, needs_cases, rtl_files, run_trainer_example
from samples import ARBITER, PIDS, cocotb_case, icarus_case, problems
from test_episodes import EXAMPLES as EPISODE_EXAMPLES
from test_episodes import GOOD_TB as EPISODE_GOOD_TB
from test_episodes import WEAK_TB as EPISODE_WEAK_TB
from test_episodes import sv as episode_sv
from test_step_walls import EXPECTED as WALLS_EXPECTED
from test_step_walls import PROBE as WALLS_PROBE

REPO = Path(__file__).resolve().parents[1]
ATTENUATOR = "cvdp_copilot_Attenuator_0011"

# One stack per module; this module, tests/test_chaos.py and tests/test_soak.py share an xdist
# group (--dist loadgroup, pyproject addopts), so they run one after the other on one xdist
# worker and only one stack is up at a time.
# The first test's budget includes bringing the stack up and warming the workers' cache (two cold
# Verilator builds in a worker: minutes on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("compose-stack"), pytest.mark.timeout(1800)]


def _warm(st: Stack) -> None:
    """The workers' ccache and the cocotb model, warmed outside the Celery time limits
    (compose_fixtures.warm_worker_cache)."""
    warm_worker_cache(
        st, [icarus_case(ATTENUATOR, "good", simulator="verilator"), cocotb_case(ARBITER, simulator="verilator")]
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with compose_stack(tmp_path_factory.getbasetemp(), warm=_warm) as st:
        yield st


def test_the_docker_sandbox_override_runs_each_step_in_a_sim_container(tmp_path_factory, engine):
    """docker-compose.docker-sandbox.yml, the opt-in container per step: its worker holds the
    Docker socket and scores a sample in sim containers as the host's engine does, leaving none
    behind. First in the module, so its own stack is up alone (the module's starts after it)."""
    with compose_stack(
        tmp_path_factory.getbasetemp(), overrides=[REPO / "docker-compose.docker-sandbox.yml"], workers=1
    ) as st:
        (worker,) = st.containers("worker")
        assert "REWARD_SERVICE_SANDBOX=docker" in worker.attrs["Config"]["Env"]
        assert any(m.get("Source") == "/var/run/docker.sock" for m in worker.attrs["Mounts"])
        request = icarus_case(ATTENUATOR, "good")
        got = httpx.post(f"{st.url}/v1/score?wait=300", timeout=360, json=request.model_dump(mode="json")).json()
        assert got["status"] == "ok", (got["status"], got["message"], got["log"][-2000:])
        assert got["versions"]["sandbox"].startswith("docker"), got["versions"]
        assert essence(got) == essence(engine.score(request))
        deadline = time.monotonic() + 20
        while st.sim_leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert st.sim_leftovers() == [], "sim containers or volumes were left behind"


def _curl_json(url: str, body: Path, *, content_type: str = "application/json") -> tuple[int, dict]:
    """POST a file with the real curl command line; returns (HTTP status, JSON body)."""
    proc = subprocess.run(
        [
            "curl",
            "-sS",
            "-X",
            "POST",
            "-H",
            f"Content-Type: {content_type}",
            "--data-binary",
            f"@{body}",
            "-w",
            "\n%{http_code}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=660,
    )
    assert proc.returncode == 0, proc.stderr
    text, _, code = proc.stdout.rpartition("\n")
    return int(code), json.loads(text)


@needs_cases
def test_curl_score_of_a_cvdp_problem_equals_the_cli(stack, shared_cache_dir, tmp_path):
    tb = STIMULUS / ATTENUATOR / "good.sv"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward_service",
            "score",
            "--problems",
            str(CID012),
            "--problem-id",
            ATTENUATOR,
            "--testbench",
            str(tb),
            "--simulator",
            "verilator",
            "--json",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "REWARD_SERVICE_CACHE_DIR": str(shared_cache_dir)},
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    want = json.loads(cli.stdout)
    assert want["status"] == "ok" and want["coverage"]["overall"] > 0.9

    # Register the problem's cid012 row (the whole file would queue 82 warm-up builds, which run
    # behind scoring jobs but keep both cores busy for minutes).
    row = tmp_path / "row.jsonl"
    row.write_text(json.dumps(cid012_rows()[ATTENUATOR]) + "\n")
    code, loaded = _curl_json(f"{stack.url}/v1/problems:load", row, content_type="application/x-ndjson")
    assert code == 201 and loaded["ids"] == [ATTENUATOR]
    body = tmp_path / "score.json"
    body.write_text(
        json.dumps(
            {
                "problem_id": ATTENUATOR,
                "simulator": "verilator",
                "stimulus": {"kind": "sv_testbench", "files": {"good.sv": tb.read_text()}},
            }
        )
    )
    code, got = _curl_json(f"{stack.url}/v1/score?wait=600", body)
    assert code == 200, got
    assert essence(got) == essence(want)

    # The minimal contract shape (design files + stimulus + scope) measures the same coverage.
    body.write_text(
        json.dumps(
            {
                "design": {"files": rtl_files(cid012_rows()[ATTENUATOR])},
                "stimulus": {"kind": "sv_testbench", "files": {"good.sv": tb.read_text()}},
                "simulator": "verilator",
                "coverage": {"scope": "uut"},
            }
        )
    )
    code, got = _curl_json(f"{stack.url}/v1/score?wait=600", body)
    assert code == 200 and got["status"] == "ok", got
    assert got["coverage"]["metrics"] == want["coverage"]["metrics"]


def _batch_samples() -> list:
    """50 samples: 3 problems x good/weak x 7 seeds on Icarus, SV and cocotb on Verilator, a
    cocotb test on Icarus, and four broken ones (compile error, no code, wrong DUT instance, hang)."""
    reqs = [icarus_case(pid, tb, seed=seed) for seed in range(7) for pid in PIDS for tb in ("good", "weak")]
    reqs += [
        icarus_case(ARBITER, "good", simulator="verilator"),
        icarus_case(ATTENUATOR, "weak", simulator="verilator"),
        cocotb_case(ARBITER),
        cocotb_case(ARBITER, simulator="verilator"),
    ]
    from reward_service.models import ScoreRequest, SvTestbench

    arbiter = problems()[ARBITER]
    good = (STIMULUS / ARBITER / "good.sv").read_text()
    reqs += [
        ScoreRequest.model_validate(
            {
                "design": {"files": rtl_files(cid012_rows()[ARBITER])},
                "simulator": "icarus",
                "stimulus": {
                    "kind": "sv_testbench",
                    "files": {"tb.sv": "module tb; initial begin x = ; end endmodule"},
                },
            }
        ),
        arbiter.request("I cannot write a testbench for this.", simulator="icarus"),
        arbiter.request(SvTestbench(files={"tb.sv": good.replace(" dut (", " u0 (")}), simulator="icarus"),
        arbiter.request(
            SvTestbench(files={"tb.sv": good.replace("$finish;", "")}), simulator="icarus", limits={"run_s": 3}
        ),
    ]
    assert len(reqs) == 50
    return reqs


def _wait_idle(redis_client, timeout: float = 600) -> None:
    """Until no job is queued or delivered and unacknowledged (seen twice, a second apart): the
    warm-up build that problems:load queued (first test) can still run, and a worker killed
    while running it interrupts none of the batch's jobs."""
    from reward_service.dispatch.contract import QUEUE_LISTS, UNACKED_KEY

    deadline, idle = time.monotonic() + timeout, 0
    while idle < 2:
        assert time.monotonic() < deadline, "the stack's workers did not go idle"
        depth = sum(redis_client.llen(q) for q in QUEUE_LISTS) + redis_client.hlen(UNACKED_KEY)
        idle = 0 if depth else idle + 1
        time.sleep(1)


def test_batch_of_50_survives_a_sigkilled_worker(stack, engine):
    import redis

    reqs = _batch_samples()
    rc = redis.Redis.from_url(stack.redis_url)
    _wait_idle(rc)
    r = httpx.post(f"{stack.url}/v1/batches", timeout=60, json={"requests": [q.model_dump(mode="json") for q in reqs]})
    assert r.status_code in (200, 202), r.text
    batch_id = r.json()["batch_id"]
    victim, deadline = None, time.monotonic() + 300
    while victim is None and time.monotonic() < deadline:
        status = httpx.get(f"{stack.url}/v1/batches/{batch_id}", timeout=30).json()
        if status["done"] >= 3:
            victim = kill_mid_job(stack, rc)
        if status["state"] == "done":
            break
        time.sleep(0.2)
    assert victim is not None, "no worker was seen running a job mid-batch"

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        r = httpx.get(f"{stack.url}/v1/batches/{batch_id}?wait=30", timeout=60)
        if r.status_code == 200:
            break
    body = r.json()
    assert r.status_code == 200 and body["state"] == "done", (body.get("done"), stack.logs()[-5000:])
    assert body["total"] == body["done"] == 50 and len(body["results"]) == 50
    # Each request answered once, in request order: every result equals the engine's own result
    # for that request (bubblewrap on this host and in the worker containers).
    for i, (req, got) in enumerate(zip(reqs, body["results"])):
        want = engine.score(req).model_dump(mode="json")
        assert essence(got) == essence(want), f"sample {i}: {got['status']} {got['message']}"
    statuses = [res["status"] for res in body["results"]]
    assert statuses[-4:] == ["compile_error", "invalid_input", "invalid_input", "timeout"]
    assert statuses.count("ok") == 46
    # The kill really interrupted work: at least one job was delivered twice.
    deliveries = [int(rc.get(f"reward-service:job:{j}:deliveries") or 0) for j in body["job_ids"]]
    assert all(d >= 1 for d in deliveries) and max(deliveries) >= 2
    victim.remove(force=True)  # its replacement is not needed; the stack goes down at the end


def test_bad_inputs_over_http_get_their_status_and_leave_nothing_behind(stack, tmp_path):
    url = stack.url
    rtl = rtl_files(cid012_rows()[ATTENUATOR])
    good = (STIMULUS / ATTENUATOR / "good.sv").read_text()

    def sv(tb: str, **extra) -> dict:
        return {
            "design": {"files": rtl},
            "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": tb}},
            "simulator": "icarus",
            "coverage": {"scope": "uut"},
            **extra,
        }

    r = httpx.post(
        f"{url}/v1/score", content=b'{"design": {"files": ', timeout=30, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "malformed JSON" in r.json()["detail"]
    r = httpx.post(
        f"{url}/v1/score",
        content=b"{" + b" " * (9 << 20) + b"}",
        timeout=60,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413
    r = httpx.post(
        f"{url}/v1/score", json=sv(good) | {"design": {"files": {"../../etc/x.sv": "module x; endmodule"}}}, timeout=30
    )
    assert r.status_code == 422 and "../../etc/x.sv" in r.json()["detail"]
    r = httpx.post(
        f"{url}/v1/score",
        timeout=30,
        json={"problem_id": "no_such_problem", "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": good}}},
    )
    assert r.status_code == 404 and "no_such_problem" in r.json()["detail"]

    hang = httpx.post(
        f"{url}/v1/score?wait=120", timeout=180, json=sv(good.replace("$finish;", ""), limits={"run_s": 3})
    ).json()
    assert hang["status"] == "timeout" and hang["reward"] == 0.0
    bomb_tb = good.replace(
        # the queue is read: Verilator drops a loop on a variable nothing reads (test_bad_input)
        "initial begin",
        "int q[$];\n  initial forever begin q.push_back(1); if (q.size() == 0) $stop; end\n  initial begin",
        1,
    )
    bomb = httpx.post(
        f"{url}/v1/score?wait=120",
        timeout=180,
        json=sv(bomb_tb, simulator="verilator", limits={"run_s": 20, "memory_mb": 256}),
    ).json()
    assert bomb["status"] == "resource_limit" and "memory" in bomb["message"]

    probe = """import os, socket, cocotb
from cocotb.triggers import Timer

def attempt(label, family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(address)
        cocotb.log.info("REACHED %s", label)
    except OSError as exc:
        cocotb.log.info("blocked %s: %s", label, exc)

@cocotb.test()
async def escape(dut):
    await Timer(1, unit="ns")
    attempt("internet", socket.AF_INET, ("93.184.216.34", 80))
    attempt("redis", socket.AF_INET, ("redis", 6379))
    attempt("docker", socket.AF_UNIX, "/var/run/docker.sock")
    try:
        open("/escape.txt", "w").write("x")
        cocotb.log.info("REACHED rootfs")
    except OSError as exc:
        cocotb.log.info("blocked rootfs: %s", exc)
"""
    counter = ADVERSARIAL / "12-hang-no-finish-zero-delay" / "dut_counter.v"
    net = httpx.post(
        f"{url}/v1/score?wait=120",
        timeout=180,
        json={
            "design": {"files": {"dut_counter.v": counter.read_text()}, "toplevel": "dut_counter"},
            "stimulus": {"kind": "cocotb", "files": {"test_probe.py": probe}, "test_module": "test_probe"},
            "simulator": "icarus",
            "coverage": {"metrics": ["line"]},
        },
    ).json()
    assert net["status"] == "ok" and net["tests"][0]["passed"], net["message"]
    for label in ("internet", "redis", "docker"):
        assert f"blocked {label}" in net["log"] and f"REACHED {label}" not in net["log"]
    # "/" of a bubblewrap sandbox is its own tmpfs, discarded with it (as in embedded mode);
    # test_a_sample_in_the_worker_reaches_nothing_and_leaves_nothing checks nothing survives.
    assert "blocked rootfs" in net["log"] or "REACHED rootfs" in net["log"]

    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
    deadline = time.monotonic() + 20
    while stack.sim_leftovers() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stack.sim_leftovers() == [], "sim containers or volumes were left behind"


# -- isolation inside the worker container ----------------------------------------------------
#: A cocotb test that looks around its run step and logs what it found as one "PROBE {json}"
#: line. Role "plant" also leaves traces (files in /work and /tmp, a detached process) that a
#: later sample ("seek") and the worker containers themselves must not show.
_PROBE = """import json, os, socket, subprocess, sys, cocotb
from cocotb.triggers import Timer

ROLE, MARK, REDIS_IP = "__ROLE__", "__MARK__", "__REDIS_IP__"
SKIP = ("/proc", "/sys", "/usr", "/dev", "/opt", "/lib", "/lib64", "/bin", "/sbin", "/etc")


def connect(address):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(address)
        return "REACHED"
    except OSError as exc:
        return f"blocked: {exc}"


def processes():
    out = {}
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if pid.isdigit():
            try:
                out[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
            except OSError as exc:
                out[pid] = f"unreadable: {exc}"
    return out


def environ_of(pid):
    try:
        return open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError as exc:
        return f"unreadable: {exc}"


def mounts():
    try:
        return sorted({l.split()[4] for l in open(f"/proc/{os.getpid()}/mountinfo")})
    except OSError:  # an empty /proc (the worker's /proc is masked): the top-level dirs then
        return sorted("/" + d for d in os.listdir("/")) + ["/"]


def writable_mounts():
    found = []
    for point in mounts():
        probe = os.path.join(point, f".probe-{os.getpid()}")
        try:
            open(probe, "w").close()
            os.unlink(probe)
            # a directory of bwrap's private root tmpfs (parents of its binds) counts as "/"
            found.append("/" if os.stat(point).st_dev == os.stat("/").st_dev else point)
        except OSError:
            pass
    return sorted(set(found))


def traces():
    hits = []
    for top in ("/",):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
            hits += [os.path.join(root, f) for f in files if MARK in f]
    hits += [f"process {pid}: {cmd}" for pid, cmd in processes().items() if MARK in cmd]
    return hits


def walls():
    # the step's seccomp filter and --disable-userns: walls_probe.c (sent along as a data file) compiled with
    # the image's cc and run, then `unshare -U true`
    source = next(os.path.join(d, f) for d, _, fs in os.walk("/work") for f in fs if f == "walls_probe.txt")
    built = subprocess.run(["cc", "-x", "c", "-pthread", "-o", "/tmp/walls", source], capture_output=True, text=True)
    if built.returncode != 0:
        return {"cc": built.stderr[-500:]}
    out = subprocess.run(["/tmp/walls"], capture_output=True, text=True).stdout
    got = dict(line.split(" ", 1) for line in out.splitlines() if line.count(" ") == 1)
    got["unshare -U true"] = subprocess.run(["unshare", "-U", "true"], capture_output=True, text=True).returncode
    return got


@cocotb.test()
async def probe(dut):
    await Timer(1, unit="ns")
    try:
        status = dict(l.split(":", 1) for l in open(f"/proc/{os.getpid()}/status") if ":" in l)
    except OSError:
        status = {"CapEff": "0"}  # no /proc: bwrap dropped every capability all the same
    report = {
        "role": ROLE, "uid": os.getuid(), "cap_eff": status["CapEff"].strip(),
        "proc": sorted(os.listdir("/proc")) if os.path.isdir("/proc") else None,
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "redis": connect((REDIS_IP, 6379)),
        "env": sorted(k for k in os.environ if k.startswith(("REWARD_SERVICE", "CELERY"))),
        "pid1_environ": environ_of(1), "processes": processes(),
        "tmp": sorted(os.listdir("/tmp")), "cache_dir_visible": os.path.exists("/var/cache/reward-service"),
        "mounts": mounts(),
        "writable": writable_mounts(), "traces": traces(), "walls": walls() if ROLE == "plant" else {},
    }
    if ROLE == "plant":
        for place in ("/work", "/tmp"):
            open(os.path.join(place, f"{MARK}.txt"), "w").write("left behind")
        if os.fork() == 0:  # a detached grandchild that tries to outlive the step
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, ["python", "-c", "import time; time.sleep(600)", MARK])
            os.execv("/usr/bin/true", ["true"])
    cocotb.log.info("PROBE " + json.dumps(report))
"""


def _probe(stack: Stack, role: str, mark: str, redis_ip: str, seed: int) -> dict:
    """Scores the probe as a cocotb test on Verilator (its model built and cached, read-only in
    the run step) through the API; returns its report."""
    from reward_service.models import CocotbStimulus, ScoreRequest

    text = _PROBE.replace("__ROLE__", role).replace("__MARK__", mark).replace("__REDIS_IP__", redis_ip)
    exp = json.loads((STIMULUS / ARBITER / "expected.json").read_text())["cocotb"]
    request = ScoreRequest(
        design=problems()[ARBITER].design,
        simulator="verilator",
        seed=seed,
        # unguarded (the write guard refuses the processes the probe starts): the walls probed
        # here are the sandbox's, which hold with or without the guard
        stimulus_policy={"dut_writes": "allow"},
        stimulus=CocotbStimulus(
            files={"test_probe.py": text, "walls_probe.txt": WALLS_PROBE.read_text()},
            test_module="test_probe",
            toplevel=exp["hdl_toplevel"],
        ),
    )
    got = httpx.post(f"{stack.url}/v1/score?wait=300", timeout=360, json=request.model_dump(mode="json")).json()
    assert got["status"] == "ok" and got["tests"][0]["passed"], (got["status"], got["message"], got["log"][-3000:])
    line = next(text for text in got["log"].splitlines() if "PROBE {" in text)
    return json.loads(line.split("PROBE ", 1)[1])


_WORKER_LOOK = """
import json, os, sys
mark = sys.argv[1]
procs, zombies = [], []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            stat = open(f"/proc/{pid}/stat", "rb").read()
        except OSError:
            continue
        if mark.encode() in cmd and pid != str(os.getpid()):
            procs.append(pid)
        if stat[stat.rfind(b")") + 2 :].split()[0] == b"Z":
            zombies.append(stat.decode(errors="replace")[:60])
files = [os.path.join(r, f) for top in ("/tmp", "/var/cache/reward-service") for r, _, fs in os.walk(top)
         for f in fs if mark in f]
print(json.dumps({"processes": procs, "files": files, "zombies": zombies}))
"""


def test_a_sample_in_the_worker_reaches_nothing_and_leaves_nothing(stack):
    redis_ip = next(iter(stack.containers("redis")[0].attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    mark = f"rs-probe-{os.getpid()}-{time.monotonic_ns()}"
    plant = _probe(stack, "plant", mark, redis_ip, seed=11)

    # Who it runs as, and what it sees: no network but loopback, Redis refused, none of the
    # worker's environment (its own nor that of the sandbox's pid 1), only its own processes.
    assert plant["uid"] == 65534 and int(plant["cap_eff"], 16) == 0
    assert plant["interfaces"] == ["lo"]
    assert plant["redis"].startswith("blocked"), plant["redis"]
    assert plant["env"] == [] and "REWARD_SERVICE" not in plant["pid1_environ"], plant["pid1_environ"][:300]
    assert not any(
        "celery" in cmd or "workers" in cmd or "REWARD_SERVICE" in cmd for cmd in plant["processes"].values()
    ), plant["processes"]
    assert len(plant["processes"]) <= 3, plant["processes"]  # bwrap's init, prlimit->python, maybe one more
    # empty (masked worker /proc: only the /proc/self/exe link bwrap.py makes for tools like yosys)
    # or its own pid namespace
    assert plant["proc"] in ([], ["self"]) or "1" in plant["proc"], plant["proc"]
    # The worker's files: not its cache volume, not its /tmp (other samples' work dirs).
    assert plant["cache_dir_visible"] is False and plant["tmp"] == []
    # Writable: the step's own /work and /tmp, and bwrap's private root and /dev tmpfs (made
    # for this sandbox, gone with it). The built model (/model) and the tools are read-only;
    # no ccache is mounted in a run step.
    assert set(plant["writable"]) <= {"/", "/dev", "/tmp", "/work"}, plant["writable"]
    assert "/model" in plant["mounts"] and "/model" not in plant["writable"]
    assert not any("ccache" in m for m in plant["mounts"]), plant["mounts"]
    # The step's walls (issue 18): each refused call fails with EPERM in the worker too (its
    # profile lets bwrap install the filter), unshare -U fails, threads and fork work.
    walls = plant["walls"]
    assert {name: walls.get(name) for name in WALLS_EXPECTED} == WALLS_EXPECTED, walls
    assert walls["unshare -U true"] != 0, walls

    # Nothing of the first sample survives its step: the next sample finds no file or process
    # of it, and neither do the worker containers themselves; no step left a zombie (each
    # leaves an orphan that the image's init, tini, must reap: with the worker as PID 1 they
    # piled up, one per step, in the container's pids limit).
    seek = _probe(stack, "seek", mark, redis_ip, seed=12)
    assert seek["traces"] == [] and seek["tmp"] == [], seek["traces"]
    deadline = time.monotonic() + 10
    while True:
        looks = [
            json.loads(c.exec_run(["python", "-c", _WORKER_LOOK, mark]).output.decode().strip().splitlines()[-1])
            for c in stack.containers("worker")
        ]
        clean = {"processes": [], "files": [], "zombies": []}
        if all(look == clean for look in looks) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(look == clean for look in looks), looks


def test_the_worker_container_is_hardened_and_holds_no_docker_socket(stack):
    for container in stack.containers("worker"):
        host = container.attrs["HostConfig"]
        assert container.attrs["Config"]["User"] == "10001:10001"
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert "no-new-privileges:true" in host["SecurityOpt"]
        seccomp = next(o for o in host["SecurityOpt"] if o.startswith("seccomp="))
        assert json.loads(seccomp.split("=", 1)[1]) == json.loads((REPO / "docker/seccomp/worker.json").read_text())
        assert host["Memory"] > 0 and host["PidsLimit"] > 0 and not host["Privileged"]
        # work dirs on a tmpfs the steps may execute from (they run the binaries they build)
        assert "exec" in (host.get("Tmpfs") or {}).get("/tmp", "").split(","), host.get("Tmpfs")
        assert not any("docker.sock" in (m.get("Source") or "") for m in container.attrs["Mounts"])
        out = container.exec_run(
            ["python", "-c", "import os; print(os.getuid(), os.path.exists('/var/run/docker.sock'))"]
        )
        assert out.output.decode().split() == ["10001", "False"]
        # An init reaps the orphan every sandboxed step leaves (docker/worker/Dockerfile)
        assert container.exec_run(["cat", "/proc/1/comm"]).output.decode().strip() == "tini"


_ROOTS_LOOK = """
import glob, json, os
from reward_service.sandbox.minimal_root import on_fuse
roots = sorted(glob.glob("/tmp/reward-service-root-*"))
pool = int(os.environ.get("REWARD_SERVICE_WORKER_CONCURRENCY") or len(os.sched_getaffinity(0)))
print(json.dumps({"fuse": on_fuse("/usr"), "roots": roots, "pool": pool,
                  "tools": sorted(os.listdir(roots[0] + "/usr/bin")) if roots else []}))
"""


def test_icarus_steps_in_the_worker_run_in_a_minimal_root_where_its_root_is_fuse(stack):
    """Settings.step_root auto in the compose worker: on a fuse-overlayfs root (Docker's storage
    driver on this VM) the pool process that ran a fast-path step holds its private copy of the
    Icarus tools on the container's tmpfs; on any other storage driver none is made."""
    request = icarus_case(ATTENUATOR, "good", seed=31, simulator="verilator").model_dump(mode="json")
    got = httpx.post(f"{stack.url}/v1/score?wait=120", timeout=180, json={**request, "engine": "fast"}).json()
    assert got["status"] == "ok" and got["engine"] == "fast", got["message"]
    looks = [
        json.loads(c.exec_run(["python", "-c", _ROOTS_LOOK]).output.decode().strip().splitlines()[-1])
        for c in stack.containers("worker")
    ]
    fuse = {look["fuse"] for look in looks}
    assert len(fuse) == 1, looks  # the workers share one storage driver
    if fuse == {False}:
        assert all(look["roots"] == [] for look in looks), looks
        return
    # one copy per pool process that ran an Icarus step (those of replaced processes are swept)
    assert any(look["roots"] for look in looks) and all(len(look["roots"]) <= look["pool"] for look in looks), looks
    for look in looks:
        if look["roots"]:
            # the step's own CPU budget replaced `timeout` (docs/sandbox.md, "Time limits")
            assert {"iverilog", "vvp", "sh", "chmod", "prlimit"} <= set(look["tools"]), look
            assert "python3" not in look["tools"] and "gcc" not in look["tools"], look


_COCOTB_BOMB = """import os, time, cocotb
from cocotb.triggers import Timer

@cocotb.test()
async def bomb(dut):
    await Timer(1, unit="ns")
    if "__KIND__" == "fork":
        children = 0
        try:
            while True:
                if os.fork() == 0:
                    os.execv("/usr/bin/sleep", ["sleep", "30"])
                children += 1
        except OSError as exc:
            cocotb.log.info("FORK REFUSED after %d: %s", children, exc)
        time.sleep(3)
    else:
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
"""


def _adversarial_requests() -> list[dict]:
    """The limit and escape cases of ../shared/cases/adversarial, and a cocotb fork bomb and
    memory bomb, as API requests."""
    adv = ADVERSARIAL
    counter = {"dut_counter.v": (adv / "12-hang-no-finish-zero-delay" / "dut_counter.v").read_text()}

    def sv(case: str, tb: str, simulator: str, text: str | None = None, **limits) -> dict:
        design = next(p for p in sorted((adv / case).iterdir()) if p.name.startswith("dut"))
        return {
            "design": {"files": {design.name: design.read_text()}},
            "stimulus": {"kind": "sv_testbench", "files": {tb: text or (adv / case / tb).read_text()}},
            "simulator": simulator,
            "limits": {"compile_s": 600, **limits},
        }

    def bomb(kind: str, **limits) -> dict:
        # dut_writes=allow: no write guard (it refuses every fork): the sandbox's limits stop them
        return {
            "stimulus_policy": {"dut_writes": "allow"},
            "design": {"files": counter, "toplevel": "dut_counter"},
            "simulator": "icarus",
            "stimulus": {
                "kind": "cocotb",
                "files": {"test_bomb.py": _COCOTB_BOMB.replace("__KIND__", kind)},
                "test_module": "test_bomb",
            },
            "coverage": {"metrics": ["line"]},
            # Each bomb meets its own limit within a second of starting, but a cocotb run starts
            # slowly on a loaded machine (13 s to the bomb at load 15 here): a shorter run limit
            # made the host's memory bomb a timeout now and then, not the limit's status.
            "limits": {"run_s": 90, **limits},
        }

    escape = "`define USE_SYSTEM\n" + (adv / "18-sandbox-file-and-shell-escape" / "tb_escape.sv").read_text()
    return [
        sv("12-hang-no-finish-zero-delay", "tb_no_finish.v", "icarus", run_s=3),
        sv("19-runaway-output-flood", "tb_flood_zero_time.v", "icarus", run_s=2),
        sv("19-runaway-output-flood", "tb_flood.v", "verilator", run_s=3),
        sv("18-sandbox-file-and-shell-escape", "tb_escape.sv", "verilator", escape),
        bomb("fork", processes=32),
        bomb("memory", memory_mb=256),
    ]


def test_limit_and_escape_cases_get_the_hosts_statuses(stack, engine):
    """Hang, output floods, $system, fork bomb and memory bomb: the worker container (bwrap
    without cgroups: rlimits per user namespace + the tree watcher) gives each the status the
    host's engine gives it (bwrap with cgroups here)."""
    requests = _adversarial_requests()
    r = httpx.post(f"{stack.url}/v1/batches", timeout=60, json={"requests": requests})
    deadline = time.monotonic() + 600
    while r.status_code == 202 and time.monotonic() < deadline:
        r = httpx.get(f"{stack.url}/v1/batches/{r.json()['batch_id']}?wait=30", timeout=60)
    assert r.status_code == 200, r.text[:2000]
    got = r.json()["results"]
    for request, result in zip(requests, got):
        want = engine.score(request)
        label = f"{request['stimulus']['files'].keys()} {request['simulator']}"
        assert result["status"] == want.status, (label, result["status"], result["message"], want.message)
        for word in ("memory", "process", "flood"):
            assert (word in (result["message"] or "")) == (word in (want.message or "")), (
                label,
                result["message"],
                want.message,
            )
    statuses = [res["status"] for res in got]
    assert statuses == ["timeout", "timeout", "timeout", "ok", "resource_limit", "resource_limit"], statuses
    assert "SYSTEM_RAN" not in got[3]["log"] and "uid=" not in got[3]["log"]
    assert "process limit" in got[4]["message"] and "memory limit" in got[5]["message"]


# -- episodes (issue 21, docs/episodes.md) on the stack ------------------------------------------
#: Concurrent episodes of the fault test, two rounds each.
EPISODES = 100
#: Steps answered (of 2 x EPISODES) before a worker is killed.
KILL_AFTER = 20


def _variant(text: str, n: int) -> str:
    """``text`` with one more wire in its testbench module, outside the DUT: the same coverage,
    but a job of its own (job ids are content hashes, so equal steps would share one)."""
    return re.sub(r"(module\s+\w+\s*;)", rf"\1\n  wire [31:0] rs_episode = {n};", text, count=1)


def _load_attenuator(url: str) -> None:
    loaded = httpx.post(
        f"{url}/v1/problems:load", content=(EPISODE_EXAMPLES / "attenuator.jsonl").read_bytes(), timeout=60
    )
    assert loaded.status_code == 201 and loaded.json()["ids"] == [ATTENUATOR], loaded.text


def _workers_up(stack: Stack, count: int = 2) -> None:
    """``count`` worker containers, running and healthy (an earlier test removes the one it killed)."""
    if len(stack.containers("worker")) < count:
        stack.compose("up", "-d", "--no-recreate", "--scale", f"worker={count}", "worker")
    for container in stack.containers("worker"):
        wait_healthy(container)


def _step(client: httpx.Client, episode_id: str, step_id: str, action: dict, wait: float = 20) -> dict:
    """POST one step until it is answered (200) and return the answer. A 202 (still scoring), a
    503 (a failure of ours: not counted) or a lost connection is answered as a trainer does:
    the same step, same step id, sent again. Any other status fails the test."""
    deadline = time.monotonic() + 900
    while True:
        assert time.monotonic() < deadline, f"step {step_id} of episode {episode_id} not answered in 900 s"
        try:
            r = client.post(
                f"/v1/episodes/{episode_id}/step?wait={wait:g}", json={"step_id": step_id, "action": action}
            )
        except httpx.TransportError:  # the API restarting
            time.sleep(1)
            continue
        if r.status_code == 200:
            return r.json()
        assert r.status_code in (202, 503), (step_id, r.status_code, r.text)
        if r.status_code == 503:
            time.sleep(1)


def _run_episode(url: str, n: int, started: list, answered: list) -> dict:
    """One two-round episode on the Attenuator (round 1: the weak testbench, round 2: the full
    one, each a variant of its own), each step sent again once answered (a client that lost
    the answer): that must get the stored answer. Appends the episode id to ``started`` and
    each answered step to ``answered`` (list.append is atomic: the test watches them). Returns
    the episode id, the answers and the final state."""
    with httpx.Client(base_url=url, timeout=120) as client:
        reset = client.post("/v1/episodes", json={"problem_id": ATTENUATOR, "options": {"rounds": 2}})
        assert reset.status_code == 201, reset.text
        episode_id = reset.json()["observation"]["episode_id"]
        started.append(episode_id)
        answers = {}
        for step_id, text in (("r1", EPISODE_WEAK_TB), ("r2", EPISODE_GOOD_TB)):
            action = {"kind": "submit", "stimulus": episode_sv(_variant(text, n))}
            answers[step_id] = _step(client, episode_id, step_id, action)
            answered.append(step_id)
            again = _step(client, episode_id, step_id, action, wait=0)
            assert again == answers[step_id], f"retried step {step_id} of episode {n} got another answer"
        state = client.get(f"/v1/episodes/{episode_id}")
        assert state.status_code == 200, state.text
        return {"episode_id": episode_id, "answers": answers, "state": state.json()}


def _score_on_stack(url: str, text: str) -> tuple[dict, str]:
    """``/v1/score`` of the testbench for the Attenuator: (the result, its job id)."""
    r = httpx.post(
        f"{url}/v1/score?wait=600", timeout=660, json={"problem_id": ATTENUATOR, "stimulus": episode_sv(text)}
    )
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text[:2000]
    return r.json(), r.headers["Content-Location"].rsplit("/", 1)[-1]


def _episode_jobs(redis_client, episode_id: str) -> dict[str, str]:
    """The job id of each scored step of an episode, from its record in the stack's Redis."""
    record = json.loads(redis_client.get(f"reward-service:episode:{episode_id}"))
    return {step_id: step["job_id"] for step_id, step in record["steps"].items() if step["job_id"]}


def test_100_concurrent_episodes_survive_a_sigkilled_worker(stack):
    """100 two-round episodes at once, a worker SIGKILLed while it scores one of their steps:
    every episode ends with both rounds answered as /v1/score answers their testbenches; every
    retried step gets its stored answer; the service scored each step exactly once (one job
    per step, one finished simulation per job; a second one only for a job whose worker died
    after simulating, before storing the result, which a redelivery runs again)."""
    import concurrent.futures

    import redis

    rc = redis.Redis.from_url(stack.redis_url)
    _workers_up(stack)
    _load_attenuator(stack.url)
    want = {
        sid: _score_on_stack(stack.url, _variant(text, -1))[0]
        for sid, text in (("r1", EPISODE_WEAK_TB), ("r2", EPISODE_GOOD_TB))
    }
    assert want["r1"]["passed"] is False and want["r2"]["passed"] is True

    started: list[str] = []
    answered: list[str] = []
    victim = None
    with concurrent.futures.ThreadPoolExecutor(EPISODES) as pool:
        futures = [pool.submit(_run_episode, stack.url, n, started, answered) for n in range(EPISODES)]
        while victim is None and len(answered) < 2 * EPISODES and not all(f.done() for f in futures):
            if len(answered) >= KILL_AFTER:
                # a worker running one of the episodes' steps (not another test's leftover job)
                steps = {job for episode_id in list(started) for job in _episode_jobs(rc, episode_id).values()}
                victim = kill_mid_job(stack, rc, jobs=steps)
            time.sleep(0.05)
        assert victim is not None, f"no worker was seen running a step's job ({len(answered)} steps answered)"
        victim.reload()
        if victim.status != "running":  # docker kill counts as a manual stop: no restart policy
            victim.start()
        done, _ = concurrent.futures.wait(futures, timeout=1200)
    runs = [f.result() for f in futures]  # an episode's assertion error is raised here
    assert len(done) == EPISODES

    for n, run in enumerate(runs):
        one, two = run["answers"]["r1"], run["answers"]["r2"]
        assert one["done"] is False and one["observation"]["round"] == 1, n
        assert two["done"] is True and two["observation"]["round"] == 2 and two["observation"]["passed"] is True, n
        for sid, answer in run["answers"].items():
            assert answer["reward"] == want[sid]["reward"], (n, sid, answer["observation"]["message"])
            assert answer["observation"]["coverage"]["overall"] == want[sid]["coverage"]["overall"], (n, sid)
        state = run["state"]
        assert state["done"] is True and state["round"] == 2 and state["step_ids"] == ["r1", "r2"], (n, state)
        assert [r["reward"] for r in state["history"]] == [one["reward"], two["reward"]], n

    # the service's own count: one job per step sent, each simulated once
    jobs = [job for run in runs for job in _episode_jobs(rc, run["episode_id"]).values()]
    assert len(jobs) == len(set(jobs)) == 2 * EPISODES
    deliveries = [int(rc.get(f"reward-service:job:{j}:deliveries") or 0) for j in jobs]
    sims = [int(rc.get(f"reward-service:job:{j}:sims") or 0) for j in jobs]
    assert max(deliveries) >= 2, "the kill interrupted no step's job"
    for job, delivered, simulated in zip(jobs, deliveries, sims):
        assert simulated == 1 if delivered == 1 else 1 <= simulated <= delivered, (job, delivered, simulated)
    wait_healthy(victim)


@pytest.mark.slow
def test_trl_environment_factory_runs_two_round_episodes_on_the_stack(stack, engine, tmp_path):
    """TRL's ``GRPOTrainer(environment_factory=CoverageEnvironment)`` (examples/trainers/
    trl_environment_tiny.py, what is real and what is scripted: tests/test_trl_environment.py)
    for one step of 2 rollouts against the stack: each rollout's episode on the stack has two
    rounds whose rewards are ``/v1/score``'s and the host engine's own simulation's, and round
    2's observation is round 1's feedback with its uncovered points."""
    from test_trl_environment import EXAMPLE, check_rollouts

    _load_attenuator(stack.url)
    data, stdout = run_trainer_example(
        EXAMPLE, stack.url, tmp_path / "history.json", "--steps", "1", "--generations", "2"
    )
    check_rollouts(data, stdout, stack.url, 1, 2, host_engine=engine)


def test_openenv_and_mcp_clients_run_two_round_episodes_on_the_stack(stack, engine):
    """OpenEnv's own client (WebSocket session) and fastmcp's client (``reward-service mcp
    --url`` over stdio) each run a two-round episode on the stack: round 2's observation holds
    round 1's uncovered points, and a step's reward is /v1/score's for the same testbench (the
    same job: the step's request is /v1/score's) and the host engine's own simulation of it."""
    import asyncio

    import redis
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from openenv.core.generic_client import GenericEnvClient

    from reward_service.feedback import uncovered_by_kind
    from reward_service.models import SvTestbench
    from reward_service.problems.cvdp import load_problems

    rc = redis.Redis.from_url(stack.redis_url)
    _load_attenuator(stack.url)
    problem = load_problems(EPISODE_EXAMPLES / "attenuator.jsonl")[ATTENUATOR].spec()

    def check_round_one(episode_id: str, answer: dict, text: str) -> None:
        host = engine.score(problem.request(SvTestbench(files={"tb.sv": text})))
        scored, job_id = _score_on_stack(stack.url, text)
        assert _episode_jobs(rc, episode_id)["r1"] == job_id  # the step's request is /v1/score's
        assert answer["reward"] == scored["reward"] == host.reward and answer["done"] is False
        assert answer["observation"]["coverage"]["overall"] == host.coverage.overall < 0.9
        # what the model reads for round 2: round 1's uncovered points, by kind
        eda = answer["observation"]["eda_result"]
        assert eda["uncovered"] == uncovered_by_kind(host.uncovered, sources=problem.design.files, max_items=50)
        assert eda["listed_points"] == len(scored["uncovered"]) == len(host.uncovered) > 0
        toggles = eda["uncovered"]["toggles"]
        assert {"file": "Attenuator.sv", "line": 6, "signal": "data", "bits": "1-4", "never": "toggled"} in toggles

    # the first request builds the OpenEnv front end (openenv-core imports gradio: slow in a busy
    # container), so that the WebSocket client's open timeout is not spent on it
    health = httpx.get(f"{stack.url}/openenv/health", timeout=300)
    assert health.json() == {"status": "healthy"}, health.text
    weak, good = _variant(EPISODE_WEAK_TB, 1001), _variant(EPISODE_GOOD_TB, 1001)
    with GenericEnvClient(base_url=f"{stack.url}/openenv", message_timeout_s=600).sync() as env:
        first = env.reset(problem_id=ATTENUATOR, options={"rounds": 2})
        episode_id = first.observation["episode_id"]
        assert first.observation["instance"] == "uut" and first.done is False
        one = env.step({"kind": "submit", "stimulus": episode_sv(weak), "step_id": "r1"})
        check_round_one(episode_id, {"reward": one.reward, "done": one.done, "observation": one.observation}, weak)
        two = env.step({"kind": "submit", "stimulus": episode_sv(good), "step_id": "r2"})
        assert two.done is True and two.observation["passed"] is True
        assert two.reward == _score_on_stack(stack.url, good)[0]["reward"] >= 1.9
        assert env.state()["round"] == 2

    weak, good = _variant(EPISODE_WEAK_TB, 1002), _variant(EPISODE_GOOD_TB, 1002)
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "reward_service", "mcp", "--url", stack.url],
        env={**os.environ, "PYTHONPATH": str(REPO)},  # this checkout's package
        cwd=str(REPO),
    )

    async def mcp_episode() -> None:
        async with Client(transport, timeout=600) as client:
            first = (await client.call_tool("reset", {"problem_id": ATTENUATOR, "rounds": 2})).structured_content
            episode_id = first["observation"]["episode_id"]
            one = (await client.call_tool("submit", {"code": weak, "step_id": "r1"})).structured_content
            check_round_one(episode_id, one, weak)
            two = (await client.call_tool("submit", {"code": good, "step_id": "r2"})).structured_content
            assert two["done"] is True and two["observation"]["passed"] is True
            assert two["reward"] == _score_on_stack(stack.url, good)[0]["reward"] >= 1.9
            state = (await client.call_tool("state", {})).structured_content
            assert state["step_ids"] == ["r1", "r2"] and state["done"] is True

    asyncio.run(mcp_episode())


def test_an_episode_continues_across_an_api_restart(stack):
    """Service mode keeps episodes in Redis: the API container restarted while round 2 is
    scoring, the client's retries get round 1's answer again and round 2's once, and each
    round was simulated once."""
    import redis

    rc = redis.Redis.from_url(stack.redis_url)
    _load_attenuator(stack.url)
    actions = {
        sid: {"kind": "submit", "stimulus": episode_sv(_variant(text, 2001))}
        for sid, text in (("r1", EPISODE_WEAK_TB), ("r2", EPISODE_GOOD_TB))
    }
    with httpx.Client(base_url=stack.url, timeout=120) as client:
        reset = client.post("/v1/episodes", json={"problem_id": ATTENUATOR, "options": {"rounds": 2}})
        assert reset.status_code == 201, reset.text
        episode_id = reset.json()["observation"]["episode_id"]
        one = _step(client, episode_id, "r1", actions["r1"])
        pending = client.post(f"/v1/episodes/{episode_id}/step?wait=0", json={"step_id": "r2", "action": actions["r2"]})
        assert pending.status_code in (200, 202), pending.text  # 202 unless the worker was quicker
        stack.containers("api")[0].restart(timeout=10)
        stack.wait_ready()
        assert _step(client, episode_id, "r1", actions["r1"]) == one
        two = _step(client, episode_id, "r2", actions["r2"])
        assert two["done"] is True and two["observation"]["passed"] is True
        state = client.get(f"/v1/episodes/{episode_id}").json()
    assert state["step_ids"] == ["r1", "r2"] and [r["round"] for r in state["history"]] == [1, 2]
    jobs = _episode_jobs(rc, episode_id)
    assert [int(rc.get(f"reward-service:job:{jobs[sid]}:sims") or 0) for sid in ("r1", "r2")] == [1, 1]
