"""``bsdkm-ci compare``: judge head repeats against base repeats (and history), as Markdown.

    bsdkm-ci compare BASE.json HEAD.json
    bsdkm-ci compare --base B.json [B.json ...] --head H.json [H.json ...]
                     [--history H.json ... | DIR] [--policy FILE] [--json FILE]

Each file is one run's results document (``bsdkm-ci parse --json``, a run's ``results.json``);
several files of one (target, variant) are repeats of one measurement. ``--history`` is healthy
past runs of the same machine (files, or directories of them, searched recursively): learned
limits take each item's spread from it. A base from another machine fingerprint exits 2; history
runs from another fingerprint are left out with a note, never mixed in.

HEAD is gated with the whole policy (regressions, and its own self-tests, completeness,
speedups). ``--json`` writes every learned-limit item (name, target, variant, change, ci_low,
ci_high, limit, min_detectable, n_base, n_head, verdict; relative numbers, throughput sense:
-0.05 is 5 % slower) and the run's verdict. Exit 0 no regression, 1 a regression or another gate
failed, 2 unusable input (non-finite numbers included).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..model import RunResult, merge_runs
from ..policy import Verdict, evaluate, fingerprint_problem
from ..report import github_action_benchmark
from ..report.markdown import delta_report
from . import triage_args
from .exit_codes import UsageError
from .io import exit_status, history_files, read_all, read_policy, write_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="judge head results against base results (repeats, history)",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("positional", nargs="*", metavar="BASE.json HEAD.json",
                   help="one base and one head results document (the short form)")
    p.add_argument("--base", nargs="+", metavar="B.json", help="base results documents (repeats)")
    p.add_argument("--head", nargs="+", metavar="H.json", help="head results documents (repeats)")
    p.add_argument("--history", nargs="+", metavar="H.json|DIR", help="healthy past results of this machine")
    p.add_argument("--policy", metavar="FILE", help="threshold policy YAML (default: policies/default.yml)")
    p.add_argument("--json", metavar="FILE", help="write the per-item verdicts as JSON here")
    p.add_argument("--gab", metavar="FILE",
                   help="write the head's results as github-action-benchmark JSON (customBiggerIsBetter); "
                        "cycles go to FILE with .cycles before the suffix (customSmallerIsBetter)")
    triage_args.add_arguments(p)
    p.set_defaults(func=run)


def _sides(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    if args.positional:
        if args.base or args.head:
            raise UsageError("give BASE.json HEAD.json, or --base ... --head ..., not both")
        if len(args.positional) != 2:
            raise UsageError(f"the short form takes BASE.json HEAD.json, not {len(args.positional)} file(s)")
        return [args.positional[0]], [args.positional[1]]
    if not args.base or not args.head:
        raise UsageError("give --base B.json ... and --head H.json ... (or BASE.json HEAD.json)")
    return list(args.base), list(args.head)


def merged(runs: list[RunResult]) -> list[RunResult]:
    """Runs of one (target, variant) from several documents as one run whose logs are the repeats."""
    return merge_runs(runs, repeats=True)[0]


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The ``--json`` document: every learned-limit item and the run's verdict."""
    items = []
    for run in verdict.perf:
        items += run["items"]
        if run.get("geomean"):
            items.append(run["geomean"])
    return {"schema": 1, "verdict": verdict.status, "regression": bool(verdict.regressions),
            "inconclusive": len(verdict.inconclusive), "passed": verdict.passed, "summary": verdict.summary(),
            "items": items, "runs": [{k: v for k, v in r.items() if k not in ("items", "geomean")}
                                     for r in verdict.perf],
            "notes": list(verdict.notes),
            # every failed check with its signature and triage word (new, pre-existing, known, flaky)
            "failures": [c.to_dict() for c in verdict.failures], "triage": dict(verdict.triage)}


def run(args: argparse.Namespace) -> int:
    base_paths, head_paths = _sides(args)
    base = merged(read_all(base_paths))
    head = merged(read_all(head_paths))
    history = read_all(history_files(args.history)) if args.history else None
    problem = fingerprint_problem(base, head)
    if problem:
        raise UsageError(problem)
    policy = read_policy(args.policy)
    triage = triage_args.triage_inputs(args, policy)
    with triage_args.triage_errors():
        verdict = evaluate(head, policy, base, history, triage=triage)
    print(delta_report(verdict), end="")
    if args.json:
        write_text(args.json, json.dumps(verdict_json(verdict), indent=2) + "\n")
    if args.gab:
        bigger, smaller = github_action_benchmark.entries(head)
        write_text(args.gab, json.dumps(bigger, indent=2) + "\n")
        path = Path(args.gab)
        cycles_path = path.with_name(path.stem + ".cycles" + path.suffix)
        write_text(str(cycles_path), json.dumps(smaller, indent=2) + "\n")
    return exit_status(verdict)
