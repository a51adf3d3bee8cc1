"""Removes sandbox containers and volumes that their owner left behind.

Every container and per-step volume of the Docker sandbox carries labels (:func:`labels`): who
made it (host name, pid namespace, pid and the pid's start time, so a reused pid is not taken
for the owner) and when it must be gone (``deadline``: the step's time limit plus copy time).
The sandbox
removes them itself in ``finally``; what survives is the trace of a killed worker or a lost
daemon connection. :func:`reap` removes every labelled object whose deadline passed by
``margin_s``, or whose owner on this host is gone. Shared cache volumes (ccache) carry no
sandbox label and are never touched.

Run it at worker start and periodically (:func:`start_periodic`), or once by hand::

    python -m reward_service.sandbox.reaper
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Imported here, in the thread that imports this module, never lazily in the reaper's thread: two
# threads importing docker-py for the first time at once (the reaper thread's reap() and a
# worker's first sandbox check) both fail on its circular docker.types import, and the package is
# then left in sys.modules without its submodules ("module 'docker' has no attribute 'errors'"
# on every later check: CI stop 16, the docker-sandbox compose worker never became ready).
import docker
from reward_service.sandbox.base import pid_namespace

log = logging.getLogger(__name__)

LABEL = "reward-service.sandbox"
OWNER = "reward-service.owner"
CREATED = "reward-service.created"
DEADLINE = "reward-service.deadline"
#: Default grace after a deadline before an object counts as orphaned (s).
MARGIN_S = 60.0


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # the fields after "(comm)" start at field 3


def _here() -> str:
    """This host and pid namespace (two worker containers may share a host name, never a pid
    namespace): ``<host name>/<pid namespace inode>``."""
    return f"{socket.gethostname()}/{pid_namespace() or '?'}"


def owner() -> str:
    """``<host>/<pid ns>:<pid>:<start time>`` of the calling process."""
    return f"{_here()}:{os.getpid()}:{_start_time(os.getpid())}"


def labels(deadline: float) -> dict[str, str]:
    """Labels of a sandbox container or per-step volume that must be gone by ``deadline``
    (epoch seconds)."""
    return {LABEL: "1", OWNER: owner(), CREATED: f"{time.time():.3f}", DEADLINE: f"{deadline:.3f}"}


def orphaned(object_labels: dict[str, str], now: float, margin_s: float, here: str) -> str | None:
    """Why an object with ``object_labels`` is an orphan, or None while its owner may still
    need it: the deadline passed by ``margin_s``, or the owner was a process of ``here`` (this
    host and pid namespace) that is gone."""
    try:
        deadline = float(object_labels[DEADLINE])
    except (KeyError, ValueError):
        deadline = None
    if deadline is not None and now > deadline + margin_s:
        return f"deadline passed {now - deadline:.0f} s ago"
    own_place, _, rest = object_labels.get(OWNER, "").partition(":")
    pid, _, start = rest.partition(":")
    if own_place == here and pid.isdigit() and _start_time(int(pid)) != start:
        return f"owner pid {pid} is gone"
    return None


@dataclass
class Reaped:
    """What one :func:`reap` removed (ids/names), and what it could not remove."""

    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def reap(client=None, *, margin_s: float = MARGIN_S, now: float | None = None) -> Reaped:
    """Remove orphaned sandbox containers (with their anonymous volumes), then orphaned
    sandbox volumes. ``client`` is a ``docker.DockerClient`` (default: ``docker.from_env()``).
    Never raises for one object that cannot be removed (listed in ``failed``); raises
    ``docker.errors.DockerException`` when the daemon cannot be listed."""
    own = client is None
    client = client or docker.from_env()
    try:
        return _reap(client, margin_s, time.time() if now is None else now)
    finally:
        if own:
            client.close()


def _reap(client, margin_s: float, now: float) -> Reaped:
    here = _here()
    out = Reaped()
    for info in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        why = orphaned(info.get("Labels") or {}, now, margin_s, here)
        if why is None:
            continue
        try:
            client.api.remove_container(info["Id"], v=True, force=True)
            out.containers.append(info["Id"])
            log.info("reaped sandbox container %s: %s", info["Id"][:12], why)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            out.failed.append(f"container {info['Id'][:12]}: {exc}")
    volumes = client.api.volumes(filters={"label": f"{LABEL}=1"}).get("Volumes") or []
    for info in volumes:
        why = orphaned(info.get("Labels") or {}, now, margin_s, here)
        if why is None:
            continue
        try:
            client.api.remove_volume(info["Name"], force=True)
            out.volumes.append(info["Name"])
            log.info("reaped sandbox volume %s: %s", info["Name"][:12], why)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # still in use by a live container
            out.failed.append(f"volume {info['Name'][:12]}: {exc}")
    return out


def start_periodic(interval_s: float = 300.0, margin_s: float = MARGIN_S) -> threading.Event:
    """Reap now and then every ``interval_s`` in a daemon thread (a worker calls this at
    start). Returns an event that stops the thread when set. Errors are logged, never raised."""
    stop = threading.Event()

    def loop() -> None:
        while True:
            try:
                reap(margin_s=margin_s)
            except Exception:
                log.exception("sandbox reaper failed")
            if stop.wait(interval_s):
                return

    threading.Thread(target=loop, name="sandbox-reaper", daemon=True).start()
    return stop


_PERIODIC: threading.Event | None = None
_PERIODIC_LOCK = threading.Lock()


def ensure_periodic(interval_s: float = 300.0) -> None:
    """Start :func:`start_periodic` once per process (idempotent): every process that runs
    Docker sandboxes (workers, ``serve``, ``rescore``) reaps, not only Celery workers."""
    global _PERIODIC
    with _PERIODIC_LOCK:
        if _PERIODIC is None:
            _PERIODIC = start_periodic(interval_s)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    done = reap()
    print(
        f"reaped {len(done.containers)} container(s), {len(done.volumes)} volume(s)"
        + (f"; could not remove: {'; '.join(done.failed)}" if done.failed else "")
    )


if __name__ == "__main__":
    main()
