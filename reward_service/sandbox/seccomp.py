"""The seccomp filter of every bubblewrap step: the system calls a simulation or a build never
needs and that open a door out of the step (kernel attack surface, namespaces, other processes'
memory). Each refused call returns ``EPERM`` (``clone3``: ``ENOSYS``, see below) rather than
killing the process, so a tool that probes for a feature fails cleanly and says so.

The filter is compiled once per process with libseccomp (``pyseccomp``, ctypes over Debian's
``libseccomp2``) into a classic BPF program that bwrap installs (``--seccomp FD``) in the
step's process before it execs the command; it is inherited by every child and cannot be
removed. Calls of another ABI (i386 ``int 0x80``, x32) kill the calling thread (libseccomp's
bad-architecture action): nothing of ours runs 32-bit code.

The list and the reason for each entry are in docs/sandbox.md ("System calls refused").
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import tempfile

from reward_service.sandbox.base import SandboxError

#: clone/unshare flags that make a namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
#: NEWPID, NEWNET, NEWTIME): clone without them (fork, threads) stays allowed.
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)

#: The largest personality(2) value a step may set: PER_LINUX, PER_LINUX32 and UNAME26
#: (0x20008), as Docker's default profile allows. The flags above it (ADDR_NO_RANDOMIZE,
#: READ_IMPLIES_EXEC, MMAP_PAGE_ZERO...) weaken the address-space layout an exploit must guess.
#: The query value 0xffffffff is refused too: seccomp compares an argument once per rule.
PERSONALITY_MAX = 0x20008

#: (system calls, why) refused outright with EPERM.
REFUSED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("setns",), "joining another namespace"),
    (("ptrace", "process_vm_readv", "process_vm_writev"), "reading or writing another process"),
    (("bpf",), "eBPF programs: a large, often exploited kernel surface"),
    (("keyctl", "add_key", "request_key"), "kernel keyrings: not namespaced, exploited"),
    (("perf_event_open",), "performance counters: side channels and kernel bugs"),
    (("userfaultfd",), "stalls the kernel at a chosen moment: the usual race-exploit tool"),
    (
        (
            "mount",
            "umount2",
            "pivot_root",
            "move_mount",
            "open_tree",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "mount_setattr",
            "chroot",
        ),
        "changing the step's file-system view",
    ),
    (("kexec_load", "kexec_file_load", "reboot"), "the machine's kernel and power"),
    (("init_module", "finit_module", "delete_module"), "kernel modules"),
    (("iopl", "ioperm"), "raw I/O ports"),
    (("acct", "swapon", "swapoff", "quotactl"), "machine-wide accounting, swap and quotas"),
    (("name_to_handle_at", "open_by_handle_at"), "opening files by handle, around the mount view"),
    (("io_uring_setup", "io_uring_enter", "io_uring_register"), "io_uring: its operations bypass seccomp"),
    (("syslog", "vhangup", "lookup_dcookie"), "the kernel log and terminals of others"),
)


#: The job-control stop signals (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU): refused to every
#: signal-sending call, by the signal argument's position.
STOP_SIGNALS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
STOP_SIGNAL_ARG = {
    "kill": 1,
    "tkill": 1,
    "tgkill": 2,
    "rt_sigqueueinfo": 1,
    "rt_tgsigqueueinfo": 2,
    "pidfd_send_signal": 1,
}


@functools.lru_cache(maxsize=1)
def filter_bpf() -> bytes:
    """The compiled BPF program (bytes of ``struct sock_filter``, native architecture) of the
    step filter. Raises :class:`SandboxError` when libseccomp cannot be used here (``pyseccomp``
    or ``libseccomp2`` missing: a step never runs unfiltered)."""
    try:
        import pyseccomp as sc  # ctypes: loads libseccomp.so.2 at import
    except (ImportError, OSError) as exc:
        raise SandboxError(
            f"the step seccomp filter needs pyseccomp and libseccomp2 ({exc}): bash scripts/install.sh"
        ) from exc
    deny = sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(defaction=sc.ALLOW)
    for names, _why in REFUSED:
        for name in names:
            try:
                filt.add_rule(deny, name)
            except (ValueError, RuntimeError, OSError):  # a call this libseccomp/arch does not know
                continue
    for call in ("clone", "unshare"):
        # the flags are the first argument of both (clone's on x86-64 and arm64); rules of one
        # call are or-ed, and a rule compares an argument once: one rule per namespace flag
        for flag in NAMESPACE_FLAGS:
            filt.add_rule(deny, call, sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in a struct seccomp cannot read: ENOSYS makes glibc fall back to
    # clone (threads, posix_spawn), whose flags the rules above see (what Docker and systemd do).
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    filt.add_rule(deny, "personality", sc.Arg(0, sc.GT, PERSONALITY_MAX))
    # A stopped step looks like a starved one to the wall-clock backstop (our sandbox_error: the
    # sample dropped, not scored); nothing a simulation does needs to stop a process.
    for call, arg in STOP_SIGNAL_ARG.items():
        for sig in STOP_SIGNALS:
            try:
                filt.add_rule(deny, call, sc.Arg(arg, sc.EQ, sig))
            except (ValueError, RuntimeError, OSError):
                continue
    with tempfile.TemporaryFile() as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def memfd() -> int:
    """A new sealed-size descriptor holding :func:`filter_bpf`, positioned at its start, for
    bwrap's ``--seccomp`` (which reads it to the end); the caller closes it."""
    program = filter_bpf()
    fd = os.memfd_create("rs-seccomp", 0)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
