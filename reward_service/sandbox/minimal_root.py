"""A minimal system for steps that name their files: a private copy of just those files and the
shared libraries they load, shown to the step as its ``/usr`` instead of the whole system.

Why: in a worker container whose root is ``fuse-overlayfs`` (Docker's storage driver on hosts
without kernel overlayfs for Docker, this VM among them) every file a step's programs open or
walk through is a request to one user-space FUSE daemon: measured, ~510 requests per fast-path
step (88 opens of the loader, libc, ld.so.cache and the tools for 14 program starts, 234 ACL
reads the kernel makes again whenever the daemon's attributes time out), ~14 ms of a ~45 ms step
with two pool processes. A 13 MB copy of what an Icarus step runs (the shell, ``timeout``,
``chmod``, ``prlimit``, ``iverilog``, ``vvp``, iverilog's library dir, their libraries,
``ld.so.cache``) on the container's tmpfs takes the daemon out of the step: the same step 36-42
-> 28 ms in the worker container (bench/README.md). It also narrows what a sample's step sees
of the system to what it needs (no compilers, interpreters or other tools).

What is copied (:func:`build`): each named path as it is on the system, its symlinks as symlinks
(``/bin/sh -> dash``, ``libz.so.1 -> libz.so.1.2.13``: the same names resolve the same way), a
named directory with everything under it, and for every ELF file the libraries ``ldd`` says it
loads (a library ``ldd`` cannot find, or a file outside ``/usr``, and there is no copy: the step
then sees the whole system, as before). Only ``/usr`` and ``/etc/ld.so.cache`` are replaced;
the merged-``/usr`` symlinks (``/bin``, ``/lib``, ...) stay.

The copy is made once per process and set of names (:class:`MinimalRoots`), before the first
step's clock starts, in a private directory (``mkdtemp``, mode 0700, read-only once made) of the
system temp dir when that is neither FUSE nor ``noexec``; it is never shared between processes
(nothing another user or process could prepare there is ever run). A new copy is checked (the
backend's check: bwrap lists each named program's libraries with its loader inside the copy) and
made again if it vanishes. The process that made it removes it at exit; Celery's pool processes
end without exit handlers (billiard's ``os._exit``), so each new copy first sweeps those of dead
processes of this uid and pid namespace. It reflects the system when it was made: a worker
container's system never changes; on a host, restart a long-running process after upgrading the
tools (as for the toolchain probe, docs/sandbox.md).

A testbench that reads files of the system (``$readmemh("/usr/share/...")``) finds them with
the whole system and not in a minimal root: no real stimulus does, and the result is then the
sample's (a missing file), but such a sample can score differently on a FUSE-rooted worker.

This module imports nothing above the sandbox layer.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import stat
import struct
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path

from reward_service.errors import RewardServiceError
from reward_service.sandbox.base import pid_namespace

log = logging.getLogger(__name__)

#: Where the copy replaces the system: only files under this prefix can be copied.
USR = "/usr"
#: The dynamic loader's cache, copied with the files (it names their paths).
LD_SO_CACHE = "/etc/ld.so.cache"
MODES = ("auto", "minimal", "system")
#: Name prefix of a copy's directory: ``<PREFIX><pid namespace>-<pid>-<random>``, the pid (and its
#: namespace) of the process that made it.
PREFIX = "reward-service-root-"


def _pid_namespace() -> str:
    """This process's pid namespace for a copy's name (``0`` when unknown)."""
    return pid_namespace() or "0"


class NoMinimalRoot(RewardServiceError, RuntimeError):
    """The named files cannot be given a minimal root (the reason is the message). Caught inside
    :class:`MinimalRoots` (the step then sees the whole system); :func:`build` raises it."""


def _mount(path: str) -> tuple[str, set[str]]:
    """(filesystem type, mount options) of the mount ``path`` is on: ``/proc/self/mountinfo``'s
    entry with the longest mount point above it; ``("", set())`` when that cannot be read."""
    real = os.path.realpath(path)
    best, kind, options = "", "", ""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return "", set()
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 6 or not rest:
            continue
        point = parts[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind, options = point, rest.split()[0], parts[5]
    return kind, set(options.split(","))


def filesystem_type(path: str) -> str:
    """The type of the filesystem ``path`` is on (``ext4``, ``tmpfs``, ``fuse.fuse-overlayfs``,
    ...); ``""`` when unknown."""
    return _mount(path)[0]


def mount_options(path: str) -> set[str]:
    """The options of the mount ``path`` is on (``noexec``, ``ro``, ...); empty when unknown."""
    return _mount(path)[1]


def on_fuse(path: str) -> bool:
    """Whether ``path`` is on a FUSE filesystem (each open a round trip to a user-space daemon)."""
    return filesystem_type(path).startswith(("fuse", "fuseblk"))


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _libraries(path: str) -> list[str]:
    """The libraries the dynamic loader loads for ELF file ``path`` (``ldd``: the loader itself
    included; none for a static file). Raises :class:`NoMinimalRoot` when one is not found."""
    try:
        out = subprocess.run(
            ["ldd", path], capture_output=True, text=True, timeout=30, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise NoMinimalRoot(f"cannot run ldd on {path}: {exc}") from exc
    if "not a dynamic executable" in out.stdout + out.stderr or "statically linked" in out.stdout:
        return []
    if out.returncode != 0:
        raise NoMinimalRoot(f"ldd {path}: {(out.stderr or out.stdout).strip()[:200]}")
    found = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "=> not found" in line:
            raise NoMinimalRoot(f"{path} needs {line.split()[0]}, which the loader does not find")
        # "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
        # "linux-vdso.so.1 (0x...)" (in the kernel, no file)
        target = line.split("=>", 1)[1].strip() if "=>" in line else line
        target = target.rsplit(" (", 1)[0].strip()
        if target.startswith("/"):
            found.append(target)
    return found


class _Copier:
    """Copies paths of the system into ``root`` as they are (symlinks as symlinks)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: set[str] = set()
        self.elves: list[str] = []

    def add(self, path: str, depth: int = 0) -> None:
        """Copy ``path`` (absolute): the directory it is in resolved, then the entry itself; a
        symlink is copied as a link and what it names is added; a directory with all it holds."""
        if depth > 40:
            raise NoMinimalRoot(f"too many symlinks at {path}")
        parent, name = os.path.split(path.rstrip("/"))
        here = os.path.join(os.path.realpath(parent), name) if name else os.path.realpath(path)
        if here in self.seen:
            return
        if here != USR and not here.startswith(USR + "/"):
            raise NoMinimalRoot(f"{path} is outside {USR}")
        self.seen.add(here)
        dest = self.root / here.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(here):
            target = os.readlink(here)
            os.symlink(target, dest)
            self.add(os.path.normpath(os.path.join(os.path.dirname(here), target)), depth + 1)
        elif os.path.isdir(here):
            dest.mkdir(exist_ok=True)
            for child in sorted(os.listdir(here)):
                self.add(os.path.join(here, child), depth)
        elif os.path.isfile(here):
            # content and mode, not the times: a copy with years-old times would be the first
            # thing an age-based /tmp cleaner (systemd-tmpfiles) removes from under a process
            shutil.copyfile(here, dest)
            shutil.copymode(here, dest)
            if _is_elf(here):
                self.elves.append(here)
        else:
            raise NoMinimalRoot(f"{path} does not exist or is not a file")


