"""``bsdkm-ci compare BASE.json HEAD.json``: every item's change versus a baseline, as Markdown.

HEAD is gated with the whole policy (regressions against BASE, and its own self-tests,
completeness, speedups); exit 0 pass, 1 a gate failed, 2 unusable input.
"""

from __future__ import annotations

import argparse

from ..policy import evaluate
from ..report import delta_report
from .junit_cmd import exit_status, read_policy, read_results


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two results documents and print the delta table",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", metavar="BASE.json", help="baseline results document")
    p.add_argument("head", metavar="HEAD.json", help="results document to judge")
    p.add_argument("--policy", metavar="FILE", help="threshold policy YAML (default: policies/default.yml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    base = read_results(args.base)
    head = read_results(args.head)
    policy = read_policy(args.policy)
    verdict = evaluate(head, policy, base)
    print(delta_report(verdict), end="")
    return exit_status(verdict)
