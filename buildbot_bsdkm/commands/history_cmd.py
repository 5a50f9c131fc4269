"""``bsdkm-ci history``: the perf gate's base-branch history in a directory (the CLI's and Action's).

    bsdkm-ci history add --store DIR RESULTS.json [...]   # after a healthy base-branch run
    bsdkm-ci history show --store DIR [--json FILE]       # runs per fingerprint, drift per item

``add`` stores each run under its machine fingerprint (a run without one is refused: history
must never mix machines). ``compare --history DIR`` reads the same directory. ``show`` lists
every (fingerprint, target, variant) with its run count and each item's drift (the commit where
a new level began). Exit 0, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..perf import drift
from ..perf.store import DirStore, StoreError, best_series
from .compare_cmd import _read_all
from .errors import UsageError
from .junit_cmd import write_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="perf history of the base branch per machine fingerprint",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    act = p.add_subparsers(dest="action", required=True)
    add = act.add_parser("add", help="store healthy base-branch results")
    add.add_argument("--store", required=True, metavar="DIR")
    add.add_argument("results", nargs="+", metavar="RESULTS.json")
    add.add_argument("--commit", help="the base commit (default: each run's source_commit)")
    show = act.add_parser("show", help="runs and drift per fingerprint/target/variant")
    show.add_argument("--store", required=True, metavar="DIR")
    show.add_argument("--window", type=int, default=30, metavar="N", help="newest N runs (default 30)")
    show.add_argument("--json", metavar="FILE", help="also write it as JSON")
    p.set_defaults(func=run)


def show(store: DirStore, window: int) -> list[dict[str, Any]]:
    rows = []
    for key in sorted(p for p in store.root.glob("*/*/*") if p.is_dir()):
        fp, target, variant = key.relative_to(store.root).parts
        runs = store.window(fp, target, variant, window)
        drifts = {}
        for name, series in best_series(runs).items():
            found = drift.detect(series)
            if found:
                drifts[name] = {"commit": found[-1].commit, "change": round(found[-1].change, 4)}
        rows.append({"fingerprint": fp, "target": target, "variant": variant, "runs": len(runs),
                     "drift": drifts})
    return rows


def run(args: argparse.Namespace) -> int:
    store = DirStore(Path(args.store))
    if args.action == "add":
        runs = _read_all(list(args.results))
        try:
            for r in runs:
                print(store.add(r, args.commit))
        except StoreError as e:
            raise UsageError(str(e)) from None
        return 0
    if args.window < 1:
        raise UsageError(f"--window must be at least 1, got {args.window}")
    try:
        rows = show(store, args.window)
    except StoreError as e:
        raise UsageError(str(e)) from None
    for r in rows:
        said = "; ".join(f"{n} {d['change'] * 100:+.1f}% from {d['commit']}" for n, d in r["drift"].items())
        print(f"{r['fingerprint']} {r['target']}/{r['variant']}: {r['runs']} run(s)"
              + (f"; drift: {said}" if said else "; no drift"))
    if args.json:
        write_text(args.json, json.dumps(rows, indent=2) + "\n")
    return 0
