"""A step's CPU budget (issue 18): the sample's time limit counts the CPU seconds its step used
(every process of it, children included), not the wall clock, so the same sample gets the same
status at any load. A wall-clock backstop (:func:`wall_backstop`) ends a step that did not use
its budget in a generous multiple of it; who is to blame for that is :func:`held_by`'s answer:
a step whose every thread was asleep waited by itself (the sample's own timeout: a cocotb test
in ``time.sleep``, a wait on nothing; a run step with ``ExecSpec.idle_s`` ends so as soon as it
used no CPU for that long, not at the backstop), anything else (threads runnable but not running: a
loaded machine; stopped; in uninterruptible I/O) is the machine's, a ``sandbox_error``.

Where the step has a cgroup (root on a cgroup v1 host with ``cpuacct``) its CPU is the cgroup's
``cpuacct.usage``; otherwise the sum over its live process tree of each process's CPU and that
of the children it reaped (:func:`~reward_service.sandbox.proctree.sample_tree`); at the end of
the step the kernel's ``wait4`` rusage of the whole tree, which bwrap's init reaps.
"""

from __future__ import annotations

import time
from pathlib import Path

from reward_service.sandbox.base import ExecSpec
from reward_service.sandbox.proctree import tree_states

#: The wall-clock backstop of a step is this multiple of its CPU budget plus
#: :data:`BACKSTOP_SLACK_S`: a single-threaded step still ends on its CPU budget while it gets
#: at least a quarter of a core (a load of 8 on 2 cores), the slack covers the sandbox's and
#: the simulators' start-up (bwrap, loader, page-cache misses: wall time, little CPU).
BACKSTOP_FACTOR = 4.0
BACKSTOP_SLACK_S = 30.0
#: ``ExecSpec.idle_s`` of the simulation (run) steps: a sample asleep this long ends then, not
#: minutes later at the backstop (an RL step waits for its slowest sample).
RUN_IDLE_S = 15.0
#: Seconds between the stop signal at the CPU budget (``ExecSpec.stop_signal``) and SIGKILL.
STOP_GRACE_S = 2.0
#: A step with ``ExecSpec.idle_s`` whose CPU count grew by less than this share of the
#: ``idle_s`` wall-clock seconds of a window is looked at (:func:`held_by`): asleep by itself,
#: it ends there as ``waited`` instead of at the backstop. A simulation never sleeps (it runs,
#: or waits runnable on a loaded machine: state R, held); a cocotb test polling in
#: ``time.sleep(0.1)`` wakes for ~0.1 % of a core.
IDLE_CPU_SHARE = 0.05
#: Scheduler states of a thread that waits by itself: interruptible sleep (``S``), an idle
#: kernel-style wait (``I``), or exited (``Z``, ``X``).
_OWN_WAIT = frozenset("SIZX")


def wall_backstop(cpu_s: float) -> float:
    """The wall-clock seconds a step with a CPU budget of ``cpu_s`` seconds may take
    (``ExecSpec.timeout_s`` of such a step)."""
    return BACKSTOP_FACTOR * cpu_s + BACKSTOP_SLACK_S


class CpuBudget:
    """The CPU budget of one step (``spec.cpu_s``; ``spec.cpu_split`` for two phases) judged on
    samples of the CPU it used so far (seconds, whole tree)."""

    def __init__(self, spec: ExecSpec) -> None:
        assert spec.cpu_s is not None, "a step with a CPU budget"
        self.cpu_s = spec.cpu_s
        self.marker: Path | None = None
        self.first_s = 0.0
        if spec.cpu_split is not None:
            path, self.first_s = spec.cpu_split
            self.marker = spec.workdir / Path(path).relative_to("/work")
        self.base: float | None = None  # CPU used when the first phase ended (None: in it)
        self.over_count = 0
        self.used = 0.0
        self.idle_s = spec.idle_s
        self.idle_mark: tuple[float, float] | None = None  # (CPU seconds, when) at the window's start

    def limit(self) -> float:
        """The CPU seconds the step may have used by now (the whole step's count)."""
        if self.marker is None:
            return self.cpu_s
        return self.first_s if self.base is None else self.base + self.cpu_s

    def over(self, used: float) -> bool:
        """Records the sample ``used`` (CPU seconds so far); True once the step is past its
        budget in two samples in a row (one walk of a process tree can count a child reaped
        during it twice)."""
        self.used = used
        if self.marker is not None and self.base is None and self.marker.exists():
            self.base = used
        self.over_count = self.over_count + 1 if used > self.limit() else 0
        return self.over_count >= 2

    def idle(self, now: float) -> bool:
        """True when the step has an idle limit (``ExecSpec.idle_s``) and its CPU count (the
        last :meth:`over` sample) grew by less than :data:`IDLE_CPU_SHARE` of the window over
        the last window of ``idle_s`` wall-clock seconds up to ``now`` (monotonic seconds; the
        windows follow each other, so an idle step is seen within two of them). The caller
        then asks :func:`held_by` and, when the machine held the step, :meth:`idle_restart`."""
        if self.idle_s is None:
            return False
        if self.idle_mark is None:
            self.idle_mark = (self.used, now)
            return False
        cpu, since = self.idle_mark
        if now - since < self.idle_s:
            return False
        if self.used - cpu < IDLE_CPU_SHARE * (now - since):
            return True
        self.idle_mark = (self.used, now)
        return False

    def idle_restart(self, now: float) -> None:
        """Start a new idle window at ``now`` (the step was held, not asleep by itself)."""
        self.idle_mark = (self.used, now)

    def phase(self) -> str:
        """Which budget the step is on: ``"first"`` (of a split step) or ``"main"``."""
        return "first" if self.marker is not None and self.base is None else "main"


def held_by(root: int, looks: int = 5, pause_s: float = 0.02) -> str | None:
    """What held the process tree below ``root`` when its wall-clock backstop passed: None when
    every thread of it slept by itself in each of ``looks`` looks ``pause_s`` apart (the
    sample's own waiting), else a description (threads runnable but given no CPU: a loaded
    machine; stopped; in uninterruptible I/O)."""
    seen = ""
    for look in range(looks):
        if look:
            time.sleep(pause_s)
        seen += tree_states(root)
    return describe_held(seen)


def describe_held(states: str) -> str | None:
    """None when ``states`` (scheduler state letters of a step's threads, over some looks) are
    all of threads waiting by themselves, else what held the step, in words."""
    held = set(states) - _OWN_WAIT
    if not held:
        return None
    what = {"R": "runnable but not given a CPU", "D": "in uninterruptible I/O", "T": "stopped", "t": "stopped"}
    return ", ".join(sorted({what.get(s, f"in state {s}") for s in held}))