def build(paths: Iterable[str], base: str) -> Path:
    """A new minimal root under ``base`` holding ``paths`` (absolute; files or directories), the
    libraries their ELF files load, and ``/etc/ld.so.cache``; read-only once made. Returns its
    directory (``<dir>/usr``, ``<dir>/etc/ld.so.cache``). Raises :class:`NoMinimalRoot` (and
    leaves nothing behind) when a path or library cannot be copied."""
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_pid_namespace()}-{os.getpid()}-", dir=base))
    try:
        copier = _Copier(root)
        for path in paths:
            copier.add(path)
        done: set[str] = set()
        while copier.elves:
            elf = copier.elves.pop()
            if elf in done:
                continue
            done.add(elf)
            for library in _libraries(elf):
                copier.add(library)
        (root / "etc").mkdir()
        shutil.copyfile(LD_SO_CACHE, root / "etc" / "ld.so.cache")
        _read_only(root)
    except BaseException:
        _remove(root)
        raise
    return root


def _read_only(root: Path) -> None:
    """Takes write permission off every file and directory under ``root`` (the root itself stays
    0700: private to this uid, removable by it)."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~0o222)
        if dirpath != str(root):
            os.chmod(dirpath, 0o555)


def _remove(root: Path) -> None:
    """Removes a minimal root (write permission back on its directories first)."""
    for dirpath, _dirnames, _filenames in os.walk(root):
        try:
            os.chmod(dirpath, 0o700)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)


def sweep(base: str) -> list[str]:
    """Removes the copies under ``base`` that this uid made in processes of this pid namespace
    that are gone. Celery's pool processes end with ``os._exit`` (billiard), running no exit
    handler, and one killed at the hard time limit none either: without this every replaced pool
    process would leave 13 MB on the container's tmpfs. Returns what it removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    namespace = _pid_namespace()
    for entry in entries:
        ns, _, rest = entry.name[len(PREFIX) :].partition("-")
        pid = rest.split("-", 1)[0]
        if not entry.name.startswith(PREFIX) or ns != namespace or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(Path(entry.path))
            removed.append(entry.path)
        except OSError:  # alive under another uid (EPERM), or the entry vanished
            continue
    return removed


