"""Where in the wall-clock second the big stalls of recorded benchmark repeats fall, and how much
adjacent repeats of one item agree (whether pairing base and head by round can cancel noise).

    python bench/perf_phase.py [bench/data/noise-2026-12-01 ...]

Per dataset: for every item result more than ``--hit`` (40 %) below that item's best, the phase of
its estimated start (run start + its position x the run's mean item length, modulo 1 s), in tenths
of a second; then per variant the lag-1 correlation of each item's log speed along the series and
the spread of differences of neighbouring repeats over the spread of single repeats x sqrt(2)
(1.0: pairing by round removes nothing); then, with ``--estimators``, how widely each candidate
estimate of the change scatters on healthy 5 vs 5 draws (half the distance between its 1st and
99th percentile; the smaller, the smaller a drop that can be told from noise): best of each side,
best but one, mean of the best two, median, Hodges-Lehmann of all head-base differences, and
Hodges-Lehmann of the per-round (paired) differences. Pure reading of the recorded files.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.parsers import parse_text  # noqa: E402

ESTIMATORS = {
    "best": lambda b, h: max(h) - max(b),
    "second": lambda b, h: sorted(h)[-2] - sorted(b)[-2],
    "mean of best 2": lambda b, h: statistics.fmean(sorted(h)[-2:]) - statistics.fmean(sorted(b)[-2:]),
    "median": lambda b, h: statistics.median(h) - statistics.median(b),
    "HL": lambda b, h: statistics.median([y - x for x in b for y in h]),
    "HL paired": lambda b, h: _walsh_median([y - x for x, y in zip(b, h, strict=True)]),
}


def _walsh_median(d: list[float]) -> float:
    return statistics.median([(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))])


def estimators(series: dict[str, list[float]], draw: str, count: int) -> str:
    """Median over items (and AES-128-GCM-enc alone) of each estimator's 1-99 % half-width, in %."""
    import perf_gate  # noqa: PLC0415 - the bench's own draws; only here, it loads the whole policy
    pick = perf_gate.rounds if draw == "rounds" else perf_gate.draws
    n = len(next(iter(series.values())))
    pairs = pick(n, count, 5, 5)
    widths: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    one: dict[str, float] = {}
    for name, xs in series.items():
        for k, f in ESTIMATORS.items():
            q = sorted(f([xs[i] for i in b], [xs[i] for i in h]) for b, h, _ in pairs)
            w = (q[int(len(q) * 0.99)] - q[int(len(q) * 0.01)]) / 2 * 100
            widths[k].append(w)
            if name == "AES-128-GCM-enc":
                one[k] = w
    return "; ".join(f"{k} {statistics.median(w):.1f} ({one.get(k, math.nan):.1f})"
                     for k, w in widths.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", type=Path,
                    default=[ROOT / "bench" / "data" / "noise-2026-12-01",
                             ROOT / "bench" / "data" / "noise-2026-12-01-late"])
    ap.add_argument("--hit", type=float, default=0.4, help="a stall: this far below the item's best")
    ap.add_argument("--estimators", action="store_true", help="also the null scatter of candidate estimates")
    ap.add_argument("--draws", type=int, default=400)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    for data in args.data:
        recs = [json.loads(ln) for ln in (data / "runs.jsonl").read_text().splitlines()]
        runs = []
        for r in recs:
            if r["exit"] == 0:
                with gzip.open(data / r["file"]) as f:
                    runs.append((r, parse_text(f.read().decode(), r["file"])))
        best: dict[tuple[str, str], float] = {}
        for r, log in runs:
            for b in log.benchmarks:
                key = (r["variant"], b.name)
                best[key] = max(best.get(key, 0.0), b.per_second)
        hits, items = [0] * 10, [0] * 10
        for r, log in runs:
            n = len(log.benchmarks)
            for i, b in enumerate(log.benchmarks):
                slot = int(((r["started"] + (i + 0.5) * r["seconds"] / n) % 1.0) * 10)
                items[slot] += 1
                hits[slot] += b.per_second < (1 - args.hit) * best[(r["variant"], b.name)]
        print(f"{data.name}: {sum(hits)} item results > {args.hit:.0%} below their best; by start phase "
              f"(0.0-0.1 s ... 0.9-1.0 s): {hits}; all item results: {items}")
        for variant in sorted({r["variant"] for r, _ in runs}):
            logs = [log for r, log in runs if r["variant"] == variant]
            lag, ratio = [], []
            series: dict[str, list[float]] = {}
            for name in [b.name for b in logs[0].benchmarks]:
                xs = [math.log(b.per_second) for lg in logs for b in lg.benchmarks if b.name == name]
                if len(xs) < 4:
                    continue
                if len(xs) == len(logs):
                    series[name] = xs
                lag.append(statistics.correlation(xs[:-1], xs[1:]))
                diffs = [xs[i + 1] - xs[i] for i in range(0, len(xs) - 1, 2)]
                ratio.append(statistics.pstdev(diffs) / (statistics.pstdev(xs) * math.sqrt(2)))
            print(f"  {variant}: {len(logs)} runs; lag-1 correlation per item median "
                  f"{statistics.median(lag):+.2f} (range {min(lag):+.2f}..{max(lag):+.2f}); "
                  f"sd(paired diff) / (sd x sqrt 2) median {statistics.median(ratio):.2f}")
            if args.estimators:
                for draw in ("rounds", "random"):
                    print(f"    null scatter, % (median over items (AES-128-GCM-enc)), {draw} draws: "
                          + estimators(series, draw, args.draws))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
