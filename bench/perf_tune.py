"""Limit curves for choosing ``perf.tail``: false alarms and detection at every tail from one pass.

    python bench/perf_tune.py [--data DIR | --shared] [--draw rounds|random] [--seed 9] [--draws 100]
        [--set NAME=VALUE ...] [--variant V]

Runs the new gate at tail 1 on healthy pairs, on AES-128-GCM-enc -12 % and on all items -5 %, and
keeps, per pair, the tail an item would need to fail: ``-change / (z * se)`` (0 when the change
does not pass the item's ``max_pct`` floor). A pair fails at tail t when any item (or the geomean)
needs more than t. Detection here counts the injected item only (``perf_gate.py`` counts any
failure of the run). Use it on a tuning draw set only; report with ``perf_gate.py`` on others.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_gate as pg  # noqa: E402

from buildbot_bsdkm.model import RunResult  # noqa: E402
from buildbot_bsdkm.policy import evaluate, load_policy  # noqa: E402

SCENARIOS = (("healthy", None, 1.0), ("one", pg.ONE_ITEM, 0.88), ("all", "*", 0.95))
TAILS = (1.0, 1.2, 1.4, 1.5, 1.6, 1.8, 2.0, 2.2, 2.5, 3.0)


def need(item: dict | None, floor_pct: float, z: float) -> float:
    if item is None or not item.get("se") or item.get("change") is None:
        return 0.0
    d = math.log1p(item["change"])
    return 0.0 if -d <= -math.log1p(-floor_pct / 100) else -d / (z * item["se"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=pg.ROOT / "bench" / "data" / "noise-2026-12-01")
    ap.add_argument("--shared", action="store_true", help="the shared check set (never tune on it)")
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--draw", choices=tuple(pg.PICKERS), default="rounds")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--variant")
    args = ap.parse_args()
    pol = load_policy(None)
    pol.perf = dataclasses.replace(pol.perf, **{**dict(pg._setting(s) for s in args.set), "tail": 1.0})
    series = pg.load_shared() if args.shared else pg.load_own(args.data)
    for variant, logs in series.items():
        if args.variant and variant != args.variant:
            continue
        if args.shared:
            splits = itertools.combinations(range(10), 5)
            pairs = [(list(b), [i for i in range(10) if i not in b], []) for b in splits]
        else:
            pairs = pg.PICKERS[args.draw](len(logs), args.draws, args.seed, 5)
        healthy, worst, one, every = [], [], [], []
        for b, h, rest in pairs:
            base = [RunResult(variant, "userspace", logs=[logs[i] for i in b])]
            hist = [RunResult(variant, "userspace", logs=[logs[i]]) for i in rest]
            for name, item, factor in SCENARIOS:
                head = [RunResult(variant, "userspace", logs=[pg.inject(logs[i], item, factor) for i in h])]
                p = evaluate(head, pol, base, hist).perf[0]
                per = [(need(it, 2, p["z"]), it["name"]) for it in p["items"]]
                per.append((need(p["geomean"], 1, p["z"]), "geomean"))
                if name == "healthy":
                    top = max(per)
                    healthy.append(top[0])
                    worst.append(top[1])
                elif name == "one":
                    one.append(next(x for x, n in per if n == pg.ONE_ITEM))
                else:
                    every.append(max(x for x, _ in per))
        n = len(pairs)
        print(f"== {variant} ({n} draws, {'shared' if args.shared else args.draw})")
        for t in TAILS:
            rate = [100.0 * sum(x > t for x in xs) / n for xs in (healthy, one, every)]
            print(f"  tail {t:.1f}: false alarms {rate[0]:5.1f} %  {pg.ONE_ITEM} -12 % {rate[1]:5.1f} %  "
                  f"all -5 % {rate[2]:5.1f} %")
        q = sorted(healthy)
        quantiles = [round(q[min(n - 1, int(n * f))], 2) for f in (0.9, 0.95, 0.99)]
        print("  healthy need q90/q95/q99/max", quantiles, round(q[-1], 2))
        noisiest = Counter(w for x, w in zip(healthy, worst, strict=True) if x > 1.4)
        print("  items needing > 1.4:", noisiest.most_common(6))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