class MinimalRoots:
    """The minimal roots of this process, one per set of names, made on first use (thread-safe).

    ``mode``: ``"minimal"`` always (where a copy can be made), ``"system"`` never, ``"auto"``
    when ``/usr`` is on FUSE (where the copy pays). ``base``: where copies go (default: the
    system temp dir; never on FUSE)."""

    def __init__(self, mode: str = "auto", base: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"minimal root mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.base = base
        self._roots: dict[tuple[str, ...], Path | None] = {}
        self._lock = threading.Lock()
        self._enabled: bool | None = None
        _INSTANCES.add(self)

    def _forget(self) -> None:
        """After a fork, in the child (a Celery pool process): it makes copies of its own (the
        parent's copies, and a lock another thread of the parent may have held, are not its)."""
        self._roots, self._lock = {}, threading.Lock()

    def enabled(self) -> bool:
        """Whether steps that name their files get a minimal root here (the mount table is read
        once)."""
        if self._enabled is None:
            self._enabled = self.mode == "minimal" or (self.mode == "auto" and on_fuse(USR))
        return self._enabled

    def get(self, paths: tuple[str, ...], check: Callable[[Path], str | None] | None = None) -> Path | None:
        """The minimal root of ``paths`` (absolute), made on first use and again if it vanished
        (an age-based /tmp cleaner); None when minimal roots are off here or these paths cannot
        have one (logged: the step then sees the whole system). ``check(root)`` runs once on a
        new copy: a message says it cannot serve (the copy is removed, the system used)."""
        if not self.enabled():
            return None
        with self._lock:
            root = self._roots.get(paths)
            if paths not in self._roots or (root is not None and not (root / "usr").is_dir()):
                self._roots[paths] = root = self._make(paths, check)
            return root

    def _make(self, paths: tuple[str, ...], check: Callable[[Path], str | None] | None) -> Path | None:
        base = self.base or tempfile.gettempdir()
        why = (
            "is on FUSE too"
            if on_fuse(base)
            else "is mounted noexec: the copied programs could not run"
            if "noexec" in mount_options(base)
            else None
        )
        if why:
            log.warning("no minimal step root: %s %s; steps see the whole system", base, why)
            return None
        sweep(base)
        try:
            root = build(paths, base)
        except (NoMinimalRoot, OSError) as exc:
            log.warning("no minimal step root for %s: %s; steps see the whole system", ", ".join(paths), exc)
            return None
        failed = check(root) if check else None
        if failed:
            _remove(root)
            log.warning("minimal step root for %s fails its check (%s); steps see the whole system", paths, failed)
            return None
        atexit.register(_remove_if_mine, root, os.getpid())
        log.info("minimal step root %s for %s", root, ", ".join(paths))
        return root


_INSTANCES: weakref.WeakSet[MinimalRoots] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for roots in list(_INSTANCES):
        roots._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)


def elf_interpreter(path: str) -> str | None:
    """The program interpreter (dynamic loader) an ELF executable names (``PT_INTERP``), or None
    (not ELF, static, unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF":
                return None
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            if wide:
                phoff, phentsize, phnum = struct.unpack_from(order + "Q14xHH", head, 32)
            else:
                phoff, phentsize, phnum = struct.unpack_from(order + "I10xHH", head, 28)
            for i in range(phnum):
                fh.seek(phoff + i * phentsize)
                entry = fh.read(phentsize)
                if struct.unpack_from(order + "I", entry)[0] != 3:  # PT_INTERP
                    continue
                offset, size = struct.unpack_from(order + ("Q8x8xQ" if wide else "I4x4xI"), entry, 8 if wide else 4)
                fh.seek(offset)
                return fh.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _remove_if_mine(root: Path, pid: int) -> None:
    """Exit handler: removes ``root`` in the process that made it only (a forked child that
    exits normally runs its parent's handlers too, and must not take the parent's copy)."""
    if os.getpid() == pid:
        _remove(root)
