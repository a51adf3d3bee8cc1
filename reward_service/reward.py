"""Reward shaping (DESIGN.md, "Reward shaping") and pass/fail against targets."""

from __future__ import annotations

from reward_service.models import CoverageReport, RewardSpec, Status, Target, TargetCheck

#: Statuses under which a sample "yields coverage" and is scored on it.
_SCORED = {Status.ok}


def targets_met(report: CoverageReport, targets: list[Target]) -> bool:
    """True when ``100 * ratio >= percent`` (unrounded) for every target; no targets -> True
    if there is any coverage. A target on a metric with no points or unavailable is not met."""
    return report.overall is not None and all(c.met for c in check_targets(report, targets))


def check_targets(report: CoverageReport, targets: list[Target], figure: str = "raw") -> list[TargetCheck]:
    """Each of ``targets`` judged on ``report`` (the raw report, or with ``figure`` "reachable"
    the one without the points proved unreachable): its value in percent and whether it is met
    (``100 * ratio >= percent``, unrounded; a metric with no points or unavailable is not met)."""
    checks = []
    for target in targets:
        ratio: float | None
        if target.metric == "overall":
            ratio = report.overall
        else:
            m = report.metrics.get(target.metric)
            ratio = m.ratio if m is not None and m.available else None
        value = None if ratio is None else 100.0 * ratio
        checks.append(
            TargetCheck(
                metric=target.metric,
                percent=target.percent,
                figure="reachable" if figure == "reachable" else "raw",
                value=value,
                met=value is not None and value >= target.percent,
            )
        )
    return checks


def shape_reward(status: Status, report: CoverageReport, passed: bool, spec: RewardSpec) -> float | None:
    """The scalar reward of one sample.

    - ``chorus`` (CHORUS, arXiv 2608.10090; LLM4Cov, arXiv 2602.16953): 0 when the sample yields
      no coverage (invalid input, compile error, crash without coverage data, timeout unless
      ``spec.timeout_scores``), else ``1 + overall`` in [1, 2], whatever the target.
    - ``ratio``: ``overall`` in [0, 1]; a failed sample scores ``spec.failure_value``.
    - ``pass``: 1.0 when every target is met, else 0.0.

    Returns None for ``sandbox_error``: an infrastructure failure is never disguised as a reward.
    """
    if status == Status.sandbox_error:
        return None
    scored = status in _SCORED or (status == Status.timeout and spec.timeout_scores)
    # None when the sample yields no coverage
    coverage = report.overall if scored else None
    if spec.shaping == "chorus":
        return 1.0 + coverage if coverage is not None else 0.0
    if spec.shaping == "ratio":
        return coverage if coverage is not None else spec.failure_value
    return 1.0 if (coverage is not None and passed) else 0.0
