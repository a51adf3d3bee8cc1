"""Tar streams in and out of sandbox containers (the Docker API's archive endpoints).

Files enter a container as a tar of a host directory (:func:`pack`) and leave it as the tar the
daemon streams back (:func:`unpack`). What comes back was written by untrusted code, so
:func:`unpack` takes only regular files and directories, refuses names that leave the
destination, drops set-id and group/other write bits, and stops at a byte budget.
"""

from __future__ import annotations

import io
import os
import posixpath
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from reward_service.errors import RewardServiceError


class ArchiveTooLarge(RewardServiceError, RuntimeError):
    """The stream exceeded its byte budget (what was extracted so far stays)."""


def pack(directory: Path, uid: int) -> bytes | None:
    """A tar of the contents of ``directory`` (names relative to it, no entry for the directory
    itself), every entry owned by ``uid``:``uid`` with its host mode and mtime; None when the
    directory is empty (nothing to send)."""
    children = sorted(directory.iterdir())
    if not children:
        return None

    def owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = uid
        info.uname = info.gname = ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for child in children:
            tar.add(child, arcname=child.name, recursive=True, filter=owner)
    return buf.getvalue()


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks, counting bytes against a budget."""

    def __init__(self, chunks: Iterable[bytes], max_bytes: int) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buf = b""
        self.total = 0
        self.max_bytes = max_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
            self.total += len(self._buf)
            if self.total > self.max_bytes:
                raise ArchiveTooLarge(f"more than {self.max_bytes >> 20} MiB")
        n = min(len(target), len(self._buf))
        target[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _safe_relative(name: str) -> str | None:
    """``name`` as a normalised relative POSIX path ("" for the top), or None when it is
    absolute or climbs out with ``..``."""
    norm = posixpath.normpath(name) if name else "."
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        return None
    return "" if norm == "." else norm


def unpack(
    chunks: Iterable[bytes], dest: Path, *, max_bytes: int, rename: Callable[[str], str | None] = lambda n: n
) -> int:
    """Extract the tar stream ``chunks`` under ``dest`` (created if missing). ``rename`` maps a
    member name (relative, normalised) to its path under ``dest``, or None to skip it. Only
    regular files and directories are taken (links, devices, fifos are skipped); modes keep
    at most 0o755. Returns the number of files written; raises :class:`ArchiveTooLarge` past
    ``max_bytes`` of stream and :class:`tarfile.TarError` on a corrupt stream."""
    reader = _ChunkReader(chunks, max_bytes)
    written = 0
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BufferedReader(reader, 1 << 16), mode="r|") as tar:
        for member in tar:
            name = _safe_relative(member.name)
            target_name = rename(name) if name is not None else None
            if target_name is None or not (member.isfile() or member.isdir()):
                continue
            if _safe_relative(target_name) is None:
                continue
            target = dest / target_name if target_name else dest
            if member.isdir():
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    _remove(target)
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.is_dir():
                _remove(target)
            source = tar.extractfile(member)
            assert source is not None
            with open(target, "wb") as fh:
                shutil.copyfileobj(source, fh, 1 << 20)
            os.chmod(target, member.mode & 0o755)
            os.utime(target, (member.mtime, member.mtime))
            written += 1
    return written


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def clear(path: Path) -> None:
    """Remove ``path`` (file, link or directory tree) if it exists."""
    if path.is_symlink() or path.exists():
        _remove(path)
