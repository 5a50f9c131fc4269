#!/usr/bin/env python3
"""How much slower is ``run_matrix`` than typing the same commands by hand? (target: <= 1.10x)

For one userspace variant (default ``noasm`` from bsdkm.yml) this times, in one session:
  cold  by hand:  configure + make -jN + testwolfcrypt + benchmark in an empty directory
  cold  tool:     run_matrix into an empty build cache (same source tree, same flags)
                  (cold pairs are repeated too, each in fresh directories; medians are compared)
  warm  tool:     run_matrix again (build dir reused: configure skipped, make is a no-op)
  warm  by hand:  make + testwolfcrypt + benchmark again in the hand-made build directory
                  (warm pairs are repeated in alternating order; medians are compared)
ccache is disabled for the cold runs so both compile everything. The wolfSSL tarball and
its autogen'd tree come from the usual cache for both sides (fetching is not compared).
The machine is shared: run it when it is quiet, and read the per-phase times too.
testwolfcrypt's own time varies several-fold from run to run (random primes and keys), so each
row also shows the tool's own time: its total minus the time of the very commands it ran.

Usage: .venv/bin/python bench/pipeline_overhead.py [--variant noasm] [--jobs 2] [--warm-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.config.bsdkm_yml import Config, load_config  # noqa: E402
from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.source import cache_root, fetch_source  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.userspace_build import compiler_env, userspace_build  # noqa: E402


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    started = time.monotonic()
    with open(log, "ab") as out:
        rc = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    if rc != 0:
        raise SystemExit(f"by hand: {' '.join(cmd)} exited {rc} (see {log})")
    return time.monotonic() - started


def by_hand(
    config: Config, variant: str, source: Path, build: Path, jobs: int, env: dict[str, str], configure: bool
) -> dict[str, float]:
    plan = userspace_build(config, variant, source, "hand", build.parent, jobs)
    build.mkdir(parents=True, exist_ok=True)
    log = build / "hand.log"
    times: dict[str, float] = {}
    if configure:
        cc = [f"CC={env['CC']}"] if "CC" in env else []
        times["configure"] = timed([str(source / "configure"), *plan.configure_args, *cc], build, env, log)
    times["make"] = timed(["make", f"-j{jobs}"], build, env, log)
    times["testwolfcrypt"] = timed(["./wolfcrypt/test/testwolfcrypt"], build, env, log)
    times["benchmark"] = timed(
        ["./wolfcrypt/benchmark/benchmark", *config.benchmark.userspace_args], build, env, log
    )
    return times


def by_tool(config: Config, variant: str, out: Path, jobs: int) -> tuple[float, dict[str, float]]:
    started = time.monotonic()
    result = run_matrix(config, [variant], ["userspace"], out, progress=lambda m: None, jobs=jobs)
    total = time.monotonic() - started
    run = result.runs[0]
    if run.failure is not None:
        raise SystemExit(f"tool run failed: {run.failure.message}")
    stages = dict(run.stages)
    state = json.loads((out / "userspace" / variant / "state.json").read_text())
    for prog in state.get("programs_run", []):  # the programs' own time inside the load stage
        stages[prog["name"]] = prog["seconds"]
    return total, stages


def fresh_cache(work: Path, name: str = "cache") -> Path:
    """A cache with the shared downloads and autogen'd tree but no builds."""
    cache = work / name
    cache.mkdir()
    shared = cache_root()
    for name in ("downloads", "debian", "src", "locks"):
        if (shared / name).exists():
            (cache / name).symlink_to(shared / name)
    return cache


Run = tuple[float, dict[str, float]]  # total seconds, seconds per phase


def alternating(
    n: int, hand: Callable[[int], Run], tool: Callable[[int], Run]
) -> tuple[list[Run], list[Run]]:
    """n pairs, the order swapped every pair: scheduler noise then falls on both sides alike."""
    hand_runs: list[Run] = []
    tool_runs: list[Run] = []
    for i in range(n):
        for side in ("hand", "tool") if i % 2 == 0 else ("tool", "hand"):
            if side == "hand":
                hand_runs.append(hand(i))
            else:
                tool_runs.append(tool(i))
    return hand_runs, tool_runs


