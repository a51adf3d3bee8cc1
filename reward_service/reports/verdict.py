"""The verdict of a scored sample in words, as the CLI and the HTML report print it: each
target with the figure it was judged on (raw, or reachable: points proved unreachable left
out, docs/formal.md), and how the proof's kinds read."""

from __future__ import annotations

from reward_service.models import ScoreResult

__all__ = ["proved_points", "verdict_text", "KIND_TEXT"]

#: What each proof kind (``PointRecord.unreachable``) means, for a reader without docs/formal.md.
KIND_TEXT = {
    "constant": "its condition is false for every input and state",
    "invariant": "no state the design can reach gets there",
    "stuck at 0": "the bit never leaves 0",
    "stuck at 1": "the bit never leaves 1",
}


def proved_points(result: ScoreResult) -> int:
    """Points proved unreachable that apply to ``result`` (0: none, or no proof run)."""
    return sum(m.unreachable for m in result.coverage.metrics.values())


def verdict_text(result: ScoreResult, targets_given: bool, target_name: str) -> str:
    """``passed: reachable 100.00 >= TARGET 90 (raw 84.44; 25 points proved unreachable and
    excluded)``: each of ``result.targets`` with the figure it was judged on and its value in
    percent, ``target_name`` naming the thresholds (``TARGET`` for a CVDP problem);
    ``passed: no target given`` when the request had none (``targets_given`` False)."""
    head = "passed" if result.passed else "failed"
    if not result.targets:
        if not targets_given:
            return f"{head}: no target given"
        return head
    parts = []
    for check in result.targets:
        name = "" if check.metric == "overall" else f"{check.metric} "
        value = "n/a" if check.value is None else f"{check.value:.2f}"
        sign = ">=" if check.met else "<"
        text = f"{name}{check.figure} {value} {sign} {target_name} {check.percent:g}"
        if check.figure == "reachable":
            raw = result.coverage.overall if check.metric == "overall" else result.coverage.metrics[check.metric].ratio
            raw_text = "n/a" if raw is None else f"{100 * raw:.2f}"
            text += f" (raw {raw_text}; {proved_points(result)} points proved unreachable and excluded)"
        parts.append(text)
    return f"{head}: " + "; ".join(parts)
