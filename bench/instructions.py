"""Instruction counts: determinism, detection at 1 vs 1, healthy rebuilds, and cost.

    python bench/instructions.py [--runs 20] [--rebuilds 20] [--full-rebuilds 2] [--out FILE]

On the pipeline's own userspace builds of the configured source (intelasm, noasm; built when
missing) with the default policy's workload (``instructions.items``):

- determinism: one binary counted ``--runs`` times, per item: min, max, spread (max-min)/min;
- detection: a planted few extra rounds of a loop in ``Sha256Update`` (``pipeline/runtime/
  instruction_counting.rebuilt_with``: the real source with the one file changed, rebuilt
  incrementally) against its base, 1 vs 1 with the default limit; and intelasm against noasm (the
  lost acceleration);
- healthy rebuilds: the driver relinked from scratch ``--rebuilds`` times, and the library rebuilt
  from scratch without ccache ``--full-rebuilds`` times; every one compared 1 vs 1 with the first
  count (false alarms: items beyond the limit);
- cost: seconds per variant of the counting, against one benchmark run's seconds x 15 rounds x
  2 sides (the wall-clock gate at its most).

Writes a Markdown results file (default ``bench/results/instructions.md``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.config.bsdkm_yml import load_config  # noqa: E402
from buildbot_bsdkm.perf.instruction_counts import InstructionCounts, compare_counts, fmt_change  # noqa: E402
from buildbot_bsdkm.pipeline.runtime import instruction_counting as pinstr  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.source import cache_root, fetch_source  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.userspace_build import userspace_build  # noqa: E402
from buildbot_bsdkm.policy import load_policy  # noqa: E402

ANCHOR = "        /* add length for final */\n        AddLength(sha256, len);\n"


def planted(text: str, rounds: int) -> str:
    return text.replace(ANCHOR, ANCHOR + f"""
        {{
            volatile word32 mix = sha256->digest[0];
            word32 n;
            for (n = 0; n < (len / WC_SHA256_BLOCK_SIZE) * {rounds}; n++)
                mix = rotrFixed(mix, 7) ^ n;
        }}
