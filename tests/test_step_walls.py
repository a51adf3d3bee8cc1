"""The walls of a bubblewrap step (issue 18, item 4): bubblewrap's --disable-userns and our
seccomp filter (reward_service/sandbox/seccomp.py). A C program (tests/walls_probe.c) is
compiled and run inside a real step, with and without cgroups: every refused call fails with
EPERM (clone3 with ENOSYS, so glibc falls back to clone), ``unshare -U true`` fails, and
threads, fork, a Python thread pool and a C compile still work."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reward_service.sandbox import seccomp
from reward_service.sandbox.base import ExecSpec
from reward_service.sandbox.bwrap import BwrapSandbox
from reward_service.sandbox.cgroup import CgroupV1

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

PROBE = Path(__file__).parent / "walls_probe.c"
#: What walls_probe.c prints for each call inside a step.
EXPECTED = {
    **{
        name: "EPERM"
        for name in (
            "unshare_user unshare_net unshare_mount clone_newpid setns ptrace process_vm_readv bpf keyctl "
            "add_key request_key perf_event_open userfaultfd mount umount2 pivot_root open_tree fsopen "
            "kexec_load init_module finit_module iopl ioperm acct swapon reboot io_uring_setup "
            "personality_addr_no_randomize"
        ).split()
    },
    "clone3": "ENOSYS",
    "pthread_create": "OK",
    "fork": "OK",
}

CGROUPS = [
    pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="no writable cgroup v1")),
    False,
]


def _step(tmp_path: Path, use_cgroups: bool, argv: list[str]) -> str:
    result = BwrapSandbox(use_cgroups=use_cgroups).run(
        ExecSpec(argv=argv, workdir=tmp_path, timeout_s=120, memory_mb=2048, processes=64)
    )
    assert result.limit_hit is None, result.output
    return result.output


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_each_refused_call_fails_cleanly_inside_a_step(tmp_path, use_cgroups):
    shutil.copy(PROBE, tmp_path / "walls_probe.c")
    # gcc (cc1, as, collect2, ld: forks and execs) must still work under the filter
    out = _step(
        tmp_path,
        use_cgroups,
        [
            "sh",
            "-c",
            "cc -pthread -o /work/walls /work/walls_probe.c && /work/walls && unshare -U true; echo unshare=$?",
        ],
    )
    got = dict(line.split(" ", 1) for line in out.splitlines() if line.count(" ") == 1)
    assert {name: got.get(name) for name in EXPECTED} == EXPECTED, out
    assert "unshare=1" in out and "unshare failed" in out, out


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_python_threads_and_subprocesses_still_work(tmp_path, use_cgroups):
    code = (
        "import concurrent.futures as f, subprocess, os\n"
        "with f.ThreadPoolExecutor(8) as pool: print('threads', sum(pool.map(lambda i: i, range(100))))\n"
        "print('child', subprocess.run(['true']).returncode)\n"
        "try:\n    os.setns(0, 0)\nexcept (OSError, AttributeError) as exc: print('setns', type(exc).__name__)\n"
    )
    out = _step(tmp_path, use_cgroups, ["python3", "-c", code])
    assert "threads 4950" in out and "child 0" in out, out


def test_the_filter_lists_every_documented_call():
    """Each refused call named in docs/sandbox.md is in the filter's list, and the other way."""
    doc = (Path(__file__).parent.parent / "docs" / "sandbox.md").read_text()
    listed = {name for names, _ in seccomp.REFUSED for name in names}
    assert all(f"`{name}`" in doc for name in listed), sorted(n for n in listed if f"`{n}`" not in doc)
    assert len(seccomp.filter_bpf()) % 8 == 0 and len(seccomp.filter_bpf()) > 8 * len(listed)


@pytest.mark.parametrize("use_cgroups", CGROUPS)
def test_a_step_cannot_stop_itself(tmp_path, use_cgroups):
    """Red team (12-04): a sample that SIGSTOPs itself looked starved to the wall-clock backstop
    (our sandbox_error: dropped instead of scored). Every stop signal is refused to every
    signal-sending call; other signals still work."""
    code = (
        "import os, signal\n"
        "for sig in (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):\n"
        "    for send in (lambda s: os.kill(os.getpid(), s), lambda s: signal.pthread_kill(__import__('threading').get_ident(), s)):\n"
        "        try:\n            send(sig)\n            print('sent', sig.name)\n"
        "        except PermissionError:\n            print('refused', sig.name)\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('usr1 delivered'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
    )
    out = _step(tmp_path, use_cgroups, ["python3", "-c", code])
    assert out.count("refused ") == 8 and "sent " not in out, out
    assert "usr1 delivered" in out, out
