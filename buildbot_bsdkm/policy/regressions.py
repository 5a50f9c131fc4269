"""Fixed-limit regression gates: each item, or the geometric mean of many, against a baseline."""

from __future__ import annotations

import math

from ..checks import GEOMEAN_PREFIX, CheckKind
from ..model import RunResult
from .context import Evaluation
from .instruction_gates import instruction_regressions, instruction_rules
from .instruction_settings import INSTRUCTIONS
from .learned import learned_regressions
from .measure import (
    PER_SECOND,
    Baseline,
    Item,
    baseline_of,
    display_unit,
    fmt_num,
    items_of,
    matches,
    measure,
    metric_for,
    metric_note,
    shown,
)
from .rules import RegressionRule


def regressions(ev: Evaluation) -> None:
    """The learned-limit rules (``learned.py``), the fixed ones against the baseline, then the counted
    instructions (``metric: instructions``, ``instruction_gates.py``: after the clock's, to compare)."""
    if any(r.limit == "learned" for r in ev.policy.regressions):
        learned_regressions(ev)
    _clock_regressions(ev)
    instruction_regressions(ev)


def _clock_regressions(ev: Evaluation) -> None:
    counted = instruction_rules(ev.policy.regressions)
    if not any(r.limit == "fixed" and r not in counted for r in ev.policy.regressions):
        return
    if ev.baseline is None:
        ev.note("no baseline given: regression gates were not evaluated")
        return
    for run in ev.runs:
        base = baseline_of(ev.baseline, run)
        if base is None:
            ev.note(f"{run.target}/{run.variant}: not in the baseline; regression gates skipped")
            continue
        _item_regressions(ev, run, base)
        for rule in ev.policy.regressions:
            if (rule.aggregate == "geomean" and rule.limit == "fixed" and rule.scope.covers(run)
                    and rule not in counted):
                _geomean_regression(ev, run, rule, base)


def _item_regressions(ev: Evaluation, run: RunResult, base: Baseline) -> None:
    item_rules = [r for r in ev.policy.regressions if r.aggregate == "item" and r.limit == "fixed"
                  and r.scope.covers(run) and r.metric != INSTRUCTIONS]
    rule_of: dict[str, RegressionRule | None] = {}  # pattern matching once per distinct name
    for item in items_of(run):
        name = item.bench.name
        if name not in rule_of:
            rule_of[name] = next((r for r in item_rules if matches(name, r.pattern)), None)
        rule = rule_of[name]
        if rule is None or item.bench.failed or not base.has(item.key):
            continue
        _item_regression(ev, run, rule, item, base)


def _item_regression(ev: Evaluation, run: RunResult, rule: RegressionRule, item: Item,
                     base: Baseline) -> None:
    metric = metric_for(rule.metric, ev.policy, run)
    b = item.bench
    head = measure(b, metric)
    before = base.median(item.key, metric)
    if head is None or before is None:
        ev.note(f"{run.target}/{run.variant}: {b.name} has no {metric} value in the run or the "
                "baseline; its regression gate was not evaluated")
        return
    delta = (head - before) / before * 100.0
    worse = -delta if metric == PER_SECOND else delta
    ok = worse <= rule.max_pct
    unit = display_unit(b, metric)
    direction = "below" if delta < 0 else "above"
    msg = (f"{b.name} {fmt_num(shown(b, metric, head))} {unit} is {abs(delta):.1f}% {direction} "
           f"baseline {fmt_num(shown(b, metric, before))} {unit} "
           f"(limit {rule.max_pct:g}%{metric_note(metric, run)})")
    ev.add(run, b.name, CheckKind.REGRESSION, ok, msg, value=shown(b, metric, head), unit=unit,
           baseline=shown(b, metric, before), delta_pct=round(delta, 2), threshold=rule.max_pct,
           metric=metric, item=item.index)


def _geomean_regression(ev: Evaluation, run: RunResult, rule: RegressionRule, base: Baseline) -> None:
    metric = metric_for(rule.metric, ev.policy, run)
    logs = []
    for item in items_of(run):
        if not matches(item.bench.name, rule.pattern) or not base.has(item.key):
            continue
        head = measure(item.bench, metric)
        before = base.median(item.key, metric)
        if head is not None and before is not None:
            logs.append(math.log(head / before))
    if not logs:
        return
    change = (math.exp(sum(logs) / len(logs)) - 1.0) * 100.0
    worse = -change if metric == PER_SECOND else change
    ok = worse <= rule.max_pct
    what = "throughput" if metric == PER_SECOND else "cycles"
    msg = (f"geometric mean {what} of {len(logs)} items matching {rule.pattern!r} is "
           f"{abs(change):.1f}% {'below' if change < 0 else 'above'} baseline "
           f"(limit {rule.max_pct:g}%{metric_note(metric, run)})")
    ev.add(run, f"{GEOMEAN_PREFIX}{rule.pattern}", CheckKind.REGRESSION, ok, msg, value=round(change, 2),
           unit="%",
           delta_pct=round(change, 2), threshold=rule.max_pct, metric=metric,
           detail={"items": len(logs)})
