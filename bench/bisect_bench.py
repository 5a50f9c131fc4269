"""Bisection: builds used against ⌈log₂N⌉ + 3, wall time, right and wrong commits named.

    python bench/bisect_bench.py [--sizes 32 64] [--kinds failure instructions time] [--runs 1]
                                 [--work DIR] [--seed 1] [--out FILE]

Two parts:

- the search alone (``bisection/search.py`` with a deterministic fake runner): every culprit
  position of histories of each size, with and without a commit that does not build in the
  middle; builds used (max, mean) against the limit;
- real bisections (``bsdkm-ci bisect``'s core, ``pipeline/jobs/bisect.bisect_range``) of
  histories made on the real wolfSSL 5.9.2 tree (tests/bisect_history.py) on userspace/noasm,
  the planted commit at a seeded random position and a commit that does not build in the middle:
  ``failure`` (a wrong SHA-256 expected value), ``instructions`` (~10 % extra work in Sha256Update,
  counted instructions) and ``time`` (the same, wall-clock rounds and the learned gate). Builds,
  build time, wall time, and whether the planted commit was named, a wrong one, or none.

Writes a Markdown results file (default ``bench/results/bisect.md``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bisect_history import base_repo, lean_config, make_history  # noqa: E402

from buildbot_bsdkm.bisection.search import Commit, Outcome, Probe, Purpose, bisect, build_limit  # noqa: E402
from buildbot_bsdkm.config.bsdkm_yml import load_config  # noqa: E402
from buildbot_bsdkm.pipeline.jobs.bisect import FailureSpec, RegressionSpec, bisect_range  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source  # noqa: E402


def simulated(n: int, broken: int | None) -> tuple[int, float, int]:
    """(max builds, mean builds, wrong) over every culprit position of an ``n``-commit history."""
    commits = [Commit(f"{i:040x}") for i in range(n + 1)]
    used, wrong = [], 0
    for culprit in range(1, n + 1):
        if culprit == broken:
            continue
        built: set[int] = set()

        def run(c: Commit, _: Purpose, culprit: int = culprit, built: set[int] = built) -> Probe:
            i = int(c.sha, 16)
            new = i not in built
            built.add(i)
            if i == broken:
                return Probe(Outcome.SKIP, built=new)
            return Probe(Outcome.BAD if i >= culprit else Outcome.GOOD, built=new)

        result = bisect(commits, run)
        used.append(result.builds)
        if result.decided and result.culprit != commits[culprit]:
            wrong += 1
    return max(used), statistics.mean(used), wrong


def real(kind: str, n: int, position: int, work: Path, repo: Path, base: str, config: Path) -> dict:
    branch = f"{kind}-{n}-{position}"
    broken = n // 2 if position != n // 2 else n // 2 + 2
    if kind == "failure":
        hist = make_history(repo, base, branch, n, failure_at=position, broken_at=broken)
        what = {"failure": FailureSpec("SHA-256")}
        planted = "failure"
    else:
        hist = make_history(repo, base, branch, n, perf_at=position, broken_at=broken)
        what = {"regression": RegressionSpec("SHA-256", 10.0, kind)}
        planted = "perf"
    started = time.monotonic()
    done = bisect_range(load_config(config), str(repo), hist.good, hist.branch, "userspace", "noasm",
                        work / "out" / branch, progress=lambda _: None, **what)  # type: ignore[arg-type]
    seconds = time.monotonic() - started
    r = done.result
    named = r.culprit.sha if r.culprit else None
    return {"kind": kind, "n": n, "position": position, "builds": r.builds, "limit": build_limit(n),
            "build_s": r.build_seconds, "wall_s": seconds, "right": named == hist.planted[planted],
            "wrong": named is not None and named != hist.planted[planted], "decided": r.decided,
            "why": r.why}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--kinds", nargs="+", default=["failure", "instructions"],
                    choices=["failure", "instructions", "time"])
    ap.add_argument("--runs", type=int, default=1, help="real bisections per size and kind")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bsdkm-bisect-bench"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "bisect.md")
    ap.add_argument("--no-real", action="store_true", help="the simulated search only")
    args = ap.parse_args()

    lines = ["# Bisection (bench/bisect_bench.py)", "",
             "## The search alone (fake runner, every culprit position)", "",
             "| commits | limit ⌈log₂N⌉+3 | max builds | mean builds | max builds, a commit not building "
             "in the middle | wrong culprits |", "|---|---|---|---|---|---|"]
    for n in args.sizes:
        top, mean, wrong = simulated(n, None)
        top_b, _, wrong_b = simulated(n, n // 2)
        lines.append(f"| {n} | {build_limit(n)} | {top} | {mean:.2f} | {top_b} | {wrong + wrong_b} |")
    rows: list[dict] = []
    if not args.no_real:
        args.work.mkdir(parents=True, exist_ok=True)
        repo, base = base_repo(args.work, wolfssl_source())
        config = lean_config(args.work, repo)
        rng = random.Random(args.seed)
        for n in args.sizes:
            for kind in args.kinds:
                for _ in range(args.runs):
                    position = rng.randrange(2, n)
                    row = real(kind, n, position, args.work, repo, base, config)
                    print(row, flush=True)
                    rows.append(row)
        lines += ["", "## Real bisections (userspace/noasm, wolfSSL 5.9.2, 2 shared cores, ccache)", "",
                  "| kind | commits | planted at | builds | limit | build time | wall time | named |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            named = "right" if r["right"] else "WRONG" if r["wrong"] else f"none ({r['why'][:80]})"
            lines.append(f"| {r['kind']} | {r['n']} | {r['position']} | {r['builds']} | {r['limit']} | "
                         f"{r['build_s']:.0f} s | {r['wall_s']:.0f} s | {named} |")
        for kind in args.kinds:
            mine = [r for r in rows if r["kind"] == kind]
            if mine:
                lines.append(f"\n{kind}: right {sum(r['right'] for r in mine)} of {len(mine)}, wrong "
                             f"{sum(r['wrong'] for r in mine)}, builds within the limit "
                             f"{sum(r['builds'] <= r['limit'] for r in mine)} of {len(mine)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
