"""One verdict per benchmark item from all repeats of both sides, with limits learned from noise.

Inputs are *repeats*: one mapping per benchmark log, item key -> value oriented so that higher
is better (throughput, or 1/cycles when an item is gated on cycles). Everything happens on
log values, so a change is a ratio and the noise of fast and slow items is comparable.

Per item (see docs/architecture.md, "perf gate"):

- each side is reduced to its median, or its best (``reduce: best``): the noise is one-sided (a
  disturbed run is slow, never fast), so both ignore a minority of disturbed repeats;
- the item's noise is a pool of deviations: of each side's repeats from their centre, and of the
  healthy history of the same machine fingerprint (a rolling window) from its centre; the centre
  is the median for ``reduce: median``, else the best but one (``center``): under one-sided noise
  a median of five with three disturbed repeats is itself disturbed, and the two healthy repeats
  would then enter the pool as fast outliers that inflate the spread of a best-of-N;
- the standard error of each side's reduced value is bootstrapped from that pool at the side's
  repeat count (for the median of N normal repeats that is ``1.25 * sigma / sqrt(N)``), then
  pulled toward the family's typical value so one lucky quiet item is not believed;
- the limit is ``z * tail * sqrt(se_base^2 + se_head^2)`` (``k * sigma * sqrt(2/N)``) with ``z``
  the normal quantile for ``alpha / m``: the false-alarm budget ``alpha`` is for the whole run
  of ``m`` items and the geometric mean (Bonferroni: limits scaled by the item count);
- a rule's ``max_pct`` is a floor: a smaller change never fails however consistent it is;
- the interval of the change is ``change +- limit`` (a simultaneous interval at level ``alpha``);
- the minimum detectable change is what is caught with probability ``power``;
- verdict: ``regression`` / ``improvement`` when the interval excludes zero and the change passes
  the limit; ``inconclusive`` when a side has fewer repeats than required, no spread is known,
  or the item cannot resolve ``detect_pct``; otherwise ``unchanged``.
"""

from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import stats

Key = tuple[str, int | None]
Repeat = Mapping[Key, float]

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
INCONCLUSIVE = "inconclusive"

GEOMEAN = "geomean"

# bench/gross_bound.py on the learning recordings (policies/default.yml, "gross_ratio").
GROSS_RATIO = 13.5


class PerfInputError(ValueError):
    """Numbers the gate cannot use (non-finite, zero or negative); the message names the item."""


@dataclass(frozen=True)
class Settings:
    """How the gate learns and applies limits (the policy's ``perf:`` section)."""

    alpha: float = 0.01  # false alarms per (target, variant) run, across all its items together
    tail: float = 1.0  # multiplier on the normal quantile for the noise's heavier-than-normal tail
    min_repeats: int = 3  # fewer repeats on a side: inconclusive
    min_history: int = 8  # history repeats before history's spread is used
    window: int = 30  # newest history repeats used per item (a rolling window, not the last pass)
    prior_dof: float = 4.0  # weight of the family's typical sigma when an item's own is few-sample
    power: float = 0.9  # the minimum detectable change is caught with this probability
    min_sigma: float = 0.002  # no item is believed quieter than this (log units, ~0.2 %)
    reduce: str = "median"  # each side's statistic: "median", "best" (best-of-N) or "second" (best but one)
    bootstrap: int = 200  # resamples for the spread of the reduced value
    # Where each group's deviations are measured from: "median", "second" (best but one), "best", or
    # "auto" (the median for reduce=median, else "second"). Under one-sided noise a side with three
    # disturbed repeats of five has a disturbed median, and its healthy repeats would enter the pool as
    # fake fast outliers (+10 %) that blow up the spread of a best-of-N; measured from the very best,
    # the spread of a heavy-tailed item is underestimated instead (README, "Performance gate").
    center: str = "auto"
    # Re-measure a regressed (target, variant) base and head interleaved again and fail only when
    # the re-run agrees (perf/confirm.py); needs a re-measure callback (``bsdkm-ci run``'s).
    confirm: bool = False
    # More rounds while the noise is too large to decide (perf/extend.py): a pair measured against a
    # built base with an item that can resolve no drop smaller than ``resolve_pct`` gets more rounds
    # (the config's ``benchmark.max_repeats`` at most). The verdict is the last look's, on every
    # round; items still unable to resolve ``detect_pct`` stay inconclusive.
    resolve_pct: float = 10.0
    # The gross bound: a ratio between the sides beyond any two healthy runs of one item ever recorded
    # here (with a margin) is a regression or an improvement at any repeat count, 1 vs 1 included.
    # Learned by bench/gross_bound.py (policies/default.yml states the value and its source); None: off.
    gross_ratio: float | None = GROSS_RATIO


