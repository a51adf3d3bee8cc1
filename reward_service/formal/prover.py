"""Prove coverage points unreachable: the formal model (:mod:`.model`) through yosys and its
bundled ABC (``pdr``), in the sandbox, one run per design (docs/formal.md).

Flow: ``read_verilog -formal -sv``; ``prep -flatten``; a JSON netlist is checked (one clock
edge for all flip-flops, no latches other than the model's flags, no memories, no
set/reset flip-flops, no signal with several drivers: anything else makes every point undecided); ``async2sync; dffunmap``;
undefined values become free inputs (``setundef -anyseq``: an ``x`` may be any value) and
every register starts at 0 (``setundef -init -zero``; Verilator's zero initial state); the
design's own outputs are dropped and the property signals exposed; ``write_aiger -zinit``.
ABC runs ``pdr -a`` (IC3, unbounded) over all properties with a time limit per design and
per property. ABC names the disproved outputs, not the proved ones, so the others count as
proved only when its summary leaves none undecided. When it does (its time limit, or the
per-property one), each undecided output is proved on its own sequential cone (``cone -s``),
in groups of consecutive outputs and then one by one, under the per-property limit; outputs
still undecided leave their points in the denominator (status ``partial``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filelock import FileLock

from reward_service.fastcov.expr import model_variant
from reward_service.fastcov.unit import Unsupported
from reward_service.formal import aiger, cones, divmap, pulses, ticks_proof
from reward_service.formal.increments import lower_increments
from reward_service.formal.loops import cut_loops
from reward_service.formal.model import FLAG_PREFIX, TOGGLE_PREFIX, FormalModel, PointKey, build_model
from reward_service.revisions import FASTCOV_VERSION, PROVER_REVISION  # bumped there, with the others
from reward_service.sandbox import ExecSpec, Sandbox, get_sandbox
from reward_service.sandbox.toolchain import require_yosys

log = logging.getLogger(__name__)


#: Cells the model supports (after ``prep``); any other cell type makes the design undecided.
_FF_CELLS = {"$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce"}
_LATCH_CELLS = {"$dlatch"}
_UNSUPPORTED = {
    "$adlatch",
    "$dlatchsr",
    "$sr",
    "$dffsr",
    "$dffsre",
    "$aldff",
    "$aldffe",
    "$mem",
    "$mem_v2",
    "$memrd",
    "$memrd_v2",
    "$memwr",
    "$memwr_v2",
    "$meminit",
    "$meminit_v2",
    "$fsm",
    "$print",
    "$check",
    "$assert",
    "$assume",
    "$cover",
    "$live",
    "$fair",
    "$ff",
    "$anyinit",
}


#: How a point was proved unreachable, as ``ProofResult.kinds`` names it: ``constant`` (a line,
#: branch or expression point whose flag synthesis reduces to a constant 0: its condition is
#: false for every input and state), ``invariant`` (ABC's ``pdr`` found an inductive invariant:
#: no state reachable from the zero initial state gets there), ``stuck at 0``/``stuck at 1``
#: (a toggle bit that holds that value in every reachable state).
PROOF_KINDS = ("constant", "invariant", "stuck at 0", "stuck at 1")


@dataclass
class ProofResult:
    """The verdict on one design. ``unreachable``: the points (file, line, metric, detail)
    proved unreachable (every enumerated point with that key); ``undecided``: points without a
    property (not modelled) or, when the run did not finish, every point; ``disproved``: points
    whose properties ABC refuted (reachable); ``points``: all points the fast path enumerates; ``status``:
    ``proved`` (every property decided), ``partial`` (some properties undecided after the
    one-by-one runs: ``unreachable`` holds the proved points only, the others count as
    undecided), ``unsupported`` (not modelled: all undecided), ``timeout`` (nothing decided)
    or ``error`` (all undecided); ``seconds``: wall time of the run; ``kinds``: per key of
    ``unreachable`` (same order), how it was proved (:data:`PROOF_KINDS`); ``model``: the
    model the verdict is on, ``edges`` (one step per clock edge) or ``ticks`` (every input
    free at every step, :mod:`.ticks_proof`: a design the one-edge model refuses)."""

    status: str
    points: int = 0
    unreachable: list[PointKey] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    undecided: int = 0
    disproved: int = 0
    seconds: float = 0.0
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    #: metric -> [points, points proved unreachable] (a finished run only)
    per_metric: dict[str, list[int]] = field(default_factory=dict)
    model: str = "edges"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ProofResult:
        data = dict(data)
        data["unreachable"] = [tuple(k) for k in data.get("unreachable", [])]
        return cls(**data)


def design_key(design: dict[str, str], top: str | None = None, limits: tuple[float, int] = (30.0, 2000)) -> str:
    """The cache key of a design's verdict: its HDL files, top, the prover revision, the fast
    path's (the points proved are named by its instrumentation) and the time limits (a timeout
    is a verdict too). The yosys/ABC build is Debian bookworm's on the host and in the images
    alike; a change of it needs a PROVER_REVISION bump."""
    blob = json.dumps(
        {
            "files": design,
            "top": top,
            "rev": PROVER_REVISION,
            "fastcov": FASTCOV_VERSION,
            "model": model_variant(),
            "limits": list(limits),
        },
        sort_keys=True,
    ).encode()
    return hashlib.sha256(blob).hexdigest()


def prove(
    design: dict[str, str],
    top: str | None = None,
    sandbox: Sandbox | None = None,
    timeout_s: float = 30.0,
    per_property_ms: int = 2000,
    cache_dir: Path | None = None,
) -> ProofResult:
    """Prove the coverage points of the DUT files ``design`` (name -> text) unreachable where
    they are. ``top``: the DUT's top module (default: the design's single top). Runs yosys and
    ABC in ``sandbox`` (default: bwrap) with ``timeout_s`` for each step (yosys, ABC over all
    properties, and the one-by-one runs of the properties it left undecided, if any) and
    ``per_property_ms`` per property. ``cache_dir``: a directory of verdicts per design key (the
    verdict does not depend on the stimulus). Never raises for a design it cannot handle: the
    result then says ``unsupported``/``error`` with every point undecided."""
    key = design_key(design, top, (timeout_s, per_property_ms))
    if cache_dir is None:
        return _prove(design, top, sandbox, timeout_s, per_property_ms)
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached = cache_dir / f"{key}.json"
    # One proof per design: the samples of one problem arrive together (a GRPO group), and
    # each would otherwise run yosys itself. They wait for the first one's verdict instead.
    with FileLock(str(cached.with_suffix(".lock"))):
        if cached.exists():
            return ProofResult.from_json(json.loads(cached.read_text()))
        result = _prove(design, top, sandbox, timeout_s, per_property_ms)
        # A verdict is a property of the design and the limits (both in the key), a timeout
        # included: re-running it would cost every later sample of the problem up to
        # 3 x timeout_s.
        if kept(result):
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(result.to_json()))
            tmp.replace(cached)
    return result


def kept(result: ProofResult) -> bool:
    """Whether ``result`` is the design's own verdict under the prover's limits, cached per
    design (and a score judged with it may be cached too). Not: a tool that did not run, ABC
    output that could not be read (status ``error``), and a yosys error or crash, which may be
    the environment's (an empty /proc once made yosys fail everywhere in the compose worker).
    A step over its time or memory limit is the design's: re-running it costs every sample the
    limit again."""
    return result.status != "error" and not (result.status == "unsupported" and result.reason.startswith("yosys:"))


def _prove(
    design: dict[str, str], top: str | None, sandbox: Sandbox | None, timeout_s: float, per_property_ms: int
) -> ProofResult:
    start = time.monotonic()
    try:
        model = build_model(design, top)
    except Unsupported as exc:
        return ProofResult("unsupported", reason=str(exc))
    except Exception as exc:  # a parser failure leaves the points undecided
        return ProofResult("unsupported", reason=f"model: {exc}")
    sandbox = sandbox or get_sandbox("bwrap")
    result = _run_any(model, sandbox, timeout_s, per_property_ms)
    if not kept(result) and result.status == "unsupported" and _has_expr(model):
        # yosys 0.23 does not read every term text the fast path's checks use: the design's
        # other points are still proved, its expression points stay undecided. Only when the
        # error is in the checks: that verdict is cached, and an error of the environment
        # (not kept, so the next sample proves again) must not cost the expression points.
        why = result.reason
        try:
            plain = build_model(design, top, expr=False)
        except Unsupported:
            return result
        if not in_checks(why, model, plain):
            result.seconds = round(time.monotonic() - start, 3)
            return result
        model = plain
        result = _run_any(model, sandbox, timeout_s, per_property_ms)
        result.notes.insert(0, f"expression checks left out ({why})")
    result.seconds = round(time.monotonic() - start, 3)
    return result


#: The one-edge model's flip-flops (:mod:`.pulses`): at a step with the reset active the
#: register takes its reset value, and its readers see it or the value from before the reset
#: (a free choice); a step may be no clock edge (``__rs_hold``), in which the flip-flops of a
#: reset pulsed with zero width may still run their process (``__rs_pulse<i>``).
ADFF_MAP = pulses.MAP


DIV_MAP = "rs_div_map.v"  # divmap.DIV_MAP_TEXT, written into the work dir


def _run_any(model: FormalModel, sandbox: Sandbox, timeout_s: float, per_property_ms: int) -> ProofResult:
    """:func:`_run` on the one-edge model (delayed continuous assignments' targets free, other
    delays refused: :func:`.ticks_proof.undelayed`); for a design whose netlist that model refuses (several
    clock edges, a latch, a memory, ...), the proof on the every-input-free model
    (:func:`.ticks_proof.prove_ticks`), which keeps the one-edge verdict when it proves nothing."""
    model, why = ticks_proof.undelayed(model)
    if why:
        n = len(model.points)
        return ProofResult("unsupported", points=n, undecided=n, reason=why, notes=model.notes[:50])
    result = _run(model, sandbox, timeout_s, per_property_ms)
    if result.status == "unsupported" and ticks_proof.applies(result.reason):
        result = ticks_proof.prove_ticks(model, sandbox, timeout_s, per_property_ms, result)
    return result


def _has_expr(model: FormalModel) -> bool:
    return any(key[2] == "expr" and provers for key, provers in model.points)


def in_checks(error: str, model: FormalModel, plain: FormalModel) -> bool:
    """Whether the yosys ``error`` of ``model`` points into its expression checks: it names an
    expression point's flag, or a line (``file:line``) that differs from ``plain``, the same
    design's model without the checks (the checks are inserted without newlines, so both
    models keep the design's line numbers)."""
    flags = {model.properties[i].signal for key, provers in model.points if key[2] == "expr" for i in provers}
    if any(name in flags for name in _FLAG_WORD.findall(error)):
        return True
    for m in _FILE_LINE.finditer(error):
        name, line = m.group(1), int(m.group(2))
        if name not in model.files or line < 1:
            continue
        ours, theirs = model.files[name].splitlines(), plain.files.get(name, "").splitlines()
        if line <= len(ours) and (line > len(theirs) or ours[line - 1] != theirs[line - 1]):
            return True
    return False


