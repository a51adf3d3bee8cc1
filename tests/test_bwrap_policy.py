"""The bwrap backend's step policy checked with real bubblewrap runs, with cgroups (root on a
cgroup v1 host) and without (the non-root worker container's rlimits + tree watcher): nothing of
the sandbox's own tmpfs mounts takes unbounded, uncounted writes, the --args memfd is not open
in the step, and the step cannot raise its own process limit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from reward_service.sandbox.base import ExecSpec
from reward_service.sandbox.bwrap import BwrapSandbox
from reward_service.sandbox.cgroup import CgroupV1

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

_STEP = r"""
import errno, json, os, resource
out = {}
for path in ("/rootfile", "/dev/devfile", "/usr/x"):
    try:
        with open(path, "wb") as fh:
            fh.write(b"x")
        out[path] = "written"
    except OSError as exc:
        out[path] = errno.errorcode[exc.errno]
# /dev/shm: a capped tmpfs; 96 MiB in 8 MiB pieces (file_mb is above it) must stop at ENOSPC.
written = 0
try:
    with open("/dev/shm/big", "wb") as fh:
        for _ in range(12):
            fh.write(b"x" * (8 << 20)); fh.flush(); written += 8
    out["shm"] = written
except OSError as exc:
    out["shm"] = errno.errorcode[exc.errno]
open("/tmp/ok", "wb").write(b"x"); open("/work/ok", "wb").write(b"x")
out["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
out["fd_targets"] = [os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2)]
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
try:
    resource.setrlimit(resource.RLIMIT_NPROC, (hard + 1, hard + 1))
    out["nproc_raised"] = True
except (ValueError, OSError):
    out["nproc_raised"] = False
out["nproc"] = [soft, hard]
out["limits"] = {name: list(resource.getrlimit(getattr(resource, "RLIMIT_" + name))) for name in ("CORE", "FSIZE", "NOFILE", "AS")}
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "use_cgroups",
    [
        pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="no writable cgroup v1")),
        False,
    ],
)
def test_sandbox_tmpfs_mounts_are_read_only_or_capped(tmp_path, use_cgroups):
    # Without a cgroup no limit counts tmpfs pages: bwrap's root and /dev were writable without
    # a size, so a step with memory_mb=128 wrote 384 MiB to / unseen (status ok).
    sandbox = BwrapSandbox(use_cgroups=use_cgroups)
    result = sandbox.run(
        ExecSpec(
            argv=[sys.executable, "-c", _STEP],
            workdir=tmp_path,
            memory_mb=512,
            processes=32,
            tmp_mb=256,
            file_mb=256,
            env={"RS_SECRET": "token-1234"},
        )
    )
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output.strip().splitlines()[-1])
    assert seen["/rootfile"] == "EROFS" and seen["/dev/devfile"] == "EROFS" and seen["/usr/x"] == "EROFS"
    assert seen["shm"] == "ENOSPC"  # 64 MiB cap
    assert (tmp_path / "ok").exists()
    # 0, 1, 2 and listdir's own descriptor: the --args memfd was closed before the step ran.
    assert seen["fds"] == [0, 1, 2, 3], seen
    assert seen["fd_targets"][0] == "/dev/null" and seen["fd_targets"][1].startswith("pipe:")
    assert seen["nproc_raised"] is False
    # The rlimits hold in both modes (without cgroups set by prlimit inside the sandbox, not in
    # a preexec_fn of the worker): soft = hard, so the step cannot raise them.
    mib = 1024 * 1024
    assert seen["limits"]["CORE"] == [0, 0] and seen["limits"]["NOFILE"] == [4096, 4096]
    assert seen["limits"]["FSIZE"] == [256 * mib, 256 * mib]
    if not use_cgroups:
        assert seen["nproc"] == [32, 32]
        assert seen["limits"]["AS"] == [1536 * mib, 1536 * mib]  # memory_mb + 1024