@dataclass(frozen=True)
class ItemRule:
    """The rule that applies to one item: its floor and the change it must be able to resolve."""

    floor_pct: float = 0.0  # ``max_pct``: a smaller change never fails
    detect_pct: float | None = None  # min detectable change above this: inconclusive


@dataclass
class ItemResult:
    name: str
    block: int | None
    change: float | None  # relative, throughput sense (-0.05: 5 % slower)
    ci_low: float | None
    ci_high: float | None
    limit: float | None  # the drop that fails (relative, positive)
    min_detectable: float | None  # relative drop caught with probability ``power``
    n_base: int
    n_head: int
    verdict: str
    reason: str = ""
    se: float | None = None  # standard error of the change, log units
    sigma_from: str = ""  # where the noise was learned: "repeats", "history", "repeats+history"
    base_median: float | None = None
    head_median: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GateResult:
    items: list[ItemResult] = field(default_factory=list)
    geomean: ItemResult | None = None
    family: int = 0  # m: the number of tests sharing alpha
    z: float = 0.0

    @property
    def verdict(self) -> str:
        every = [*self.items, *([self.geomean] if self.geomean else [])]
        if any(r.verdict == REGRESSION for r in every):
            return REGRESSION
        if any(r.verdict == INCONCLUSIVE for r in every):
            return INCONCLUSIVE
        return "pass"


def check_finite(repeats: Sequence[Repeat], where: str) -> None:
    for i, rep in enumerate(repeats):
        for key, v in rep.items():
            if not stats.finite(v) or v <= 0:
                raise PerfInputError(f"{where} repeat {i + 1}: {key[0]} has an unusable value {v!r}")


def _logs(repeats: Sequence[Repeat], key: Key) -> list[float]:
    return [math.log(r[key]) for r in repeats if key in r]


def _second_best(values: Sequence[float]) -> float:
    """The best but one (the best of one or two): one fast glitch of the timer cannot set the level."""
    ordered = sorted(values)
    return ordered[-2] if len(ordered) >= 3 else ordered[-1]


def _reducer(name: str) -> Callable[[Sequence[float]], float]:
    return {"best": max, "second": _second_best}.get(name, stats.median)


@dataclass
class _Sample:
    name: str
    block: int | None
    base: list[float]
    head: list[float]
    history: list[float]
    rule: ItemRule
    pool: list[float] = field(default_factory=list)  # centred deviations: what one repeat's noise looks like
    sources: str = ""
    se_base: float = 0.0
    se_head: float = 0.0
    bias_base: float = 0.0  # expected offset of the reduced value from the centre, skewed noise
    bias_head: float = 0.0
    values: tuple[float, float] | None = None  # (base, head) reduced, when not reduce(base/head)


def _centre(settings: Settings) -> Callable[[Sequence[float]], float]:
    if settings.center == "auto":
        return stats.median if settings.reduce == "median" else _second_best
    return _reducer(settings.center)


def _pool(s: _Sample, settings: Settings) -> None:
    """Noise of one repeat of this item: deviations of the repeats, and of history, from their centres."""
    parts, pool = [], []
    centre = _centre(settings)
    for side in (s.base, s.head):
        if len(side) >= 2:
            m = centre(side)
            pool += [v - m for v in side]
    if pool:
        parts.append("repeats")
    hist = s.history[-settings.window:]
    if len(hist) >= settings.min_history:
        m = centre(hist)
        pool += [v - m for v in hist]
        parts.append("history")
    s.pool, s.sources = pool, "+".join(parts)


