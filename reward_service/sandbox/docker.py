"""Docker backend: every step (:class:`ExecSpec`) runs in a fresh container of the simulation
image (sim_images/Dockerfile) through the Docker API, with no bind mount of a worker path.

The worker talking to the daemon need not share its filesystem (a worker container with only
the Docker socket), so files travel through the archive API:

- ``/work`` and every non-cache bind are anonymous per-step volumes, filled with ``put_archive``
  before the container starts (Docker refuses archives into a tmpfs or the root of a read-only
  container; a volume of a created container accepts them). ``/work`` and writable binds are
  owned by uid 65534, read-only binds by root (so the step cannot change its private copy
  in place). After the step, ``get_archive`` brings back what the step declared
  (:attr:`ExecSpec.outputs`), into the host dirs, replacing what was there.
- A bind with ``cache`` (ccache) mounts the named volume ``<prefix>-<cache>``, writable only
  when the bind is (build steps); run steps never get one.
- Writable targets must be directories the image owns by uid 65534 (Docker gives a new volume
  the owner of the image path it is mounted on): :data:`WRITABLE_TARGETS`.

Container policy: read-only root, no network, uid/gid 65534, all capabilities dropped,
no-new-privileges, memory (= memory + swap), pids and CPU limits, rlimits (file size, no core
files, open files), a size-capped ``/tmp`` tmpfs, ``init`` to reap zombies, the Docker socket
never mounted, labels for the reaper (:mod:`reward_service.sandbox.reaper`). Output is read
through an attach stream (nothing is logged to the daemon's disk) into a bounded buffer; the
container is SIGKILLed at the time limit or on an output flood, and removed with its volumes
in ``finally``. ``no_shell`` mounts the daemon host's ``/dev/null`` over the shells (the one
host path used: it carries no files, every Docker host has it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import shutil
import signal
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests
from docker.types import Mount, Ulimit

import docker
from reward_service.sandbox import archive, reaper
from reward_service.sandbox.base import (
    SHELLS,
    Bind,
    ExecResult,
    ExecSpec,
    Sandbox,
    SandboxError,
    base_env,
)
from reward_service.sandbox.cpu import STOP_GRACE_S, CpuBudget, describe_held
from reward_service.sandbox.output import BoundedOutput
from reward_service.sandbox.toolchain import DEFAULT_VENV, Toolchain
from reward_service.sandbox.toolchain_probe import VERILATOR_ENV, verilator_choice

log = logging.getLogger(__name__)

SANDBOX_UID = 65534
#: Mount targets the image owns by uid 65534 (sim_images/Dockerfile creates them).
WRITABLE_TARGETS = ("/work", "/model", "/ccache")
#: The cocotb 1.9 runtime's place in the image (sim_images/Dockerfile puts it at the hosts' default).
COCOTB19_VENV = str(DEFAULT_VENV)
#: Time allowed for creating, filling, emptying and removing a container, beyond its limit:
#: the reaper treats a sandbox object older than its deadline (+ margin) as orphaned.
SETUP_ALLOWANCE_S = 300.0
#: Most bytes of tar stream brought back for one declared output path.
COPY_BACK_MAX_BYTES = 4 << 30
#: The command runs under coreutils' ``timeout -s KILL`` this long after its limit: a container
#: whose worker died (nobody left to kill it) still ends by itself.
SELF_KILL_GRACE_S = 30.0
#: How often a running step is checked for pids exhaustion (s).
POLL_S = 0.1
#: How long to wait for the daemon's ``oom`` event after an unexplained SIGKILL exit (s).
OOM_EVENT_GRACE_S = 1.0
#: cgroup files holding the pids.events of a container, where the daemon's host is ours.
_PIDS_EVENTS = (
    "/sys/fs/cgroup/pids/docker/{id}/pids.events",
    "/sys/fs/cgroup/pids/system.slice/docker-{id}.scope/pids.events",
    "/sys/fs/cgroup/docker/{id}/pids.events",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/pids.events",
)

#: A container's CPU time in its cgroup on this host: cgroup v1 ``cpuacct.usage`` (ns), v2
#: ``cpu.stat`` (``usage_usec``).
_CPU_USAGE = (
    "/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage",
    "/sys/fs/cgroup/cpu,cpuacct/docker/{id}/cpuacct.usage",
    "/sys/fs/cgroup/cpuacct/system.slice/docker-{id}.scope/cpuacct.usage",
    "/sys/fs/cgroup/docker/{id}/cpu.stat",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/cpu.stat",
)

#: What a failing daemon call raises (the SDK does not wrap transport errors).
_DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)

_TOOLCHAINS: dict[tuple[str, str], Toolchain] = {}  # (image id, Verilator setting) -> probed toolchain
_TOOLCHAIN_LOCK = threading.Lock()


@dataclass
class _Mount:
    """One per-step volume: where it is in the container, the host dir it is filled from (and,
    when writable, copied back to), and whether the step may write it."""

    target: str
    host: Path
    writable: bool


class DockerSandbox(Sandbox):
    """Runs each :class:`ExecSpec` in a fresh container of ``image`` (see the module docstring).

    ``volume_prefix`` names the containers and the shared cache volumes (``<prefix>-ccache``);
    ``cpus`` is the CPU limit of one container. The Docker client is made on first use from the
    environment (``DOCKER_HOST``, default ``/var/run/docker.sock``). ``host_cgroups``: read a
    container's pids events from this host's cgroup tree when the daemon runs here (exact);
    otherwise, or when False, the stats stream says when the process count sat at the limit."""

    name = "docker"

    def __init__(
        self,
        image: str = "reward-service-sim:latest",
        volume_prefix: str = "reward-service",
        cpus: float = 1.0,
        client=None,
        host_cgroups: bool = True,
    ) -> None:
        self.image = image
        self.volume_prefix = volume_prefix
        self.cpus = cpus
        self.host_cgroups = host_cgroups
        self._client = client
        self._image_id: str | None = None
        self._caches: set[str] = set()
        self._lock = threading.RLock()
        reaper.ensure_periodic()  # containers a killed process of this host left behind

    # -- connection ------------------------------------------------------------------------------
    @property
    def client(self):
        with self._lock:
            if self._client is None:
                try:  # many threads share it: a connection per concurrent call
                    self._client = docker.from_env(max_pool_size=64)
                except _DOCKER_ERRORS as exc:
                    raise SandboxError(f"the Docker daemon does not answer: {exc}") from exc
            return self._client

    def check(self) -> None:
        """Raise :class:`SandboxError` when the daemon is unreachable or the image missing
        (asked anew on every call: this is the worker's readiness)."""
        try:
            self.client.ping()
        except _DOCKER_ERRORS as exc:
            raise SandboxError(f"the Docker daemon does not answer: {exc}") from exc
        self._inspect_image()

    def _inspect_image(self) -> str:
        try:
            return self.client.api.inspect_image(self.image)["Id"]
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"the simulation image {self.image} is missing: build it with scripts/build_images.sh"
            ) from exc
        except _DOCKER_ERRORS as exc:
            raise SandboxError(f"the Docker daemon does not answer: {exc}") from exc

    def image_id(self) -> str:
        """The id of ``image``, resolved once: every container of this sandbox runs exactly the
        image its toolchain was probed in (a rebuilt tag takes effect on worker restart)."""
        if self._image_id is None:
            self._image_id = self._inspect_image()
        return self._image_id

    # -- toolchain -------------------------------------------------------------------------------
    def toolchain(self) -> Toolchain:
        """The image's tools, probed once per image and process by running
        :mod:`reward_service.sandbox.toolchain_probe` in a container (about a second), and per
        Verilator setting (``REWARD_SERVICE_VERILATOR``, read on every call)."""
        image_id = self.image_id()
        choice = verilator_choice()
        with _TOOLCHAIN_LOCK:
            found = _TOOLCHAINS.get((image_id, choice))
            if found is None:
                found = _TOOLCHAINS[(image_id, choice)] = self._probe(image_id, choice)
        return found

    def _probe(self, image_id: str, verilator: str) -> Toolchain:
        probe = Path(__file__).with_name("toolchain_probe.py")
        work = Path(tempfile.mkdtemp(prefix="rs-probe-"))
        try:
            shutil.copyfile(probe, work / probe.name)
            spec = ExecSpec(
                argv=["python", f"/work/{probe.name}", COCOTB19_VENV], workdir=work, timeout_s=120, outputs=()
            )
            # The image's own PATH (no toolchain yet): its first python is the one with cocotb.
            env = {"HOME": "/work", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", VERILATOR_ENV: verilator}
            result = self._run(spec, env)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        line = next((ln for ln in result.output.splitlines() if ln.startswith("RS_TOOLCHAIN ")), None)
        if result.exit_code != 0 or line is None:
            raise SandboxError(
                f"cannot probe the tools of {self.image}: exit {result.exit_code}: {result.output[-2000:]}"
            )
        return Toolchain.from_probe(
            f"docker:{image_id.removeprefix('sha256:')[:12]}", json.loads(line.partition(" ")[2])
        )

    # -- one step --------------------------------------------------------------------------------
    def run(self, spec: ExecSpec) -> ExecResult:
        return self._run(spec, {**base_env(self.toolchain()), **spec.env})

    def _run(self, spec: ExecSpec, env: dict[str, str]) -> ExecResult:
        if not spec.workdir.is_dir():
            raise SandboxError(f"work dir {spec.workdir} does not exist")
        mounts = self._mounts(spec)
        api = self.client.api
        container: str | None = None
        start = time.monotonic()
        labels = reaper.labels(time.time() + spec.timeout_s + SETUP_ALLOWANCE_S)
        try:
            container = api.create_container(
                self.image_id(),
                command=self_limited(spec),
                user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                environment=env,
                working_dir=spec.cwd,
                hostname="sandbox",
                name=f"{self.volume_prefix}-{uuid.uuid4().hex[:12]}",
                labels=labels,
                host_config=self._host_config(spec, mounts, labels),
            )["Id"]
            for mount in mounts:
                data = archive.pack(mount.host, SANDBOX_UID if mount.writable else 0)
                if data is not None:
                    api.put_archive(container, mount.target, data)
            result = self._supervise(container, spec)
            try:
                self._copy_back(container, spec, mounts)
            except archive.ArchiveTooLarge:
                result.output_flood = True  # the sample wrote too much: its limit, not ours
        except docker.errors.ImageNotFound as exc:
            # the resolved image was removed (prune, rebuild + cleanup): resolve the tag again on
            # the next step, so /readyz (which checks the tag) and the jobs agree again
            with self._lock:
                self._image_id = None
            raise SandboxError(
                f"the simulation image {self.image} ({exc}) is gone; the next step uses the image the tag names now"
            ) from exc
        except _DOCKER_ERRORS as exc:
            raise SandboxError(f"docker: {exc}") from exc
        except tarfile.TarError as exc:
            raise SandboxError(f"copying files out of the sandbox failed: {exc}") from exc
        finally:
            if container is not None:
                self._remove(container)
        result.duration_ms = (time.monotonic() - start) * 1000
        return result

    def _mounts(self, spec: ExecSpec) -> list[_Mount]:
        """The per-step volumes of ``spec``: ``/work`` first, then the non-cache binds."""
        mounts = [_Mount("/work", spec.workdir, True)]
        for bind in spec.binds:
            if bind.cache is not None:
                continue
            if bind.writable and bind.target not in WRITABLE_TARGETS:
                raise SandboxError(
                    f"writable bind target {bind.target} is not one of the image's "
                    f"writable mount points {WRITABLE_TARGETS}"
                )
            if not bind.host.is_dir():
                raise SandboxError(f"bind source {bind.host} is not a directory")
            mounts.append(_Mount(bind.target, bind.host, bind.writable))
        return mounts

    def _host_config(self, spec: ExecSpec, mounts: list[_Mount], labels: dict[str, str]) -> dict:
        volumes = [Mount(m.target, None, type="volume", labels=labels) for m in mounts]
        volumes += [
            Mount(b.target, self._cache_volume(b), type="volume", read_only=not b.writable)
            for b in spec.binds
            if b.cache is not None
        ]
        if spec.no_shell:
            volumes += [Mount(s, "/dev/null", type="bind", read_only=True) for s in SHELLS]
        file_bytes = spec.file_mb << 20
        memory = f"{spec.memory_mb}m"
        return self.client.api.create_host_config(
            mounts=volumes,
            read_only=True,
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            init=True,
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=spec.processes,
            nano_cpus=int(self.cpus * 1e9),
            ulimits=[
                Ulimit(name="fsize", soft=file_bytes, hard=file_bytes),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=4096, hard=4096),
            ],
            tmpfs={"/tmp": f"size={spec.tmp_mb}m,mode=1777"},
            log_config={"type": "none"},
        )

    def _cache_volume(self, bind: Bind) -> str:
        """The named volume of ``bind.cache``, created (labelled as a cache) on first use."""
        if bind.writable and bind.target not in WRITABLE_TARGETS:
            raise SandboxError(
                f"cache bind target {bind.target} is not one of the image's writable mount points {WRITABLE_TARGETS}"
            )
        name = f"{self.volume_prefix}-{bind.cache}"
        with self._lock:
            if name not in self._caches:
                self.client.api.create_volume(name, labels={"reward-service.cache": str(bind.cache)})
                self._caches.add(name)
        return name

    def _supervise(self, container: str, spec: ExecSpec) -> ExecResult:
        """Start ``container`` and follow it to its end or a limit (time, output flood)."""
        api = self.client.api
        out = BoundedOutput(spec.output_kb * 1024)
        flood_bytes = spec.output_kill_mb << 20
        flood = threading.Event()
        stream = api.attach(container, stdout=True, stderr=True, stream=True, logs=False)

        def pump() -> None:
            # Drain to the end even after a flood: the daemon reports the container's exit only
            # once its output is consumed.
            try:
                for chunk in stream:
                    if not flood.is_set():
                        out.feed(chunk)
                        if out.total > flood_bytes:
                            flood.set()
            except Exception:
                pass

        reader = threading.Thread(target=pump, name=f"sandbox-output-{container[:12]}", daemon=True)
        reader.start()
        started = time.time()
        api.start(container)
        deadline = time.monotonic() + spec.timeout_s
        timed_out = waited = False
        held: str | None = None
        budget = None if spec.cpu_s is None else _budget(api, container, spec, self.host_cgroups)
        watch = _ContainerWatch(api, container, spec.processes, self.host_cgroups)
        stop_at: float | None = None
        while reader.is_alive() and not flood.is_set():
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                if budget is None or watch.cpu_s >= budget.limit():
                    timed_out = True
                else:
                    held = _held(api, container)
                    timed_out = waited = held is None
                break
            if stop_at is not None and now >= stop_at + STOP_GRACE_S:
                break
            reader.join(min(left, POLL_S))
            watch.poll()
            if budget is not None and stop_at is None and watch.measured and budget.over(watch.cpu_s):
                timed_out = True
                if spec.stop_signal == signal.SIGKILL:
                    break
                with contextlib.suppress(*_DOCKER_ERRORS):
                    api.kill(container, signal=int(spec.stop_signal))  # init passes it on
                stop_at = time.monotonic()
            elif budget is not None and stop_at is None and watch.measured and budget.idle(time.monotonic()):
                if _held(api, container) is None:
                    timed_out = waited = True
                    break
                budget.idle_restart(time.monotonic())
        if not (timed_out or flood.is_set() or held):
            try:  # the output ended; the process may still run with its output closed
                api.wait(container, timeout=max(0.5, deadline - time.monotonic()))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                # docker-py reports its read timeout either way; before the deadline it is the
                # daemon connection failing, which is ours to report, not the sample's timeout
                if time.monotonic() < deadline - 0.1:
                    raise SandboxError(f"lost the daemon while waiting for the step: {exc}") from exc
                timed_out = True
        killed = timed_out or flood.is_set() or held is not None
        if killed:
            try:
                api.kill(container)  # SIGKILL to init: the pid namespace goes with it
            except Exception:
                pass
        status = api.wait(container, timeout=60)
        reader.join(2.0)
        stream.close()
        watch.poll()
        if held is not None:
            raise SandboxError(
                f"the step reached its wall-clock backstop ({spec.timeout_s:g} s) having used "
                f"{watch.cpu_s:.1f} of its {budget.limit() if budget else 0:g} CPU s: {held} (a loaded or stalled "
                "worker, not the sample's time limit)"
            )
        state = api.inspect_container(container)["State"]
        exit_code = status.get("StatusCode", state.get("ExitCode"))
        oom = bool(state.get("OOMKilled"))
        if not (oom or killed) and exit_code == 128 + signal.SIGKILL:
            oom = _oom_event(api, container, state, started)
        return ExecResult(
            exit_code=-9 if killed else exit_code,
            output=out.text(),
            output_bytes=out.total,
            dropped_bytes=out.dropped,
            duration_ms=0.0,
            timed_out=timed_out,
            oom=oom,
            pids_exhausted=watch.hit,
            output_flood=flood.is_set(),
            cpu_s=watch.cpu_s if watch.measured else None,
            waited=waited,
        )

    def _copy_back(self, container: str, spec: ExecSpec, mounts: list[_Mount]) -> None:
        """Bring back the declared outputs (all of ``/work`` and of the writable binds when
        ``spec.outputs`` is None) into the host dirs, replacing what was there."""
        for mount in mounts:
            if not mount.writable:
                continue
            if spec.outputs is None:
                wanted = [""]
            else:
                wanted = [rel for path in spec.outputs if (rel := _relative(path, mount.target)) is not None]
            for rel in wanted:
                if rel:
                    archive.clear(mount.host / rel)
                else:
                    _empty(mount.host)
            # One archive call per declared path: a stream of the whole volume would also carry
            # whatever else the sample wrote there (waveform dumps, up to file_mb each).
            for rel in wanted:
                self._fetch(container, mount, rel)

    def _fetch(self, container: str, mount: _Mount, rel: str) -> None:
        """Copy ``<mount.target>/<rel>`` out to ``<mount.host>/<rel>``; a path the step did not
        write is simply absent. Raises :class:`archive.ArchiveTooLarge` past the byte budget."""
        source = f"{mount.target}/{rel}" if rel else mount.target
        try:
            chunks, _ = self.client.api.get_archive(container, source)
        except docker.errors.NotFound:
            return
        top = PurePosixPath(source).name  # the archive names entries from the source's own name

        def rename(name: str) -> str | None:
            first, _, rest = name.partition("/")
            if first != top:
                return None
            return "/".join(p for p in (rel, rest) if p)

        archive.unpack(chunks, mount.host, max_bytes=COPY_BACK_MAX_BYTES, rename=rename)

    def _remove(self, container: str) -> None:
        """Remove the container and its anonymous volumes; the reaper retries on failure."""
        try:
            self.client.api.remove_container(container, v=True, force=True)
        except Exception as exc:
            log.warning("cannot remove sandbox container %s (the reaper will): %s", container[:12], exc)


