"""Gates between two variants on one target: speedups, and crossovers across block sizes."""

from __future__ import annotations

from collections.abc import Iterator

from ..checks import CheckKind
from ..model import Benchmark, RunResult
from .context import Evaluation
from .measure import (
    PER_SECOND,
    Item,
    crossover_block,
    display_unit,
    fmt_num,
    items_of,
    matches,
    measure,
    metric_for,
    metric_note,
    ratio_series,
    shown,
)
from .rules import CrossoverRule, SpeedupRule


def _pairs(ev: Evaluation, accelerated: str, software: str, targets: tuple[str, ...]) -> Iterator[
        tuple[RunResult, RunResult]]:
    for acc in ev.runs:
        if acc.variant != accelerated or (targets and acc.target not in targets):
            continue
        sw = next((r for r in ev.runs if r.variant == software and r.target == acc.target), None)
        if sw is None:
            ev.note(f"{acc.target}: no {software} run to compare {accelerated} with")
            continue
        yield acc, sw


def speedup(ev: Evaluation, rule: SpeedupRule) -> None:
    for acc, sw in _pairs(ev, rule.accelerated, rule.software, rule.targets):
        metric = metric_for(rule.metric, ev.policy, acc, sw)
        soft = {i.key: i.bench for i in items_of(sw)}
        compared = 0
        for item in items_of(acc):
            if matches(item.bench.name, rule.pattern) and item.key in soft:
                compared += _speedup_check(ev, rule, acc, sw, metric, item, soft[item.key])
        if not compared:
            ev.note(f"{acc.target}: no benchmark matching {rule.pattern!r} in both "
                    f"{rule.accelerated} and {rule.software}")


def _speedup_check(ev: Evaluation, rule: SpeedupRule, acc: RunResult, sw: RunResult, metric: str,
                   item: Item, slow: Benchmark) -> int:
    fast = item.bench
    a, s = measure(fast, metric), measure(slow, metric)
    if a is None or s is None:
        return 0
    ratio = a / s if metric == PER_SECOND else s / a
    ok = ratio >= rule.min_ratio
    msg = (f"{fast.name} {rule.accelerated} is {ratio:.2f}x {rule.software} "
           f"({fmt_num(shown(fast, metric, a))} vs {fmt_num(shown(fast, metric, s))} "
           f"{display_unit(fast, metric)}; minimum {rule.min_ratio:g}x{metric_note(metric, acc, sw)})")
    ev.add(acc, fast.name, CheckKind.SPEEDUP, ok, msg, value=round(ratio, 3), unit="x",
           threshold=rule.min_ratio, metric=metric,
           detail={"software": rule.software, "accelerated_value": shown(fast, metric, a),
                   "software_value": shown(fast, metric, s), "value_unit": display_unit(fast, metric)},
           item=item.index)
    return 1


def crossover(ev: Evaluation, rule: CrossoverRule) -> None:
    """A crossover rule over two variants (``paths: true`` rules are ``paths.py``'s)."""
    for acc, sw in _pairs(ev, rule.accelerated, rule.software, rule.targets):
        metric = metric_for(rule.metric, ev.policy, acc, sw)
        # one block size says nothing about where the lines cross
        series = {f: r for f, r in ratio_series(acc, sw, rule.pattern, metric).items() if len(r) > 1}
        if not series:
            ev.note(f"{acc.target}: no benchmark matching {rule.pattern!r} ran at two or more block "
                    f"sizes in both {rule.accelerated} and {rule.software}")
        for family, ratios in sorted(series.items()):
            _crossover_check(ev, rule, acc, metric, family, ratios)


def _crossover_check(ev: Evaluation, rule: CrossoverRule, acc: RunResult, metric: str, family: str,
                     ratios: dict[int, float]) -> None:
    point = crossover_block(ratios)
    where = "never" if point is None else f"{point} bytes"
    ok = rule.max_block is None or (point is not None and point <= rule.max_block)
    steps = ", ".join(f"{size}: {ratio:.2f}x" for size, ratio in sorted(ratios.items()))
    limit = "" if rule.max_block is None else f"; limit {rule.max_block} bytes"
    msg = (f"{family}: {rule.accelerated} vs {rule.software} crossover {where} ({steps}{limit}"
           f"{metric_note(metric, acc)})")
    ev.add(acc, family, CheckKind.CROSSOVER, ok, msg, value=float(point) if point is not None else None,
           unit="bytes", threshold=float(rule.max_block) if rule.max_block else None, metric=metric,
           detail={"software": rule.software, "crossover": point if point is not None else "never",
                   "ratios": {str(k): round(v, 3) for k, v in sorted(ratios.items())}})