def timed_total(fn: Callable[..., dict[str, float]], *args: Any) -> Run:
    t0 = time.monotonic()
    phases = fn(*args)
    return time.monotonic() - t0, phases


def median_pair(hand: list[Run], tool: list[Run]) -> tuple[float, float, dict[str, float], dict[str, float]]:
    hand_med = sorted(hand, key=lambda r: r[0])[len(hand) // 2]
    tool_med = sorted(tool, key=lambda r: r[0])[len(tool) // 2]
    return hand_med[0], tool_med[0], hand_med[1], tool_med[1]


def own_time(total: float, stages: dict[str, float]) -> float:
    """The tool's total minus the commands it ran (configure, make, the two programs)."""
    return total - sum(stages.get(k, 0.0) for k in ("configure", "build", "testwolfcrypt", "benchmark"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="noasm")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--warm-only", action="store_true", help="skip the cold (full compile) pair")
    ap.add_argument("--config", default=str(ROOT / "bsdkm.yml"))
    ap.add_argument("--repeats", type=int, default=5, help="warm pairs to run (median is reported)")
    ap.add_argument("--cold-repeats", type=int, default=3, help="cold pairs to run (median is reported)")
    args = ap.parse_args()

    base = load_config(args.config)
    source = fetch_source(base.source, cache=cache_root(base)).path
    work = Path(tempfile.mkdtemp(prefix="bsdkm-overhead-"))
    config = dataclasses.replace(base, cache_dir=fresh_cache(work), parallel=1, jobs=args.jobs)
    hand_dir = work / "hand" / "build"
    rows: list[tuple[str, float, float, dict[str, float], dict[str, float]]] = []
    saved = os.environ.get("CCACHE_DISABLE")
    try:
        if not args.warm_only:
            os.environ["CCACHE_DISABLE"] = "1"
            env = compiler_env()
            # Each cold pair in its own directories and cache, so both sides compile everything.
            configs = [dataclasses.replace(config, cache_dir=fresh_cache(work, f"cache{i}"))
                       for i in range(args.cold_repeats)]
            hand_dirs = [work / f"hand{i}" / "build" for i in range(args.cold_repeats)]
            hand_cold, tool_cold = alternating(
                args.cold_repeats,
                lambda i: timed_total(
                    by_hand, configs[i], args.variant, source, hand_dirs[i], args.jobs, env, True
                ),
                lambda i: by_tool(configs[i], args.variant, work / f"out-cold{i}", args.jobs),
            )
            rows.append((f"cold (median of {args.cold_repeats})", *median_pair(hand_cold, tool_cold)))
            config, hand_dir = configs[-1], hand_dirs[-1]
            if saved is None:
                os.environ.pop("CCACHE_DISABLE")
        else:
            by_hand(config, args.variant, source, hand_dir, args.jobs, compiler_env(), configure=True)
            by_tool(config, args.variant, work / "out-prime", args.jobs)
        env = compiler_env()
        hand_runs, tool_runs = alternating(
            args.repeats,
            lambda i: timed_total(by_hand, config, args.variant, source, hand_dir, args.jobs, env, False),
            lambda i: by_tool(config, args.variant, work / f"out-warm{i}", args.jobs),
        )
        rows.append((f"warm (median of {args.repeats})", *median_pair(hand_runs, tool_runs)))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"pipeline overhead, userspace/{args.variant}, make -j{args.jobs}, {os.cpu_count()} cores")
    print(f"{'run':22} {'by hand':>9} {'tool':>9} {'ratio':>6} {'own':>6}  phases (hand | tool)")
    worst = 0.0
    for name, hand_s, tool_s, hand_ph, tool_ph in rows:
        ratio = tool_s / hand_s
        worst = max(worst, ratio)
        hp = " ".join(f"{k}={v:.1f}" for k, v in hand_ph.items())
        tp = " ".join(f"{k}={v:.1f}" for k, v in tool_ph.items())
        own = own_time(tool_s, tool_ph)
        print(f"{name:22} {hand_s:8.1f}s {tool_s:8.1f}s {ratio:5.2f}x {own:5.1f}s  {hp} | {tp}")
    print(f"worst ratio {worst:.2f}x (target <= 1.10x): {'OK' if worst <= 1.10 else 'OVER'}")
    return 0 if worst <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main())
