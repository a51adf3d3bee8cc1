"""Run the unreachability prover (reward_service.formal) over every cid012 design (issue 14).

Per design: points the fast path enumerates (line, branch, toggle, expr),
points proved unreachable, undecided (no property, a property still undecided after the
one-by-one runs, or the run did not finish), status (``partial``: some properties undecided),
wall time, and the TARGET against the best overall any stimulus could reach on these metrics with
and without the proved points (``max_raw``: mean over the metrics of (points - unreachable) /
points; with the proved points excluded every metric can reach 100 %). A TARGET "becomes
reachable" when ``max_raw`` < TARGET. A design whose expression points the fast path does not
enumerate (it falls back to Verilator there) has them assumed coverable (an upper bound).

    python bench/formal_cid012.py [--json out.json] [--timeout 60] [--only ring_token]
                                  [--corpus] [--cache-dir DIR] [--witness [--closure-dir DIR]]

``--witness`` (issue 23): the proof column says ``proved t`` (``partial t``) for a verdict on
the every-input-free model (``ticks_proof``: a design the one-edge model refuses); each design is also searched for reachability witnesses and its
closure testbench replayed on the fast path and Verilator (``reward_service.ceiling``); per
design: points proved unreachable, witnessed (covered by both replays), undecided, seconds,
claims that did not replay (model bugs) and proved points a replay covered (must be 0), and
whether the TARGET is out of reach even at the ceiling (TARGET > 100 * (1 - undecided share
- unreachable share) per metric mean: no stimulus can meet it). ``--closure-dir`` writes each
closure testbench there.

``--corpus``: the designs of the cocotb corpus (cvdp/cocotb_corpus.jsonl, its ``toplevel``)
instead of cid012 (no TARGET). ``--cache-dir``: the prover's verdict cache (as the engine's
``<cache_dir>/formal``), so a later run or test reads the verdicts instead of proving again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = Path(os.environ.get("REWARD_SERVICE_CASES", REPO.parent / "shared" / "cases"))


def _rows() -> list[dict]:
    with open(CASES / "cvdp" / "cid012.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _rtl(row: dict) -> dict[str, str]:
    files = row["harness"].get("files", row["harness"])  # agentic rows hold the files directly
    return {n[4:]: t for n, t in files.items() if n.startswith("src/") and n.endswith((".sv", ".v"))}


def _corpus() -> list[dict]:
    """Cocotb corpus items as rows of this bench: id, design files (in source order), top."""
    with open(CASES / "cvdp" / "cocotb_corpus.jsonl", encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh if line.strip()]
    return [
        {"id": i["id"], "files": {p: i["rtl"][p] for p in i["rtl_sources_order"]}, "top": i["toplevel"]} for i in items
    ]


def _target(row: dict) -> int | None:
    if "harness" not in row:
        return None
    m = re.search(r"TARGET\s*=\s*(\d+)", row["harness"].get("files", row["harness"]).get("src/.env", ""))
    return int(m.group(1)) if m else None


def main() -> int:
    from reward_service.formal.prover import prove

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the per-design rows here")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per yosys / ABC step")
    ap.add_argument("--only", help="substring of the problem ids to run")
    ap.add_argument("--corpus", action="store_true", help="the cocotb corpus's designs instead of cid012")
    ap.add_argument("--cache-dir", type=Path, help="the prover's verdict cache directory")
    ap.add_argument("--witness", action="store_true", help="witness search and closure replay (issue 23)")
    ap.add_argument("--closure-dir", type=Path, help="with --witness: write the closure testbenches here")
    ap.add_argument(
        "--soundness",
        type=int,
        metavar="STEPS",
        help="random-stimulus runs (3 seeds of STEPS steps) on designs with proofs",
    )
    args = ap.parse_args()
    if args.soundness:
        return _soundness(args)
    if args.witness:
        return _witness(args)
    rows = [r for r in (_corpus() if args.corpus else _rows()) if not args.only or args.only in r["id"]]
    out = []
    start = time.monotonic()
    print(
        f"{'problem':50} {'status':11} {'points':>6} {'unreach':>7} {'expr':>9} {'undec':>6} {'time s':>7} "
        f"{'max_raw':>7} {'TARGET':>6}  reason"
    )
    for row in rows:
        if "files" in row:
            result = prove(row["files"], row["top"], timeout_s=args.timeout, cache_dir=args.cache_dir)
        else:
            result = prove(_rtl(row), timeout_s=args.timeout, cache_dir=args.cache_dir)
        undecided = result.undecided
        ratios = [(n - u) / n for n, u in result.per_metric.values() if n]
        max_raw = 100 * sum(ratios) / len(ratios) if ratios else None
        target = _target(row)
        item = {
            "id": row["id"],
            "target": target,
            "max_raw": max_raw,
            "target_becomes_reachable": bool(max_raw is not None and target and max_raw < target),
            "status": result.status,
            "points": result.points,
            "unreachable": _count(result),
            "unreachable_keys": len(result.unreachable),
            "expr_points": result.per_metric.get("expr", [0, 0])[0],
            "expr_unreachable": result.per_metric.get("expr", [0, 0])[1],
            "undecided": undecided,
            "seconds": result.seconds,
            "reason": result.reason,
            "unreachable_points": [list(k) for k in result.unreachable],
        }
        out.append(item)
        raw = f"{max_raw:7.2f}" if max_raw is not None else "      -"
        print(
            f"{row['id'][:50]:50} {result.status:11} {result.points:6d} {item['unreachable']:7d} "
            f"{item['expr_unreachable']:4d}/{item['expr_points']:<4d} {undecided:6d} {result.seconds:7.2f} {raw} {target or '-':>6}  {' '.join(result.reason.split())[:60]}",
            flush=True,
        )
    total = time.monotonic() - start
    proved = [i for i in out if i["status"] == "proved"]
    print(
        f"\n{len(out)} designs in {total:.0f} s: {len(proved)} proved runs, "
        f"{sum(1 for i in proved if i['unreachable'])} with unreachable points, "
        f"{sum(i['unreachable'] for i in out)} points proved unreachable of {sum(i['points'] for i in out)} "
        f"(expr: {sum(i['expr_unreachable'] for i in out)} of {sum(i['expr_points'] for i in out)})"
    )
    print(
        f"TARGETs that become reachable with the proved points excluded: "
        f"{sum(i['target_becomes_reachable'] for i in out)} "
        f"({', '.join(i['id'] for i in out if i['target_becomes_reachable'])})"
    )
    for status in sorted({i["status"] for i in out}):
        print(f"  {status}: {sum(1 for i in out if i['status'] == status)}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def _witness(args: argparse.Namespace) -> int:
    """The ``--witness`` run: one closure per cid012 design (ceiling per metric)."""
    from reward_service.ceiling import closure
    from reward_service.problems import load_problems

    problems = [
        p for p in load_problems(CASES / "cvdp" / "cid012.jsonl").values() if not args.only or args.only in p.id
    ]
    if args.closure_dir:
        args.closure_dir.mkdir(parents=True, exist_ok=True)
    out = []
    start = time.monotonic()
    print(
        f"{'problem':48} {'proof':11} {'points':>6} {'proved':>6} {'witn':>6} {'undec':>6} {'s':>6} "
        f"{'ceil %':>6} {'TARGET':>6} {'bugs':>4}  note"
    )
    for p in problems:
        c = closure(
            dict(p.design.files),
            p.design.toplevel,
            p.dut_instance,
            list(p.metrics),
            budget_s=args.timeout,
            cache_dir=args.cache_dir,
        )
        row = {"id": p.id, "target": p.target_percent, **c.to_json()}
        totals = {k: sum(getattr(m, k) for m in c.metrics.values()) for k in ("total", "unreachable", "witnessed")}
        row.update(totals)
        row["undecided"] = c.undecided
        # the best mean over metrics any stimulus can reach, on the raw figure: every point not
        # proved unreachable covered (undecided ones included: an upper bound)
        ratios = [(m.total - m.unreachable) / m.total for m in c.metrics.values() if m.total]
        row["ceiling_raw"] = 100 * sum(ratios) / len(ratios) if ratios else None
        # on the reachable figure, what the witnessed points alone reach (a lower bound of the ceiling)
        shown = [m.witnessed / (m.total - m.unreachable) for m in c.metrics.values() if m.total - m.unreachable]
        row["shown_reachable"] = 100 * sum(shown) / len(shown) if shown else None
        row["target_shown_met"] = bool(
            row["shown_reachable"] is not None and row["shown_reachable"] >= p.target_percent
        )
        bugs = sum(len(v) for v in c.not_replayed.values()) + len(c.proved_but_covered)
        out.append(row)
        if args.closure_dir and c.testbench:
            (args.closure_dir / f"{p.id}.sv").write_text(c.testbench)
        shown_text = f"{row['shown_reachable']:6.2f}" if row["shown_reachable"] is not None else "     -"
        print(
            f"{p.id[:48]:48} {c.proof.status + (' t' if c.proof.model == 'ticks' else ''):11} {totals['total']:6d} {totals['unreachable']:6d} "
            f"{totals['witnessed']:6d} {c.undecided:6d} {c.seconds:6.1f} {shown_text} {p.target_percent:6g} {bugs:4d}  "
            f"{' '.join((c.reason or c.witness.reason or c.proof.reason).split())[:50]}",
            flush=True,
        )
    total = time.monotonic() - start
    points = sum(r["total"] for r in out)
    classified = sum(r["unreachable"] + r["witnessed"] for r in out)
    print(
        f"\n{len(out)} designs in {total:.0f} s: {sum(1 for r in out if r['total'] and not r['undecided'])} with "
        f"every point classified; {classified} of {points} points classified "
        f"({100 * classified / max(points, 1):.1f} %: {sum(r['unreachable'] for r in out)} proved, "
        f"{sum(r['witnessed'] for r in out)} witnessed); claims not replayed: "
        f"{sum(len(v) for r in out for v in r['not_replayed'].values())}; proved points covered: "
        f"{sum(len(r['proved_but_covered']) for r in out)}"
    )
    print(
        "TARGETs met by the closure testbench on the reachable figure: "
        f"{sum(r['target_shown_met'] for r in out)} of {len(out)}"
    )
    short = [r for r in out if not r["target_shown_met"]]
    print(
        "TARGETs not shown attainable (the witnessed share of the points not proved unreachable is below "
        f"TARGET; out of reach at the ceiling unless undecided points are reachable): {len(short)} "
        f"({', '.join(r['id'] for r in short)})"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def _soundness(args: argparse.Namespace) -> int:
    """The ``--soundness`` run: random stimulus (every input free, resets included, seeds 1-3)
    on both engines must cover no proved point, per cid012 design with proofs."""
    from reward_service.ceiling import soundness
    from reward_service.problems import load_problems

    problems = [
        p for p in load_problems(CASES / "cvdp" / "cid012.jsonl").values() if not args.only or args.only in p.id
    ]
    bad = 0
    for p in problems:
        t0 = time.monotonic()
        r = soundness(
            dict(p.design.files),
            p.design.toplevel,
            p.dut_instance,
            steps=args.soundness,
            budget_s=args.timeout,
            cache_dir=args.cache_dir,
        )
        bad += len(r.covered)
        print(
            f"{p.id[:48]:48} {r.status:13} proved {r.proved:5d} covered {len(r.covered):3d} "
            f"{time.monotonic() - t0:6.1f} s {r.reason[:40]} {r.covered[:3]}",
            flush=True,
        )
    print(f"proved points covered by random stimulus: {bad}")
    return 1 if bad else 0


def _count(result) -> int:
    """Points (not keys) proved unreachable."""
    return sum(u for _, u in result.per_metric.values())


if __name__ == "__main__":
    sys.exit(main())