def _standard_errors(s: _Sample, settings: Settings) -> None:
    """Spread of the reduced value of n repeats, by resampling the noise pool (bootstrap)."""
    if len(s.pool) < 3:
        return
    reduce = _reducer(settings.reduce)
    rng = random.Random(zlib.crc32(s.name.encode()))
    for n, side in ((len(s.base), "base"), (len(s.head), "head")):
        if n == 0:
            continue
        draws = [reduce(rng.choices(s.pool, k=n)) for _ in range(settings.bootstrap)]
        setattr(s, f"se_{side}", max(statistics.pstdev(draws), settings.min_sigma / math.sqrt(n)))
        # One slow-skewed repeat sits below the median of twenty: compare like with like.
        setattr(s, f"bias_{side}", statistics.fmean(draws))


def _vectors(repeats: Sequence[Repeat], keys: Sequence[Key]) -> list[list[float]]:
    return [[math.log(r[k]) for k in keys] for r in repeats if all(k in r for k in keys)]


def _reduced(vectors: list[list[float]], reduce: Callable[[Sequence[float]], float]) -> list[float]:
    return [reduce(col) for col in zip(*vectors, strict=True)]


def _centred(vectors: list[list[float]], centre: Callable[[Sequence[float]], float]) -> list[list[float]]:
    mid = _reduced(vectors, centre)
    return [[v - m for v, m in zip(vec, mid, strict=True)] for vec in vectors]


def _geomean(base: Sequence[Repeat], head: Sequence[Repeat], history: Sequence[Repeat], keys: Sequence[Key],
             rule: ItemRule, settings: Settings) -> _Sample:
    """The geometric mean of the items' reduced values. Its noise is bootstrapped from whole repeats:
    a disturbed run slows every item at once, so items' noise must not be treated as independent."""
    reduce = _reducer(settings.reduce)
    b, h = _vectors(base, keys), _vectors(head, keys)
    hist = _vectors(history, keys)[-settings.window:]
    s = _Sample(GEOMEAN, None, [0.0] * len(b), [0.0] * len(h), [], rule)
    if not b or not h:
        return s
    s.values = (statistics.fmean(_reduced(b, reduce)), statistics.fmean(_reduced(h, reduce)))
    pool, parts = [], []
    centre = _centre(settings)
    for side in (b, h):
        if len(side) >= 2:
            pool += _centred(side, centre)
    if pool:
        parts.append("repeats")
    if len(hist) >= settings.min_history:
        pool += _centred(hist, centre)
        parts.append("history")
    s.sources = "+".join(parts)
    if len(pool) < 3:
        return s
    rng = random.Random(0x6E0)
    for n, side in ((len(b), "base"), (len(h), "head")):
        draws = [statistics.fmean(_reduced(rng.choices(pool, k=n), reduce))
                 for _ in range(settings.bootstrap)]
        setattr(s, f"se_{side}", max(statistics.pstdev(draws), settings.min_sigma / math.sqrt(n)))
        setattr(s, f"bias_{side}", statistics.fmean(draws))
    s.pool = [0.0] * len(pool)  # only its size is read from here on (degrees of freedom)
    return s


