"""The sandbox interface: what a backend must do with one command (one isolation unit)."""

from __future__ import annotations

import abc
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from reward_service.errors import RewardServiceError
from reward_service.sandbox.toolchain import Toolchain

#: Shells of a Debian system (host or image), hidden in ``no_shell`` steps.
SHELLS = ("/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash", "/usr/bin/rbash")


class SandboxError(RewardServiceError, RuntimeError):
    """The sandbox itself failed (infrastructure), as opposed to the command failing."""


@dataclass(frozen=True)
class Bind:
    """A host path made visible inside the sandbox at ``target``; read-only unless ``writable``.

    ``cache`` names a shared persistent cache (``"ccache"``): bwrap binds ``host`` as usual;
    Docker mounts its named cache volume instead (the worker's files are not the Docker host's),
    writable only when ``writable`` (build steps)."""

    host: Path
    target: str
    writable: bool = False
    cache: str | None = None


@dataclass
class ExecSpec:
    """One command to run in a sandbox.

    ``argv`` is an argv list (never a shell string); ``workdir`` (host path) is bound writable at
    ``/work`` and is the command's cwd unless ``cwd`` says otherwise. Limits: ``timeout_s`` wall
    clock (the whole process tree is killed at the limit; with ``cpu_s`` the wall-clock
    backstop, see there), ``memory_mb``, ``processes``,
    ``file_mb`` (largest file written), ``output_kb`` (log bytes kept: half head, half tail),
    ``output_kill_mb`` (output beyond this ends the run as a flood). ``no_shell`` hides the
    shells (``$system`` and ``system()`` then fail with status 127).
    """

    argv: list[str]
    workdir: Path
    binds: list[Bind] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/work"
    timeout_s: float = 30.0
    memory_mb: int = 2048
    processes: int = 64
    file_mb: int = 64
    output_kb: int = 256
    output_kill_mb: int = 1024
    tmp_mb: int = 256
    no_shell: bool = False  # hide /bin/sh & co: Verilator's $system then fails (run steps)
    #: The system files the step uses, if it names them: programs (a name is looked up on the
    #: toolchain's PATH) and directories (all they hold). A backend may then show the step only
    #: these and the libraries they load (bwrap where /usr is on FUSE: sandbox/minimal_root.py);
    #: None: the step sees the whole read-only system.
    system: tuple[str, ...] | None = None
    #: Sandbox paths (files or dirs, under ``/work`` or a writable bind) the caller reads after
    #: the step; None: all of them. A backend that copies files in and out (Docker) brings back
    #: only these; bwrap shares the host dirs and ignores it.
    outputs: tuple[str, ...] | None = None
    #: The step's CPU budget in seconds (every process of it, children included): past it the
    #: step gets ``stop_signal`` (SIGKILL ``cpu.STOP_GRACE_S`` later) and ends ``timed_out``.
    #: ``timeout_s`` is then a wall-clock backstop (``cpu.wall_backstop``): the step ends
    #: ``timed_out`` and ``waited`` there only when it was asleep by itself; when it was held
    #: (runnable on a loaded machine, stopped) the backend raises SandboxError. None: no CPU
    #: budget, ``timeout_s`` alone (the wall clock) is the limit.
    cpu_s: float | None = None
    #: With ``cpu_s``: a step that used no CPU for this many wall-clock seconds while every
    #: thread of it slept by itself ends then, ``timed_out`` and ``waited`` (as at the
    #: backstop, minutes earlier: one sample in ``time.sleep`` would hold an RL step). For
    #: run steps, which wait on nothing outside (builds can wait on a lock). None: no such limit.
    idle_s: float | None = None
    #: A step of two phases with budgets of their own (``cpu_s`` must be set): (sandbox path
    #: under ``/work`` that the step creates when its first phase ends, the first phase's CPU
    #: seconds); ``cpu_s`` counts from that file's appearance. A backend that cannot see the
    #: file while the step runs (Docker with a daemon on another host) gives the step the sum of both.
    cpu_split: tuple[str, float] | None = None
    #: The signal a step gets at its CPU budget (e.g. SIGINT: ``vvp -n`` then runs its final
    #: blocks); SIGKILL follows after a grace.
    stop_signal: int = signal.SIGKILL


def base_env(toolchain: Toolchain) -> dict[str, str]:
    """The environment every sandboxed command starts from (``ExecSpec.env`` is added on top);
    nothing of the worker's own environment is passed."""
    return {
        "PATH": toolchain.path_env(),
        "HOME": "/work",
        "TMPDIR": "/tmp",
        # The C locale, not C.UTF-8: with C.UTF-8 every program of a step (the shell, coreutils,
        # iverilog's driver, gcc's many processes) opens and maps glibc's 13 locale files at its
        # start: ~25 ms of a ~70 ms fast-path step, more where the image's files sit on a slow
        # overlay (bench/README.md, "per-step costs"). No simulator output depends on it.
        # cocotb steps set C.UTF-8 again (cocotb_flow.common_env): cocotb 1.9's embedded
        # Python stays ASCII in the C locale.
        "LANG": "C",
        "LC_ALL": "C",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }


@dataclass
class ExecResult:
    """How the command ended. ``exit_code`` is the process's status (negative: killed by that
    signal); ``timed_out``/``oom``/``pids_exhausted``/``output_flood`` say which limit ended it.
    ``output`` is the kept head and tail of stdout+stderr; ``output_bytes`` the total written."""

    exit_code: int | None
    output: str
    output_bytes: int
    dropped_bytes: int
    duration_ms: float
    timed_out: bool = False
    oom: bool = False
    pids_exhausted: bool = False
    output_flood: bool = False
    #: CPU seconds the step used (whole tree, children included), where measured.
    cpu_s: float | None = None
    #: ``timed_out`` at the wall-clock backstop of a CPU budget while every thread of the step
    #: slept by itself (it waited on nothing: the sample's timeout, not the machine's).
    waited: bool = False

    @property
    def limit_hit(self) -> str | None:
        """The name of the limit that ended the command, or None."""
        for name in ("timed_out", "oom", "pids_exhausted", "output_flood"):
            if getattr(self, name):
                return name
        return None


class Sandbox(abc.ABC):
    """Runs an :class:`ExecSpec` isolated: no network, read-only system, writable ``/work``
    only, non-root uid, no capabilities, limits enforced, process tree killed at the end."""

    name: str = "abstract"

    @abc.abstractmethod
    def run(self, spec: ExecSpec) -> ExecResult:
        """Run the command to completion or to a limit. Raises :class:`SandboxError` when the
        sandbox cannot be set up (never for a failing command)."""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise :class:`SandboxError` if the backend cannot run here."""

    @abc.abstractmethod
    def toolchain(self) -> Toolchain:
        """Where the tools are inside this sandbox. Raises :class:`SandboxError` when that
        cannot be found out (e.g. the Docker daemon is unreachable)."""


def pid_namespace() -> str | None:
    """The inode number of this process's pid namespace (``/proc/self/ns/pid``), or None when
    it cannot be read. Names the place a pid means something: two worker containers may share
    a host name, never a pid namespace."""
    try:
        return os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]") or None
    except OSError:
        return None
