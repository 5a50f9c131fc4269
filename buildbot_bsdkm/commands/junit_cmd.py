"""``bsdkm-ci junit LOG... -o FILE``: gate logs with a policy, write JUnit (and Markdown/HTML).

Text LOGs are parsed and form one run (``--variant`` on ``--target``). A LOG ending in
``.json`` is a results document (``bsdkm-ci parse --json`` / ``summary.json``) and brings
its own runs with their own variant and target names, so several variants can be gated
together, e.g. for the speedup gates: ``bsdkm-ci junit aesni.json noasm.json -o junit.xml``.

Exit 0 every check passed (the verdict may be INCONCLUSIVE: gated items went unjudged), 1 a test
or threshold failed (or items went unjudged under ``perf.inconclusive: fail``), 2 unusable input.
"""

from __future__ import annotations

import argparse

from ..policy import Verdict, evaluate
from ..report.html_page import html_report
from ..report.junit import junit_tally, junit_xml
from ..report.markdown import markdown_report
from . import triage_args
from .io import exit_status, load_runs, read_policy, read_results, write_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("junit", help="gate logs with a threshold policy and write JUnit XML",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files, or results documents ending in .json")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="JUnit XML to write")
    p.add_argument("--variant", default="unknown", help="variant of the text LOGs (e.g. aesni-avx)")
    p.add_argument("--target", default="unknown", help="target of the text LOGs (e.g. freebsd-kmod)")
    p.add_argument("--policy", metavar="FILE", help="threshold policy YAML (default: policies/default.yml)")
    p.add_argument("--baseline", metavar="FILE", help="baseline results JSON for regression gates")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report here")
    p.add_argument("--html", metavar="FILE", help="also write the standalone HTML report here")
    p.add_argument("--testcase-files", action="store_true",
                   help="also put each testcase's log and line in its own file/line attributes (what "
                        "EnricoMi/publish-unit-test-result-action reads; outside the junit-10.xsd schema)")
    triage_args.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = load_runs(args.logs, args.variant, args.target)
    policy = read_policy(args.policy)
    baseline = read_results(args.baseline) if args.baseline else None
    triage = triage_args.triage_inputs(args, policy)
    with triage_args.triage_errors():
        verdict = evaluate(runs, policy, baseline, triage=triage)
    write_text(args.output, junit_xml(runs, verdict, testcase_files=args.testcase_files))
    if args.markdown:
        write_text(args.markdown, markdown_report(runs, verdict))
    if args.html:
        write_text(args.html, html_report(runs, verdict))
    print_verdict(verdict)
    print(f"  {args.output}: {junit_tally(runs, verdict)}")
    return exit_status(verdict)


def print_verdict(verdict: Verdict) -> None:
    print(verdict.headline())
    for note in verdict.notes:
        print(f"  note: {note}")
    for c in verdict.failures:
        print(f"  {c.run_label} {c.kind}{' (error)' if c.error else ''}: {c.message}")
        if c.triage:
            why = f": {c.triage_note}" if c.triage_note else ""
            print(f"    {c.triage}{'' if c.blocking else ' (does not block)'}{why} [{c.signature}]")


