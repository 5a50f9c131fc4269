"""How often the perf gate raises false alarms, and how often it catches injected drops.

    python bench/perf_gate.py [--draws 300] [--seed 9] [--data bench/data/noise-2026-12-01]
        [--draw shuffled-rounds|rounds|random] [--set NAME=VALUE ...] [--new-only] [--only own|shared]
        [--max-repeats N] [--variant V ...] [--json out.json]

On real repeated runs of one unchanged binary per variant: healthy pairs are 5 base vs 5 head
repeats drawn without overlap, either as the pipeline measures them (``--draw shuffled-rounds``,
the default: five adjacent rounds at a random place of the series, each round's order B H or H B a
coin flip, as ``benchmark.round_order: shuffled`` does), as strict alternation would (``--draw
rounds``: B H B H ..., ``round_order: alternate``) or anywhere in the series (``--draw random``);
``--set`` overrides a perf setting of the new gate
(tuning, e.g. ``--set tail=1.5``; ``--set center=median --set tail=1.8`` is the previous
learned default). The new gate learns limits only from other runs (the remaining
recorded repeats as ``history``; on the shared ten, where no other runs exist, from the ten
repeats of the pair themselves). A false alarm is any item or the geometric mean failing on a
healthy pair. Detection: the head repeats with AES-128-GCM-enc slowed by 5/10/12/15 %, or all
items by 2/5/10 %. The old gate (the previous default: fixed 15 % per item / 6 % geomean) is
run on the same draws: "1v1" (one log a side) and "5v5" (median of 5 base logs, each of the
5 head logs gated on its own, as it did). Everything goes through ``policy.evaluate``.

The new gate measures as the pipeline does: a window of ``--max-repeats`` rounds (bsdkm.yml's
``benchmark.max_repeats``, 15) is drawn, the gate looks at its first five, and while
``perf/extend.undecided`` says an item is too noisy it looks at 10, then 15; the last look's verdict
counts, and the mean rounds used are printed. ``--max-repeats 5`` is the fixed 5 vs 5 of before. The
shared check set has ten runs a variant, so there it is always 5 vs 5.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.config.bsdkm_yml import load_config  # noqa: E402
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult  # noqa: E402
from buildbot_bsdkm.parsers import parse_text  # noqa: E402
from buildbot_bsdkm.perf import extend as perf_extend  # noqa: E402
from buildbot_bsdkm.perf.gate import Settings  # noqa: E402
from buildbot_bsdkm.pipeline import gating as perf_confirm  # noqa: E402
from buildbot_bsdkm.policy import Policy, evaluate, load_policy, parse_policy  # noqa: E402

OLD_POLICY = """
regressions:
  - {pattern: "*", max_pct: 15}
  - {pattern: "*", max_pct: 6, aggregate: geomean}
