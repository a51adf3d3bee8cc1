#!/usr/bin/env python
"""How often the fast coverage path hands a sample to Verilator, and why (issue 9 point 8).

Every testbench of ``../shared/cases/stimulus`` (8 problems x weak/good/best SV testbenches and
the problems' cocotb tests), the public-style samples of ``tests/fastcov_designs/public`` (one
per construct that took public testbenches off the fast path, issue 20: concurrent assertions
in the DUT, a ``string`` operand, testbench covergroups, an `` `include`` in a design file, a
parameterised DUT instance under a testbench header, a ``$fscanf`` data file, a ``foreach``
statement) and a spread of the cocotb corpus (``../shared/cases/cvdp/
cocotb_corpus.jsonl``, every ``--corpus-step``-th item, requests built as
``tests/test_cocotb_corpus.py`` builds them) is scored with ``engine=fast`` through the
engine's fast-path attempt (:func:`reward_service.fastcov.routing.attempt`): the fast path
runs for real (instrumentation, sandboxed Icarus / cocotb), but a sample that falls back is
*not* then scored on Verilator, since only the reason is measured here. Default metrics (line,
branch, toggle, expr), the DUT instance as coverage scope for the SV testbenches.

Prints one row per testbench (engine, status, fallback reason), the fallback rate, and the
rate per reason (:func:`reason_kind` groups the messages); the target of issue 9 is <= 5 % of
testbenches. Exit status 0 when the rate meets ``--max-rate``.

    python bench/fallback_rate.py                      # 26 stimulus cases + 38 corpus items, ~10 min
    python bench/fallback_rate.py --corpus-step 0 --json /tmp/fallback.json   # cases and public samples only
    PYTHONPATH=/tmp/old-checkout python bench/fallback_rate.py --full         # another version's rate
"""

from __future__ import annotations

