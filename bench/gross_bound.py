"""The gross bound: the largest ratio two healthy runs of one item ever showed, and its false alarms.

    python bench/gross_bound.py [--learn noise-2026-12-01 --learn noise-2026-12-01-nochrt]
        [--margin 1.5] [--out bench/results/gross_bound.md]

A change beyond anything noise has produced is a regression even when a side has one run
(``perf.gross_ratio``, ``buildbot_bsdkm/perf/gate.py``). The bound is learned here, from our own
recordings only (``bench/data``): per recording, variant and item, the largest value over the
smallest of all its healthy runs, in the metric the gate reads (throughput; cycles give the same
ratios), the largest of those over the learning recordings, times ``--margin``.

Then every recording, the learning ones and the held-out ones (the other ``bench/data`` sets and
the shared ``fixtures/noise`` ten, never learned from), is judged at 1 vs 1:

- ``pairs``: every ordered pair of two different healthy runs of one variant (base, head); a false
  alarm is a pair in which any item is slower than ``1/bound`` (what the gate fails on);
- ``gate``: the adjacent pairs (run i as base, run i+1 as head, and the reverse) through the real
  gate (``policy.evaluate`` with the default policy and the bound), failing on any regression check.

Both figures must stay at or below 1 %. The lost-acceleration pair (the shared userspace
``accel`` vs ``noasm`` default benchmark tables, i.e. an accelerated build against its
``--disable-asm`` build) is judged the same way and must fail, AES-128-GCM-enc named.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.model import LogResult, RunResult  # noqa: E402
from buildbot_bsdkm.parsers import parse_text  # noqa: E402
from buildbot_bsdkm.policy import CheckKind, evaluate, load_policy  # noqa: E402

DATA = ROOT / "bench" / "data"
SHARED = ROOT.parent / "shared" / "fixtures"
LEARN = ("noise-2026-12-01", "noise-2026-12-01-nochrt")
MARGIN = 1.5


def load_recording(path: Path) -> dict[str, list[LogResult]]:
    """Every healthy (exit 0) run of a recording, per variant, in recording order."""
    out: dict[str, list[LogResult]] = {}
    if (path / "runs.jsonl").is_file():
        for line in (path / "runs.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["exit"] != 0:
                continue
            with gzip.open(path / rec["file"]) as f:
                out.setdefault(rec["variant"], []).append(parse_text(f.read().decode(), rec["file"]))
        return out
    for f in sorted(path.glob("*_r*.txt")):  # the shared ten: <variant>_rNN.txt
        out.setdefault(f.name.split("_")[0], []).append(parse_text(f.read_text(), f.name))
    return out


def item_values(logs: list[LogResult]) -> dict[tuple[str, int | None], list[float]]:
    values: dict[tuple[str, int | None], list[float]] = {}
    for log in logs:
        for b in log.benchmarks:
            if not b.failed and b.per_second:
                values.setdefault((b.name, b.block_size), []).append(b.per_second)
    return values


def widest(logs: list[LogResult]) -> tuple[float, str]:
    """The largest max/min ratio of any item over these runs, and the item."""
    best = (1.0, "")
    for (name, _), vals in item_values(logs).items():
        if len(vals) >= 2 and max(vals) / min(vals) > best[0]:
            best = (max(vals) / min(vals), name)
    return best


def pair_alarms(logs: list[LogResult], bound: float) -> tuple[int, int]:
    """Ordered pairs of different runs in which any item is slower than 1/bound: (alarms, pairs)."""
    per_run = [{(b.name, b.block_size): b.per_second for b in lg.benchmarks if not b.failed and b.per_second}
               for lg in logs]
    alarms = pairs = 0
    for i, j in itertools.permutations(range(len(per_run)), 2):
        base, head = per_run[i], per_run[j]
        pairs += 1
        if any(head[k] * bound < v for k, v in base.items() if k in head):
            alarms += 1
    return alarms, pairs


def run_of(variant: str, log: LogResult) -> RunResult:
    return RunResult(variant, "userspace", logs=[log])


def gate_alarms(variant: str, logs: list[LogResult], policy) -> tuple[int, int]:
    """Adjacent pairs both ways through the real gate: (pairs with a regression check failed, pairs)."""
    alarms = pairs = 0
    for a, b in zip(logs, logs[1:], strict=False):
        for base, head in ((a, b), (b, a)):
            v = evaluate([run_of(variant, head)], policy, [run_of(variant, base)])
            pairs += 1
            alarms += any(c.kind == CheckKind.REGRESSION and not c.passed for c in v.checks)
    return alarms, pairs


def lost_acceleration(policy) -> list[str]:
    """The asm table against its --disable-asm table at 1 vs 1: the regressions the gate names."""
    acc = SHARED / "userspace" / "accel" / "bench_default.txt"
    soft = SHARED / "userspace" / "noasm" / "bench_default.txt"
    if not (acc.is_file() and soft.is_file()):
        return []
    base = RunResult("asm", "freebsd-kmod", logs=[parse_text(acc.read_text(), acc.name)])
    head = RunResult("asm", "freebsd-kmod", logs=[parse_text(soft.read_text(), soft.name)])
    v = evaluate([head], policy, [base])
    return [f"{c.name} {c.delta_pct:+.1f}%" for c in v.checks
            if c.kind == CheckKind.REGRESSION and not c.passed and c.delta_pct is not None]


def pct(a: int, n: int) -> str:
    return f"{100.0 * a / n:.2f} %" if n else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--learn", action="append", help="a bench/data recording to learn from (repeatable)")
    ap.add_argument("--margin", type=float, default=MARGIN)
    ap.add_argument("--out", type=Path, help="also write the Markdown here")
    args = ap.parse_args()
    learn = tuple(args.learn or LEARN)
    t0 = time.monotonic()
    recordings: dict[str, dict[str, list[LogResult]]] = {}
    for path in sorted(DATA.glob("noise-*")):
        recordings[path.name] = load_recording(path)
    if (SHARED / "noise").is_dir():
        recordings["shared fixtures/noise"] = load_recording(SHARED / "noise")
    unknown = [n for n in learn if n not in recordings]
    if unknown:
        ap.error(f"no recording {', '.join(unknown)} in {DATA}")

    widest_seen = {(name, v): widest(logs) for name, rec in recordings.items() for v, logs in rec.items()}
    learned, where = max((w[0], f"{name} {v} {w[1]}") for (name, v), w in widest_seen.items()
                         if name in learn)
    bound = round(learned * args.margin * 2) / 2  # stated to 0.5
    policy = load_policy(None)
    policy.perf = dataclasses.replace(policy.perf, gross_ratio=bound)

    lines = [f"# Gross bound (bench/gross_bound.py, margin {args.margin:g})", "",
             f"Learned from: {', '.join(learn)}. Widest healthy ratio there: **{learned:.2f}x** ({where}); "
             f"bound = {learned:.2f} x {args.margin:g} = **{bound:g}x** "
             f"(a {100 * (1 - 1 / bound):.1f} % drop).", "",
             "| recording | variant | runs | role | widest healthy ratio (item) | 1v1 pairs alarmed | "
             "gate, adjacent pairs alarmed |", "|---|---|---|---|---|---|---|"]
    worst = 0.0
    for (name, v), (ratio, item) in widest_seen.items():
        logs = recordings[name][v]
        a, n = pair_alarms(logs, bound)
        ga, gn = gate_alarms(v, logs, policy)
        worst = max(worst, a / n if n else 0.0, ga / gn if gn else 0.0)
        role = "learned" if name in learn else "held out"
        lines.append(f"| {name} | {v} | {len(logs)} | {role} | {ratio:.2f}x ({item}) | "
                     f"{a} of {n} ({pct(a, n)}) | {ga} of {gn} ({pct(ga, gn)}) |")
    caught = lost_acceleration(policy)
    lines += ["", f"Worst false-alarm rate at 1 vs 1: {100 * worst:.2f} % (target: at most 1 %).", "",
              "Lost acceleration at 1 vs 1 (shared userspace accel vs noasm bench_default, as "
              "freebsd-kmod/asm): "
              + (f"fails, {len(caught)} item(s): {', '.join(caught)}" if caught else "NOT caught"), "",
              f"({time.monotonic() - t0:.0f} s)"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0 if worst <= 0.01 and any(c.startswith("AES-128-GCM-enc ") for c in caught) else 1


if __name__ == "__main__":
    raise SystemExit(main())