def _judge(s: _Sample, settings: Settings, z: float, prior: tuple[float, float] | None) -> ItemResult:
    nb, nh = len(s.base), len(s.head)
    res = ItemResult(s.name, s.block, None, None, None, None, None, nb, nh, INCONCLUSIVE,
                     sigma_from=s.sources)
    if nb == 0 or nh == 0:
        res.reason = "missing on one side"
        return res
    reduce = _reducer(settings.reduce)
    mb, mh = (s.values if s.values is not None else (reduce(s.base), reduce(s.head)))
    d = (mh - mb) - (s.bias_head - s.bias_base)
    res.change = math.expm1(d)
    res.base_median, res.head_median = math.exp(mb), math.exp(mh)
    gross = math.log(settings.gross_ratio) if settings.gross_ratio else math.inf
    if min(nb, nh) < settings.min_repeats:
        res.reason = f"{nb} base / {nh} head repeat(s): fewer than the {settings.min_repeats} required"
        return _gross(res, d, gross, settings)
    if not s.se_base or not s.se_head:
        res.reason = "no spread known: give more repeats or --history"
        return _gross(res, d, gross, settings)
    dof = max(0, len(s.pool) - 2)
    se_b, se_h = s.se_base, s.se_head
    if prior is not None:
        se_b = stats.shrink(se_b, dof, prior[0], settings.prior_dof)
        se_h = stats.shrink(se_h, dof, prior[1], settings.prior_dof)
    se = math.sqrt(se_b * se_b + se_h * se_h)
    res.se = se
    floor = -math.log1p(-s.rule.floor_pct / 100.0) if s.rule.floor_pct < 100 else math.inf
    # However noisy the item, a change beyond anything noise has produced is not noise.
    limit = min(max(z * settings.tail * se, floor), gross)
    mdc = max(limit + stats.z_one_sided(settings.power) * se, floor)
    res.limit = -math.expm1(-limit)
    res.min_detectable = -math.expm1(-mdc)
    res.ci_low, res.ci_high = math.expm1(d - limit), math.expm1(d + limit)
    if d < -limit:
        res.verdict = REGRESSION
    elif d > limit:
        res.verdict = IMPROVEMENT
    elif s.rule.detect_pct is not None and res.min_detectable * 100 > s.rule.detect_pct:
        res.reason = (f"too noisy: the smallest drop it can detect is {res.min_detectable * 100:.1f}%, "
                      f"above the {s.rule.detect_pct:g}% it must resolve")
    else:
        res.verdict = UNCHANGED
    return res


def _gross(res: ItemResult, d: float, gross: float, settings: Settings) -> ItemResult:
    """An item too thinly measured for a learned limit: judged by the gross bound alone."""
    if abs(d) <= gross:
        return res
    res.verdict = REGRESSION if d < 0 else IMPROVEMENT
    res.limit = -math.expm1(-gross)
    res.reason = (f"{math.exp(abs(d)):.1f}x {'slower' if d < 0 else 'faster'}: beyond the gross bound "
                  f"{settings.gross_ratio:g}x (no two healthy runs were ever this far apart), "
                  "at any repeat count")
    return res


def compare(base: Sequence[Repeat], head: Sequence[Repeat], history: Sequence[Repeat] = (), *,
            rule_for: Callable[[str], ItemRule | None], geomean_rule: ItemRule | None = None,
            in_geomean: Callable[[str], bool] | None = None, settings: Settings = Settings()) -> GateResult:
    """Per-item (and geometric-mean) verdicts of ``head`` versus ``base``; ``history`` only lends spread."""
    check_finite(base, "base")
    check_finite(head, "head")
    check_finite(history, "history")
    keys: list[Key] = []
    for r in [*base, *head]:
        keys += [k for k in r if k not in keys]
    samples = []
    for key in keys:
        rule = rule_for(key[0])
        if rule is not None:
            samples.append(_Sample(key[0], key[1], _logs(base, key), _logs(head, key), _logs(history, key),
                                   rule))
    common = [k for k in keys if rule_for(k[0]) is not None and (in_geomean is None or in_geomean(k[0]))
              and all(k in r for r in base) and all(k in r for r in head)]
    for s in samples:
        _pool(s, settings)
        _standard_errors(s, settings)
    if geomean_rule is not None and common:
        samples.append(_geomean(base, head, history, common, geomean_rule, settings))
    known = [s for s in samples if s.se_base and s.se_head and s.name != GEOMEAN]
    prior = ((stats.median([s.se_base for s in known]), stats.median([s.se_head for s in known]))
             if known else None)
    m = max(1, len(samples))
    z = stats.z_two_sided(settings.alpha / m)
    out = GateResult(family=m, z=z)
    for s in samples:
        # The run level's spread is not like an item's (items' noise partly cancels): no prior for it.
        r = _judge(s, settings, z, prior if s.name != GEOMEAN else None)
        if s.name == GEOMEAN:
            out.geomean = r
        else:
            out.items.append(r)
    return out
