"""The unbiased pass@k estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
on Code", arXiv 2107.03374, section 2.1 and its numerically stable implementation, Figure 3).

For one problem with ``n`` scored samples of which ``c`` passed, the probability that at least
one of ``k`` samples drawn without replacement passes is ``1 - C(n-c, k) / C(n, k)``. The
binomials overflow floats for large ``n``, so it is computed as the product
``1 - prod_{i=n-c+1}^{n} (1 - k / i)``. With ``k > n`` the estimate is undefined (there are not
``k`` samples to draw): :func:`pass_at_k` returns None and :func:`mean_pass_at_k` leaves the
problem out of the mean and says how many problems it averaged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["pass_at_k", "mean_pass_at_k"]


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """pass@k of one problem from ``n`` samples with ``c`` passing, in [0, 1].

    Returns None when ``k > n`` (undefined). Raises ``ValueError`` unless ``0 <= c <= n`` and
    ``k >= 1``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k > n:
        return None
    if n - c < k:  # every draw of k samples holds a passing one
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> tuple[float | None, int]:
    """Mean pass@k over problems given as ``(n, c)`` pairs, skipping those where it is
    undefined (``k > n``). Returns ``(mean or None when no problem qualifies, problems averaged)``.
    """
    values = [v for n, c in counts if (v := pass_at_k(n, c, k)) is not None]
    return (math.fsum(values) / len(values) if values else None), len(values)
