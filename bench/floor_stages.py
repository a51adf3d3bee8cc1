#!/usr/bin/env python
"""Where the fast path's own CPU goes per sample (issue 20): the stimulus-case samples of
bench_floor.py scored in this process (``engine=fast``, result cache off, the designs' plans warm
after an untimed pass), each made new per pass, with a CPU timer (``time.thread_time``, the
scoring thread) around the engine's stages and the sandbox's steps. Prints the process CPU per
sample (all threads: the work-dir removal thread too), the sandbox step's cgroup CPU
(``timings.run_cpu``) and a table of each stage's *self* time (minus the timed stages it calls)
in ms per sample, largest first.

    python bench/floor_stages.py                  # 24 samples x 3 passes
    python bench/floor_stages.py --passes 5 --plain   # no timers: the process CPU alone

The timers cost ~2 us a call; ``--plain`` gives the untimed total to compare trees with (run
each checkout with its own ``PYTHONPATH``, alternating: the machine's load moves the numbers).
Every sample must score ``ok`` on the fast path (else the bench stops).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import DEFAULT_CASES, fresh, load_cases, request

#: (module, attribute path, label): where the attribute is looked up is where callers find it.
STAGES = (
    ("reward_service.scoring.engine", "Engine.scored", "engine: the rest of scored"),
    ("reward_service.scoring.engine", "prepare", "prepare"),
    ("reward_service.scoring.engine", "check_stimulus", "integrity: check_stimulus rest (digest, copies)"),
    ("reward_service.integrity.sv", "_Checker.run", "integrity: compilation, diagnostics"),
    ("reward_service.integrity.sv", "_Checker._parse", "integrity: parse"),
    ("reward_service.integrity.sv", "_Checker._host_code", "integrity: host-code scan"),
    ("reward_service.integrity.sv", "_Checker._elaborated", "integrity: walk of the elaboration"),
    ("reward_service.integrity.sv", "_Checker._port_drivers", "integrity: port drivers"),
    ("reward_service.integrity.sv", "_Checker._with_defaults", "integrity: parameter defaults"),
    ("reward_service.integrity.races", "analyse", "integrity: race analysis"),
    ("reward_service.fastcov.routing", "plan", "fast plan"),
    ("reward_service.scoring.run", "simulate", "run.simulate rest (work dir, files, Job)"),
    ("reward_service.scoring.run", "tempfile.mkdtemp", "run: mkdtemp"),
    ("reward_service.scoring.run", "measure", "measure"),
    ("reward_service.scoring.engine", "finish", "finish"),
    ("reward_service.fastcov.backend", "FastSimulator.run_sv", "run_sv rest (sources read back, checks)"),
    ("reward_service.fastcov.backend", "FastSimulator.prepare", "fast prepare (instrumented design written)"),
    ("reward_service.fastcov.backend", "emulate_testbench", "testbench emulation"),
    ("reward_service.fastcov.backend", "compile_and_run", "Icarus step: the rest (mkdirs, ExecSpec, logs)"),
    ("reward_service.fastcov.backend", "_read_vvp", "sim.vvp read (placeholder check)"),
    ("reward_service.fastcov.backend", "_read_flags", "flags read"),
    ("reward_service.sandbox.bwrap", "BwrapSandbox.run", "sandbox: run (check, minimal root, argv)"),
    ("reward_service.sandbox.bwrap", "BwrapSandbox._execute", "sandbox: _execute rest (memfds, watch loop)"),
    ("reward_service.sandbox.bwrap", "select.select", "sandbox: select"),
    ("reward_service.sandbox.bwrap", "_reap", "sandbox: wait4 looks"),
    ("reward_service.sandbox.bwrap", "subprocess.Popen.__init__", "sandbox: Popen"),
    ("reward_service.sandbox.cgroup", "CgroupV1.__init__", "sandbox: cgroup create"),
    ("reward_service.sandbox.cgroup", "CgroupV1.remove", "sandbox: cgroup remove"),
    ("reward_service.sandbox.cgroup", "CgroupV1.cpu_s", "sandbox: cgroup CPU reads"),
    ("reward_service.scoring.workdir", "remove_later", "work dir handed to the remover"),
)

_self: defaultdict[str, float] = defaultdict(float)
_calls: defaultdict[str, int] = defaultdict(int)
_stack: list[float] = []


def _timed(func: Any, label: str) -> Any:
    @functools.wraps(func)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        _stack.append(0.0)
        try:
            return func(*args, **kwargs)
        finally:
            spent = time.thread_time() - start
            inner = _stack.pop()
            _self[label] += spent - inner
            _calls[label] += 1
            if _stack:
                _stack[-1] += spent

    return timed


def install() -> None:
    """Wrap every stage of :data:`STAGES` in a timer (stages missing here are skipped, named)."""
    for module_name, path, label in STAGES:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        try:
            for part in parents:
                owner = getattr(owner, part)
            setattr(owner, name, _timed(getattr(owner, name), label))
        except AttributeError:
            print(f"(no {module_name}.{path} here: not timed)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--plain", action="store_true", help="no timers: the process CPU alone")
    args = ap.parse_args()
    from reward_service.engine import Engine
    from reward_service.scoring import workdir
    from reward_service.settings import Settings

    if not args.plain:
        install()
    engine = Engine(Settings(cache_dir=Path(tempfile.mkdtemp(prefix="floor-stages-")) / "cache", result_cache=False))
    cases = load_cases(args.cases, args.cases.parent / "cvdp" / "cid012.jsonl", None, ["weak", "good", "best"])
    for case in cases:  # warm-up: plans, imports, toolchain probe
        engine.score(request(case, fresh(case)))
    workdir.drain()
    _self.clear()
    _calls.clear()
    requests = [request(case, fresh(case)) for _ in range(args.passes) for case in cases]
    cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
    results = [engine.score(r) for r in requests]
    thread, wall = time.thread_time() - thread0, time.perf_counter() - wall0
    workdir.drain()
    cpu = time.process_time() - cpu0
    for res in results:
        if res.status != "ok" or res.engine != "fast":
            raise SystemExit(f"a sample scored {res.status}/{res.engine}: {res.message[:200]}")
    n = len(results)
    step = sum(r.timings.get("run_cpu", 0.0) for r in results) / n
    print(
        f"{n} samples: process CPU {cpu / n * 1000:.2f} ms a sample (scoring thread {thread / n * 1000:.2f}), "
        f"sandbox step CPU {step:.2f} ms, wall {wall / n * 1000:.1f} ms"
    )
    if not args.plain:
        print("| stage (scoring thread CPU, self time) | ms / sample | calls / sample |\n|---|---|---|")
        for label in sorted(_self, key=lambda k: -_self[k]):
            print(f"| {label} | {_self[label] / n * 1000:.2f} | {_calls[label] / n:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
