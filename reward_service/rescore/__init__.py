"""Batch rescoring: a completions JSONL scored against CVDP problems into pass@k and coverage.

* :mod:`.passk` — the unbiased pass@k estimator (Chen et al. 2021);
* :mod:`.store` — reading completions, the resumable results JSONL;
* :mod:`.runner` — scoring what is missing, concurrently, embedded or through a server;
* :mod:`.report` — the summary (JSON and Markdown, CVDP-ECov table);
* :mod:`.commands` — the ``rescore`` and ``eval-cvdp`` commands.

See docs/rescoring.md.
"""

from reward_service.rescore.passk import mean_pass_at_k, pass_at_k
from reward_service.rescore.report import render_markdown, summarise
from reward_service.rescore.runner import RunOutcome, engine_scorer, plan, run
from reward_service.rescore.store import CompletionSet, ResultStore, Sample, read_completions

__all__ = [
    "pass_at_k",
    "mean_pass_at_k",
    "summarise",
    "render_markdown",
    "run",
    "plan",
    "engine_scorer",
    "RunOutcome",
    "ResultStore",
    "Sample",
    "CompletionSet",
    "read_completions",
]
