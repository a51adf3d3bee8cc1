#!/usr/bin/env python
"""Instructions (valgrind callgrind, deterministic under load) of Icarus on one sample, bare
against the fast path's instrumented sources (issue 20: where the instrumentation costs in the
simulation's hot loop). For each of bare and instrumented: ``iverilog -g2012 -o x.vvp -s <top>
<rtl> <tb>`` (callgrind follows ivlpp and ivl: the compile's total) and ``vvp -n x.vvp``.

The instrumented sources are those the fast path builds (``fastcov.backend.instrumented`` of
the design, ``instrument.emulate_testbench`` of the testbench, the token placeholder left in).

    python bench/floor_callgrind.py --set stimulus --sample write_through_data_direct_mapped_cache_0001:weak
    python bench/floor_callgrind.py --set others --sample cvdp_agentic_direct_map_cache_0005:model --keep /tmp/x
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import other_candidates
from bench_stimulus import DEFAULT_CASES, Case, load_cases

from reward_service import hdl
from reward_service.fastcov.backend import instrumented
from reward_service.fastcov.instrument import emulate_testbench


def instructions(argv: list[str], cwd: Path) -> int:
    """Total instructions callgrind counts for ``argv`` and its children."""
    out = cwd / "cg"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}/cg.%p", *argv],
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    total = 0
    for f in out.iterdir():
        m = re.search(r"^(?:summary|totals): (\d+)", f.read_text(errors="replace"), re.M)
        total += int(m.group(1)) if m else 0
    return total


def measure(files: dict[str, str], tb: str, top: str, root: Path) -> tuple[int, int]:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    srcs = [n for n in files if hdl.is_hdl_source(n) and n != tb] + [tb]
    compile_i = instructions(["iverilog", "-g2012", "-o", "x.vvp", "-s", top, *srcs], root)
    run_i = instructions(["vvp", "-n", "x.vvp"], root)
    return compile_i, run_i


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("stimulus", "others"), default="stimulus")
    ap.add_argument("--sample", required=True, help="<problem id or its short name>:<weak|good|best|model>")
    ap.add_argument("--keep", type=Path, help="write the sources here (bare/, fast/)")
    args = ap.parse_args()
    problem, tb = args.sample.rsplit(":", 1)
    if args.set == "stimulus":
        cases: list[Case] = load_cases(DEFAULT_CASES, DEFAULT_CASES.parent / "cvdp" / "cid012.jsonl", None, [tb])
    else:
        cases = other_candidates(DEFAULT_CASES)
    case = next(c for c in cases if problem in (c.problem, c.short) and c.tb == tb)
    root = args.keep or Path(tempfile.mkdtemp(prefix="floor-cg-"))
    bare = measure({**case.design, case.tb_file: case.tb_text}, case.tb_file, case.top, root / "bare")
    inst = instrumented(dict(case.design))
    tb_files, _ = emulate_testbench({case.tb_file: case.tb_text})
    fast = measure({**inst.files, **tb_files}, case.tb_file, case.top, root / "fast")
    print(
        f"{case.short} {case.tb}: compile bare {bare[0] / 1e6:.1f} M fast {fast[0] / 1e6:.1f} M; "
        f"vvp bare {bare[1] / 1e6:.1f} M fast {fast[1] / 1e6:.1f} M"
    )
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
