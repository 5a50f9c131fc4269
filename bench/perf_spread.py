"""Whether the perf gate's estimated spread matches the real scatter of its change on healthy pairs.

    python bench/perf_spread.py [--data bench/data/noise-2026-12-01] [--draw random] [--seed 33]
        [--draws 60] [--set NAME=VALUE ...]

On healthy 5 vs 5 draws of recorded repeats (as ``perf_gate.py`` draws them, history = the other
runs), per item: the share of its results more than 20 % below its best, the actual scatter of the
gate's change across the draws (standard deviation and 99th percentile of |change|, log units in %),
the gate's median standard error of that change, their ratio (1.0: the gate knows its noise; above:
its limits are that much wider than the noise needs), and the median limit, minimum detectable change
and share of ``inconclusive`` verdicts. Pure reading; nothing is tuned here.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_gate as pg  # noqa: E402

from buildbot_bsdkm.model import RunResult  # noqa: E402
from buildbot_bsdkm.policy import evaluate, load_policy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=pg.ROOT / "bench" / "data" / "noise-2026-12-01")
    ap.add_argument("--draws", type=int, default=60)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--draw", choices=tuple(pg.PICKERS), default="random")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    pol = load_policy(None)
    pol.perf = dataclasses.replace(pol.perf, **dict(pg._setting(s) for s in args.set))
    for variant, logs in pg.load_own(args.data).items():
        per: dict[str, list[dict]] = {}
        for b, h, rest in pg.PICKERS[args.draw](len(logs), args.draws, args.seed, 5):
            p = evaluate([RunResult(variant, "userspace", logs=[logs[i] for i in h])], pol,
                         [RunResult(variant, "userspace", logs=[logs[i] for i in b])],
                         [RunResult(variant, "userspace", logs=[logs[i]]) for i in rest]).perf[0]
            for it in [*p["items"], p["geomean"]]:
                per.setdefault(it["name"], []).append(it)
        best: dict[str, float] = {}
        for lg in logs:
            for x in lg.benchmarks:
                best[x.name] = max(best.get(x.name, 0.0), x.per_second)
        results = [(x.name, x.per_second) for lg in logs for x in lg.benchmarks]
        stalled = {k: sum(n == k and v < 0.8 * m for n, v in results) / len(logs) for k, m in best.items()}
        print(f"== {args.data.name} {variant}: {args.draws} healthy draws ({args.draw}, seed {args.seed})"
              + (f", {' '.join(args.set)}" if args.set else ""))
        print("| item | results > 20 % slow | null sd % | null q99 abs % | gate se % | se / sd | limit % "
              "| min detectable % | inconclusive % |")
        print("|---|---|---|---|---|---|---|---|---|")
        ratios = []
        for name, its in per.items():
            d = [math.log1p(i["change"]) for i in its if i["change"] is not None]
            se = [i["se"] for i in its if i["se"]]
            if len(d) < 5 or not se:
                continue
            sd = statistics.pstdev(d)
            q99 = sorted(abs(x) for x in d)[max(0, math.ceil(len(d) * 0.99) - 1)]
            ratio = statistics.median(se) / sd if sd else math.nan
            if name != "geomean":
                ratios.append(ratio)
            limit = statistics.median([i["limit"] for i in its if i["limit"] is not None])
            mdc = statistics.median([i["min_detectable"] for i in its if i["min_detectable"] is not None])
            inc = sum(i["verdict"] == "inconclusive" for i in its) / len(its)
            share = f"{stalled[name] * 100:.0f} %" if name in stalled else "-"
            print(f"| {name} | {share} | {sd * 100:.2f} | {q99 * 100:.2f} "
                  f"| {statistics.median(se) * 100:.2f} | {ratio:.2f} | {limit * 100:.1f} "
                  f"| {mdc * 100:.1f} | {inc * 100:.0f} |")
        print(f"median se / sd over items: {statistics.median(ratios):.2f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
