"""Small robust statistics the perf gate is built from (pure, standard library only)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def residuals(values: Sequence[float]) -> list[float]:
    """Deviations from the median; with an odd count the median's own zero carries no information."""
    if len(values) < 2:
        return []
    m = median(values)
    out = [v - m for v in values]
    if len(values) % 2 == 1:
        out.remove(min(out, key=abs))
    return out


def spread(values: Sequence[float]) -> tuple[float, int]:
    """(sigma, degrees of freedom) of one group's repeats, from deviations about its median.

    A root mean square, not a MAD: the noise is one-sided (a preempted run is slow, never fast),
    and a rare slow repeat should widen the limit rather than be ignored by the estimate.
    """
    res = residuals(values)
    if not res:
        return 0.0, 0
    dof = len(values) - 1
    return math.sqrt(sum(r * r for r in res) / dof), dof


def shrink(sigma: float, dof: int, prior: float, prior_dof: float) -> float:
    """Pull a few-sample sigma toward the family's typical sigma, so one lucky quiet item is not believed."""
    if dof + prior_dof <= 0:
        return sigma
    return math.sqrt((dof * sigma * sigma + prior_dof * prior * prior) / (dof + prior_dof))


def z_two_sided(alpha: float) -> float:
    """Normal quantile leaving ``alpha`` in both tails together."""
    return statistics.NormalDist().inv_cdf(1.0 - alpha / 2.0)


def z_one_sided(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


def hodges_lehmann(base: Sequence[float], head: Sequence[float]) -> float:
    """Median of all head-minus-base differences: a robust estimate of the shift between two groups."""
    return median([h - b for h in head for b in base])


def finite(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
