"""Record real benchmark repeats of unchanged builds, interleaved across variants.

    python bench/perf_record.py --out bench/data/noise-YYYY-MM-DD --runs 40 \
        intelasm=bsdkm-out/userspace/intelasm noasm=bsdkm-out/userspace/noasm

Each VARIANT=DIR names a ``bsdkm-ci run`` output directory of one userspace build (its
``state.json`` says where the benchmark program is and which arguments the config used).
Rounds alternate the variants (A B A B ...), so slow drift of the machine hits every variant
alike. Each run's output is stored gzipped as ``<variant>_rNN.txt.gz``; ``runs.jsonl`` holds
one line per run (variant, repeat, start time, seconds, exit code, load average before/after).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import time
from pathlib import Path


def _program(run_dir: Path) -> tuple[Path, list[str], dict]:
    state = json.loads((run_dir / "state.json").read_text())
    bench = Path(state["programs"]["benchmark"])
    runs = state.get("programs_run") or []
    argv = next((r["argv"] for r in runs if r["name"] == "benchmark"), [str(bench)])
    return bench, list(argv[1:]), state


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", metavar="VARIANT=DIR")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=40, help="runs per variant")
    ap.add_argument("--start", type=int, default=1, help="first repeat number (to extend a series)")
    ap.add_argument("--prefix", default="", help="command prefix, e.g. 'chrt -f 50' (kept in machine.json)")
    ap.add_argument("--prefix-for", action="append", default=[], metavar="VARIANT=PREFIX",
                    help="this variant's own prefix instead of --prefix: two worker settings recorded "
                         "side by side in one series, e.g. one build under two names")
    args = ap.parse_args()
    prefixes = dict(spec.partition("=")[::2] for spec in args.prefix_for)
    builds = []
    for spec in args.builds:
        variant, _, d = spec.partition("=")
        bench, bench_args, state = _program(Path(d))
        builds.append((variant, bench, bench_args, state))
    unknown = set(prefixes) - {b[0] for b in builds}
    if unknown:
        ap.error(f"--prefix-for names no recorded variant: {', '.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    meta_path = args.out / "machine.json"
    if not meta_path.exists():
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
        meta = {"prefix": args.prefix, "prefix_for": prefixes,
                "platform": platform.platform(), "nproc": os.cpu_count(),
                "cpu": next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")),
                            None),
                "builds": {v: {"program": str(b), "args": a, "configure_args": s.get("configure_args"),
                               "source": s.get("source", {}).get("origin")} for v, b, a, s in builds}}
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    with (args.out / "runs.jsonl").open("a") as index:
        for rep in range(args.start, args.start + args.runs):
            for variant, bench, bench_args, _ in builds:
                load_before = os.getloadavg()[0]
                began = time.time()
                t0 = time.monotonic()
                prefix = prefixes.get(variant, args.prefix)
                proc = subprocess.run([*prefix.split(), str(bench), *bench_args],
                                      cwd=bench.parent.parent.parent, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, check=False)
                took = time.monotonic() - t0
                name = f"{variant}_r{rep:02d}.txt.gz"
                with gzip.open(args.out / name, "wb", compresslevel=9) as f:
                    f.write(proc.stdout)
                rec = {"variant": variant, "repeat": rep, "file": name, "started": round(began, 1),
                       "seconds": round(took, 2), "exit": proc.returncode,
                       "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
                index.write(json.dumps(rec) + "\n")
                index.flush()
                print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
