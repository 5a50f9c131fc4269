"""Learned-limit regression gates: results documents -> repeats for ``perf.gate``, its verdicts -> checks.

Every repeat of head and base (or the history window) of one (target, variant) goes to
``perf/gate.compare``; mis-timed items (``perf/clock``) are gated on cycles; the per-run entry of
``Verdict.perf`` carries the items' numbers and the history trend (``perf/drift``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..checks import GEOMEAN_PREFIX, CheckKind
from ..model import LogResult, RunResult
from ..perf import clock as perf_clock
from ..perf import drift as perf_drift
from ..perf import fingerprint as perf_fingerprint
from ..perf import gate as perf_gate
from ..targets import perf_ungated
from .context import Evaluation
from .measure import (
    CYCLES,
    PER_SECOND,
    block_of,
    display_unit,
    items_of,
    matches,
    measure,
    median,
    metric_for,
    rate_of,
    shown,
)
from .rules import RegressionRule


def learned_regressions(ev: Evaluation) -> None:
    """One learned gate per (target, variant) of the runs."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for run in ev.runs:
        groups.setdefault((run.target, run.variant), []).append(run)
    for (target, variant), heads in groups.items():
        same = [r for r in ev.baseline or [] if (r.target, r.variant) == (target, variant)]
        hist = [r for r in ev.history if (r.target, r.variant) == (target, variant)]
        _LearnedGate(ev, heads, same, hist).run()


def bench_logs(runs: Iterable[RunResult]) -> list[LogResult]:
    """Every log with benchmark items: one repeat each."""
    return [log for run in runs for log in run.logs if log.benchmarks]


def fingerprint_problem(base: list[RunResult], head: list[RunResult]) -> str | None:
    """Why ``base`` must not be compared with ``head`` (different machine fingerprints), or None."""
    ids = {(r.target, r.variant): perf_fingerprint.of_run(r.metadata) for r in head}
    for r in base:
        want = ids.get((r.target, r.variant))
        got = perf_fingerprint.of_run(r.metadata)
        if want and got and want != got:
            fields = perf_fingerprint.differences(r.metadata["fingerprint"], next(
                h.metadata["fingerprint"] for h in head if (h.target, h.variant) == (r.target, r.variant)))
            return (f"{r.target}/{r.variant}: the baseline was measured on another machine fingerprint "
                    f"({got} vs {want}; differs in {', '.join(fields) or 'id'}): not comparable")
    return None


def same_machine(history: list[RunResult], head: list[RunResult]) -> tuple[list[RunResult], list[str]]:
    """History runs of the heads' fingerprints, and a note per run left out for another fingerprint."""
    ids = {(r.target, r.variant): perf_fingerprint.of_run(r.metadata) for r in head}
    kept: list[RunResult] = []
    refused: dict[tuple[str, str, str, str], int] = {}
    for r in history:
        want = ids.get((r.target, r.variant))
        got = perf_fingerprint.of_run(r.metadata)
        if want and got and want != got:
            key = (r.target, r.variant, got, want)
            refused[key] = refused.get(key, 0) + 1
            continue
        kept.append(r)
    notes = [f"{t}/{v}: {n} history run(s) left out: machine fingerprint {got} is not this run's {want}"
             for (t, v, got, want), n in refused.items()]
    return kept, notes