_FLAG_WORD = re.compile(re.escape(FLAG_PREFIX) + r"\w+")
_FILE_LINE = re.compile(r"([\w./+-]+\.s?v[h]?):(\d+)")


def _yosys_script(
    model: FormalModel, ticks: bool = False, netlist: str | None = None, final: bool | None = None
) -> str:
    """The yosys script of the model's AIG. ``ticks``: the witness search's lowering of a
    design the proof does not model (several clock edges, latches, memories, async loads):
    memories mapped to flip-flops, every flip-flop and latch made logic of a global step by
    ``clk2fflogic`` (a clock is an input; a flip-flop takes the value its input had at the
    step before the one its clock edge is seen in). ``netlist``: start from this JSON netlist
    (the one ``pre.json`` holds, its loops cut: :mod:`.loops`) instead of the model's files.
    ``final``: write ``final.json`` (default: not with ``ticks``)."""
    names = " ".join(sorted(model.files))
    if not ticks and netlist is None:
        # the one-edge model's first step: its flip-flops get the hold and pulse choices in
        # the RTLIL text (pulses.rewrite) before the second step (_edges_script) maps them
        return "\n".join(
            [
                f"read_verilog -formal -sv {names}",
                f"hierarchy -check -top {model.top}",
                f"prep -top {model.top} -flatten",
                "write_json pre.json",
                divmap.techmap_command(DIV_MAP),
                "dffunmap",
                "write_json edges.json",
                "write_rtlil edges.il",
                "",
            ]
        )
    lowering = (
        [divmap.techmap_command(DIV_MAP), "memory_map", "opt_clean", "clk2fflogic", "dffunmap"]
        if ticks
        else [f"techmap -map {ADFF_MAP} t:rs_edges_dff t:rs_edges_adff", "async2sync", "dffunmap"]
    )
    front = (
        ([f"read_json {netlist}"] if netlist.endswith(".json") else [f"read_rtlil {netlist}"])
        + [f"hierarchy -top {model.top}"]
        if netlist
        else [
            f"read_verilog -formal -sv {names}",
            f"hierarchy -check -top {model.top}",
            f"prep -top {model.top} -flatten",
            "write_json pre.json",
        ]
    )
    return "\n".join(
        [
            *front,
            *lowering,
            "setundef -undriven -anyseq",
            "setundef -anyseq",
            "setundef -init -zero",
            "delete -output o:*",
            f"expose w:*{FLAG_PREFIX}* w:*{TOGGLE_PREFIX}*",
            "techmap",
            "aigmap",
            # the witness model: techmap's own undefined bits (a shift or a division out of
            # range in a large design) become free choices too, as setundef made the others
            *(["setundef -anyseq"] if ticks else []),
            "opt_clean",
            # the proof reads the final netlist's constant bits; the witness search does not
            # (and a large design's netlist is over the sandbox's file size limit)
            *(["write_json final.json"] if (not ticks if final is None else final) else []),
            "write_aiger -zinit -map model.map model.aig",
            "",
        ]
    )


