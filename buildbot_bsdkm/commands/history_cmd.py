"""``bsdkm-ci history``: the perf gate's base-branch history in a directory (the CLI's and Action's).

    bsdkm-ci history add --store DIR RESULTS.json [...]   # after a base-branch run
    bsdkm-ci history show --store DIR [--json FILE]       # runs per fingerprint, drift per item
    bsdkm-ci history page --store DIR --out index.html    # the trend charts, as a static page
    bsdkm-ci history outcomes --store DIR [--json FILE]   # the base's verdicts and failure signatures
    bsdkm-ci history outcomes --db URL [--json FILE]      # ... as a Buildbot master recorded them

``add`` stores each healthy run under its machine fingerprint (a run without one is refused: history
must never mix machines; a failed or incomplete one is left out, with a line saying why), and records
the base outcome of each (target, variant, kernel kind):
its verdict and the signatures of its failures, judged by the document's own verdict
(``summary.json``) or else by the default policy, under ``DIR/outcomes/``. ``compare --history DIR``
reads the same directory. ``show`` lists every (fingerprint, target, variant) with its run count
and each item's drift (the commit where a new level began), then the base outcomes; ``page`` writes
the Buildbot master's perf history page (its trend charts) over the directory, as one HTML file for
a static site (the Action's nightly publishes it on ``gh-pages``); ``outcomes``
lists only those, from the directory or a Buildbot master's database (``--json``: every record,
oldest first, as ``{"base_outcomes": [...]}``, the form ``compare``/``junit --base-results`` read).
Exit 0, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..model import ModelError, RunResult, from_json
from ..perf import drift
from ..perf.store import DirStore, StoreError, best_series, not_healthy
from ..policy import PolicyError, Verdict, evaluate, load_policy
from ..report.history import WINDOW, static_page
from ..triage.outcome_store import OutcomeDirStore, OutcomeSqlStore, describe
from ..triage.outcomes import outcomes_of
from .exit_codes import UsageError
from .io import read_all, write_text


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
    page = act.add_parser("page", help="the trend charts of every series, as one static HTML page")
    page.add_argument("--store", required=True, metavar="DIR")
    page.add_argument("--out", required=True, metavar="FILE", help="the HTML page to write (index.html)")
    page.add_argument("--window", type=int, default=WINDOW, metavar="N",
                      help=f"newest N runs of each series (default {WINDOW})")
    page.add_argument("--title", default="bsdkm-ci performance history", help="the page's title")
    outs = act.add_parser("outcomes", help="the base branch's verdicts and failure signatures")
    where = outs.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", metavar="DIR", help="a history directory (the CLI's and the Action's)")
    where.add_argument("--db", metavar="URL", help="a Buildbot master's database (its db_url)")
    outs.add_argument("--window", type=int, default=10, metavar="N",
                      help="newest N base builds per kernel kind (default 10)")
    outs.add_argument("--json", metavar="FILE",
                      help="also write them as {\"base_outcomes\": [...]}, which --base-results reads")
    p.set_defaults(func=run)


def show(store: DirStore, window: int) -> list[dict[str, Any]]:
    rows = []
    for fp, target, variant, _ in store.series():
        runs = store.window(fp, target, variant, window)
        drifts = {}
        for name, series in best_series(runs).items():
            found = drift.detect(series)
            if found:
                drifts[name] = {"commit": found[-1].commit, "change": round(found[-1].change, 4)}
        rows.append({"fingerprint": fp, "target": target, "variant": variant, "runs": len(runs),
                     "drift": drifts})
    return rows


def _document_verdict(path: str, runs: list[RunResult]) -> Verdict:
    """The verdict a results document carries (``summary.json``), else the default policy's."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("verdict"), dict):
        try:
            return Verdict.from_dict(doc["verdict"])
        except ValueError as e:
            raise UsageError(f"{path}: verdict: {e}") from None
    try:
        return evaluate(runs, load_policy(None))
    except PolicyError as e:
        raise UsageError(f"default policy: {e}") from None


def _read_one(path: str) -> list[RunResult]:
    try:
        return from_json(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot be read: {e}") from None
    except ModelError as e:
        raise UsageError(str(e)) from None


def outcomes(store: OutcomeDirStore | OutcomeSqlStore, window: int) -> list[dict[str, Any]]:
    return [rec for target, variant in store.pairs() for rec in store.window(target, variant, window)]


def _print_outcomes(records: list[dict[str, Any]]) -> None:
    if not records:
        print("base outcomes: none recorded")
        return
    for line in describe(records):
        print(f"base outcome {line}")


def _outcomes_command(args: argparse.Namespace) -> int:
    if args.window < 1:
        raise UsageError(f"--window must be at least 1, got {args.window}")
    try:
        store = OutcomeDirStore(Path(args.store)) if args.store else OutcomeSqlStore(args.db)
        records = outcomes(store, args.window)
    except StoreError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - SQLAlchemy's errors (bad URL, no such database) named
        raise UsageError(f"--db: {type(e).__name__}: {e}") from None
    _print_outcomes(records)
    if args.json:
        write_text(args.json, json.dumps({"base_outcomes": records}, indent=2) + "\n")
    return 0


def _page_command(args: argparse.Namespace) -> int:
    if args.window < 1:
        raise UsageError(f"--window must be at least 1, got {args.window}")
    store = DirStore(Path(args.store))
    if not store.root.is_dir():
        raise UsageError(f"--store {args.store}: no such directory")
    try:
        keys = store.series()
        text = static_page(keys, lambda fp, t, v: store.window(fp, t, v, args.window), title=args.title,
                           window=args.window)
    except StoreError as e:
        raise UsageError(str(e)) from None
    write_text(args.out, text)
    print(f"{args.out}: {len(keys)} series")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "outcomes":
        return _outcomes_command(args)
    if args.action == "page":
        return _page_command(args)
    store = DirStore(Path(args.store))
    outcome_store = OutcomeDirStore(Path(args.store))
    if args.action == "add":
        runs = read_all(list(args.results))
        try:
            for r in runs:
                why = not_healthy(r)
                if why is not None:  # its outcome is still recorded below: failures are the triage's
                    print(f"{r.target}/{r.variant}: not kept as perf history: {why}")
                    continue
                print(store.add(r, args.commit))
            for path in args.results:
                one = _read_one(path)
                for rec in outcomes_of(one, _document_verdict(path, one), commit=args.commit):
                    print(outcome_store.add(rec.to_dict()))
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
    try:
        records = outcomes(outcome_store, 10)
    except StoreError as e:
        raise UsageError(str(e)) from None
    _print_outcomes(records)
    if args.json:
        write_text(args.json, json.dumps(rows, indent=2) + "\n")
    return 0