class _LearnedGate:
    """One (target, variant): every repeat of head and base (or history) through perf.gate."""

    def __init__(self, ev: Evaluation, heads: list[RunResult], base: list[RunResult],
                 history: list[RunResult]) -> None:
        self.ev, self.heads, self.base, self.history = ev, heads, base, history
        self.run0 = heads[0]
        self.label = f"{self.run0.target}/{self.run0.variant}"
        rules = [r for r in ev.policy.regressions if r.limit == "learned" and r.scope.covers(self.run0)]
        self.item_rules = [r for r in rules if r.aggregate == "item"]
        self.geo_rule = next((r for r in rules if r.aggregate == "geomean"), None)
        self.metric = metric_for(self.item_rules[0].metric if self.item_rules else "auto", ev.policy, *heads)

    def _rule(self, name: str) -> RegressionRule | None:
        return next((r for r in self.item_rules if matches(name, r.pattern)), None)

    def _clock(self, logs: list[LogResult]) -> list[perf_clock.ClockReport]:
        tolerance = self.ev.policy.clock_tolerance
        return [perf_clock.check_log([perf_clock.Timed(b.name, rate_of(b) or 0.0, b.cycles)
                                      for b in log.benchmarks if not b.failed], tolerance)
                for log in logs]

    def _repeats(self, logs: list[LogResult], mis_timed: set[str]) -> list[dict[perf_gate.Key, float]]:
        out = []
        for log in logs:
            rep: dict[perf_gate.Key, float] = {}
            for b in log.benchmarks:
                rule = self._rule(b.name)
                if rule is None or b.failed:
                    continue
                metric = (CYCLES if b.name in mis_timed
                          else metric_for(rule.metric, self.ev.policy, *self.heads))
                v = measure(b, metric)
                if v is not None:
                    rep[(b.name, block_of(b, log))] = v if metric == PER_SECOND else 1.0 / v
            out.append(rep)
        return out

    def run(self) -> None:
        ev = self.ev
        if not self.item_rules and self.geo_rule is None:
            return
        problem = fingerprint_problem(self.base, self.heads)
        if problem:
            ev.add(self.run0, "fingerprint", CheckKind.REGRESSION, False, problem, error=True)
            return
        history, left_out = same_machine(self.history, self.heads)
        for n in left_out:
            ev.note(n)
        sides = self._sides(history)
        if sides is None:
            return
        head_logs, base_logs, hist_logs = sides
        from_history = not bench_logs(self.base)  # _sides took a history window as the base
        head_clock, base_clock = self._clock(head_logs), self._clock(base_logs)
        names, clock_diff = self._clock_notes(head_clock, base_clock)
        try:
            result = perf_gate.compare(
                self._repeats(base_logs, names), self._repeats(head_logs, names),
                self._repeats(hist_logs, names),
                rule_for=self._item_rule, geomean_rule=self._geo_item_rule(), settings=ev.policy.perf,
                in_geomean=(lambda n: matches(n, self.geo_rule.pattern)) if self.geo_rule else None)
        except perf_gate.PerfInputError as e:
            ev.add(self.run0, "perf-input", CheckKind.REGRESSION, False, f"{self.label}: {e}", error=True)
            return
        self._checks(result, names)
        ev.verdict.perf.append({
            "trend": self._trend(history[-ev.policy.perf.window:], result, names),
            "target": self.run0.target, "variant": self.run0.variant, "verdict": result.verdict,
            "family": result.family, "z": round(result.z, 3), "alpha": ev.policy.perf.alpha,
            "metric": self.metric, "base_from": "history" if from_history else "baseline",
            "clock": {"base_hz": _med([c.clock_hz for c in base_clock]),
                      "head_hz": _med([c.clock_hz for c in head_clock]),
                      "mismatch": clock_diff, "mis_timed": sorted(names)},
            "items": [_item_json(r, self.run0, names) for r in result.items],
            "geomean": _item_json(result.geomean, self.run0, names) if result.geomean else None,
        })
        self._note_inconclusive(result)

    def _sides(self, history: list[RunResult]
               ) -> tuple[list[LogResult], list[LogResult], list[LogResult]] | None:
        """Head, base and history repeats to compare; the base is a history window when no base was
        built (and then no separate history). None (with a note when it matters): nothing to judge."""
        head_logs, base_logs, hist_logs = bench_logs(self.heads), bench_logs(self.base), bench_logs(history)
        if not head_logs:
            return None
        if base_logs:
            return head_logs, base_logs, hist_logs
        if not hist_logs:
            if not perf_ungated(self.run0.target):  # that target's own note says why already
                self.ev.note(f"{self.label}: no baseline and no history: learned regression gates not "
                             "evaluated")
            return None
        window = hist_logs[-self.ev.policy.perf.window:]
        self.ev.note(f"{self.label}: no base build; compared with a window of {len(window)} "
                     "history repeat(s)")
        return head_logs, window, []

    def _clock_notes(self, head_clock: list[perf_clock.ClockReport],
                     base_clock: list[perf_clock.ClockReport]) -> tuple[set[str], float | None]:
        """The mis-timed items (gated on cycles) and the base/head clock mismatch, each noted."""
        mis_timed: dict[str, float] = {}
        for rep in [*head_clock, *base_clock]:
            for name in rep.mis_timed:
                mis_timed[name] = rep.deviation(name) or 0.0
        for name, dev in sorted(mis_timed.items()):
            if self.ev.verdict.mis_timed_row(self.run0.target, self.run0.variant, name):
                continue  # the table's own note (timing.py) says it already
            self.ev.note(f"{self.label}: {name} is mis-timed: its implied clock (rate x cycles) is "
                         f"{dev * 100:+.0f}% off the run's median; gated on cycles")
        clock_diff = perf_clock.side_mismatch([c.clock_hz for c in base_clock if c.clock_hz],
                                              [c.clock_hz for c in head_clock if c.clock_hz])
        if clock_diff is not None:
            self.ev.note(f"{self.label}: base and head implied clocks differ by {clock_diff * 100:+.1f}% "
                         "(frequency scaling between the sides?): throughput changes may be the clock's")
        return set(mis_timed), clock_diff

    def _note_inconclusive(self, result: perf_gate.GateResult) -> None:
        bad = [r.name for r in result.items if r.verdict == perf_gate.INCONCLUSIVE]
        if result.geomean and result.geomean.verdict == perf_gate.INCONCLUSIVE:
            bad.append("geomean")
        if bad:
            shown_names = ", ".join(bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
            self.ev.note(f"{self.label}: {len(bad)} item(s) inconclusive (not judged, not passed): "
                         f"{shown_names}")

    def _trend(self, history: list[RunResult], result: perf_gate.GateResult,
               mis_timed: set[str]) -> dict[str, Any]:
        """Per item: the best value of each history run (oldest first), this run's, and any drift."""
        if not history:
            return {}
        out: dict[str, Any] = {}
        for r in result.items:
            points = []
            for i, run in enumerate(history):
                reps = self._repeats(bench_logs([run]), mis_timed)
                values = [rep[(r.name, r.block)] for rep in reps if (r.name, r.block) in rep]
                if values:
                    commit = str(run.metadata.get("source_commit") or f"#{i + 1}")
                    points.append((commit[:12], max(values)))
            if len(points) < 2 or r.head_median is None:
                continue
            found = perf_drift.detect(points)
            out[r.name] = {"points": [[c, round(v, 6)] for c, v in points], "head": round(r.head_median, 6),
                           "verdict": r.verdict, "cycles": r.name in mis_timed,
                           "drift": ({"commit": found[-1].commit, "index": found[-1].index,
                                      "change": round(found[-1].change, 4)} if found else None)}
        return out

    def _item_rule(self, name: str) -> perf_gate.ItemRule | None:
        rule = self._rule(name)
        return None if rule is None else perf_gate.ItemRule(rule.max_pct, rule.detect_pct)

    def _geo_item_rule(self) -> perf_gate.ItemRule | None:
        g = self.geo_rule
        return None if g is None else perf_gate.ItemRule(g.max_pct, g.detect_pct)

    def _checks(self, result: perf_gate.GateResult, mis_timed: set[str]) -> None:
        index = {item.key: item for item in items_of(self.run0)}
        for r in [*result.items, *([result.geomean] if result.geomean else [])]:
            item = index.get((r.name, r.block))
            b = item.bench if item else None
            metric = CYCLES if r.name in mis_timed else self.metric
            geo = r.name == perf_gate.GEOMEAN and self.geo_rule is not None
            name = f"{GEOMEAN_PREFIX}{self.geo_rule.pattern}" if geo and self.geo_rule else r.name
            unit = display_unit(b, metric) if b is not None else "%"
            value = baseline = None
            if b is not None and r.head_median is not None and r.base_median is not None:
                hv, bv = (r.head_median, r.base_median) if metric == PER_SECOND else (
                    1.0 / r.head_median, 1.0 / r.base_median)
                value, baseline = shown(b, metric, hv), shown(b, metric, bv)
            elif geo and r.change is not None:
                value = round(r.change * 100, 2)
            self.ev.add(self.run0, name, CheckKind.REGRESSION, r.verdict != perf_gate.REGRESSION,
                        perf_message(name, r, metric), value=value, unit=unit, baseline=baseline,
                        delta_pct=round(r.change * 100, 2) if r.change is not None else None,
                        threshold=round(r.limit * 100, 2) if r.limit is not None else None, metric=metric,
                        detail={"verdict": r.verdict, "learned": True, **_item_json(r, self.run0, mis_timed)},
                        item=item.index if item else None)


def _med(values: list[float | None]) -> float | None:
    m = median(values)
    return round(m) if m is not None else None


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:+.1f}%"