def _run(
    model: FormalModel,
    sandbox: Sandbox,
    timeout_s: float,
    per_property_ms: int,
    at_once: bool = True,
    lower: Callable[[FormalModel, Sandbox, Path, float], tuple[str, str] | None] | None = None,
) -> ProofResult:
    """Prove ``model``'s properties. ``at_once=False`` skips the run over all outputs and goes
    straight to the one-by-one runs (tests compare the two routes' verdicts). ``lower``: the
    yosys step that writes the AIG (default :func:`synthesize`, the one-edge model)."""
    base = ProofResult("error", points=len(model.points), undecided=len(model.points), notes=model.notes[:50])
    if not model.properties:
        base.status, base.reason = "unsupported", "no point has a property"
        return base
    work = Path(tempfile.mkdtemp(prefix="rs_formal_"))
    try:
        failed = (lower or synthesize)(model, sandbox, work, timeout_s)
        if failed is not None:
            base.status, base.reason = failed
            return base
        outputs = read_map(work / "model.map")
        count = _aig_outputs(work / "model.aig")
        if outputs and max(outputs) >= count:
            base.reason = f"abc: the map names output {max(outputs)} of {count}"
            return base
        verdicts: list[bool | None] = [None] * count
        if at_once:
            (work / "abc.cmd").write_text(
                f"read_aiger model.aig; fold; pdr -a -T {int(timeout_s)} -H {per_property_ms}\n"
            )
            res = sandbox.run(
                ExecSpec(
                    argv=["yosys-abc", "-f", "abc.cmd"],
                    workdir=work,
                    timeout_s=timeout_s + 10,
                    memory_mb=2048,
                    output_kb=4096,
                )
            )
            if res.limit_hit and not res.timed_out:
                base.status, base.reason = "unsupported", f"abc over its limit ({res.limit_hit})"
                return base
            if res.exit_code != 0 and not res.timed_out:
                base.reason = "abc: " + res.output[-300:]
                return base
            verdicts, why = _all_outputs(res.output, count)
            if why:
                base.reason = why
                return base
        route = ""
        if None in verdicts:
            # The run over all outputs did not finish (its time limit, or ABC's own per-output
            # limit left some undecided). Each remaining output alone: its cone is a fraction of
            # the design, which is what makes most of them quick.
            before = verdicts.count(None)
            _per_output(work, sandbox, verdicts, timeout_s, per_property_ms)
            left = verdicts.count(None)
            route = (
                f"all outputs at once: {before} of {count} undecided; " if at_once else ""
            ) + f"one by one: {before - left} decided, {left} undecided"
            if left == before:
                base.status, base.reason = "timeout", route
                return base
        final = json.loads(_read(work / "final.json") or "{}").get("modules", {}).get(model.top, {})
        pre = json.loads(_read(work / "pre.json") or "{}").get("modules", {}).get(model.top, {})
        result = _verdicts(model, outputs, verdicts, base, final.get("netnames", {}), undriven_bits(pre, model))
        result.reason = route
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def synthesize(
    model: FormalModel,
    sandbox: Sandbox,
    work: Path,
    timeout_s: float,
    ticks: bool = False,
    final: bool | None = None,
) -> tuple[str, str] | None:
    """Write ``model``'s files into ``work`` and run the yosys step there: ``model.aig`` (the
    properties are its outputs), ``model.map`` (their names), ``pre.json`` (the netlist after
    ``prep``) and ``final.json``. Returns None when the AIG is there, else (status, reason)
    of a :class:`ProofResult` that proves nothing (``unsupported``, ``timeout``, ``error``).
    ``ticks``: the witness search's lowering (:func:`_yosys_script`), whose netlist is not
    checked against the proof's semantics (never used for a proof), and which writes no
    ``final.json`` unless ``final`` (a proof's constant bits are read from it)."""
    for name, text in model.files.items():
        # relative paths below the work dir ("rtl/x.sv", as cocotb designs come) whose
        # names are words of a yosys script (no blank, quote, '#' or ';')
        if not all(_NAME_PART.fullmatch(part) for part in name.split("/")):
            return "unsupported", f"file name {name!r}"
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(lower_increments(text))  # yosys 0.23 reads no `++i`
    (work / DIV_MAP).write_text(divmap.DIV_MAP_TEXT)
    (work / "model.ys").write_text(_yosys_script(model, ticks, final=final))
    start = time.monotonic()
    res = _yosys(sandbox, work, "model.ys", timeout_s)
    for _ in range(4):
        # yosys 0.23's proc refuses an asynchronous control that loads a non-constant value
        # (`always @(posedge clk or negedge rst_n or negedge cs_n) ... else if (!cs_n) q <= d;`,
        # an async reset of a memory word): the witness model makes that control synchronous
        # (tested at the clock's edge only) and reads the design again; the replay judges
        # the states this misses or adds (never used for a proof)
        found = ticks and res.exit_code != 0 and _ASYNC_LOAD.search(_read(work / "yosys.log") + res.output)
        if not found:
            break
        changed = False
        for name in model.files:
            text = (work / name).read_text()
            synchronous = _without_edge(text, found.group(1))
            if synchronous != text:
                (work / name).write_text(synchronous)
                changed = True
        if not changed:
            break
        res = _yosys(sandbox, work, "model.ys", max(1.0, timeout_s - (time.monotonic() - start)))
    pre = work / "pre.json"
    if ticks and pre.exists() and res.exit_code != 0 and not res.timed_out and not res.limit_hit:
        # write_aiger crashes on a combinational loop (a process that reads a variable
        # before it writes it, a latch fed by itself): the witness model cuts each loop at
        # the previous step's value and lowers the netlist again (never used for a proof)
        netlist = json.loads(pre.read_text())
        if model.top in netlist.get("modules", {}) and cut_loops(netlist, model.top):
            (work / "cut.json").write_text(json.dumps(netlist))
            (work / "model.aig").unlink(missing_ok=True)
            (work / "cut.ys").write_text(_yosys_script(model, ticks, netlist="cut.json", final=final))
            res = _yosys(sandbox, work, "cut.ys", max(1.0, timeout_s - (time.monotonic() - start)))
    if not ticks and res.exit_code == 0 and not res.timed_out and not res.limit_hit and (work / "edges.il").exists():
        if _check_netlist(json.loads(pre.read_text()), model.top) is None:
            # the one-edge model's second step: the flip-flops with their hold and pulse choices
            try:
                pulses.rewrite(work, model.top)
            except ValueError as exc:
                return "error", f"one-edge model: {exc}"
            (work / "edges.ys").write_text(_yosys_script(model, netlist="edges_cut.il", final=final))
            res = _yosys(sandbox, work, "edges.ys", max(1.0, timeout_s - (time.monotonic() - start)))
    if res.timed_out:
        return "timeout", f"yosys: over {timeout_s:g} s"
    if pre.exists() and not ticks:
        why = _check_netlist(json.loads(pre.read_text()), model.top)
        if why:
            return "unsupported", why
    if res.exit_code in (126, 127):
        return "error", f"yosys did not run (exit {res.exit_code}): {res.output[-200:]}"
    if res.limit_hit:  # memory (2048 MB), processes or output: the design's size, as a timeout is
        return "unsupported", f"yosys over its limit ({res.limit_hit})"
    if res.exit_code != 0 or not (work / "model.aig").exists():
        code = res.exit_code or 0
        error = _first_error(res.output + _read(work / "yosys.log"))
        if code < 0 or (code > 128 and "ERROR" not in error):  # a signal (as the sandbox's shell reports it)
            # 11: write_aiger on a combinational loop; 25: a file over the sandbox's size limit
            error = f"crashed (signal {-code if code < 0 else code - 128})"
        return "unsupported", "yosys: " + error
    return None