""")


def build_of(variant: str) -> Path:
    config = load_config(ROOT / "bsdkm.yml")
    tree = fetch_source(config.source, cache=cache_root(config), timeout_s=900)
    b = userspace_build(config, variant, tree.path, tree.sha256 or str(tree.path), cache_root(config), 2)
    b.make(b.build_dir.with_name(b.build_dir.name + ".bench.log"), 3600)
    return b.build_dir


def spread_rows(runs: list[InstructionCounts]) -> list[str]:
    rows = []
    for item in runs[0].items:
        values = [r.item(item.name).instructions for r in runs]  # type: ignore[union-attr]
        got = [v for v in values if v is not None]
        if len(got) != len(values):
            rows.append(f"| {item.name} | not counted in every run | | | |")
            continue
        lo, hi = min(got), max(got)
        rows.append(f"| {item.name} | {item.per_unit:.6g} {item.unit} | {lo:,} | {hi:,} | "
                    f"{(hi - lo) / lo * 100:.4f} % |")
    return rows


def alarms(base: InstructionCounts, others: list[InstructionCounts], limit: float) -> tuple[int, float]:
    """Items beyond the limit over all comparisons, and the largest |change| seen."""
    n, worst = 0, 0.0
    for other in others:
        for c in compare_counts(base, other, limit):
            n += c.regressed
            worst = max(worst, abs(c.change_pct or 0.0))
    return n, worst


def bench_seconds(variant: str) -> float | None:
    """One run of the configured benchmark program (what one wall-clock round costs a side)."""
    config = load_config(ROOT / "bsdkm.yml")
    prog = build_of(variant) / "wolfcrypt" / "benchmark" / "benchmark"
    started = time.monotonic()
    res = subprocess.run([str(prog), *config.benchmark.userspace_args], capture_output=True,
                         cwd=prog.parent.parent.parent, check=False)
    return time.monotonic() - started if res.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rebuilds", type=int, default=20)
    ap.add_argument("--full-rebuilds", type=int, default=2)
    ap.add_argument("--rounds", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "instructions.md")
    args = ap.parse_args()
    policy = load_policy(None)
    items = policy.instructions.items
    limit = next(r.max_pct for r in policy.regressions if r.metric == "instructions")
    out: list[str] = ["# Instruction counts (bench/instructions.py)", "",
                      f"Workload: the default policy's `instructions.items` ({len(items)} items, "
                      f"{policy.instructions.block_bytes} bytes a call); limit {limit:g} % "
                      "(default policy).", ""]
    builds = {v: build_of(v) for v in ("intelasm", "noasm")}
    first: dict[str, InstructionCounts] = {}
    seconds: dict[str, list[float]] = {}

    out += ["## Determinism: one binary counted again and again", ""]
    for variant, build in builds.items():
        runs = [pinstr.count_instructions(build, items) for _ in range(args.runs)]
        first[variant] = runs[0]
        seconds[variant] = [r.seconds for r in runs]
        n, worst = alarms(runs[0], runs[1:], limit)
        out += [f"### {variant}: {args.runs} runs", "",
                "| item | per unit | min | max | spread |", "|---|---|---|---|---|", *spread_rows(runs), "",
                f"Re-runs compared 1 vs 1 with the first: {n} alarm(s) in {args.runs - 1} comparisons, "
                f"largest |change| {worst:.4f} %.", ""]
        print(f"{variant}: {args.runs} runs done", file=sys.stderr)

    out += ["## Detection at 1 vs 1", ""]
    out += ["| base | head | item | change | caught | most changed function |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="bsdkm-instr-bench-") as tmp:
        for variant, build in builds.items():
            source = pinstr.BuiltTree.find(build).source
            text = (source / "wolfcrypt" / "src" / "sha256.c").read_text()
            for rounds in args.rounds:
                head_dir = pinstr.rebuilt_with(build, {"wolfcrypt/src/sha256.c": planted(text, rounds)},
                                               Path(tmp) / f"plant-{variant}-{rounds}")
                head = pinstr.count_instructions(head_dir, items)
                for c in compare_counts(first[variant], head, limit):
                    if c.name == "SHA-256" or c.regressed or (c.change_pct or 0) != 0:
                        fn = c.functions[0] if c.functions else None
                        how = "new" if fn is None or fn.change_pct is None else fmt_change(fn.change_pct)
                        named = f"{fn.name} ({how})" if fn else ""
                        caught = "yes" if c.regressed else "no"
                        out.append(f"| {variant} | {variant} + {rounds} extra rounds/block in Sha256Update | "
                                   f"{c.name} | {fmt_change(c.change_pct)} | {caught} | {named} |")
                untouched = [c for c in compare_counts(first[variant], head, limit) if c.name != "SHA-256"]
                out.append(f"| {variant} | (same) | the {len(untouched)} other items | "
                           f"{', '.join(sorted({fmt_change(c.change_pct) for c in untouched}))} | "
                           f"{sum(c.regressed for c in untouched)} alarm(s) | |")
        for c in compare_counts(first["intelasm"], first["noasm"], limit):
            fn = c.functions[0] if c.functions else None
            out.append(f"| intelasm | noasm | {c.name} | {fmt_change(c.change_pct)} | "
                       f"{'yes' if c.regressed else 'no'} | {fn.name if fn else ''} |")
        out.append("")

        out += ["## Healthy rebuilds", ""]
        for variant, build in builds.items():
            relinked = []
            for i in range(args.rebuilds):
                cache = Path(tmp) / f"cache-{variant}-{i}"  # a fresh cache: the driver is built again
                relinked.append(pinstr.count_instructions(build, items, cache=cache))
                shutil.rmtree(cache, ignore_errors=True)
            n, worst = alarms(first[variant], relinked, limit)
            out.append(f"- {variant}: the driver built again from scratch {args.rebuilds} times: "
                       f"{n} alarm(s), largest |change| {worst:.4f} %.")
            full = []
            for i in range(args.full_rebuilds):
                started = time.monotonic()
                again = _full_rebuild(build, Path(tmp) / f"full-{variant}-{i}")
                fcache = Path(tmp) / f"fcache-{variant}-{i}"
                full.append(pinstr.count_instructions(again, items, cache=fcache))
                took = time.monotonic() - started
                print(f"{variant}: full rebuild {i + 1} in {took:.0f} s", file=sys.stderr)
            if full:
                n, worst = alarms(first[variant], full, limit)
                out.append(f"- {variant}: the library rebuilt from scratch without ccache "
                           f"{args.full_rebuilds} times: {n} alarm(s), largest |change| {worst:.4f} %.")
        out.append("")

    out += ["## Cost per variant", "", "| variant | counting (median of runs) | one benchmark run | "
            "15 rounds x 2 sides |", "|---|---|---|---|"]
    for variant in builds:
        one = bench_seconds(variant)
        med = statistics.median(seconds[variant])
        wall = f"{one:.1f} s | {one * 30:.0f} s" if one is not None else "failed | "
        lo, hi = min(seconds[variant]), max(seconds[variant])
        out.append(f"| {variant} | {med:.1f} s (min {lo:.1f}, max {hi:.1f}) | {wall} |")
    out += ["", f"Machine: {os.cpu_count()} cores shared with other jobs; {pinstr.valgrind_version()}.", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(out))
    print("\n".join(out))
    return 0


def _full_rebuild(build: Path, dest: Path) -> Path:
    """``build`` copied and made again from clean, without ccache (the compiler runs every file)."""
    again = pinstr.rebuilt_with(build, {}, dest)
    env = dict(os.environ, CCACHE_DISABLE="1")
    subprocess.run(["make", "clean"], cwd=again, check=True, capture_output=True, env=env)
    subprocess.run(["nice", "make", "-j2", "src/libwolfssl.la"], cwd=again, check=True, capture_output=True,
                   env=env)
    return again


if __name__ == "__main__":
    raise SystemExit(main())
