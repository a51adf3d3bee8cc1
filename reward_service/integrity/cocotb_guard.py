"""cocotb write guard: a cocotb test may write only the top-level ports of its toplevel.

A cocotb test writes the DUT through cocotb's Python extension, which calls one of libgpi's four
``gpi_set_signal_value_*`` entry points for every write (``.value =``, ``<=``,
``setimmediatevalue``, ``Deposit``/``Force``/``Freeze``/``Release``, the C++ ``Clock``). The
guard (``cocotb_guard.c``, a shared library preloaded into the simulator process of the test
step, cocotb 2.1 and 1.9, Icarus, the fast path and Verilator) stands in for those entry
points: a write to a handle whose simulator full name is not ``<toplevel>.<port>`` never
reaches the simulator; the guard writes a record (:data:`RECORD` in the run dir, and the same
line on the step's stderr) and ends the simulator at once. ``rs_cocotb_guard.py`` (staged
beside the driver) adds the test's ``file:line`` of the write to the record.

This module is the engine's side: whether a request's policy refuses DUT writes
(:func:`refuses`), the toplevel's port names (:func:`top_ports`), the compiled guard
(:func:`library`), and the violations a run's records name (:func:`violations`).
docs/integrity-cocotb.md says what is refused, how, and what is knowingly not covered.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import filelock

from reward_service import hdl
from reward_service.models import IntegrityViolation, StimulusPolicy
from reward_service.sandbox import SandboxError

SOURCE = Path(__file__).with_name("cocotb_guard.c")
#: The in-simulator half (test locations of writes), staged beside the cocotb driver.
LOCATOR = Path(__file__).with_name("rs_cocotb_guard.py")
#: The guard library's file name in the staged tools dir.
LIBRARY = "librs_cocotb_guard.so"
#: The guard's record file in the run dir (JSON lines after :data:`MARKER`).
RECORD = "rs_guard.jsonl"
#: Prefix of every record line, in the record file and on stderr.
MARKER = "RS_COCOTB_GUARD "
#: The simulator's exit status after a refused write (cocotb_guard.c GUARD_EXIT).
EXIT = 86
#: The simulator's exit status when it could not write a scorer file (cocotb_guard.c
#: CANNOT_WRITE_EXIT): the test used up the descriptors or the disk.
CANNOT_WRITE_EXIT = 70
KIND = "cocotb_write"
_LINE = re.compile(r"^" + re.escape(MARKER) + r"(\{.*\})\s*$", re.M)
_ACTIONS = {
    "deposit": "a write (deposit)",
    "deposit_no_delay": "an immediate write",
    "force": "a Force (or Freeze)",
    "release": "a Release",
}


def refuses(policy: StimulusPolicy | None) -> bool:
    """Whether a cocotb stimulus under ``policy`` has its DUT writes refused: ``refuse`` and
    unset both refuse (the cocotb toplevel is the DUT, so its scope is always known); only
    ``allow`` lets writes into the DUT through."""
    return policy is None or policy.dut_writes != "allow"


def top_ports(files: Mapping[str, str], toplevel: str) -> list[str]:
    """The names of ``toplevel``'s ports a test drives (inputs and inouts: the guard passes
    its writes on), in declaration order (:func:`elaborated_ports`). Raises ValueError as it does."""
    return [name for name, direction in _port_table(files, toplevel) if direction in ("in", "inout")]


def top_outputs(files: Mapping[str, str], toplevel: str) -> list[str]:
    """The names of ``toplevel``'s output ports: DUT state, which a test does not drive. The
    guard drops writes to them (not refused: engineers' tests initialise outputs, 2 of the
    corpus's 112 write `sipo_top.done`, `UART_RTL.tx`; passed on, a deposit on an ``output
    reg`` held the test's value until the DUT's next assignment, and its toggles paid:
    tests/test_redteam_cocotb_outputs.py)."""
    return [name for name, direction in _port_table(files, toplevel) if direction == "out"]


def _port_table(files: Mapping[str, str], toplevel: str) -> tuple[tuple[str, str], ...]:
    """:func:`elaborated_ports`, remembered per design text and toplevel (rollouts of one problem
    share the design: 0.2 ms for the Attenuator, ~19 ms for an 83 kB corpus design)."""
    h = hashlib.sha256(toplevel.encode())
    for name in sorted(files):
        h.update(f"\0{name}\0{len(files[name])}\0".encode())
        h.update(files[name].encode())
    key = h.hexdigest()
    if key not in _PORTS:
        if len(_PORTS) >= 256:
            _PORTS.clear()
        _PORTS[key] = tuple(elaborated_ports(files, toplevel))  # ValueError: not remembered
    return _PORTS[key]


_PORTS: dict[str, tuple[tuple[str, str], ...]] = {}


def _direction(port: object) -> str:
    """A pyslang port symbol's direction: "in", "out", "inout" or "ref"."""
    from pyslang import ast

    direction = getattr(port, "direction", None)
    if direction == ast.ArgumentDirection.In:
        return "in"
    if direction == ast.ArgumentDirection.Out:
        return "out"
    return "inout" if direction == ast.ArgumentDirection.InOut else "ref"


