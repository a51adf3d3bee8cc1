"""HTML page of a rescoring run (``rescore``/``eval-cvdp --report-html FILE``): pass@k and mean
coverage for the whole set, by difficulty and by kind, coverage per metric, and one row per
problem with its pass@k, mean coverage (a bar) and statuses.

Made from :func:`reward_service.rescore.report.summarise`'s dict with the Jinja2 template
``templates/rescore.html.j2`` (autoescaped, inline CSS, no script); the numbers and their
definitions are the Markdown report's (docs/rescoring.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import markupsafe

from reward_service.reports.html import template

__all__ = ["render", "write"]

_CODE_SPAN = re.compile(r"`([^`]+)`")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def _code_spans(text: str) -> markupsafe.Markup:
    """``text`` escaped, with its Markdown `code` spans as <code>: the report's prose (the metric
    mapping) is written for the Markdown report, whose backticks the page showed as such."""
    parts = _CODE_SPAN.split(text)  # odd indexes: the spans' contents
    return markupsafe.Markup("").join(
        markupsafe.Markup("<code>{}</code>").format(part) if i % 2 else markupsafe.escape(part)
        for i, part in enumerate(parts)
    )


def render(report: Mapping[str, Any], title: str = "Rescoring report") -> str:
    """The page of ``report`` (a :func:`~reward_service.rescore.report.summarise` dict) as HTML."""
    ks = report["k"]
    groups = [("all", report)]
    groups += [(f"difficulty {d}", g) for d, g in report["by_difficulty"].items()]
    groups += [(kind, g) for kind, g in report["by_kind"].items() if g["problems"]]
    return template("rescore.html.j2").render(
        title=title, report=report, ks=ks, groups=groups, pct=_pct, code=_code_spans
    )


def write(report: Mapping[str, Any], path: Path, title: str = "Rescoring report") -> Path:
    """Write the page to ``path`` (its folder created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(report, title), encoding="utf-8")
    return path