def self_limited(spec: ExecSpec) -> list[str]:
    """``spec.argv`` under ``timeout -s KILL`` (its whole process group) at the limit plus
    :data:`SELF_KILL_GRACE_S`: the worker kills the container at the limit; this is the backstop
    for a worker that died."""
    return ["timeout", "-s", "KILL", f"{spec.timeout_s + SELF_KILL_GRACE_S:.0f}", *spec.argv]


def _relative(path: str, target: str) -> str | None:
    """``path`` relative to the mount ``target`` ("" for the target itself), or None."""
    if path == target:
        return ""
    if path.startswith(target.rstrip("/") + "/"):
        return path[len(target.rstrip("/")) + 1 :]
    return None


def _empty(directory: Path) -> None:
    for child in directory.iterdir():
        archive.clear(child)


def _oom_event(api, container: str, state: dict, started: float) -> bool:
    """Whether the daemon logged an ``oom`` event for ``container`` during its run (``state``:
    its inspected ``State``; ``started``: our epoch seconds at start, used when the daemon's
    times cannot be read).

    ``State.OOMKilled`` is not enough: the daemon sets it from containerd's OOM event, which
    races the exit event, and an exit handled first leaves it false (seen in CI: exit 137 after
    0.6 s of a memory bomb, OOMKilled false; moby/moby#18510, kubernetes#19825). The event log
    keeps the ``oom`` event whatever the order. Asked only for an unexplained SIGKILL exit; the
    query spans the run in the daemon's own clock and waits until ``OOM_EVENT_GRACE_S`` after
    the exit for an event still in flight."""
    since = _daemon_epoch(state.get("StartedAt")) or started
    finished = _daemon_epoch(state.get("FinishedAt")) or time.time()
    try:
        events = api.events(
            since=int(since) - 1,
            until=int(finished + OOM_EVENT_GRACE_S) + 1,
            filters={"container": container, "event": "oom"},
            decode=True,
        )
        try:
            return any(True for _ in events)
        finally:
            events.close()
    except Exception:
        return False