def perf_message(name: str, r: perf_gate.ItemResult, metric: str) -> str:
    """One line a human reads: change, interval, limit, minimum detectable change, verdict."""
    what = " (cycles)" if metric == CYCLES else ""
    if r.change is None:
        return f"{name}: {r.verdict}: {r.reason}"
    if r.limit is None or r.min_detectable is None:  # no learned limit (the gross bound, or none)
        return (f"{name}{what}: {_pct(r.change)} over {r.n_base} vs {r.n_head} repeats: "
                f"{r.verdict}: {r.reason}")
    text = (f"{name}{what}: {_pct(r.change)} (interval {_pct(r.ci_low)} .. {_pct(r.ci_high)}; "
            f"limit -{r.limit * 100:.1f}%, min detectable {r.min_detectable * 100:.1f}%; "
            f"{r.n_base} vs {r.n_head} repeats): {r.verdict}")
    return text + (f": {r.reason}" if r.reason else "")


def _item_json(r: perf_gate.ItemResult, run: RunResult, mis_timed: set[str]) -> dict[str, Any]:
    """The per-item fields of the ``compare --json`` contract (relative numbers, throughput sense)."""
    def rnd(x: float | None) -> float | None:
        return None if x is None else round(x, 5)

    return {"name": r.name, "block": r.block, "target": run.target, "variant": run.variant,
            "change": rnd(r.change), "ci_low": rnd(r.ci_low), "ci_high": rnd(r.ci_high),
            "limit": rnd(r.limit),
            "min_detectable": rnd(r.min_detectable), "n_base": r.n_base, "n_head": r.n_head,
            "verdict": r.verdict, "reason": r.reason, "se": rnd(r.se), "noise_from": r.sigma_from,
            "mis_timed": r.name in mis_timed}