def elaborated_ports(files: Mapping[str, str], toplevel: str) -> list[tuple[str, str]]:
    """(name, direction: :func:`_direction`) of each port of module ``toplevel`` among the
    design ``files`` (name -> text; headers are made available to `` `include``), in
    declaration order, found by pyslang's elaboration (ANSI and non-ANSI headers alike).
    Raises ValueError when no module of that name is found (pyslang could not make sense of
    the design)."""
    from pyslang import Bag, SourceManager, ast, parsing, syntax

    hdl_files = {n: t for n, t in files.items() if n.lower().endswith(hdl.HDL_SUFFIXES)}
    dirs = hdl.search_dirs(list(hdl_files))
    included = hdl.included_files(hdl_files, dirs)
    try:
        sm = SourceManager()
        buffers = {name: sm.assignText(name, text) for name, text in hdl_files.items()}  # includes read these
        preprocessor = parsing.PreprocessorOptions()
        preprocessor.additionalIncludePaths = [d for d in dirs if d != "."]
        options = ast.CompilationOptions()
        options.topModules = {toplevel}  # as the simulator's -s: the toplevel may be instantiated elsewhere too
        bag = Bag([options, preprocessor])
        compilation = ast.Compilation(bag)
        for name in hdl.compilation_units(list(hdl_files), included, included):
            compilation.addSyntaxTree(syntax.SyntaxTree.fromBuffer(buffers[name], sm, bag))
        for inst in compilation.getRoot().topInstances:
            if inst.name == toplevel:
                return [(p.name, _direction(p)) for p in inst.body.portList if p.name]
    except (RuntimeError, ValueError) as exc:  # pyslang's own failures
        raise ValueError(f"pyslang could not read the design: {exc}") from exc
    raise ValueError(f"no module {toplevel!r} in the design")


def library(cache_dir: Path) -> Path:
    """The compiled guard for this machine: ``<cache_dir>/integrity/<hash>/librs_cocotb_guard.so``,
    built once per source text with the host's C compiler (``cc``), under a file lock. Raises
    :class:`~reward_service.sandbox.SandboxError` when it cannot be built (ours: the sample is
    never run unguarded)."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:20]
    target = cache_dir / "integrity" / digest / LIBRARY
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(target.parent / "build.lock"), timeout=120):
        if target.is_file():
            return target
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise SandboxError("the cocotb write guard cannot be built: no C compiler (cc) on PATH")
        tmp = target.with_suffix(".tmp.so")
        proc = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(tmp), "-x", "c", "-", "-ldl"],
            input=source,
            capture_output=True,
            timeout=120,
        )
        if proc.returncode != 0 or not tmp.is_file():
            raise SandboxError(f"the cocotb write guard did not compile: {proc.stderr.decode(errors='replace')[-500:]}")
        tmp.replace(target)
    return target


def records(*texts: str) -> list[dict]:
    """The guard's records (parsed JSON objects) in ``texts`` (the record file, the step's
    output), in order, without repeats."""
    seen: dict[str, dict] = {}
    for text in texts:
        for raw in _LINE.findall(text or ""):
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                seen.setdefault(json.dumps(data, sort_keys=True), data)
    return list(seen.values())


def armed(found: list[dict]) -> bool:
    """Whether the guard started in the run whose records are ``found``."""
    return any(r.get("event") == "armed" for r in found)


def cannot_write(found: list[dict]) -> str | None:
    """The guard's ``rs-guard:`` line when the simulator could not write its coverage file (it
    ended with :data:`CANNOT_WRITE_EXIT`: the test had used up the descriptors or filled the
    disk), from its record in ``found`` (the record file's records: never the step's output,
    which the test writes); None otherwise."""
    for r in found:
        if r.get("event") == "cannot_write":
            return f"rs-guard: the simulator could not write its coverage file {r.get('file')}: {r.get('error')}"
    return None


def dropped_note(found: list[dict]) -> str | None:
    """A note for the result when the guard dropped writes: of zero into DUT internals (a net,
    or anything at time 0: cocotb 1.x harnesses' ``GPI_NET`` init loop; they never took
    effect), or into the toplevel's output ports (DUT state: :func:`top_outputs`)."""
    notes = []
    for event, what, why in (
        ("dropped", "write(s) of 0 into DUT internals", "a cocotb 1.x GPI_NET init loop?"),
        ("dropped_output", "write(s) into the DUT's output ports", "outputs are the DUT's to drive"),
    ):
        targets = list(dict.fromkeys(str(r.get("target")) for r in found if r.get("event") == event))
        if targets:
            shown = ", ".join(targets[:3]) + (" ..." if len(targets) > 3 else "")
            notes.append(f"{len(targets)} {what} were ignored ({shown}; {why})")
    if not notes:
        return None
    return "; ".join(notes) + ": a cocotb test drives only the DUT's input ports"


def violations(found: list[dict], toplevel: str) -> list[IntegrityViolation]:
    """The refused writes in the guard's records ``found`` (:func:`records`), one violation per
    target, with the test's ``file:line`` when the guard's locator gave one."""
    where: dict[str, str] = {}
    for r in found:
        if r.get("event") == "where" and isinstance(r.get("where"), str) and r["where"]:
            where.setdefault(str(r.get("target")), r["where"])
    out: dict[str, IntegrityViolation] = {}
    for r in found:
        if r.get("event") != "refused":
            continue
        target = str(r.get("target") or "?")
        if target in out:
            continue
        file, line = None, None
        loc = where.get(target, "")
        m = re.fullmatch(r"(.+):(\d+)", loc)
        if m:
            file, line = m.group(1), int(m.group(2))
        action = _ACTIONS.get(str(r.get("action")), "a write")
        out[target] = IntegrityViolation(
            kind=KIND,
            file=file,
            line=line,
            target=target,
            message=(
                f"{action} to {target}, which is not a top-level port of the toplevel {toplevel}"
                f"{f' ({loc})' if loc else ''}: a cocotb test may drive only the DUT's ports"
            ),
        )
    return list(out.values())
