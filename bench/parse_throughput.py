"""Parser throughput and memory: stream a >=100 MB concatenation of the real fixtures.

    .venv/bin/python bench/parse_throughput.py [--mb 100] [--keep DIR]

Builds the input in a temp dir (fixtures repeated until the size is reached),
parses it with ``iter_records`` in one streaming pass per size, and prints MB/s (wall
and CPU), the ratio of its CPU time to a trivial per-line loop over the same file
(decode, rstrip, one test: the machine's yardstick, so the ratio means something on a
loaded worker) and peak RSS. The RSS is measured in a fresh child process per size, so
the 10 MB and the 100 MB figures are comparable: if parsing streams, they are about the same.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BSDKM_SHARED", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures"
TARGET_MB_PER_S = 50.0


def fixture_files() -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name.endswith((".txt", ".log")) and not p.name.endswith(".sh.txt")
    )


def build_input(path: Path, megabytes: int) -> int:
    """Concatenate the fixtures (bench, CSV, self-test, kernel, openssl) until `megabytes` MB."""
    blob = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in fixture_files())
    target = megabytes * 1_000_000
    written = 0
    with path.open("wb") as f:
        while written < target:
            f.write(blob)
            written += len(blob)
    return written


def measure(path: Path) -> dict[str, float]:
    """Parse `path` streaming, in this process; the numbers for one size."""
    from buildbot_bsdkm.model import Benchmark, SelfTest
    from buildbot_bsdkm.parsers import iter_records

    counts = {"benchmarks": 0, "tests": 0, "other": 0}
    calibration = trivial_loop_seconds(path)
    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    cpu_start = time.process_time()
    with path.open("rb") as f:
        for record in iter_records(f):
            if isinstance(record, Benchmark):
                counts["benchmarks"] += 1
            elif isinstance(record, SelfTest):
                counts["tests"] += 1
            else:
                counts["other"] += 1
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    calibration = min(calibration, trivial_loop_seconds(path))  # before and after: the less loaded
    size = path.stat().st_size
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return {
        "bytes": size,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "mb_per_s": size / 1e6 / seconds,
        "cpu_mb_per_s": size / 1e6 / cpu,
        "trivial_cpu_mb_per_s": size / 1e6 / calibration,
        "x_trivial_loop": cpu / calibration,
        "rss_before_parse_mib": rss_before_kib / 1024,
        "peak_rss_mib": peak_kib / 1024,
        **counts,
    }


def trivial_loop_seconds(path: Path) -> float:
    """CPU time of the cheapest per-line loop (decode, rstrip, one test): the machine's yardstick.

    On a shared, loaded worker wall-clock MB/s says more about the neighbours than
    the parser; the ratio to this loop does not.
    """
    start = time.process_time()
    with path.open("rb") as f:
        for raw in f:
            _ = "B/s" in raw.decode("utf-8", errors="replace").rstrip()
    return max(time.process_time() - start, 1e-9)


def measure_in_child(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="size of the big input in MB (default 100)")
    ap.add_argument("--small-mb", type=int, default=10, help="size of the small input in MB (default 10)")
    ap.add_argument("--keep", type=Path, help="write the inputs here instead of a temp dir")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        results = {}
        for mb in (args.small_mb, args.mb):
            path = where / f"fixtures_{mb}MB.log"
            build_input(path, mb)
            results[mb] = measure_in_child(path)
            r = results[mb]
            print(
                f"{r['bytes'] / 1e6:8.1f} MB  {r['seconds']:6.2f} s wall {r['cpu_seconds']:6.2f} s CPU  "
                f"{r['mb_per_s']:6.1f} MB/s wall  {r['cpu_mb_per_s']:6.1f} MB/s CPU  "
                f"{r['x_trivial_loop']:.1f}x the trivial line loop "
                f"({r['trivial_cpu_mb_per_s']:.0f} MB/s CPU)  "
                f"peak RSS {r['peak_rss_mib']:6.1f} MiB ({r['rss_before_parse_mib']:.1f} before parsing)  "
                f"({r['benchmarks']} benchmarks, {r['tests']} tests, {r['other']} other records)"
            )
        small, big = results[args.small_mb], results[args.mb]
        growth = big["peak_rss_mib"] - small["peak_rss_mib"]
        print(
            f"peak RSS {small['peak_rss_mib']:.1f} MiB at {args.small_mb} MB, "
            f"{big['peak_rss_mib']:.1f} MiB at {args.mb} MB ({growth:+.1f} MiB); "
            f"throughput at {args.mb} MB: {big['mb_per_s']:.1f} MB/s wall, "
            f"{big['cpu_mb_per_s']:.1f} MB/s CPU, "
            f"{big['x_trivial_loop']:.1f}x the trivial loop (target >= {TARGET_MB_PER_S:.0f} MB/s CPU: "
            f"{'met' if big['cpu_mb_per_s'] >= TARGET_MB_PER_S else 'NOT met'}); "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
