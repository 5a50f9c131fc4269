"""The judged results of a job as the Action publishes them: the counts behind the ``passed``/
``failed``/``skipped``/``inconclusive`` outputs, the ``json`` output with a commit status per
(target, variant) (the core's, ``report/pull_request.py``), and what ``fail-on`` makes fail the job.
"""

from __future__ import annotations

import argparse
import json

from ...policy import Verdict
from ...report.commit_status import CommitStatus

# fail-on: what makes the job fail, on top of the policy (which it never edits).
FAIL_ON_NEW = "new"  # blocking failures the triage calls new (not pre-existing, known or flaky)
FAIL_ON_REGRESSION = "regression"  # the policy's verdict: every blocking failure (the default)
FAIL_ON_INCONCLUSIVE = "inconclusive"  # also gated items left unjudged
FAIL_ON_NEVER = "never"  # report only
FAIL_ON = (FAIL_ON_NEW, FAIL_ON_REGRESSION, FAIL_ON_INCONCLUSIVE, FAIL_ON_NEVER)


def fail_on_choice(text: str) -> str:
    """The ``fail-on`` input; empty is the default (the policy's verdict)."""
    word = text.strip().lower() or FAIL_ON_REGRESSION
    if word not in FAIL_ON:
        raise argparse.ArgumentTypeError(f"fail-on {text!r}: expected one of {', '.join(FAIL_ON)}")
    return word


def job_fails(verdict: Verdict, usable: bool, fail_on: str) -> bool:
    """Whether the job fails: unusable results fail it unless ``never``."""
    if fail_on == FAIL_ON_NEVER:
        return False
    if not usable:
        return True
    if fail_on == FAIL_ON_NEW:
        return any(c.triage in (None, "new") for c in verdict.blocking_failures)
    if fail_on == FAIL_ON_INCONCLUSIVE:
        return not verdict.passed or bool(verdict.inconclusive)
    return not verdict.accepted


def counts(verdict: Verdict, usable: bool) -> dict[str, int]:
    """The ``passed``/``failed``/``skipped``/``inconclusive`` outputs: checks, and runs not run."""
    unjudged = len(verdict.inconclusive)
    failed = len(verdict.failures)
    return {
        "passed": len(verdict.checks) - failed - unjudged if usable else 0,
        "failed": failed,
        "skipped": len(verdict.not_run),
        "inconclusive": unjudged,
    }


def json_output(word: str, verdict: Verdict, usable: bool, states: list[CommitStatus]) -> str:
    """The ``json`` output: one line, for ``fromJSON()`` in later steps."""
    doc = {"verdict": word, **counts(verdict, usable), "summary": verdict.summary() if usable else "",
           "runs": [s.to_dict() for s in states]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))