def test_prlimit_comes_from_the_system_not_the_steps_path(tmp_path):
    # The step's PATH starts with the interpreter's bin dir (and /rsbin in cocotb builds):
    # the process-limit wrapper is named by its absolute path in /usr/bin instead.
    sandbox = BwrapSandbox(use_cgroups=False)
    argv = sandbox.command(ExecSpec(argv=["true"], workdir=tmp_path, processes=7))
    wrapper = argv[argv.index("--") + 1 : -1]
    assert wrapper[0] == shutil.which("prlimit", path="/usr/bin:/bin")
    assert wrapper[0].startswith(("/usr/bin/", "/bin/"))
    assert "--nproc=7:7" in wrapper and wrapper[-1] == "--" and argv[-1] == "true"


# One fork every 5 ms: 200 forks take a second, 40 of the watcher's 25 ms samples. Without the
# pause a fast machine forks all 200 between two samples (CI saw "never refused 200"): the
# watcher bounds how long a tree may stay over the limit, not how many forks fit in one interval
# (the cocotb fork bomb of test_bad_input is the unpaced case).
_FORKER = r"""
import os, time
n = 0
try:
    while n < 200:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
        time.sleep(0.005)
    print("never refused", n, flush=True)
    time.sleep(30)
except OSError as exc:
    print("refused after", n, exc, flush=True)
"""


def test_process_limit_holds_without_cgroups_even_as_root(tmp_path):
    # As root outside, RLIMIT_NPROC inside the user namespace does not bind (measured: 200
    # forks under --nproc=32:32, run to its time limit); the tree watcher then ends the step.
    sandbox = BwrapSandbox(use_cgroups=False)
    result = sandbox.run(ExecSpec(argv=[sys.executable, "-c", _FORKER], workdir=tmp_path, processes=32, timeout_s=20))
    assert result.pids_exhausted and not result.timed_out, (result, result.output)
    assert result.duration_ms < 10_000
    # Caught within a few samples of passing 32 tasks, far short of the 200 forks.
    assert "never refused" not in result.output, result.output


@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is installed by scripts/install.sh")
def test_tools_find_themselves_under_an_empty_proc(tmp_path):
    """Where no fresh /proc can be mounted (the compose worker) a step gets an empty one with
    only /proc/self/exe, the link to its own program: yosys (the formal prover) exits with
    'readlink("/proc/self/exe") failed' without it, which made compose results differ from the
    host's. Nothing else of /proc is there."""
    sandbox = BwrapSandbox()
    sandbox.check()
    sandbox.fresh_proc = False  # as check() finds in a container whose /proc Docker masked
    run = sandbox.run(
        ExecSpec(argv=["yosys", "-q", "-p", "read_verilog -sv /dev/null"], workdir=tmp_path, timeout_s=60)
    )
    assert run.exit_code == 0, run.output
    listing = sandbox.run(ExecSpec(argv=["ls", "-A", "/proc", "/proc/self"], workdir=tmp_path, timeout_s=60))
    assert listing.exit_code == 0 and listing.output.split() == ["/proc:", "self", "/proc/self:", "exe"]


@pytest.mark.parametrize(
    "use_cgroups",
    [False, pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="needs cgroup v1 as root"))],
)
def test_a_program_the_sandbox_cannot_start_is_a_sandbox_error(tmp_path, use_cgroups):
    """A toolchain path the sandbox does not show (here: under the host's /tmp, which each step
    gets as its own tmpfs) made bwrap print 'execvp ...: No such file or directory' and exit 1,
    which the engine read as the sample's compile error and cached (a CI rehearsal with a venv in
    /tmp poisoned the result cache that way)."""
    from reward_service.sandbox.base import SandboxError

    hidden = tmp_path / "tool"
    hidden.write_text("#!/bin/sh\necho hi\n")
    hidden.chmod(0o755)
    sandbox = BwrapSandbox(use_cgroups=use_cgroups)
    (tmp_path / "w").mkdir()
    with pytest.raises(SandboxError, match="cannot start"):
        sandbox.run(ExecSpec(argv=[str(hidden)], workdir=tmp_path / "w", timeout_s=30))
    # a program that runs and prints the same words itself is the sample's business
    (tmp_path / "w2").mkdir()
    run = sandbox.run(
        ExecSpec(
            argv=["sh", "-c", f"echo 'bwrap: execvp {hidden}: No such file'; exit 1"],
            workdir=tmp_path / "w2",
            timeout_s=30,
        )
    )
    assert run.exit_code == 1