def _daemon_epoch(stamp: str | None) -> float | None:
    """Epoch seconds of a daemon RFC 3339 time (nanoseconds cut to microseconds), or None."""
    if not stamp or stamp.startswith("0001-"):
        return None
    head, _, frac = stamp.rstrip("Z").partition(".")
    try:
        moment = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    digits = "".join(ch for ch in frac if ch.isdigit())[:6]
    return moment.timestamp() + (int(digits) / 10 ** len(digits) if digits else 0.0)


class _ContainerWatch:
    """Whether a running container hit its pids limit, and the CPU seconds it used. Where the
    daemon's host is this one, its cgroup's ``pids.events`` counts every fork refused at the
    limit (exact; polled) and its CPU file (:data:`_CPU_USAGE`) the CPU. Otherwise the daemon's
    stats stream (one sample a second, read in a thread) tells when the process count sat at
    the limit (a fork bomb, which holds the limit, is seen; a burst that hits it for less than a
    second may not be) and the CPU (up to a second late)."""

    def __init__(self, api, container: str, limit: int, host_cgroups: bool) -> None:
        self.hit = False
        self.cpu_s = 0.0
        self.measured = False
        self._file: Path | None = None
        self._cpu_file: Path | None = None
        if host_cgroups:
            self._file = next((p for p in (Path(s.format(id=container)) for s in _PIDS_EVENTS) if p.exists()), None)
            self._cpu_file = next((p for p in (Path(s.format(id=container)) for s in _CPU_USAGE) if p.exists()), None)
        if self._file is None or self._cpu_file is None:
            threading.Thread(
                target=self._follow_stats,
                args=(api, container, limit),
                name=f"sandbox-stats-{container[:12]}",
                daemon=True,
            ).start()

    def poll(self) -> None:
        if self._cpu_file is not None:
            try:
                text = self._cpu_file.read_text()
                if self._cpu_file.name == "cpu.stat":
                    usec = next(int(row.split()[1]) for row in text.splitlines() if row.startswith("usage_usec "))
                    self.cpu_s, self.measured = usec / 1e6, True
                else:
                    self.cpu_s, self.measured = int(text) / 1e9, True
            except (OSError, ValueError, IndexError, StopIteration):
                pass
        if self._file is None or self.hit:
            return
        try:
            self.hit = int(self._file.read_text().split()[-1]) > 0
        except (OSError, ValueError, IndexError):
            pass

    def _follow_stats(self, api, container: str, limit: int) -> None:
        try:
            for sample in api.stats(container, stream=True, decode=True):
                if self._file is None and (sample.get("pids_stats") or {}).get("current", 0) >= limit:
                    self.hit = True
                usage = ((sample.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
                if self._cpu_file is None and isinstance(usage, int):
                    self.cpu_s, self.measured = max(self.cpu_s, usage / 1e9), True
        except Exception:
            return


def _budget(api, container: str, spec: ExecSpec, host_cgroups: bool) -> CpuBudget:
    """The CPU budget of ``spec`` in ``container``. A split step's phases (``ExecSpec.cpu_split``)
    are told apart where the daemon's host is this one and the ``/work`` volume's directory is
    readable here (the marker file is looked for there); otherwise both budgets are summed."""
    if spec.cpu_split is not None and host_cgroups:
        mounts = api.inspect_container(container).get("Mounts") or []
        source = next((m.get("Source") for m in mounts if m.get("Destination") == "/work"), None)
        if source and os.access(source, os.R_OK | os.X_OK):
            return CpuBudget(dataclasses.replace(spec, workdir=Path(source)))
    first = spec.cpu_split[1] if spec.cpu_split else 0.0
    assert spec.cpu_s is not None
    return CpuBudget(dataclasses.replace(spec, cpu_s=spec.cpu_s + first, cpu_split=None))


def _held(api, container: str, looks: int = 5, pause_s: float = 0.02) -> str | None:
    """What held ``container`` at its wall-clock backstop (:func:`.cpu.held_by`'s answer, from the
    daemon host's ``ps`` of its threads): None when every thread slept by itself in each look;
    the states otherwise, or that they could not be read (then the machine is blamed: never
    the sample's timeout on a guess)."""
    seen = ""
    for look in range(looks):
        if look:
            time.sleep(pause_s)
        try:
            top = api.top(container, ps_args="-L -o pid,stat")
        except _DOCKER_ERRORS as exc:
            return f"its threads could not be read ({exc})"
        column = top["Titles"].index("STAT")
        seen += "".join(row[column][:1] for row in top.get("Processes") or [])
    return describe_held(seen)
