#!/usr/bin/env python
"""What a persistent per-worker sandbox would save on the fast path's Icarus step (issue 20),
measured before building one: the same step (gray_to_binary good by default, a median sample)
run N times as today (a fresh bwrap per step, ``BwrapSandbox.run``) and N times as a child of one
already-running bwrap (a small Python supervisor inside it forks, isolates and execs the step),
alternating in rounds, CPU from the cgroups (today: the step's ``cpuacct``; persistent: the
supervisor's whole ``cpuacct`` group, supervisor included) plus this process's own CPU.

Modes of the persistent sandbox (``--mode``):

- ``c``: the isolation of ``ns`` done by a small C supervisor (``bench/zygote_supervisor.c``,
  built with ``cc``): no Python fork per step.
- ``landlock``: the child applies Landlock (files: its work dir read-write, /usr and /etc
  read-only; TCP bind/connect refused; signals and abstract unix sockets scoped) and execs. Its
  steps share the supervisor's uid and pid namespace: NOT the isolation of today (``--attack``
  shows a step lowering another process's rlimits with ``prlimit --pid``, which Landlock does
  not cover; setpriority, sched_setaffinity and ioprio_set are the same).
- ``ns``: per step a new mount, pid and IPC namespace (the step is pid 1 of its own; its work dir
  bound at /work, a sized tmpfs /tmp, an empty /proc, the pool of work dirs covered), all
  capabilities dropped, the steps' seccomp filter, Landlock's TCP refusal and scopes. The
  network namespace (loopback only) is the supervisor's, shared by its steps one after another.

    python bench/bench_zygote.py --mode ns --steps 40 --rounds 3
    python bench/bench_zygote.py --mode landlock --attack

A prototype for the measurement, not the service's code (no limits but the seccomp filter and
the namespaces, no watcher, no CPU budget, no cgroup per step). Needs root on a cgroup v1 host
(the cpuacct groups).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stimulus import DEFAULT_CASES, REPO, load_cases

sys.path.insert(0, str(REPO))
from bench_floor import fresh, request

from reward_service.engine import Engine
from reward_service.sandbox import bwrap as bw
from reward_service.sandbox import seccomp
from reward_service.sandbox.base import ExecSpec
from reward_service.settings import Settings

SUPERVISOR = r"""
import ctypes, json, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
MODE, FILTER = sys.argv[1], sys.argv[2]
def chk(r, what):
    if r < 0:
        raise OSError(ctypes.get_errno(), what)
    return r
RO, ALL, FILE_RIGHTS = 1 | 4 | 8, (1 << 16) - 1, 1 | 2 | 4 | 16384 | 32768
def landlock(rw=(), ro=(), rwfiles=(), fs=True):
    attr = struct.pack("QQQ", ALL if fs else 0, 3, 3)  # fs rights, TCP bind+connect, scopes
    fd = chk(libc.syscall(444, attr, len(attr), 0), "landlock_create_ruleset")
    for path, acc in [*((p, ALL) for p in rw), *((p, RO) for p in ro), *((p, FILE_RIGHTS) for p in rwfiles)]:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = struct.pack("=Qi", acc if os.path.isdir(path) else acc & FILE_RIGHTS, pfd)
        chk(libc.syscall(445, fd, 1, rule, 0), "landlock_add_rule " + path)
        os.close(pfd)
    chk(libc.syscall(446, fd, 0), "landlock_restrict_self")
    os.close(fd)
def mount(src, dst, fs, flags, data):
    chk(libc.mount(src, dst, fs, flags, data), "mount " + dst.decode())
class FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
code = open(FILTER, "rb").read()
buf = ctypes.create_string_buffer(code)
fprog = FProg(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
def isolate_ns(req):
    chk(libc.unshare(0x00020000 | 0x20000000 | 0x08000000), "unshare")  # mount, pid, ipc
    child = os.fork()
    if child:
        _, st = os.waitpid(child, 0)  # the step is pid 1 of its namespace: its end kills the rest
        os._exit(os.waitstatus_to_exitcode(st) & 255)
    nosuid_nodev = 2 | 4
    mount(None, b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    mount(req["dir"].encode(), b"/work", None, 0x1000 | 0x4000, None)  # MS_BIND | MS_REC
    mount(b"tmpfs", b"/tmp", b"tmpfs", nosuid_nodev, b"size=%dk" % (req["tmp_mb"] * 1024))
    mount(b"tmpfs", b"/proc", b"tmpfs", nosuid_nodev | 1, b"size=4k")
    mount(b"tmpfs", b"/pool", b"tmpfs", nosuid_nodev | 1, b"size=4k")  # the other work dirs
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) < 0 and ctypes.get_errno() == 22:  # PR_CAPBSET_DROP
            break
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    chk(libc.capset(struct.pack("Ii", 0x20080522, 0), bytes(24)), "capset")
    chk(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    chk(libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "seccomp")
    landlock(fs=False)
out = sys.stdout.buffer
for line in sys.stdin:
    req = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setsid()
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.close(w)
            if MODE == "ns":
                isolate_ns(req)
            else:
                landlock([req["dir"]], ["/usr", "/etc"], ["/dev/null"])
            os.chdir(req["cwd"])
            os.execve(req["argv"][0], req["argv"], req["env"])
        except BaseException as exc:
            os.write(2, repr(exc).encode())
        finally:
            os._exit(127)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, st = os.waitpid(pid, 0)
    reply = {"rc": os.waitstatus_to_exitcode(st), "out": data.decode(errors="replace")[-2000:]}
    out.write((json.dumps(reply) + "\n").encode())
    out.flush()
"""


def capture(case_name: str, work: Path) -> tuple[ExecSpec, Path]:
    """The fast path's Icarus step of a new sample of ``case_name`` (good.sv) and a copy of its
    work dir as the step found it."""
    cases = [c for c in load_cases(DEFAULT_CASES, DEFAULT_CASES.parent / "cvdp" / "cid012.jsonl", None, ["good"])]
    case = next(c for c in cases if case_name in c.short)
    orig, got = bw.BwrapSandbox.run, {}

    def run(self, spec):
        if spec.argv[3:4] == ["rs-icarus"] and "spec" not in got:
            shutil.copytree(spec.workdir, work / "template", symlinks=True)
            got["spec"] = pickle.loads(pickle.dumps(spec))
        return orig(self, spec)

    bw.BwrapSandbox.run = run
    try:
        res = Engine(Settings(cache_dir=work / "cache", result_cache=False)).score(request(case, fresh(case)))
    finally:
        bw.BwrapSandbox.run = orig
    assert res.status == "ok" and res.engine == "fast", res
    return got["spec"], work / "template"


class Persistent:
    """One bwrap (today's options, the pool of work dirs at /pool) running the supervisor."""

    def __init__(self, sb: bw.BwrapSandbox, spec: ExecSpec, mode: str, work: Path) -> None:
        self.mode, self.pool = mode, work / "pool"
        self.pool.mkdir()
        sup, filt = work / "supervisor.py", work / "seccomp.bpf"
        sup.write_text(SUPERVISOR)
        fd = seccomp.memfd()
        filt.write_bytes(os.read(fd, 1 << 20))
        os.close(fd)
        if mode == "c":  # the ns isolation in C (bench/zygote_supervisor.c): no Python fork per step
            sup = work / "zygote_supervisor"
            subprocess.run(
                ["cc", "-O2", "-o", str(sup), str(Path(__file__).with_name("zygote_supervisor.c"))], check=True
            )
        outer = ExecSpec(
            **{
                **spec.__dict__,
                "workdir": self.pool,
                "cwd": "/",
                "argv": [str(sup), str(filt)] if mode == "c" else [sys.executable, str(sup), mode, str(filt)],
            }
        )
        argv = sb._command(outer, None)
        split = argv.index("--")
        opts = [a if a != "/work" else "/pool" for a in argv[1:split]]
        extra = ["--ro-bind", str(sup), str(sup), "--ro-bind", str(filt), str(filt)]
        if mode in ("ns", "c"):  # the supervisor keeps CAP_SYS_ADMIN in the sandbox's user namespace
            at = opts.index("--cap-drop")
            del opts[at : at + 2]
            opts = ["--cap-add", "CAP_SYS_ADMIN", *opts]
            extra += ["--dir", "/work"]
        last = max(i for i, o in enumerate(opts) if o == "--remount-ro" and opts[i + 1] == "/")
        opts[last:last] = extra
        command = [argv[0], *opts]
        filter_fd = None
        if mode == "landlock":  # bwrap installs the filter for the whole sandbox
            filter_fd = seccomp.memfd()
            command += ["--seccomp", str(filter_fd)]
        self.cgroup = Path("/sys/fs/cgroup/cpuacct") / f"rs-zygote-bench-{uuid.uuid4().hex[:8]}"
        self.cgroup.mkdir()
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", f'echo $$ >{self.cgroup}/cgroup.procs && exec "$@"', "enter", *command, *argv[split:]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=() if filter_fd is None else (filter_fd,),
            env={},
        )
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}

    def cpu(self) -> float:
        return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9

    def run(self, name: str, argv: list[str], cwd: str = "src") -> dict:
        w = f"/pool/{name}"
        if self.mode == "c":
            env = {**self.env, "HOME": "/work", "TMPDIR": "/tmp"}
            fields = [w, str(256 * 1024), f"/work/{cwd}", str(len(argv)), *argv, str(len(env))]
            fields += [f"{k}={v}" for k, v in env.items()]
            data = b"".join(f.encode() + b"\0" for f in fields)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(len(data).to_bytes(4, sys.byteorder) + data)
            self.proc.stdin.flush()
            rc, size = self.proc.stdout.readline().split()
            return {"rc": int(rc), "out": self.proc.stdout.read(int(size)).decode(errors="replace")}
        if self.mode == "ns":
            req = {
                "dir": w,
                "tmp_mb": 256,
                "cwd": f"/work/{cwd}",
                "argv": argv,
                "env": {**self.env, "HOME": "/work", "TMPDIR": "/tmp"},
            }
        else:  # no /work of its own: the step's script gets its dir instead
            if argv[:2] == ["/bin/sh", "-c"]:
                argv = [*argv[:2], f"W={w}\n" + argv[2].replace("/work", "$W"), *argv[3:]]
            req = {"dir": w, "cwd": f"{w}/{cwd}", "argv": argv, "env": {**self.env, "HOME": w, "TMPDIR": f"{w}/tmp"}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        for _ in range(50):
            try:
                self.cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("ns", "c", "landlock"), default="ns")
    ap.add_argument("--case", default="gray_to_binary")
    ap.add_argument("--steps", type=int, default=40, help="steps per round and side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--attack", action="store_true", help="only run the prlimit --pid probe")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-zygote-"))
    sb = bw.BwrapSandbox(step_root="system")  # the supervisor is the host's Python
    sb.check()
    spec, template = capture(args.case, work)
    zygote = Persistent(sb, spec, args.mode, work)
    n = 0

    def new_dir() -> tuple[str, Path]:
        nonlocal n
        n += 1
        d = zygote.pool / f"s{n}"
        shutil.copytree(template, d, symlinks=True)
        (d / "tmp").mkdir()
        return d.name, d

    try:
        if args.attack:
            name, _ = new_dir()
            other, _ = new_dir()  # a sibling's work dir, and a later sample's after it
            probe = (
                "echo pid $$; /usr/bin/prlimit --pid 2 --fsize=0:0 && /usr/bin/prlimit --pid 2 --fsize; "
                "kill -0 2 && echo signal-2-ok; kill -0 1 && echo signal-1-ok; ls /proc | head -3; "
                f"ls /pool /pool/{other} 2>&1 | head -3; echo x >/pool/{other}/forged && echo wrote-sibling; "
                "echo y >/work/mine && echo wrote-own; ls /tmp; (sleep 300 >/dev/null 2>&1 &) ; echo left-sleep"
            )
            print(args.mode, "step 1:", zygote.run(name, ["/bin/sh", "-c", probe], cwd="")["out"])
            later = "ls /work /tmp; cat /work/mine 2>&1; ls /pool 2>&1"
            print(args.mode, "step 2:", zygote.run(other, ["/bin/sh", "-c", later], cwd="")["out"])
            tasks = (zygote.cgroup / "tasks").read_text().split()
            print(args.mode, f"tasks left in the supervisor's cgroup: {len(tasks)} (bwrap, its init, the supervisor)")
            print(args.mode, "sibling's dir on the host:", sorted(p.name for p in (zygote.pool / other).iterdir()))
            return 0
        print(f"mode {args.mode}, case {args.case} good.sv, {args.steps} steps x {args.rounds} rounds per side")
        for rnd in range(args.rounds):
            for side in ("fresh bwrap", "persistent"):
                own0, wall0 = time.process_time(), time.perf_counter()
                sup0, step_cpu = zygote.cpu(), 0.0
                for _ in range(args.steps):
                    name, d = new_dir()
                    if side == "fresh bwrap":
                        res = sb.run(ExecSpec(**{**spec.__dict__, "workdir": d}))
                        assert res.exit_code == 0, res.output
                        step_cpu += res.cpu_s or 0.0
                    else:
                        got = zygote.run(name, list(spec.argv))
                        assert got["rc"] == 0, got
                    rc = (d / "obj/status/build.rc").read_text().strip()
                    assert rc == "0", (d / "obj/status/build.log").read_text()
                    assert (d / "obj/sim.vvp").stat().st_mode & 0o222 == 0, "the step's chmod ran"
                    shutil.rmtree(d, ignore_errors=True)
                if side == "persistent":
                    step_cpu = zygote.cpu() - sup0
                own = time.process_time() - own0
                wall = time.perf_counter() - wall0
                print(
                    f"round {rnd + 1} {side:<12} per step: CPU step {step_cpu / args.steps * 1000:6.2f} ms "
                    f"+ this process {own / args.steps * 1000:5.2f} ms = {(step_cpu + own) / args.steps * 1000:6.2f} ms; "
                    f"wall {wall / args.steps * 1000:6.1f} ms",
                    flush=True,
                )
        print("load average:", open("/proc/loadavg").read().strip())
    finally:
        zygote.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