_ASYNC_LOAD = re.compile(r"Async reset \\?([A-Za-z_][\w$]*) yields non-constant value")
_EVENT_LIST = re.compile(r"@\s*\(([^()]*)\)")


def _without_edge(text: str, signal: str) -> str:
    """``text`` with the edge of ``signal`` taken out of every event list that names another
    edge too (``@(posedge clk or negedge cs_n)`` -> ``@(posedge clk)``)."""
    edge = rf"(?:posedge|negedge)\s+{re.escape(signal)}\b"

    def drop(m: re.Match) -> str:
        inner = m.group(1)
        if len(re.findall(r"\b(?:posedge|negedge)\b", inner)) < 2 or not re.search(edge, inner):
            return m.group(0)
        inner = re.sub(rf"\s*(?:\bor\b|,)\s*{edge}", "", inner)
        inner = re.sub(rf"{edge}\s*(?:\bor\b|,)\s*", "", inner)
        return f"@({inner})"

    return _EVENT_LIST.sub(drop, text)


def _yosys(sandbox: Sandbox, work: Path, script: str, timeout_s: float):
    """Run the yosys ``script`` in ``work`` (log in ``yosys.log``). Raises
    :class:`~reward_service.sandbox.toolchain.ToolMissing` when the sandbox has no yosys."""
    return sandbox.run(
        ExecSpec(
            argv=[require_yosys(sandbox.toolchain()), "-q", "-l", "yosys.log", "-s", script],
            workdir=work,
            timeout_s=timeout_s,
            memory_mb=2048,
            output_kb=64,
        )
    )