import argparse
import collections
import json
import posixpath
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stimulus_requests(cases: Path, cid012: Path) -> list[tuple[str, dict]]:
    """(name, request) per SV testbench and cocotb test of the stimulus cases."""
    rows = {}
    with open(cid012, encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            rows[row["id"]] = row
    out = []
    for d in sorted(p for p in cases.iterdir() if (p / "expected.json").exists()):
        expected = json.loads((d / "expected.json").read_text())
        files = rows[d.name]["harness"].get("files", rows[d.name]["harness"])
        rtl = {k[4:]: v for k, v in files.items() if k.startswith("src/") and k.endswith((".sv", ".v"))}
        for info in expected["testbenches"].values():
            out.append(
                (
                    f"{d.name}/{info['file']}",
                    {
                        "design": {"files": rtl},
                        "stimulus": {"kind": "sv_testbench", "files": {info["file"]: (d / info["file"]).read_text()}},
                        "coverage": {"scope": expected["dut_instance"]},
                        "engine": "fast",
                    },
                )
            )
        cocotb = expected.get("cocotb")
        if cocotb:
            out.append(
                (
                    f"{d.name}/{cocotb['file']}",
                    {
                        "design": {"files": rtl, "toplevel": cocotb["hdl_toplevel"]},
                        "stimulus": {
                            "kind": "cocotb",
                            "test_module": cocotb["test_module"],
                            "files": {cocotb["file"]: (d / cocotb["file"]).read_text()},
                        },
                        "engine": "fast",
                    },
                )
            )
    return out


def public_requests(folder: Path) -> list[tuple[str, dict]]:
    """(name, request) per public-style sample: ``<folder>/<construct>/design/*`` (the DUT,
    headers included) and ``stimulus/*`` (the SV testbench, its headers and data files), DUT
    instance ``dut``."""
    out = []
    for d in sorted(p for p in folder.iterdir() if (p / "design").is_dir()) if folder.is_dir() else []:
        out.append((f"public/{d.name}", public_request(d, "fast")))
    return out


def public_request(sample: Path, engine: str, metrics: list[str] | None = None) -> dict:
    """The request of one public-style sample folder (see :func:`public_requests`)."""
    return {
        "design": {"files": {p.name: p.read_text() for p in sorted((sample / "design").iterdir())}},
        "stimulus": {
            "kind": "sv_testbench",
            "files": {p.name: p.read_text() for p in sorted((sample / "stimulus").iterdir())},
        },
        "coverage": {"scope": "dut", **({"metrics": metrics} if metrics else {})},
        "engine": engine,
        "limits": {"run_s": 60},
    }


#: Fallback messages grouped by cause: (kind, pattern), first match wins.
REASONS = [
    ("covergroups (Icarus 11)", r"does not support covergroups"),
    ("concurrent assertion", r"concurrent assertion"),
    ("string operand", r"string operand"),
    ("reads files (token readable)", r"reads files|opens a file for reading|names the fast path's files"),
    ("`include", r"`include"),
    ("parameters (not elaborated)", r"with parameters \(not elaborated|uses defparam|under the testbench's parameter"),
    ("race at a clock edge", r"race at a clock edge"),
    ("unguarded event control (zero-width pulses)", r"does not guard against zero-width pulses"),
    ("macro expansion", r"macro"),
    ("pyslang cannot parse/elaborate", r"pyslang cannot|could not be elaborated"),
    ("unpacked-array ports", r"unpacked-array ports"),
    ("foreach statement (expression coverage)", r"foreach"),
    ("expression coverage of a construct", r"expression coverage of|in expression coverage|in an expression"),
    ("Icarus rejects/cannot run the sources", r"^Icarus (rejects|cannot run)"),
    ("instrumented build fails", r"instrumented (build|run)"),
]


def reason_kind(fallback: str) -> str:
    """The cause of a fallback message, as a short kind (:data:`REASONS`; else the message
    without file names and numbers, cut to 70 characters)."""
    for kind, pattern in REASONS:
        if re.search(pattern, fallback):
            return kind
    text = re.sub(r"[\w./-]+\.(?:sv|v|svh|vh)(?::\d+)?:?\s*", "", fallback.split(" — ")[0])
    return re.sub(r"\d+", "N", text)[:70]


def corpus_requests(corpus: Path, step: int) -> list[tuple[str, dict]]:
    """(name, request) for every ``step``-th item of the cocotb corpus (sorted by id)."""
    if step <= 0 or not corpus.exists():
        return []
    with open(corpus, encoding="utf-8") as fh:
        rows = sorted(map(json.loads, fh), key=lambda r: r["id"])
    out = []
    for row in rows[::step]:
        out.append(
            (
                f"corpus/{row['id']}",
                {
                    "design": {
                        "files": {p: row["rtl"][p] for p in row["rtl_sources_order"]},
                        "toplevel": row["toplevel"],
                    },
                    "stimulus": {
                        "kind": "cocotb",
                        "test_module": row["test_modules"][0],
                        "runtime": "auto",
                        "files": {posixpath.basename(p): t for p, t in row["tests"].items()},
                    },
                    "limits": {"run_s": 120, "compile_s": 300},
                    "engine": "fast",
                },
            )
        )
    return out


def attempt(engine, request: dict, full: bool = False) -> dict:
    """Run the fast path's attempt for one request (``full``: the whole ``Engine.score``, a
    fallback then also runs Verilator): engine, status, fallback, tests run, seconds."""
    from reward_service.models import ScoreRequest

    t0 = time.perf_counter()
    if full:
        result = engine.score(request)
        engine_name = result.engine if result.status.value != "invalid_input" else None
        fallback = result.fallback
    else:
        from reward_service.fastcov import routing

        try:
            prepared = engine.prepare(ScoreRequest.model_validate(request))
        except Exception as exc:
            return {
                "engine": None,
                "status": "invalid_input",
                "fallback": None,
                "message": str(exc)[:300],
                "tests": None,
                "seconds": round(time.perf_counter() - t0, 2),
            }
        scored, fallback = routing.attempt(prepared, {}, engine.simulate, engine.settings)
        result = scored.result if scored is not None else None
        engine_name = "fast" if result is not None else "verilator"
    return {
        "engine": engine_name,
        "fallback": fallback,
        "status": result.status.value if result is not None else None,
        "message": result.message[:300] if result is not None else "",
        "tests": len(result.tests) if result is not None and request["stimulus"]["kind"] == "cocotb" else None,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=REPO.parent / "shared" / "cases" / "stimulus")
    parser.add_argument("--cid012", type=Path, default=None, help="default: CASES/../cvdp/cid012.jsonl")
    parser.add_argument("--corpus", type=Path, default=None, help="default: CASES/../cvdp/cocotb_corpus.jsonl")
    parser.add_argument("--corpus-step", type=int, default=3, help="every N-th corpus item (0: none)")
    parser.add_argument(
        "--public", type=Path, default=REPO / "tests" / "fastcov_designs" / "public", help="public-style samples"
    )
    parser.add_argument("--only", default="", help="only names containing this text")
    parser.add_argument("--max-rate", type=float, default=5.0, help="target fallback rate, percent")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--full", action="store_true", help="score with Engine.score (a fallback is then also run on Verilator)"
    )
    args = parser.parse_args(argv)
    cid012 = args.cid012 or args.cases.parent / "cvdp" / "cid012.jsonl"
    corpus = args.corpus or args.cases.parent / "cvdp" / "cocotb_corpus.jsonl"

    from reward_service.engine import Engine
    from reward_service.settings import Settings

    samples = (
        stimulus_requests(args.cases, cid012) + public_requests(args.public) + corpus_requests(corpus, args.corpus_step)
    )
    samples = [(n, r) for n, r in samples if args.only in n]
    engine = Engine(Settings(cache_dir=Path(tempfile.mkdtemp(prefix="rs-fallback-")), result_cache=False))
    rows = {}
    for name, request in samples:
        row = rows[name] = attempt(engine, request, args.full)
        tests = "" if row["tests"] is None else f" ({row['tests']} tests)"
        print(
            f"{row['engine'] or '-':9} {row['status'] or '-':14} {row['seconds']:7.2f}s {name}{tests}"
            + (f"\n          fallback: {row['fallback']}" if row["fallback"] else "")
            + (f"\n          message: {row['message']}" if row["engine"] is None else ""),
            flush=True,
        )
    counted = [r for r in rows.values() if r["engine"] is not None]
    fell = [n for n, r in rows.items() if r["engine"] == "verilator"]
    rate = 100.0 * len(fell) / len(counted) if counted else 0.0
    print(
        f"\n{len(fell)} of {len(counted)} testbenches fall back to Verilator: {rate:.1f} % "
        f"(target <= {args.max_rate:g} %)"
    )
    for name in fell:
        print(f"  {name}: {rows[name]['fallback']}")
    per_reason = collections.Counter(reason_kind(rows[n]["fallback"] or "") for n in fell)
    groups = {
        "stimulus cases": lambda n: not n.startswith(("public/", "corpus/")),
        "public": "public/",
        "corpus": "corpus/",
    }
    print("\nper reason (of all testbenches counted):")
    for kind, count in per_reason.most_common():
        print(f"  {count:3} ({100.0 * count / len(counted):4.1f} %)  {kind}")
    for group, test in groups.items():
        members = [
            n
            for n, r in rows.items()
            if r["engine"] is not None and (test(n) if callable(test) else n.startswith(test))
        ]
        if members:
            off = sum(rows[n]["engine"] == "verilator" for n in members)
            print(f"  {group}: {off} of {len(members)} fall back")
    # Not fallbacks, but worth a Verilator run: a fast-path timeout or error on a testbench that
    # Verilator finishes is a wrong reward that the rate above does not show.
    suspect = [n for n, r in rows.items() if r["engine"] == "fast" and r["status"] not in ("ok", "compile_error")]
    if suspect:
        print(f"{len(suspect)} fast-path result(s) not ok (compare with --full or engine=verilator):")
        for name in suspect:
            print(f"  {name}: {rows[name]['status']}: {rows[name]['message'][:200]}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rate_percent": rate,
                    "fallbacks": len(fell),
                    "testbenches": len(counted),
                    "fast_not_ok": suspect,
                    "per_reason": dict(per_reason),
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0 if rate <= args.max_rate else 1


if __name__ == "__main__":
    sys.exit(main())