@pytest.mark.skipif(not CgroupV1.available(), reason="needs cgroup v1 as root")
def test_a_step_that_cannot_enter_its_cgroup_is_a_sandbox_error(tmp_path, monkeypatch):
    # The step's shell moves itself into the cgroups before it execs bwrap; if it cannot, no
    # limit would hold: nothing may run, and it is ours (not the sample's exit status).
    from reward_service.sandbox.base import SandboxError

    monkeypatch.setattr(CgroupV1, "procs_files", lambda self: (str(tmp_path / "no" / "procs"), str(tmp_path / "x")))
    marker = tmp_path / "w" / "ran"
    (tmp_path / "w").mkdir()
    with pytest.raises(SandboxError, match="could not enter its cgroup"):
        BwrapSandbox(use_cgroups=True).run(
            ExecSpec(argv=["sh", "-c", "touch /work/ran"], workdir=tmp_path / "w", timeout_s=30)
        )
    assert not marker.exists()


@pytest.mark.parametrize(
    "use_cgroups",
    [False, pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="needs cgroup v1 as root"))],
)
def test_a_limit_the_sandbox_cannot_set_is_a_sandbox_error(tmp_path, use_cgroups):
    # A worker whose hard RLIMIT_NOFILE is below the step's 4096: prlimit (no capabilities)
    # cannot set it, the step's program never runs; that is ours, not the sample's exit 1.
    script = f"""
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
from reward_service.sandbox.base import ExecSpec, SandboxError
from reward_service.sandbox.bwrap import BwrapSandbox
try:
    r = BwrapSandbox(use_cgroups={use_cgroups}).run(ExecSpec(argv=["true"], workdir=Path("{tmp_path}"), timeout_s=30))
    print("RESULT", r.exit_code, r.output.strip())
except SandboxError as exc:
    print("SANDBOX_ERROR", exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60).stdout
    # with cgroups the root shell entering them sets the limit (it could raise it): the worker's
    # hard limit is checked before, and the step refused the same way
    why = "the worker's hard NOFILE limit is 1024" if use_cgroups else "prlimit: failed to set the NOFILE"
    assert f"SANDBOX_ERROR the sandbox cannot set the step's limits: {why}" in out, out


class _Interrupt(Exception):
    """What a caller's time limit raised from a signal handler looks like to the sandbox."""


@pytest.mark.parametrize(
    "use_cgroups",
    [False, pytest.param(True, marks=pytest.mark.skipif(not CgroupV1.available(), reason="needs cgroup v1 as root"))],
)
def test_an_exception_raised_into_a_step_kills_it(tmp_path, use_cgroups):
    # Celery's soft time limit arrives as an exception from a signal handler in the middle of
    # the step's wait loop; the step (here a 37 s sleep) must not outlive it.
    import os
    import signal
    import time
    from pathlib import Path

    def raise_interrupt(signum, frame):
        raise _Interrupt()

    # a duration of this test's own: the check below reads every process of the machine, and
    # the other parametrisation may be sleeping in another xdist worker at the same time
    duration = f"37.{os.getpid()}{int(use_cgroups)}"
    before = signal.signal(signal.SIGALRM, raise_interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    start = time.monotonic()
    try:
        with pytest.raises(_Interrupt):
            BwrapSandbox(use_cgroups=use_cgroups).run(
                ExecSpec(argv=["/bin/sleep", duration], workdir=tmp_path, timeout_s=60)
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert time.monotonic() - start < 10
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd[:2] == [b"/bin/sleep", duration.encode()] and state != "Z":
            left.append(pid)
    assert left == []