def _aig_outputs(path: Path) -> int:
    """The number of outputs of a binary AIGER file (its header ``aig M I L O A``)."""
    with open(path, "rb") as fh:
        header = fh.readline().split()
    return int(header[4])


def _all_outputs(text: str, count: int) -> tuple[list[bool | None], str]:
    """Per output of ``pdr -a`` over all ``count`` outputs: True proved (the bit is never 1),
    False disproved, None undecided; and why the output cannot be read ("" when it can). A
    run cut short by its time limit still names the outputs it disproved."""
    failed = {int(m.group(1)) for m in _ASSERTED.finditer(text)}
    if failed and max(failed) >= count:
        return [], f"abc: output {max(failed)} of {count} asserted"
    verdicts: list[bool | None] = [False if i in failed else None for i in range(count)]
    summary = _SUMMARY.search(text)
    if summary is None:
        return verdicts, ""
    total, proved, disproved, undecided = map(int, summary.groups())
    if total != count or len(failed) != disproved or proved + disproved + undecided != total:
        return [], f"abc: {total} of {count} outputs, {disproved} disproved, {len(failed)} named"
    if not undecided:  # ABC names the disproved outputs only: the others are the proved ones
        verdicts = [v is None for v in verdicts]
    return verdicts, ""


#: Outputs per ABC ``pdr -a`` call in the first one-by-one pass. ABC does not name the proved
#: outputs of a group it leaves partly undecided, so such a group's undecided outputs are
#: run again one by one, when its summary says some of them were proved.
_GROUP = 16


