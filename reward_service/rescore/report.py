"""The summary of a rescoring run: pass@k, coverage, by difficulty, by kind and by problem,
as a JSON-able dict (:func:`summarise`) and as Markdown (:func:`render_markdown`,
:func:`render_cvdp_table`).

Definitions (also stated in the Markdown and in docs/rescoring.md):

* A problem's ``n`` counts its samples with a final result (any status but ``sandbox_error``);
  ``c`` those that passed (every target met: CVDP overall coverage >= TARGET).
  pass@k is :func:`~reward_service.rescore.passk.pass_at_k` per problem, averaged over the
  problems where it is defined (``n >= k``); the report says how many those are.
* ``passed_raw``/``pass@<k>_raw``: the same on the raw overall (no point proved unreachable
  excluded, as CVDP's harness grades), next to ``passed`` (CVDP problems judge their TARGET
  without proved points, docs/formal.md); ``passed_by_exclusion`` = ``passed - passed_raw``,
  the samples that pass only because those points are left out.
* Infrastructure failures (``sandbox_error``) and samples not scored yet (an interrupted run)
  are not in ``n``: they are counted apart (``sandbox_errors``, ``pending``), and the next run
  re-tries them.
* A sample's coverage is its ``overall`` ratio when its status is ``ok``, else 0 (it yielded no
  coverage — the convention of the coverage-RL papers' "average coverage"). A problem's mean
  coverage is the mean over its ``n`` samples; a group's is the mean over its problems (each
  problem weighs the same, as in pass@k).
* Per metric: the mean ratio over ``ok`` samples whose metric has points (not counting
  failures as 0: it says which kind of point the testbenches miss), averaged over problems.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reward_service.models import Status
from reward_service.rescore.passk import mean_pass_at_k, pass_at_k
from reward_service.rescore.store import Sample, SampleKey, is_final

__all__ = ["summarise", "render_markdown", "render_cvdp_table", "metric_mapping"]


def _average(values: Sequence[float]) -> float:
    """The mean of ``values``, which are not empty (ZeroDivisionError otherwise)."""
    return math.fsum(values) / len(values)


def _mean(values: Sequence[float]) -> float | None:
    """The mean of ``values``; None when there are none."""
    return _average(values) if values else None


@dataclass
class _Problem:
    id: str
    difficulty: str | None
    agentic: bool
    target: float | None
    samples: int = 0
    n: int = 0
    c: int = 0
    c_raw: int = 0  # passed on the raw overall (no point excluded: CVDP's own grading)
    coverage: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    sandbox_errors: int = 0
    pending: int = 0

    def add(self, record: Mapping[str, Any] | None) -> None:
        self.samples += 1
        if record is None:
            self.pending += 1
            return
        if not is_final(record):
            self.sandbox_errors += 1
            return
        self.n += 1
        self.c += bool(record.get("passed"))
        self.statuses[record["status"]] += 1
        coverage = record.get("coverage") or {}
        ok = record["status"] == Status.ok.value
        raw = coverage.get("overall")
        if record.get("overall_reachable") is None:  # nothing excluded: the judged figure is the raw one
            self.c_raw += bool(record.get("passed"))
        else:
            self.c_raw += bool(ok and raw is not None and self.target is not None and 100.0 * raw >= self.target)
        self.coverage.append((coverage.get("overall") or 0.0) if ok else 0.0)
        if ok:
            for name, ratio in coverage.items():
                if name != "overall" and ratio is not None:
                    self.metrics.setdefault(name, []).append(ratio)

    def summary(self, ks: Sequence[int]) -> dict[str, Any]:
        return {
            "difficulty": self.difficulty,
            "agentic": self.agentic,
            "target_percent": self.target,
            "samples": self.samples,
            "n": self.n,
            "passed": self.c,
            **{f"pass@{k}": pass_at_k(self.n, self.c, k) if self.n else None for k in ks},
            "passed_raw": self.c_raw,
            "passed_by_exclusion": self.c - self.c_raw,
            **{f"pass@{k}_raw": pass_at_k(self.n, self.c_raw, k) if self.n else None for k in ks},
            "mean_coverage": _mean(self.coverage),
            "coverage_per_metric": {m: _mean(v) for m, v in sorted(self.metrics.items())},
            "status_counts": dict(sorted(self.statuses.items())),
            "sandbox_errors": self.sandbox_errors,
            "pending": self.pending,
        }


def _group(problems: Sequence[_Problem], ks: Sequence[int]) -> dict[str, Any]:
    scored = [p for p in problems if p.n]
    out: dict[str, Any] = {
        "problems": len(scored),
        "samples": sum(p.n for p in scored),
        "passed": sum(p.c for p in scored),
    }
    counted: dict[str, int] = {}
    for k in ks:
        out[f"pass@{k}"], counted[f"pass@{k}"] = mean_pass_at_k(((p.n, p.c) for p in scored), k)
    out["pass@k_problems"] = counted
    # the same on the raw figure (no proved-unreachable point excluded, as CVDP graded): side by side
    out["passed_raw"] = sum(p.c_raw for p in scored)
    out["passed_by_exclusion"] = out["passed"] - out["passed_raw"]
    for k in ks:
        out[f"pass@{k}_raw"], _ = mean_pass_at_k(((p.n, p.c_raw) for p in scored), k)
    # a scored problem has one coverage per scored sample; a metric's list exists once it has one
    out["mean_coverage"] = _mean([_average(p.coverage) for p in scored])
    names = sorted({m for p in scored for m in p.metrics})
    out["coverage_per_metric"] = {m: _mean([_average(p.metrics[m]) for p in scored if p.metrics.get(m)]) for m in names}
    return out


def summarise(
    samples: Sequence[Sample],
    records: Mapping[SampleKey, Mapping[str, Any]],
    problems: Mapping[str, Any],
    ks: Sequence[int] = (1,),
    duplicates: int = 0,
) -> dict[str, Any]:
    """The report of ``samples`` given the result ``records`` (``ResultStore.load()``).

    ``problems`` maps ids to :class:`~reward_service.problems.Problem` (for ``difficulty``,
    ``agentic``, ``target_percent``); ``ks`` are the k of pass@k. Returns a JSON-able dict whose
    top level holds the whole set (``"pass@1"``, ``"pass@<k>"``, ``"pass@k_problems"``,
    ``"mean_coverage"``, ``"coverage_per_metric"``) and the counts ``samples`` (unique samples
    given), ``scored``, ``sandbox_errors``, ``pending``, ``duplicates``, ``complete``, plus
    ``by_difficulty``, ``by_kind`` (``non-agentic``/``agentic``) and ``by_problem``. The same
    inputs give the same dict (no timings, fixed order).
    """
    per: dict[str, _Problem] = {}
    for sample in samples:
        if sample.problem_id not in per:
            p = problems[sample.problem_id]
            per[sample.problem_id] = _Problem(
                sample.problem_id,
                getattr(p, "difficulty", None),
                bool(getattr(p, "agentic", False)),
                getattr(p, "target_percent", None),
            )
        per[sample.problem_id].add(records.get(sample.key))
    ordered = [per[pid] for pid in problems if pid in per]
    statuses = sum((p.statuses for p in ordered), Counter())
    infra = [[s.problem_id, s.sample_id] for s in samples if (r := records.get(s.key)) is not None and not is_final(r)]
    report: dict[str, Any] = {
        "k": list(ks),
        **_group(ordered, ks),
        "samples_given": len(samples),
        "scored": sum(p.n for p in ordered),
        "sandbox_errors": len(infra),
        "pending": sum(p.pending for p in ordered),
        "duplicates": duplicates,
        "status_counts": dict(sorted(statuses.items())),
    }
    report["complete"] = report["sandbox_errors"] == 0 and report["pending"] == 0
    difficulties = sorted({p.difficulty or "unknown" for p in ordered})
    report["by_difficulty"] = {
        d: _group([p for p in ordered if (p.difficulty or "unknown") == d], ks) for d in difficulties
    }
    report["by_kind"] = {
        kind: _group([p for p in ordered if p.agentic == agentic], ks)
        for kind, agentic in (("non-agentic", False), ("agentic", True))
    }
    report["by_problem"] = {p.id: p.summary(ks) for p in ordered}
    report["sandbox_error_samples"] = infra[:100]
    versions = sorted({f"{tool} {v}" for r in records.values() for tool, v in (r.get("versions") or {}).items()})
    report["tool_versions"] = versions
    return report


# -- Markdown -----------------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def _passk_cell(group: Mapping[str, Any], k: int) -> str:
    value, counted = group[f"pass@{k}"], group["pass@k_problems"][f"pass@{k}"]
    cell = _pct(value)
    if value is not None and counted < group["problems"]:
        cell += f" ({counted}/{group['problems']})"
    return cell


def _group_rows(rows: Sequence[tuple[str, Mapping[str, Any]]], ks: Sequence[int]) -> list[str]:
    head = ["group", "problems", "samples", "passed", *(f"pass@{k} %" for k in ks), "mean coverage %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in rows:
        cells = [
            name,
            str(g["problems"]),
            str(g["samples"]),
            str(g["passed"]),
            *(_passk_cell(g, k) for k in ks),
            _pct(g["mean_coverage"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _by_exclusion(group: Mapping[str, Any]) -> str:
    """``3 of the 5 passing samples pass only because points proved unreachable are excluded``."""
    n = group["passed"] - group["passed_raw"]
    return (
        f"{n} of the {group['passed']} passing samples {'passes' if n == 1 else 'pass'} only because "
        "coverage points proved unreachable (no stimulus can cover them) are left out of the TARGET check"
    )


def render_markdown(report: Mapping[str, Any], title: str = "Rescoring report") -> str:
    """The report as Markdown: totals, the pass@k/coverage table (all, by difficulty, by kind),
    coverage per metric, the per-problem table and the definitions."""
    ks = report["k"]
    out = [f"# {title}", ""]
    out.append(
        f"{report['samples_given']} samples of {len(report['by_problem'])} problems: "
        f"{report['scored']} scored, {report['sandbox_errors']} infrastructure failures (sandbox_error), "
        f"{report['pending']} not scored yet, {report['duplicates']} duplicate lines ignored."
    )
    if not report["complete"]:
        out.append("")
        out.append(
            "**Incomplete**: re-run the same command to score the samples not scored yet and to "
            "retry the infrastructure failures; the numbers below cover the scored samples only."
        )
    statuses = ", ".join(f"{s} {n}" for s, n in report["status_counts"].items()) or "none"
    out += ["", f"Statuses: {statuses}.", ""]
    rows = [("all", report)]
    rows += [(f"difficulty {d}", g) for d, g in report["by_difficulty"].items()]
    rows += [(kind, g) for kind, g in report["by_kind"].items() if g["problems"]]
    out += _group_rows(rows, ks)
    if report.get("passed_raw", report["passed"]) != report["passed"]:
        raw = ", ".join(f"pass@{k} {_pct(report[f'pass@{k}_raw'])} %" for k in ks)
        out += [
            "",
            f"**{_by_exclusion(report)}.** With those points counted (CVDP's own grading, docs/formal.md): "
            f"{report['passed_raw']} passed, {raw}; the table judges targets without them.",
        ]
    if report["coverage_per_metric"]:
        out += [
            "",
            "Coverage per metric (mean over `ok` samples whose metric has points, by problem):",
            "",
            "| metric | mean % |",
            "|---|---|",
        ]
        out += [f"| {m} | {_pct(v)} |" for m, v in report["coverage_per_metric"].items()]
    out += ["", "## By problem", ""]
    head = [
        "problem",
        "difficulty",
        "kind",
        "n",
        "passed",
        *(f"pass@{k} %" for k in ks),
        "passed only by exclusion",
        "mean coverage %",
        "statuses",
        "infra / pending",
    ]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pid, p in report["by_problem"].items():
        statuses = ", ".join(f"{s} {n}" for s, n in p["status_counts"].items())
        cells = [
            pid,
            p["difficulty"] or "",
            "agentic" if p["agentic"] else "non-agentic",
            str(p["n"]),
            str(p["passed"]),
            *(_pct(p[f"pass@{k}"]) for k in ks),
            str(p["passed_by_exclusion"]),
            _pct(p["mean_coverage"]),
            statuses,
            f"{p['sandbox_errors']} / {p['pending']}",
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "## Definitions",
        "",
        "- pass@k: unbiased estimator of Chen et al. 2021, `1 - C(n-c,k)/C(n,k)` per problem "
        "(n scored samples, c passed), averaged over problems. It is undefined for a problem with "
        "fewer than k samples (`n/a`); `(P/Q)` after a value means it averages the P of Q problems "
        "that have at least k samples.",
        "- passed: every target met (CVDP: overall coverage of the DUT instance >= the problem's TARGET, "
        "with the coverage points proved unreachable left out); passed only by exclusion: samples "
        "that pass so but not on the raw figure, where every point counts (CVDP's own grading).",
        "- mean coverage: overall coverage of a sample (0 when it yielded none: compile error, "
        "timeout, no code, ...), averaged per problem, then over problems.",
        "- Infrastructure failures (sandbox_error) are not counted as failures: they are left out of "
        "n and re-tried by the next run.",
    ]
    if report.get("tool_versions"):
        out += ["", "Tools: " + ", ".join(report["tool_versions"]) + "."]
    return "\n".join(out) + "\n"


def metric_mapping(metrics: Sequence[str]) -> str:
    """One paragraph stating which open-source metrics stand for the commercial tool's."""
    names = {
        "line": "Block",
        "branch": "Branch",
        "toggle": "Toggle",
        "expr": "Expression",
        "user": "Assertion/cover",
        "fsm_state": "FSM state",
        "fsm_arc": "FSM transition",
        "functional": "Covergroup",
    }
    pairs = ", ".join(f"`{m}` for {names.get(m, m)}" for m in metrics)
    return (
        "Metric mapping: CVDP cid012 scores with a commercial simulator (`xrun -coverage all`, "
        'IMC "Overall Average" of the DUT instance). We measure the DUT instance with Verilator '
        f"(open source) and take the unweighted mean of {pairs} — Verilator's point types standing "
        "for IMC's coverage kinds; FSM coverage is off (it crashes the pinned Verilator on some RTL). "
        "Pass = that overall >= the problem's TARGET (`src/.env`). Known differences (docs/coverage.md): "
        "Verilator's point model differs from IMC's (e.g. an unreachable `default:` arm counts, so some "
        "TARGETs cannot be reached), Verilator is 2-state (no X/Z toggles), and random sequences differ "
        "between simulators. Numbers are therefore comparable in kind, not identical, to the papers'."
    )


