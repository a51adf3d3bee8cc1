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
                                  [--corpus] [--cache-dir DIR]

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
    args = ap.parse_args()
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


def _count(result) -> int:
    """Points (not keys) proved unreachable."""
    return sum(u for _, u in result.per_metric.values())


if __name__ == "__main__":
    sys.exit(main())
