"""The minimal step root (reward_service/sandbox/minimal_root.py): what it copies, what an Icarus
step then sees, when it is used, and, the part that guards rewards, that every case of
../shared/cases/stimulus scores the same in it as with the whole system (fast path and Icarus),
with the real simulators. The compose worker, where ``auto`` chooses it (a fuse-overlayfs root),
is tests/test_compose_stack.py's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import needs_cases
from test_stimulus_cases import CASES, _request

from reward_service.sandbox import BwrapSandbox, ExecSpec
from reward_service.sandbox.minimal_root import MinimalRoots, NoMinimalRoot, build, filesystem_type, on_fuse
from reward_service.simulators.icarus import step_system


@pytest.fixture(scope="module")
def minimal():
    return BwrapSandbox(step_root="minimal")


def icarus_system(sandbox: BwrapSandbox) -> tuple[str, ...]:
    system = step_system("iverilog", "vvp", sandbox.toolchain().path_env())
    assert system is not None, "iverilog's library dir is found on this host"
    return system


def run(sandbox: BwrapSandbox, script: str, tmp_path: Path, system: tuple[str, ...] | None):
    return sandbox.run(ExecSpec(argv=["/bin/sh", "-c", script], workdir=tmp_path, system=system))


def test_an_icarus_step_sees_its_tools_and_nothing_else(minimal, tmp_path):
    system = icarus_system(minimal)
    assert system[-1].endswith("/ivl")
    probe = (
        "for p in iverilog vvp timeout chmod prlimit sh python3 gcc perl cat ls bwrap; do "
        'command -v "$p" >/dev/null && echo "has $p" || echo "no $p"; done; '
        "[ -f /usr/lib/x86_64-linux-gnu/ivl/vvp.tgt ] && echo has vvp.tgt; "
        "echo x >/usr/bin/x 2>/dev/null || echo read-only"
    )
    out = run(minimal, probe, tmp_path, system).output.split("\n")
    for tool in ("iverilog", "vvp", "chmod", "prlimit", "sh"):
        assert f"has {tool}" in out
    # no `timeout` since the sandbox holds the step to its CPU budgets (issue 18)
    for tool in ("timeout", "python3", "gcc", "perl", "cat", "ls", "bwrap"):
        assert f"no {tool}" in out
    assert "has vvp.tgt" in out and "read-only" in out
    # the same step without a minimal root sees the whole system
    whole = run(BwrapSandbox(step_root="system"), probe, tmp_path, system).output.split("\n")
    assert "has cat" in whole and "has gcc" in whole


def test_the_copy_keeps_symlinks_and_holds_what_the_loader_loads(tmp_path):
    root = build(["/bin/sh", "/usr/bin/vvp"], str(tmp_path))
    try:
        usr = root / "usr"
        assert (usr / "bin/sh").is_symlink() and os.readlink(usr / "bin/sh") == os.readlink("/usr/bin/sh")
        assert (usr / "bin" / os.readlink("/usr/bin/sh")).is_file()  # dash, under its own name
        libs = {p.name for p in (usr / "lib/x86_64-linux-gnu").iterdir()}
        assert {"libc.so.6", "libreadline.so.8", "libstdc++.so.6"} <= libs  # vvp's libraries
        assert (root / "etc/ld.so.cache").read_bytes() == Path("/etc/ld.so.cache").read_bytes()
        assert not (usr / "bin/python3").exists() and not (usr / "bin/cat").exists()
        for dirpath, _dirs, files in os.walk(usr):
            assert not os.stat(dirpath).st_mode & 0o222, dirpath
            for name in files:
                path = os.path.join(dirpath, name)
                assert os.path.islink(path) or not os.stat(path).st_mode & 0o222, path
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700  # private to this uid
    finally:
        from reward_service.sandbox.minimal_root import _remove

        _remove(root)


def test_what_cannot_be_copied_gives_the_whole_system_and_leaves_nothing(tmp_path):
    with pytest.raises(NoMinimalRoot, match="outside /usr"):
        build(["/etc/hostname"], str(tmp_path))
    with pytest.raises(NoMinimalRoot, match="does not exist"):
        build(["/usr/bin/no-such-program"], str(tmp_path))
    roots = MinimalRoots("minimal", base=str(tmp_path))
    assert roots.get(("/usr/bin/no-such-program",)) is None
    assert list(tmp_path.iterdir()) == []
    # a step naming a program the toolchain's PATH lacks runs with the whole system
    sandbox = BwrapSandbox(step_root="minimal")
    spec = ExecSpec(argv=["/bin/sh", "-c", "command -v cat"], workdir=tmp_path, system=("no-such-program",))
    assert sandbox.minimal_root(spec, sandbox.toolchain()) is None
    assert sandbox.run(spec).exit_code == 0


def test_auto_makes_copies_only_where_usr_is_on_fuse():
    assert filesystem_type("/proc/self") == "proc"
    assert filesystem_type("/dev/shm") == "tmpfs"
    assert MinimalRoots("auto").enabled() == on_fuse("/usr")
    assert MinimalRoots("minimal").enabled() and not MinimalRoots("system").enabled()
    with pytest.raises(ValueError):
        MinimalRoots("fast")


@pytest.fixture(scope="module")
def engines(shared_cache_dir, tmp_path_factory):
    """Engines whose Icarus steps see a minimal root (made under their own dir) or the system."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    out = {
        root: Engine(Settings(cache_dir=shared_cache_dir, result_cache=False, step_root=root))
        for root in ("minimal", "system")
    }
    out["minimal"].sandbox.minimal_roots.base = str(tmp_path_factory.mktemp("roots"))
    return out