def render_cvdp_table(report: Mapping[str, Any], metrics: Sequence[str], problems_total: int) -> str:
    """The CVDP-ECov table as LLM4Cov (arXiv 2602.16953) and CHORUS (arXiv 2608.10090) report
    it: Pass@1 averaged over the n samples of each problem and mean coverage, non-agentic and
    agentic rows apart, then the metric mapping."""
    head = "| setting | problems | samples / problem | Pass@1 % | mean coverage % |"
    lines = ["# CVDP-ECov (cid012) evaluation", "", head, "|---|---|---|---|---|"]
    for name, g in (*report["by_kind"].items(), ("all", report)):
        per = f"{g['samples'] / g['problems']:.1f}" if g["problems"] else "0"
        lines.append(f"| {name} | {g['problems']} | {per} | {_pct(g['pass@1'])} | {_pct(g['mean_coverage'])} |")
    evaluated = len(report["by_problem"])
    lines += [""]
    if report.get("passed_by_exclusion"):
        lines.append(f"**{_by_exclusion(report)}** (Pass@1 on the raw figure: {_pct(report['pass@1_raw'])} %).")
    if evaluated < problems_total:
        lines.append(
            f"**{problems_total - evaluated} of the {problems_total} problems have no completion** "
            "and are not in the table."
        )
    if not report["complete"]:
        lines.append(
            f"**Incomplete**: {report['pending']} samples not scored, {report['sandbox_errors']} "
            "infrastructure failures; re-run to finish."
        )
    ceiling = report.get("ceiling")
    if ceiling is not None:
        per = ceiling["problems"]
        missed = ", ".join(f"{pid} ({per[pid]['undecided']} undecided)" for pid in ceiling["not_shown"])
        lines.append(
            f"Ceiling (points proved unreachable or witnessed by a replayed closure testbench, docs/formal.md): "
            f"TARGET shown attainable for {len(per) - len(ceiling['not_shown'])} of {len(per)} problems"
            + (f"; not shown: {missed}." if missed else ".")
        )
    lines += ["", metric_mapping(metrics), ""]
    return "\n".join(lines)