"""
SHARED = ROOT.parent / "shared" / "fixtures" / "noise"
DEFAULT_MAX_REPEATS = load_config(ROOT / "bsdkm.yml").benchmark.max_repeats
ONE_ITEM = "AES-128-GCM-enc"
SCENARIOS = [("healthy", None, 1.0)]
SCENARIOS += [(f"{ONE_ITEM} -{p}%", ONE_ITEM, 1 - p / 100) for p in (5, 10, 12, 15)]
SCENARIOS += [(f"all -{p}%", "*", 1 - p / 100) for p in (2, 5, 10)]


def _run(variant: str, log: LogResult) -> RunResult:
    return RunResult(variant, "userspace", logs=[log])


def load_own(data: Path) -> dict[str, list[LogResult]]:
    out: dict[str, list[LogResult]] = {}
    for line in (data / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["exit"] != 0:
            continue
        with gzip.open(data / rec["file"]) as f:
            text = f.read().decode()
        out.setdefault(rec["variant"], []).append(parse_text(text, rec["file"]))
    return out


def load_shared() -> dict[str, list[LogResult]]:
    out: dict[str, list[LogResult]] = {}
    for f in sorted(SHARED.glob("*_r*.txt")):
        out.setdefault(f.name.split("_")[0], []).append(parse_text(f.read_text(), f.name))
    return out


def _slow(b: Benchmark, factor: float) -> Benchmark:
    cycles = b.cycles / factor if b.cycles is not None else None
    return dataclasses.replace(b, value=b.value * factor, per_second=b.per_second * factor, cycles=cycles)


def inject(log: LogResult, item: str | None, factor: float) -> LogResult:
    if item is None:
        return log
    bench = [_slow(b, factor) if item in ("*", b.name) else b for b in log.benchmarks]
    return dataclasses.replace(log, benchmarks=bench)


def failed(verdict) -> bool:
    return bool(verdict.regressions)


def draws(n_logs: int, count: int, seed: int, per_side: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Base and head drawn anywhere in the series, without overlap (not how a pipeline measures)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        idx = list(range(n_logs))
        rng.shuffle(idx)
        base, head, rest = idx[:per_side], idx[per_side:2 * per_side], sorted(idx[2 * per_side:])
        out.append((base, head, rest))
    return out


def rounds(n_logs: int, count: int, seed: int, per_side: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Base and head as a pipeline measures them: ``per_side`` adjacent rounds (B H B H ... or H B H B ...)
    at a random place in the series; base[i] and head[i] are one round. History: every other run."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        start = rng.randrange(n_logs - 2 * per_side + 1)
        window = range(start, start + 2 * per_side)
        first, second = list(window[0::2]), list(window[1::2])
        base, head = (first, second) if rng.random() < 0.5 else (second, first)
        rest = [i for i in range(n_logs) if not start <= i < start + 2 * per_side]
        out.append((base, head, rest))
    return out


def shuffled_rounds(n_logs: int, count: int, seed: int,
                    per_side: int) -> list[tuple[list[int], list[int], list[int]]]:
    """As ``rounds``, but each round's order (B H or H B) is a coin flip: what the pipeline measures
    (``benchmark.round_order: shuffled``, pipeline/rounds.py)."""
    rng = random.Random(seed)
    out = []
    for base, head, rest in rounds(n_logs, count, seed, per_side):
        pairs = [(b, h) if rng.random() < 0.5 else (h, b) for b, h in zip(base, head, strict=True)]
        out.append(([b for b, _ in pairs], [h for _, h in pairs], rest))
    return out


PICKERS = {"rounds": rounds, "random": draws, "shuffled-rounds": shuffled_rounds}


def _again(pairs, pick, n_logs: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """For ``confirm: true``: per draw, a second base/head measurement that shares no run with it."""
    more = iter(pick(n_logs, 50 * len(pairs), seed + 1000, 5))
    out = []
    for base_i, head_i, _ in pairs:
        used = {*base_i, *head_i}
        b, h, _ = next(d for d in more if not used & {*d[0], *d[1]})
        out.append((b, h))
    return out


def _looks(variant: str, base: list[LogResult], head: list[LogResult], hist: list[RunResult], new: Policy,
           first: int) -> tuple[object, int]:
    """The gate as the pipeline runs it: ``first`` rounds, then more (up to as many as were drawn:
    ``--max-repeats``) while an item is still too noisy (perf/extend.py); the verdict of the last
    look and its rounds a side."""
    n = min(first, len(base))
    while True:
        v = evaluate([RunResult(variant, "userspace", logs=head[:n])], new,
                     [RunResult(variant, "userspace", logs=base[:n])], hist)
        more = perf_extend.next_rounds(n, len(base))
        if more <= n or not perf_extend.undecided(v, new.perf):
            return v, n
        n = more


def measure(variant: str, logs: list[LogResult], pairs, new: Policy, old: Policy | None,
            use_history: bool, again: list[tuple[list[int], list[int]]] | None = None,
            first: int = 5) -> dict:
    res: dict[str, dict[str, int]] = {name: {"new": 0, "old1": 0, "old5": 0} for name, _, _ in SCENARIOS}
    rounds_used: dict[str, int] = {name: 0 for name, _, _ in SCENARIOS}
    inconclusive = 0
    for k, (base_i, head_i, rest) in enumerate(pairs):
        base = [logs[i] for i in base_i]
        hist = [_run(variant, logs[i]) for i in rest] if use_history else []
        for name, item, factor in SCENARIOS:
            head = [inject(logs[i], item, factor) for i in head_i]
            v, used = _looks(variant, base, head, hist, new, first)
            rounds_used[name] += used
            head = head[:first]  # the old gate sees the first rounds only
            if again is not None:  # the pipeline's re-measurement: the same change, measured again
                b2, h2 = again[k]

                def remeasure(_pairs, b2=b2, h2=h2, item=item, factor=factor):
                    heads = [inject(logs[i], item, factor) for i in h2]
                    return ([RunResult(variant, "userspace", logs=heads)],
                            [RunResult(variant, "userspace", logs=[logs[i] for i in b2])])
                v = perf_confirm.confirm(v, new, remeasure, hist)
            res[name]["new"] += failed(v)
            if name == "healthy":
                inconclusive += any(p["verdict"] == "inconclusive" for p in v.perf)
            if old is None:
                continue
            res[name]["old1"] += failed(evaluate([_run(variant, head[0])], old, [_run(variant, base[0])]))
            res[name]["old5"] += failed(evaluate([RunResult(variant, "userspace", logs=head)], old,
                                                 [RunResult(variant, "userspace", logs=base[:first])]))
    n = len(pairs)
    return {"pairs": n, "healthy_runs_with_inconclusive_items": inconclusive,
            "mean_rounds": {name: round(r / n, 2) for name, r in rounds_used.items()} if n else {},
            "rates": {name: {k: round(100.0 * v / n, 1) for k, v in r.items()} for name, r in res.items()}}


def table(title: str, results: dict[str, dict], new: str = "new 5v5") -> str:
    lines = [f"### {title}", "", "| scenario | " + " | ".join(
        f"{v}: old 1v1 | {v}: old 5v5 | {v}: {new}" for v in results) + " |",
        "|---" * (1 + 3 * len(results)) + "|"]
    for name, _, _ in SCENARIOS:
        cells = []
        for r in results.values():
            x = r["rates"][name]
            cells += [f"{x['old1']:.1f} %", f"{x['old5']:.1f} %", f"**{x['new']:.1f} %**"]
        what = "false alarms" if name == "healthy" else "detects " + name
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _setting(spec: str) -> tuple[str, object]:
    name, _, raw = spec.partition("=")
    kind = type(getattr(Settings(), name))
    return name, raw if kind is str else (raw.lower() == "true" if kind is bool else kind(raw))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "bench" / "data" / "noise-2026-12-01")
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--policy", type=Path, help="new gate's policy (default: policies/default.yml)")
    ap.add_argument("--only", choices=("own", "shared"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--new-only", action="store_true", help="skip the old gate (faster, for tuning)")
    ap.add_argument("--draw", choices=tuple(PICKERS), default="shuffled-rounds",
                    help="shuffled-rounds: adjacent rounds, each round's order a coin flip, as the pipeline "
                         "measures (default); rounds: strict B H alternation; random: anywhere")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a perf setting of the new gate, e.g. --set tail=1.5 (for tuning)")
    ap.add_argument("--variant", action="append", default=[], help="only these variants of --data")
    ap.add_argument("--max-repeats", type=int, default=DEFAULT_MAX_REPEATS,
                    help="rounds a side at most while too noisy to decide (bsdkm.yml benchmark.max_repeats, "
                         f"{DEFAULT_MAX_REPEATS}; 5: never more than the first five)")
    args = ap.parse_args()
    new = load_policy(args.policy)
    new.perf = dataclasses.replace(new.perf, **dict(_setting(s) for s in args.set))
    pick = PICKERS[args.draw]
    old = None if args.new_only else parse_policy(OLD_POLICY, "<old default>")
    report: dict[str, dict] = {}
    started = time.monotonic()
    if args.only != "shared":
        own = load_own(args.data)
        report["own"] = {}
        own = {v: logs for v, logs in own.items() if not args.variant or v in args.variant}
        # Windows of max_repeats rounds are drawn; the first look sees their first five.
        per_side = max(5, args.max_repeats)
        for v, logs in own.items():
            pairs = pick(len(logs), args.draws, args.seed, per_side)
            again = _again(pairs, pick, len(logs), args.seed) if new.perf.confirm else None
            report["own"][v] = measure(v, logs, pairs, new, old, True, again)
        counts = ", ".join(f"{v} {len(x)}" for v, x in own.items())
        extended = (f", more rounds while too noisy up to {per_side} a side (resolve_pct "
                    f"{new.perf.resolve_pct:g})" if per_side > 5 else "")
        print(table(f"Own recorded repeats ({args.data.name}; {counts} runs; {args.draws} draws of 5 vs 5 "
                    f"({args.draw}), seed {args.seed}, history = the other runs"
                    + (", confirm: true" if new.perf.confirm else "") + extended + ")", report["own"],
                    f"new 5v5 → ≤{per_side}" if per_side > 5 else "new 5v5"))
        if per_side > 5:
            print("\nmean rounds a side: " + "; ".join(
                f"{v}: healthy {r['mean_rounds']['healthy']}, {ONE_ITEM} -12% "
                f"{r['mean_rounds'][f'{ONE_ITEM} -12%']}, all -5% {r['mean_rounds']['all -5%']}"
                for v, r in report["own"].items()))
    if args.only != "own":
        shared = load_shared()
        pairs = []
        import itertools
        for base in itertools.combinations(range(10), 5):
            head = [i for i in range(10) if i not in base]
            pairs.append((list(base), head, []))
        report["shared"] = {v: measure(v, logs, pairs, new, old, False) for v, logs in shared.items()}
        print(table("Check set: shared/fixtures/noise (10 runs a variant; all 252 splits 5 vs 5, no history)",
                    report["shared"]))
    print(f"\n({time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
