"""Where in the wall-clock second the big stalls of recorded benchmark repeats fall, and how much
adjacent repeats of one item agree (whether pairing base and head by round can cancel noise).

    python bench/perf_phase.py [bench/data/noise-2026-12-01 ...]

Per dataset: for every item result more than ``--hit`` (40 %) below that item's best, the phase of
its estimated start (run start + its position x the run's mean item length, modulo 1 s), in tenths
of a second; then per variant the lag-1 correlation of each item's log speed along the series and
the spread of differences of neighbouring repeats over the spread of single repeats x sqrt(2)
(1.0: pairing by round removes nothing). Pure reading of the recorded files.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", type=Path,
                    default=[ROOT / "bench" / "data" / "noise-2026-12-01",
                             ROOT / "bench" / "data" / "noise-2026-12-01-late"])
    ap.add_argument("--hit", type=float, default=0.4, help="a stall: this far below the item's best")
    args = ap.parse_args()
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
            for name in [b.name for b in logs[0].benchmarks]:
                xs = [math.log(b.per_second) for lg in logs for b in lg.benchmarks if b.name == name]
                if len(xs) < 4:
                    continue
                lag.append(statistics.correlation(xs[:-1], xs[1:]))
                diffs = [xs[i + 1] - xs[i] for i in range(0, len(xs) - 1, 2)]
                ratio.append(statistics.pstdev(diffs) / (statistics.pstdev(xs) * math.sqrt(2)))
            print(f"  {variant}: {len(logs)} runs; lag-1 correlation per item median "
                  f"{statistics.median(lag):+.2f} (range {min(lag):+.2f}..{max(lag):+.2f}); "
                  f"sd(paired diff) / (sd x sqrt 2) median {statistics.median(ratio):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
