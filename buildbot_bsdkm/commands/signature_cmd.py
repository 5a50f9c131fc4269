"""``bsdkm-ci signature LOG|RESULTS.json ...``: print each failure's stable signature, one per line.

A text LOG is parsed and gated as one run (``--variant`` on ``--target``); a results document
(``parse --json``, ``results.json``) is gated with the policy; one that carries its verdict
(``summary.json``) is read as judged. Each signature is printed once, in the order of the checks:
the same bug on another machine or boot prints the same line (docs/triage.md).

Exit 1 when a failure was found (its signatures are printed), 0 when nothing failed (nothing is
printed), 2 unusable input: the exit statuses of every subcommand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..model import ModelError, RunResult, from_json, load_document
from ..policy import Verdict, evaluate
from ..triage.classify_checks import TriageInputs
from ..triage.signature import signature
from . import triage_args
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError
from .io import load_runs, read_policy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("signature", help="print each failure's stable signature, one per line",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="LOG|RESULTS.json", help="logs or results documents")
    p.add_argument("--variant", default="unknown", help="variant of the text LOGs")
    p.add_argument("--target", default="unknown", help="target of the text LOGs")
    p.add_argument("--policy", metavar="FILE", help="threshold policy YAML (default: policies/default.yml)")
    p.set_defaults(func=run)


def _judged(path: str) -> tuple[list[RunResult], Verdict] | None:
    """A results document that carries its verdict (summary.json), else None."""
    try:
        doc = load_document(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, ValueError):  # ModelError too: deeper than Python's decoder goes
        return None  # load_runs names the problem
    if not isinstance(doc, dict) or not isinstance(doc.get("verdict"), dict):
        return None
    try:
        runs = from_json(json.dumps({"schema": doc.get("schema", 1), "runs": doc.get("runs", [])}), path)
        return runs, Verdict.from_dict(doc["verdict"])
    except (ModelError, ValueError) as e:
        raise UsageError(f"{path}: {e}") from None


def run(args: argparse.Namespace) -> int:
    policy = None
    pairs: list[tuple[list[RunResult], Verdict]] = []
    for path in args.inputs:
        judged = _judged(path) if path.endswith(".json") else None
        if judged is None:
            runs = load_runs([path], args.variant, args.target)
            policy = policy or read_policy(args.policy)
            with triage_args.triage_errors():
                judged = runs, evaluate(runs, policy, triage=TriageInputs())
        pairs.append(judged)
    seen: list[str] = []
    for runs, verdict in pairs:
        by = {(r.target, r.variant): r for r in runs}
        for c in verdict.failures:
            s = signature(c, by.get((c.target, c.variant)))
            if s not in seen:
                seen.append(s)
    for s in seen:
        print(s)
    return EXIT_FAILED if seen else EXIT_OK
