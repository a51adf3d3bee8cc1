"""The attainable coverage of a design: every point proved unreachable (:mod:`.formal.prover`),
shown reachable by a replayed witness (:mod:`.formal.witness`), or undecided (issue 23).

The witness search gives one input sequence from the model's zero state and the points the
model says it covers; that sequence becomes a plain SystemVerilog testbench (the design's
"closure testbench"), and the engine replays it on the fast path and on Verilator. A point is
**witnessed** only when both replays cover it; a point the model claims and a replay does not
cover is listed in ``not_replayed`` (a bug of the model, never counted), and a proved point a
replay covers in ``proved_but_covered`` (a wrong proof: the worst bug, tests assert it stays
empty).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from reward_service.formal.exclude import key_of
from reward_service.formal.prover import ProofResult, prove
from reward_service.formal.witness import Witness, random_steps, search, to_testbench
from reward_service.formal.witnessed import load as load_witnessed
from reward_service.formal.witnessed import store as store_witnessed
from reward_service.models import DEFAULT_METRICS

#: The engines a witness is replayed on: a point is witnessed when every one covers it.
REPLAY_ENGINES = ("fast", "verilator")
#: Random steps (every input free, seed 0) appended to the closure sequence.
RANDOM_TAIL = 32


@dataclass
class MetricCeiling:
    """Points of one metric: ``total`` (the engine's count for the closure replay),
    ``unreachable`` (proved), ``witnessed`` (covered by every replay), ``undecided`` (the
    rest: ``total - unreachable - witnessed``)."""

    total: int = 0
    unreachable: int = 0
    witnessed: int = 0
    undecided: int = 0


@dataclass
class Closure:
    """One design's classification. ``status``: ``ok`` (replayed), ``no witness`` (the
    search had no testbench to give: ``reason``), ``replay failed`` (a replay did not score:
    ``reason``; nothing witnessed); ``proof``/``witness``: the two halves; ``testbench``: the
    closure testbench text; ``metrics``: per metric; ``not_replayed``: per engine, keys the
    model claims that the replay did not cover; ``proved_but_covered``: proved keys a replay
    covered; ``undecided_keys``: the keys of the undecided points; ``replayed_on``: the engine
    that scored each replay (the fast path may decline a design: then Verilator scored both);
    ``seconds``: proof + search + replays."""

    status: str
    proof: ProofResult
    witness: Witness
    testbench: str = ""
    reason: str = ""
    metrics: dict[str, MetricCeiling] = field(default_factory=dict)
    not_replayed: dict[str, list[tuple]] = field(default_factory=dict)
    proved_but_covered: list[tuple] = field(default_factory=list)
    undecided_keys: list[tuple] = field(default_factory=list)
    replayed_on: dict[str, str | None] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def undecided(self) -> int:
        return sum(m.undecided for m in self.metrics.values())

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (no point lists of the proof)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "proof_status": self.proof.status,
            "proof_model": self.proof.model,
            "witness_status": self.witness.status,
            "steps": len(self.witness.steps),
            "claimed": len(self.witness.claimed),
            "metrics": {m: asdict(c) for m, c in self.metrics.items()},
            "not_replayed": {e: [list(k) for k in keys] for e, keys in self.not_replayed.items()},
            "proved_but_covered": [list(k) for k in self.proved_but_covered],
            "undecided_points": [list(k) for k in self.undecided_keys[:200]],
            "replayed_on": self.replayed_on,
            "seconds": self.seconds,
        }


def closure(
    design: dict[str, str],
    top: str | None = None,
    instance: str = "dut",
    metrics: list[str] | None = None,
    engine: Any = None,
    budget_s: float = 60.0,
    cache_dir: Path | None = None,
) -> Closure:
    """Classify every coverage point of ``design`` (name -> HDL text, top module ``top``):
    prove (``budget_s`` per step), search a witness (``budget_s``), replay its testbench (DUT
    instance ``instance``) on :data:`REPLAY_ENGINES` with ``engine`` (a
    :class:`~reward_service.scoring.engine.Engine`; default: one without the result cache).
    ``metrics``: default line, branch, toggle, expr. ``cache_dir``: the engine's cache root;
    the verdict is cached under its ``formal/`` (as the engine does), a replayed closure's
    witnessed points and summary under its ``ceiling/`` (:mod:`~reward_service.formal.witnessed`)."""
    start = time.monotonic()
    metrics = list(metrics or DEFAULT_METRICS)
    if engine is None:
        from reward_service.engine import Engine
        from reward_service.settings import Settings

        engine = Engine(Settings(result_cache=False))
    sandbox = engine.sandbox
    proof = prove(design, top, sandbox=sandbox, timeout_s=budget_s, cache_dir=cache_dir and cache_dir / "formal")
    dead = set(proof.unreachable) if proof.status in ("proved", "partial") else set()
    # a design the one-edge model refuses (its verdict unsupported, or proved on the
    # every-input-free model) is searched on the every-input-free lowering at once
    refused = proof.status == "unsupported" or proof.model == "ticks"
    witness = search(design, top, sandbox=sandbox, budget_s=budget_s, skip=dead, refused=refused)
    if witness.status == "ok":
        # a random tail: points the model has no property for (a loop's own list, a generate
        # block, a function) or that the search had no time for may be covered all the same,
        # and only the replay counts
        witness.steps += random_steps(witness, RANDOM_TAIL, seed=0).steps
    if witness.status != "ok" or not witness.steps:
        out = Closure("no witness", proof, witness, reason=witness.reason or "the search reached no point")
        out.seconds = round(time.monotonic() - start, 3)
        return out
    replay = _replay_both(engine, design, top, witness, instance, metrics)
    if replay.failed is not None and replay.failed[1] == "runtime_error" and len(witness.steps) > 1:
        # the design fails at run time under some input sequence (Verilator's
        # DIDNOTCONVERGE on a process that reads its own output): the longest prefix found
        # that both engines replay is the closure, its claims those it reaches
        full, why = len(witness.steps), replay.failed
        ok, bad, best = 0, full, None
        for _ in range(PREFIX_TRIES):
            mid = (ok + bad) // 2
            if mid <= ok:
                break
            short = replace(witness, steps=witness.steps[:mid])
            attempt = _replay_both(engine, design, top, short, instance, metrics)
            if attempt.failed is None:
                ok, best = mid, attempt
            else:
                bad = mid
        if best is not None:
            witness.steps = witness.steps[:ok]
            witness.claimed = {k: t for k, t in witness.claimed.items() if t < ok}
            replay = best
            replay.note = f"the first {ok} of {full} steps replayed ({why[0]}: {why[1]}: {why[2][:200]})"
    out = Closure("ok", proof, witness, testbench=replay.testbench, reason=replay.note)
    out.replayed_on = replay.replayed_on
    covered, points = replay.covered, replay.points
    if replay.failed is not None:
        name, status, message = replay.failed
        out.status, out.reason = "replay failed", f"{name}: {status}: {message}"
    for name, keys in covered.items():
        out.not_replayed[name] = sorted(k for k in witness.claimed if k not in keys and k[2] in metrics)
    out.proved_but_covered = sorted(k for k in dead if any(k in keys for keys in covered.values()))
    for p in points or []:
        if p.metric not in metrics:
            continue
        entry = out.metrics.setdefault(p.metric, MetricCeiling())
        entry.total += 1
        key = key_of(p)
        if key in dead:
            entry.unreachable += 1
        elif out.status == "ok" and all(key in keys for keys in covered.values()):
            entry.witnessed += 1
        else:
            entry.undecided += 1
            out.undecided_keys.append(key)
    out.seconds = round(time.monotonic() - start, 3)
    if cache_dir is not None and out.status == "ok" and not out.proved_but_covered:
        witnessed = sorted({key_of(p) for p in points or [] if all(key_of(p) in keys for keys in covered.values())})
        summary = {**out.to_json(), "metrics_asked": metrics}
        store_witnessed(cache_dir, design, top, [k for k in witnessed if k not in dead], summary)
    return out


def ceiling_of(
    design: dict[str, str],
    top: str | None,
    instance: str,
    metrics: list[str],
    cache_dir: Path,
    engine: Any = None,
    budget_s: float = 60.0,
    again: bool = False,
) -> dict[str, Any]:
    """The closure summary (:meth:`Closure.to_json`) of a design, from ``cache_dir`` when a
    closure was kept for it (``again``: run it anew), else run (:func:`closure`) and kept."""
    if not again:
        kept = load_witnessed(cache_dir, design, top)
        if kept is not None and set(metrics) <= set(kept[1].get("metrics_asked", [])):
            return kept[1]
    return closure(design, top, instance, metrics, engine, budget_s, cache_dir).to_json()


def problem_ceilings(problems: Iterable[Any], again: bool = False) -> Iterator[tuple[Any, dict[str, Any]]]:
    """``(problem, closure summary)`` for each registered problem (``Problem``: its design, top,
    DUT instance and metrics) in turn, by :func:`ceiling_of` under the settings' cache dir with
    one engine without the result cache; ``again`` runs kept closures anew."""
    from reward_service.engine import Engine
    from reward_service.settings import get_settings

    settings = get_settings()
    engine = Engine(settings.model_copy(update={"result_cache": False}))
    for p in problems:
        summary = ceiling_of(
            dict(p.design.files),
            p.design.toplevel,
            p.dut_instance,
            list(p.metrics),
            settings.cache_dir,
            engine,
            again=again,
        )
        yield p, summary


def shown_attainable(summary: dict[str, Any], metrics: list[str]) -> float | None:
    """The overall coverage (percent, on the reachable figure: points proved unreachable left
    out, as CVDP TARGETs are judged) that the witnessed points of a closure ``summary``
    (:meth:`Closure.to_json`) show attainable: the mean over ``metrics`` with reachable points
    of witnessed / (total - unreachable). A lower bound of the ceiling (undecided points may
    add); None when no metric has reachable points or the closure did not replay."""
    if summary.get("status") != "ok":
        return None
    shares = []
    for m in metrics:
        c = summary.get("metrics", {}).get(m)
        if c and c["total"] > c["unreachable"]:
            shares.append(c["witnessed"] / (c["total"] - c["unreachable"]))
    return 100.0 * sum(shares) / len(shares) if shares else None


@dataclass
class Soundness:
    """A random-stimulus run against a design's proofs: ``seeds`` replayed, ``steps`` each,
    the proved keys (``proved``) and those some run covered (``covered``: must stay empty);
    ``status``: ``ok``, or why nothing was run (no proof, no ports to drive)."""

    status: str
    seeds: list[int] = field(default_factory=list)
    steps: int = 0
    proved: int = 0
    covered: list[tuple] = field(default_factory=list)
    reason: str = ""


def soundness(
    design: dict[str, str],
    top: str | None = None,
    instance: str = "dut",
    seeds: tuple[int, ...] = (1, 2, 3),
    steps: int = 400,
    engines: tuple[str, ...] = REPLAY_ENGINES,
    engine: Any = None,
    budget_s: float = 60.0,
    cache_dir: Path | None = None,
) -> Soundness:
    """Replay ``steps`` random steps per seed of ``seeds`` (every DUT input free, resets
    included; :func:`~reward_service.formal.witness.random_steps`) on ``engines`` and list
    the proved-unreachable keys any run covered (a wrong proof). The DUT's ports come from a
    witness search of 0 s (the yosys step only)."""
    if engine is None:
        from reward_service.engine import Engine
        from reward_service.settings import Settings

        engine = Engine(Settings(result_cache=False))
    proof = prove(design, top, sandbox=engine.sandbox, timeout_s=budget_s, cache_dir=cache_dir and cache_dir / "formal")
    if proof.status not in ("proved", "partial"):
        return Soundness("no proof", reason=proof.reason)
    dead = set(proof.unreachable)
    shape = search(design, top, sandbox=engine.sandbox, budget_s=budget_s, skip=dead, max_frames=0)
    if shape.status != "ok":
        return Soundness("no ports", reason=shape.reason, proved=len(dead))
    out = Soundness("ok", seeds=list(seeds), steps=steps, proved=len(dead))
    covered: set = set()
    for seed in seeds:
        tb = to_testbench(random_steps(shape, steps, seed), instance)
        for name in engines:
            scored = engine.scored(
                _replay(design, top or shape.top, "random_tb.sv", tb, name, instance, list(DEFAULT_METRICS))
            )
            if scored.result.status != "ok":
                out.status, out.reason = "replay failed", f"{name}, seed {seed}: {scored.result.message}"
                return out
            covered |= {key_of(p) for p in scored.points if p.covered} & dead
    out.covered = sorted(covered)
    return out


#: Replays of prefixes (a binary search for the longest one) when the closure sequence makes
#: the design fail at run time.
PREFIX_TRIES = 5


@dataclass
class _Replay:
    """The replays of one closure testbench: per engine the keys covered, the points of the
    last replay (Verilator's when it ran), the engine that scored each one, and the first
    failure ((engine, status, message); None: every replay scored)."""

    testbench: str
    covered: dict[str, set] = field(default_factory=dict)
    points: list[Any] | None = None
    replayed_on: dict[str, str | None] = field(default_factory=dict)
    failed: tuple[str, str, str] | None = None
    note: str = ""


def _replay_both(
    engine: Any, design: dict[str, str], top: str | None, witness: Witness, instance: str, metrics: list[str]
) -> _Replay:
    """Replay ``witness``'s testbench on :data:`REPLAY_ENGINES` (stopping at the first that
    does not score)."""
    out = _Replay(to_testbench(witness, instance))
    for name in REPLAY_ENGINES:
        scored = engine.scored(
            _replay(design, top or witness.top, "closure_tb.sv", out.testbench, name, instance, metrics)
        )
        out.replayed_on[name] = scored.result.engine
        if scored.result.status != "ok":
            out.failed = (name, str(scored.result.status), scored.result.message)
            break
        out.covered[name] = {key_of(p) for p in scored.points if p.covered}
        if name == "verilator" or out.points is None:
            out.points = scored.points
    if out.failed is not None and "fast" in out.covered and rejected_by_verilator(out.failed, design):
        # Verilator refuses the design itself (BLKANDNBLK: perceptron_0018), whatever the
        # stimulus: no testbench scores there, the fast path is the only engine that does,
        # so its replay alone decides (the closure says so)
        out.note = f"replayed on the fast path only: Verilator rejects the design ({out.failed[2][:200]})"
        out.replayed_on["verilator"] = None
        out.failed = None
    return out


_VERILATOR_ERROR = re.compile(r"%Error(?:-[A-Z0-9_]+)?: ([^:\s]+):\d+")


def rejected_by_verilator(failed: tuple[str, str, str], design: dict[str, str]) -> bool:
    """Whether a replay failure ``failed`` ((engine, status, message)) is Verilator refusing
    the design's own text: a compile error whose every ``%Error`` names a file of ``design``
    (the closure testbench is ours and plain: an error in it is a bug, not this)."""
    name, status, message = failed
    files = _VERILATOR_ERROR.findall(message)
    return name == "verilator" and status == "compile_error" and bool(files) and set(files) <= set(design)


def _replay(
    design: dict[str, str], top: str | None, name: str, tb: str, engine: str, instance: str, metrics: list[str]
) -> dict[str, Any]:
    """The score request replaying testbench ``tb`` (file ``name``) on ``design`` with ``engine``
    (``fast``/``verilator``), coverage of ``instance`` in ``metrics``."""
    return {
        "design": {"files": design, "toplevel": top},
        "stimulus": {"kind": "sv_testbench", "files": {name: tb}},
        "simulator": "verilator",
        "engine": engine,
        "coverage": {"scope": instance, "metrics": metrics},
    }
