#!/usr/bin/env python3
"""Writes docker/seccomp/worker.json: Docker 20.10's default seccomp profile plus the calls
bubblewrap makes to build a sandbox without capabilities (docs/deploy.md, "The worker container").

    python3 docker/seccomp/make_worker_profile.py [DEFAULT_JSON]

DEFAULT_JSON is moby's ``profiles/seccomp/default.json`` of the engine release (Debian ships it in
``golang-github-docker-docker-dev``: ``apt-get download golang-github-docker-docker-dev`` and
``dpkg-deb -x`` it; the default path below is where it lands when installed).

Docker's default profile allows namespace creation (``clone`` with CLONE_NEW* flags,
``unshare``), ``mount``, ``umount2``, ``pivot_root`` and ``sethostname`` only to a container
holding CAP_SYS_ADMIN. The worker holds no capability (``cap_drop: ALL``); bubblewrap gets
what it needs from the user namespace it creates instead, and these six calls are the ones it
makes for ``--unshare-all --uid 65534 --hostname sandbox`` with its bind mounts. ``clone3``
stays ENOSYS (glibc then uses ``clone``); ``setns``, the new mount API (``fsopen``,
``open_tree``, ...) and everything else of the CAP_SYS_ADMIN block stay refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT = Path("/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json")
OUT = Path(__file__).resolve().parent / "worker.json"
#: What bubblewrap needs beyond Docker's default, without CAP_SYS_ADMIN.
BWRAP_CALLS = ["clone", "unshare", "mount", "umount2", "pivot_root", "sethostname"]
COMMENT = (
    "reward-service worker: bubblewrap builds each step's sandbox in a new user namespace "
    "(clone/unshare with CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP, its bind "
    "mounts, pivot_root, the sandbox host name) without any capability"
)


def worker_profile(default: dict) -> dict:
    """``default`` with one more rule allowing :data:`BWRAP_CALLS` whatever the capabilities."""
    profile = json.loads(json.dumps(default))
    profile["syscalls"].append(
        {
            "names": BWRAP_CALLS,
            "action": "SCMP_ACT_ALLOW",
            "args": [],
            "comment": COMMENT,
            "includes": {},
            "excludes": {},
        }
    )
    return profile


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    OUT.write_text(json.dumps(worker_profile(json.loads(src.read_text())), indent=1) + "\n")
    print(f"wrote {OUT} from {src}")


if __name__ == "__main__":
    main()