def _per_output(
    work: Path, sandbox: Sandbox, verdicts: list[bool | None], budget_s: float, per_property_ms: int
) -> None:
    """Decide the undecided outputs (None in ``verdicts``, filled in place) on their own
    sequential cones (``cone -s``): groups of up to :data:`_GROUP` consecutive undecided
    outputs, then one by one the outputs of the groups that proved some but left some
    undecided; ``per_property_ms`` per output, ``budget_s`` for all of it. Outputs still
    undecided stay None."""
    deadline = time.monotonic() + budget_s
    _small_cones_first(work, sandbox, verdicts, budget_s / 3, per_property_ms)
    runs = _undecided_runs(verdicts, _GROUP)
    for size in (_GROUP, 1):
        left = deadline - time.monotonic()
        if not runs or left < 1:
            return
        limit = max(1, -(-size * per_property_ms // 1000))  # seconds per group, rounded up
        # the model is read once (backup); each group works on a copy (restore)
        lines = ["read_aiger model.aig; backup"] + [
            f"restore; cone -s -O {start} -R {n}; scleanup; fold; pdr -a -T {limit} -H {per_property_ms}; "
            f"echo {_MARK} {start} {n}"
            for start, n in runs
        ]
        (work / "cones.cmd").write_text("\n".join(lines) + "\n")
        res = sandbox.run(
            ExecSpec(
                argv=["yosys-abc", "-f", "cones.cmd"], workdir=work, timeout_s=left, memory_mb=2048, output_kb=16384
            )
        )
        retry = _read_groups(res.output, verdicts)
        runs = [(i, 1) for i in retry if verdicts[i] is None]


#: Latches a sequential cone may have for the small-cones-first pass, and its outputs at most.
_SMALL_CONE, _SMALL_MAX = 16, 256


def _small_cones_first(
    work: Path, sandbox: Sandbox, verdicts: list[bool | None], budget_s: float, per_property_ms: int
) -> None:
    """Each undecided output whose sequential cone has at most :data:`_SMALL_CONE` latches,
    alone (smallest first, 1 s each, ``budget_s`` for all): the same proof as the one-by-one
    runs, before the groups, where one hard output of a group can leave easy ones undecided."""
    try:
        aig = aiger.read_aig((work / "model.aig").read_bytes())
    except (OSError, ValueError):
        return
    small = cones.small_cones(aig, [i for i, v in enumerate(verdicts) if v is None], _SMALL_CONE)[:_SMALL_MAX]
    if not small or budget_s < 1:
        return
    lines = ["read_aiger model.aig; backup"] + [
        f"restore; cone -s -O {o} -R 1; scleanup; fold; pdr -a -T 1 -H {per_property_ms}; echo {_MARK} {o} 1"
        for o in small
    ]
    (work / "cones.cmd").write_text("\n".join(lines) + "\n")
    res = sandbox.run(
        ExecSpec(
            argv=["yosys-abc", "-f", "cones.cmd"], workdir=work, timeout_s=budget_s, memory_mb=2048, output_kb=16384
        )
    )
    _read_groups(res.output, verdicts)


def _undecided_runs(verdicts: list[bool | None], size: int) -> list[tuple[int, int]]:
    """(first output, count) of the runs of consecutive undecided outputs, at most ``size`` each."""
    runs: list[tuple[int, int]] = []
    for i, v in enumerate(verdicts):
        if v is not None:
            continue
        if runs and runs[-1][0] + runs[-1][1] == i and runs[-1][1] < size:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


_MARK = "@@rs_group"
#: The line :class:`~reward_service.sandbox.output.BoundedOutput` puts where it dropped output.
_DROPPED = re.compile(r"\.\.\. \[\d+ bytes of output dropped\] \.\.\.")
_GROUP_END = re.compile(re.escape(_MARK) + r" (\d+) (\d+)")


def _read_groups(text: str, verdicts: list[bool | None]) -> list[int]:
    """Fill in ``verdicts`` from the groups of a cones script's output: each group's lines end
    with its marker; a group is read only when its summary agrees with its named outputs (the
    kept output is head and tail: a group cut in the middle is left undecided). Returns the
    outputs worth a run of their own: the undecided ones of groups that proved some."""
    chunk: list[str] = []
    retry: list[int] = []
    cut = False
    for line in text.splitlines():
        if _DROPPED.fullmatch(line.strip()):
            # where the kept head and tail meet: the lines before it up to here belong to a group
            # whose marker was dropped, those after it up to the next marker to a group whose
            # first lines were (its named outputs, or another group's summary, would be misread)
            chunk, cut = [], True
            continue
        end = _GROUP_END.search(line)
        if end is None:
            chunk.append(line)
            continue
        start, n = int(end.group(1)), int(end.group(2))
        body, chunk = "\n".join(chunk), []
        if cut:
            cut = False
            continue
        group, _ = _all_outputs(body, n)
        if len(group) != n or start + n > len(verdicts) or len(_SUMMARY.findall(body)) > 1:
            continue
        for offset, v in enumerate(group):
            if v is not None and verdicts[start + offset] is None:
                verdicts[start + offset] = v
        summary = _SUMMARY.search(body)
        if summary and int(summary.group(2)) and int(summary.group(4)):
            retry.extend(start + offset for offset, v in enumerate(group) if v is None)
    return retry


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "ERROR" in line:
            return line.strip()[:300]
    return text.strip()[-300:]


def _check_netlist(netlist: dict, top: str) -> str | None:
    """Why the flattened netlist is outside the model's semantics (None: it is inside)."""
    module = netlist.get("modules", {}).get(top)
    if module is None:
        return f"yosys has no module {top}"
    flag_bits = {
        b for name, net in module.get("netnames", {}).items() if f"{FLAG_PREFIX}m" in name for b in net["bits"]
    }
    clocks = set()
    for name, cell in module.get("cells", {}).items():
        kind = cell["type"]
        if kind in _UNSUPPORTED or (kind.startswith("$") and kind.startswith(("$_", "$mem"))):
            return f"cell {kind} ({name}) is not modelled"
        if kind in _LATCH_CELLS:
            if not set(cell["connections"]["Q"]) <= flag_bits:
                return "the design has a latch"
            continue
        if kind in _FF_CELLS:
            clk = tuple(cell["connections"]["CLK"])
            clocks.add((clk, cell["parameters"].get("CLK_POLARITY")))
    if len(clocks) > 1:
        return f"{len(clocks)} clock edges (one clock edge only)"
    # A signal written by a clocked and a combinational block (or two cells): yosys keeps both
    # drivers and the AIG one of them, where a simulator lets the last write win.
    several = ticks_proof.several_drivers(module)
    if several:
        names = sorted(
            {
                name
                for name, net in module.get("netnames", {}).items()
                if set(net["bits"]) & set(several) and not name.rsplit(".", 1)[-1].startswith(FLAG_PREFIX)
            }
        )
        return f"{len(several)} signal bits have several drivers ({', '.join(names[:3])})"
    return None


def read_map(path: Path) -> dict[int, list[tuple[str, int]]]:
    """Output index -> the (wire name, bit)s ``write_aiger -map`` names it with. Several wires
    that are one net share an output (they have one verdict); an output whose bit is a
    constant is not named (its properties are then never proved)."""
    outputs: dict[int, list[tuple[str, int]]] = {}
    for line in _read(path).splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "output":
            outputs.setdefault(int(words[1]), []).append((words[3].lstrip("\\"), int(words[2])))
    return outputs


_NAME_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_ASSERTED = re.compile(r"Output\s+(\d+) was (?:trivially )?asserted")
_SUMMARY = re.compile(r"Properties:\s+All = (\d+)\. Proved = (\d+)\. Disproved = (\d+)\. Undecided = (\d+)\.")


def _verdicts(
    model: FormalModel,
    outputs: dict[int, list[tuple[str, int]]],
    verdicts: list[bool | None],
    base: ProofResult,
    netnames: dict,
    undriven: set[tuple[str, int]] | frozenset[tuple[str, int]] = frozenset(),
) -> ProofResult:
    """The result from the outputs' verdicts (True proved, False disproved, None undecided).
    ``undriven``: (wire, bit) of toggle ``_h`` wires that are never 1 because nothing drives
    them (:func:`undriven_bits`; the AIG has them as free inputs)."""
    # a property holds when its signal bit is unreachable in every instance of its module
    # (the flattened wire is `<instance path>.<signal>`; model signal names are design-unique)
    # Each instance's wire bit: a constant in the final netlist (write_aiger names no constant
    # output) or the verdict of the output the map names it with; neither: unknown.
    mapped = {(wire, bit): verdicts[index] for index, names in outputs.items() for wire, bit in names}
    instances: dict[tuple[str, int], list[bool | None]] = {}
    constants: dict[tuple[str, int], list[bool]] = {}  # per instance: a constant 0 of the netlist
    for wire, net in netnames.items():
        leaf = wire.rsplit(".", 1)[-1]
        if not leaf.startswith(FLAG_PREFIX):
            continue
        for bit, value in enumerate(net["bits"]):
            stuck = (wire, bit) in undriven
            known = True if stuck else (value == "0") if isinstance(value, str) else mapped.get((wire, bit))
            instances.setdefault((leaf, bit), []).append(known)
            constants.setdefault((leaf, bit), []).append(stuck or value == "0")
    held = [
        bool(instances.get((p.signal, p.bit))) and all(v is True for v in instances[(p.signal, p.bit)])
        for p in model.properties
    ]
    # a constant netlist bit in every instance: decided by synthesis, no state reasoning needed
    constant = [
        bool(instances.get((p.signal, p.bit))) and all(v is True for v in constants.get((p.signal, p.bit), []))
        for p in model.properties
    ]
    refuted = [any(v is False for v in instances.get((p.signal, p.bit), [])) for p in model.properties]
    # a key is unreachable only if every point with that key is (two case items on one line)
    verdict: dict[PointKey, bool] = {}
    how: dict[PointKey, str] = {}
    for n, (key, provers) in enumerate(model.points):
        dead = n in model.dead  # its arm ruled out by elaboration: no property needed
        verdict[key] = verdict.get(key, True) and (dead or any(held[i] for i in provers))
        if verdict[key]:
            how[key] = (
                "constant"
                if dead and how.get(key, "constant") == "constant"
                else _kind(key, provers, held, constant, how.get(key))
            )
    unreachable = sorted(k for k, v in verdict.items() if v)
    kinds = [how[k] for k in unreachable]
    per_metric: dict[str, list[int]] = {}
    for key, _ in model.points:
        entry = per_metric.setdefault(key[2], [0, 0])
        entry[0] += 1
        entry[1] += verdict[key]
    n_unreachable = sum(u for _, u in per_metric.values())
    no_property = sum(1 for key, provers in model.points if not provers and not verdict[key])
    if None not in verdicts:  # every output decided: whatever has a property and is not proved is reachable
        return ProofResult(
            "proved",
            points=len(model.points),
            unreachable=unreachable,
            kinds=kinds,
            undecided=no_property,
            disproved=len(model.points) - n_unreachable - no_property,
            notes=base.notes,
            per_metric=per_metric,
        )
    # some outputs undecided: reachable only where every property that could prove it was refuted
    disproved = sum(
        1 for key, provers in model.points if provers and not verdict[key] and all(refuted[i] for i in provers)
    )
    return ProofResult(
        "partial",
        points=len(model.points),
        unreachable=unreachable,
        kinds=kinds,
        undecided=len(model.points) - n_unreachable - disproved,
        disproved=disproved,
        notes=base.notes,
        per_metric=per_metric,
    )


def undriven_bits(pre: dict, model: FormalModel) -> set[tuple[str, int]]:
    """(wire, bit) of the toggle ``_h`` wires of ``model.undriven_ok`` (internal variables of
    a design nothing outside the netlist writes) whose bit no cell of the flattened ``prep``
    netlist ``pre`` (its top module) drives, no input port is, and no wire holding it has an
    initial value: a variable bit the design never assigns. Verilator keeps it at its zero
    initial value and the fast path reads Icarus's ``x`` as 0, so its toggle points are
    unreachable, although the model makes the bit a free input for its readers
    (``setundef -undriven``: the two engines' values differ there)."""
    if not model.undriven_ok:
        return set()
    driven: set[int] = set()
    for port in pre.get("ports", {}).values():
        if port.get("direction") != "output":
            driven.update(b for b in port["bits"] if isinstance(b, int))
    for cell in pre.get("cells", {}).values():
        dirs = cell.get("port_directions", {})
        for name, bits in cell.get("connections", {}).items():
            if dirs.get(name, "output") != "input":  # a port of unknown direction counts as a driver
                driven.update(b for b in bits if isinstance(b, int))
    nets = pre.get("netnames", {})
    for net in nets.values():
        if "init" in net.get("attributes", {}):
            driven.update(b for b in net["bits"] if isinstance(b, int))
    out: set[tuple[str, int]] = set()
    for wire, net in nets.items():
        if wire.rsplit(".", 1)[-1] in model.undriven_ok:
            out.update((wire, i) for i, b in enumerate(net["bits"]) if isinstance(b, int) and b not in driven)
    return out


def _kind(key: PointKey, provers: tuple[int, ...], held: list[bool], constant: list[bool], before: str | None) -> str:
    """How the point ``key`` (one of the points with that key, ``before``: the kind the others
    with the key gave) was proved, one of :data:`PROOF_KINDS`. A toggle point's first property
    is "the bit is never 1" (the model's order), its second "never 0"."""
    if key[2] == "toggle":
        return "stuck at 0" if held[provers[0]] else "stuck at 1"
    by_constant = any(held[i] and constant[i] for i in provers)
    kind = "constant" if by_constant else "invariant"
    return "invariant" if before == "invariant" else kind
