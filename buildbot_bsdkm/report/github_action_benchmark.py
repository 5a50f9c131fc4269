"""Results in github-action-benchmark's JSON (``tool: customBiggerIsBetter`` / ``customSmallerIsBetter``).

One entry per (target, variant, item): the best repeat's throughput (bigger is better), and,
where the log printed them, its cycles per byte/op in a second document (smaller is better), so
the action's gh-pages charts and alert comments can be used as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..model import RATE_UNITS, BenchKind, RunResult


def _rate(value: float, unit: str) -> float | None:
    factor = RATE_UNITS.get(unit)
    return value * factor if factor else None


def entries(runs: Iterable[RunResult]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(bigger-is-better throughput entries, smaller-is-better cycles entries)."""
    best: dict[str, tuple[float, str, int]] = {}
    cycles: dict[str, list[float]] = {}
    for run in runs:
        for log in run.logs:
            for b in log.benchmarks:
                if b.failed or b.value <= 0:
                    continue
                name = f"{run.target}/{run.variant}: {b.name}"
                norm = b.per_second or _rate(b.value, b.unit) or b.value
                seen = best.get(name)
                count = (seen[2] if seen else 0) + 1
                if seen is None or norm > seen[0]:
                    best[name] = (norm, f"{b.value:.3f} {b.unit}", count)
                else:
                    best[name] = (seen[0], seen[1], count)
                if b.cycles:
                    per = " cycles/op" if b.kind == BenchKind.ASYMMETRIC else " cycles/byte"
                    cycles.setdefault(name + per, []).append(b.cycles)
    bigger = []
    for name, (_, shown, n) in best.items():
        value, unit = shown.split(" ", 1)
        bigger.append({"name": name, "unit": unit, "value": float(value), "extra": f"best of {n} repeat(s)"})
    smaller = [{"name": name, "unit": name.rsplit(" ", 1)[1], "value": min(v), "extra": f"best of {len(v)}"}
               for name, v in cycles.items()]
    return bigger, smaller
