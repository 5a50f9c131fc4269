"""``action merge``: several jobs' results (downloaded artifacts) joined into one document for the
report job."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ...contract import BASE_RUNS_JSON
from ...model import ModelError, RunResult, from_json, merge_runs, to_json
from ..exit_codes import EXIT_OK, UsageError
from . import workflow as actions
from .run_files import SUMMARY_JSON, read_text
from .workflow import Annotation, Level


def register_merge(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("merge", help="join the results of several jobs (downloaded artifacts) into one")
    p.add_argument("--out", type=Path, required=True, help="where the merged summary.json goes")
    p.add_argument("sources", nargs="+", type=Path, help="directories holding summary.json (searched deeply)")
    p.set_defaults(func=run_merge)


def merge_results(sources: Sequence[Path]) -> tuple[list[RunResult], list[str]]:
    """Every run found under ``sources``; a (target, variant) seen twice keeps its first copy.

    The merged document carries runs only: its verdict is evaluated afresh over all of them,
    since speedup and crossover gates compare variants that ran in different jobs.
    """
    found_runs: list[RunResult] = []
    origin: list[Path] = []
    for source in sources:
        found = [source] if source.is_file() else sorted(source.rglob(SUMMARY_JSON))
        if not found:
            raise UsageError(f"merge: no {SUMMARY_JSON} under {source}")
        for path in found:
            try:
                doc_runs = from_json(read_text(path, "results"), str(path))
            except ModelError as e:
                raise UsageError(f"merge: {e}") from None
            found_runs += doc_runs
            origin += [path] * len(doc_runs)
    runs, left_out = merge_runs(found_runs, repeats=False)
    notes = [f"{found_runs[j].target}/{found_runs[j].variant} is in {origin[i]} and {origin[j]}; "
             "kept the first" for i, j in left_out]
    return runs, notes


def merge_base_runs(sources: Sequence[Path]) -> list[RunResult]:
    """Every job's base runs (``base-runs.json`` beside its summary), first copy of a pair kept."""
    runs: list[RunResult] = []
    seen: set[tuple[str, str]] = set()
    for source in sources:
        for path in [] if source.is_file() else sorted(source.rglob(BASE_RUNS_JSON)):
            try:
                found = from_json(read_text(path, "base runs"), str(path))
            except ModelError as e:
                raise UsageError(f"merge: {e}") from None
            for run in found:
                if (run.target, run.variant) not in seen:
                    seen.add((run.target, run.variant))
                    runs.append(run)
    return runs


def run_merge(args: argparse.Namespace) -> int:
    runs, notes = merge_results(args.sources)
    for note in notes:
        print(Annotation(Level.WARNING, note, title="bsdkm-ci merge").command())
    args.out.mkdir(parents=True, exist_ok=True)
    sources = [str(s) for s in args.sources]
    (args.out / SUMMARY_JSON).write_text(to_json(runs, merged_from=sources), encoding="utf-8")
    base_runs = merge_base_runs(args.sources)
    if base_runs:
        (args.out / BASE_RUNS_JSON).write_text(to_json(base_runs, merged_from=sources), encoding="utf-8")
    actions.say(f"bsdkm-ci: merged {len(runs)} run(s) from {len(sources)} source(s) "
                f"into {args.out / SUMMARY_JSON}", err=True)
    return EXIT_OK
