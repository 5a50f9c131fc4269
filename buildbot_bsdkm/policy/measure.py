"""Measurements: which number of a benchmark a gate reads, the baseline's, and how they are shown.

``per_second`` numbers are normalised rates (higher is better); ``cycles`` lower is better.
"""

from __future__ import annotations

import fnmatch
import re
import statistics
from dataclasses import dataclass

from ..model import RATE_UNITS, BenchKind, Benchmark, LogResult, RunResult
from .rules import CYCLES, PER_SECOND, Policy


@dataclass(frozen=True)
class Item:
    """A benchmark with the block size it ran at (from the item or its log's header)."""

    bench: Benchmark
    block: int | None
    index: int  # position in RunResult.benchmarks

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.bench.name, self.block)


def items_of(run: RunResult) -> list[Item]:
    pairs = [(b, log) for log in run.logs for b in log.benchmarks]
    return [Item(b, block_of(b, log), i) for i, (b, log) in enumerate(pairs)]


def block_of(b: Benchmark, log: LogResult) -> int | None:
    if b.block_size is not None:
        return b.block_size
    block = log.metadata.get("block_bytes")
    return int(block) if isinstance(block, int | float) and not isinstance(block, bool) else None


def rate_of(b: Benchmark) -> float | None:
    if b.failed:
        return None
    if b.per_second > 0:
        return b.per_second
    factor = RATE_UNITS.get(b.unit)
    return b.value * factor if factor and b.value > 0 else None


def measure(b: Benchmark, metric: str) -> float | None:
    """The number a gate compares: normalised rate (higher is better) or cycles (lower is better)."""
    if metric == CYCLES:
        return b.cycles if b.cycles is not None and b.cycles > 0 and not b.failed else None
    return rate_of(b)


def display_unit(b: Benchmark, metric: str) -> str:
    if metric == CYCLES:
        return b.cycles_unit or ("cycles/op" if b.kind == BenchKind.ASYMMETRIC else "cycles/byte")
    if b.unit in RATE_UNITS:
        return b.unit
    return "ops/s" if b.kind == BenchKind.ASYMMETRIC else "bytes/s"


def shown(b: Benchmark, metric: str, value: float) -> float:
    """``value`` (normalised) in the unit ``display_unit`` names."""
    if metric == CYCLES:
        return value
    return value / RATE_UNITS[display_unit(b, metric)]


def fmt_num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def metric_for(rule_metric: str, policy: Policy, *runs: RunResult) -> str:
    metric = rule_metric if rule_metric != "auto" else policy.metric
    if metric != "auto":
        return metric
    return CYCLES if any(r.clock_quantised for r in runs) else PER_SECOND


def metric_note(metric: str, *runs: RunResult) -> str:
    if metric == CYCLES and any(r.clock_quantised for r in runs):
        return ", gated on cycles: benchmark clock is quantised"
    return ""


def matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


class Baseline:
    """Baseline items of one (target, variant); repeats of an item are reduced to their median."""

    def __init__(self, runs: list[RunResult]) -> None:
        self._items: dict[tuple[str, int | None], list[Benchmark]] = {}
        for r in runs:
            for item in items_of(r):
                self._items.setdefault(item.key, []).append(item.bench)
        self._medians: dict[tuple[tuple[str, int | None], str], float | None] = {}

    def has(self, key: tuple[str, int | None]) -> bool:
        return key in self._items

    def median(self, key: tuple[str, int | None], metric: str) -> float | None:
        cached = (key, metric)
        if cached not in self._medians:
            self._medians[cached] = median([measure(b, metric) for b in self._items[key]])
        return self._medians[cached]


def baseline_of(baseline: list[RunResult], run: RunResult) -> Baseline | None:
    same = [r for r in baseline if r.target == run.target and r.variant == run.variant]
    return Baseline(same) if same else None


BLOCK_SUFFIX = re.compile(r"@\d+$")


def ratio_series(acc: RunResult, sw: RunResult, pattern: str, metric: str) -> dict[str, dict[int, float]]:
    """family -> {block size: accelerated/software speed ratio} for items run at known block sizes."""
    soft = {(BLOCK_SUFFIX.sub("", i.bench.name), i.block): i.bench for i in items_of(sw) if i.block}
    out: dict[str, dict[int, float]] = {}
    for item in items_of(acc):
        if item.block is None or not matches(item.bench.name, pattern):
            continue
        family = BLOCK_SUFFIX.sub("", item.bench.name)
        other = soft.get((family, item.block))
        a = measure(item.bench, metric)
        s = measure(other, metric) if other is not None else None
        if a is None or s is None:
            continue
        out.setdefault(family, {})[item.block] = a / s if metric == PER_SECOND else s / a
    return out


def crossover_block(ratios: dict[int, float]) -> int | None:
    """Smallest block size from which the accelerated side is faster at every larger size; None = never."""
    point = None
    for size in sorted(ratios, reverse=True):
        if ratios[size] <= 1.0:
            break
        point = size
    return point

