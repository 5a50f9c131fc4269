"""Slow drift across history: where a series of per-run values shifted to a new level.

A penalised change-point search (the optimal-partitioning recursion PELT prunes; history
windows are tens of points, so the plain O(n^2) form is fast enough) on log values with a
squared-error cost. The penalty is ``beta * sigma^2 * log(n)`` with sigma estimated from
successive differences (robust to the shift itself), so only a shift well above the
run-to-run noise splits the series. Each change point names the commit where the new level begins.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

BETA = 3.0
MIN_SEGMENT = 3
MIN_CHANGE = 0.01  # a level shift smaller than 1 % is not worth naming a commit for


@dataclass(frozen=True)
class Drift:
    index: int  # first point of the new level
    commit: str
    change: float  # relative change of the level (throughput sense: -0.04 = 4 % slower)


def _noise(logs: Sequence[float]) -> float:
    diffs = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    if not diffs:
        return 0.0
    # median absolute successive difference / (0.6745 * sqrt 2): sigma, unmoved by one level shift
    return statistics.median(abs(d) for d in diffs) / (0.6745 * math.sqrt(2))


def change_points(values: Sequence[float], *, beta: float = BETA, min_segment: int = MIN_SEGMENT,
                  min_sigma: float = 0.002) -> list[int]:
    """Indices where a new level begins (optimal partition under a per-change penalty)."""
    n = len(values)
    if n < 2 * min_segment:
        return []
    x = [math.log(v) for v in values]
    sigma = max(_noise(x), min_sigma)
    penalty = beta * sigma * sigma * math.log(n)
    s1 = [0.0]
    s2 = [0.0]
    for v in x:
        s1.append(s1[-1] + v)
        s2.append(s2[-1] + v * v)

    def cost(a: int, b: int) -> float:  # squared error of x[a:b] around its mean
        m = b - a
        return s2[b] - s2[a] - (s1[b] - s1[a]) ** 2 / m

    best = [0.0] + [math.inf] * n
    last = [0] * (n + 1)
    best[0] = -penalty
    for b in range(min_segment, n + 1):
        for a in range(0, b - min_segment + 1):
            if a and a < min_segment:
                continue
            if best[a] == math.inf:
                continue
            c = best[a] + cost(a, b) + penalty
            if c < best[b]:
                best[b], last[b] = c, a
    points, b = [], n
    while b > 0:
        a = last[b]
        if a:
            points.append(a)
        b = a
    return sorted(points)


def detect(series: Sequence[tuple[str, float]], *, min_change: float = MIN_CHANGE,
           **kw: float) -> list[Drift]:
    """Change points of ``(commit, value)`` pairs, oldest first; value higher is better."""
    values = [v for _, v in series]
    points = change_points(values, **kw)
    out = []
    edges = [0, *points, len(values)]
    for i, p in enumerate(points):
        before = statistics.median(values[edges[i]:p])
        after = statistics.median(values[p:edges[i + 2]])
        if abs(after / before - 1.0) >= min_change:
            out.append(Drift(p, series[p][0], after / before - 1.0))
    return out