def outcome(result) -> tuple:
    return (
        result.status,
        result.engine,
        result.reward,
        result.coverage.model_dump_json(),
        [u.model_dump_json() for u in result.uncovered],
        result.message,
    )


@pytest.mark.parametrize("engine_name", ["fast", "icarus"])
@needs_cases
@pytest.mark.parametrize("problem_id,tb", CASES)
def test_every_stimulus_case_scores_the_same_in_the_minimal_root(engines, problem_id, tb, engine_name):
    request, _expected = _request(problem_id, tb, "verilator" if engine_name == "fast" else "icarus")
    if engine_name == "fast":
        request["engine"] = "fast"
    minimal, whole = engines["minimal"].score(request), engines["system"].score(request)
    assert outcome(minimal) == outcome(whole)
    assert minimal.status in ("ok", "compile_error", "runtime_error")
    assert minimal.engine == ("fast" if engine_name == "fast" else "icarus")
    # the step ran in the minimal root: one copy, made by the first step and kept
    assert len(list(Path(engines["minimal"].sandbox.minimal_roots.base).iterdir())) == 1


def test_copies_of_processes_that_are_gone_are_swept(tmp_path):
    """A pool process killed at the hard time limit leaves its copy: the next copy made in the
    same place removes those of dead processes of this uid, and no other."""
    import subprocess

    from reward_service.sandbox.minimal_root import PREFIX, _pid_namespace

    gone = subprocess.Popen(["true"])
    gone.wait()
    ns = _pid_namespace()
    dead = tmp_path / f"{PREFIX}{ns}-{gone.pid}-abc"
    (dead / "usr/bin").mkdir(parents=True)
    (dead / "usr/bin").chmod(0o555)  # made read-only like a real copy
    live = tmp_path / f"{PREFIX}{ns}-{os.getppid()}-def"
    elsewhere = tmp_path / f"{PREFIX}1{ns}-{gone.pid}-ghi"  # another pid namespace's: its pids are not ours
    other = tmp_path / "reward-service-rootless"
    for path in (live, elsewhere, other):
        path.mkdir()
    roots = MinimalRoots("minimal", base=str(tmp_path))
    made = roots.get(("/usr/bin/vvp",))
    assert made is not None and made.name.startswith(f"{PREFIX}{ns}-{os.getpid()}-")
    assert not dead.exists() and live.exists() and elsewhere.exists() and other.exists()


def test_a_copy_that_vanished_is_made_again(tmp_path):
    from reward_service.sandbox.minimal_root import _remove

    roots = MinimalRoots("minimal", base=str(tmp_path))
    first = roots.get(("/usr/bin/vvp",))
    assert first is not None
    _remove(first)  # an age-based /tmp cleaner
    second = roots.get(("/usr/bin/vvp",))
    assert second is not None and second != first and (second / "usr/bin/vvp").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a noexec tmpfs (root)")
def test_a_base_that_cannot_execute_gives_no_copy(tmp_path):
    import subprocess

    base = tmp_path / "noexec"
    base.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs", str(base)], check=True)
    try:
        assert MinimalRoots("minimal", base=str(base)).get(("/usr/bin/vvp",)) is None
        assert list(base.iterdir()) == []
    finally:
        subprocess.run(["umount", str(base)], check=True)


def test_a_copy_whose_programs_do_not_load_fails_its_check(minimal, tmp_path):
    """The check of a new copy runs the loader's --list of each named program inside it: a
    library the copy lacks is found before any sample runs there."""
    from reward_service.sandbox.minimal_root import _remove

    paths = [minimal.prlimit, "/usr/bin/vvp"]
    root = build(paths, str(tmp_path))
    try:
        assert minimal._check_root(root, paths) is None
        lib = root / "usr/lib/x86_64-linux-gnu"
        lib.chmod(0o755)
        (lib / "libreadline.so.8").unlink()
        failed = minimal._check_root(root, paths)
        assert failed is not None and "/usr/bin/vvp" in failed and "libreadline.so.8" in failed, failed
    finally:
        _remove(root)


def test_bwraps_own_failure_on_a_minimal_root_is_a_sandbox_error(minimal, tmp_path):
    """A root that is gone when bwrap binds it ("Can't find source path <root>/usr") is the
    sandbox's failure, never the sample's exit status (a compile error would be cached)."""
    from reward_service.sandbox import SandboxError

    gone = tmp_path / "gone-root"
    spec = ExecSpec(argv=["/usr/bin/vvp", "-V"], workdir=tmp_path)
    minimal.check()
    with pytest.raises(SandboxError, match="minimal root"):
        minimal._execute(spec, minimal._command(spec, gone), gone)


def test_a_step_without_shells_runs_in_a_minimal_root(minimal, tmp_path):
    """no_shell hides the shells the copy holds (bwrap cannot bind over files the copy lacks)."""
    system = icarus_system(minimal)
    result = minimal.run(ExecSpec(argv=["/usr/bin/vvp", "-V"], workdir=tmp_path, system=system, no_shell=True))
    assert result.exit_code == 0 and "Icarus Verilog runtime" in result.output, result.output
    hidden = minimal.run(  # timeout (no longer one of the step's programs) execs the hidden shell
        ExecSpec(
            argv=["/usr/bin/timeout", "5", "/bin/sh", "-c", "true"],
            workdir=tmp_path,
            system=(*system, "timeout"),
            no_shell=True,
        )
    )
    assert hidden.exit_code == 126 and "/bin/sh" in hidden.output, hidden.output  # /dev/null there
