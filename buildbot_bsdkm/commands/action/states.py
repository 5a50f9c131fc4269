"""The judged results of a job as the Action publishes them: a commit status per (target, variant),
named as Buildbot names them (``contract.status_context``), the counts behind the ``passed``/
``failed``/``skipped``/``inconclusive`` outputs, and what ``fail-on`` makes fail the job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass

from ...contract import status_context
from ...github.texts import short_description
from ...model import FailureCategory, RunResult
from ...policy import Verdict

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


@dataclass(frozen=True)
class RunState:
    """One (target, variant)'s commit status."""

    target: str
    variant: str
    state: str  # success / failure / error (GitHub's commit status states)
    description: str

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)

    def to_dict(self) -> dict[str, str]:
        return {"context": self.context, "target": self.target, "variant": self.variant,
                "state": self.state, "description": self.description}


def _part(verdict: Verdict, target: str, variant: str) -> Verdict:
    """The verdict of one run: its own checks and notes, the rest of the policy's settings kept."""
    return dataclasses.replace(
        verdict,
        checks=[c for c in verdict.checks if (c.target, c.variant) == (target, variant)],
        not_run=[n for n in verdict.not_run if (n.get("target"), n.get("variant")) == (target, variant)],
    )


def run_states(runs: list[RunResult], verdict: Verdict) -> list[RunState]:
    """A status per run of the job, and per run the machine could not do (``error``: nothing tested)."""

    out: list[RunState] = []
    for run in runs:
        part = _part(verdict, run.target, run.variant)
        failure = run.failure
        if run.not_run or part.not_run:
            # Nothing was tested: no checks is not a pass, whatever the rest of the job did.
            reason = run.not_run or str(part.not_run[0].get("reason", ""))
            state, text = "error", f"not run: {reason}"
        elif failure is not None and failure.category == FailureCategory.INFRASTRUCTURE and part.passed:
            state, text = "error", f"infrastructure: {failure.reason or failure.stage}: {failure.message}"
        elif part.accepted:
            state, text = "success", part.summary()
        elif part.failures and all(c.error for c in part.failures):
            state, text = "error", part.summary()
        else:
            state, text = "failure", part.summary()
        out.append(RunState(run.target, run.variant, state, short_description(text)))
    done = {(r.target, r.variant) for r in runs}
    for n in verdict.not_run:
        key = (str(n.get("target", "")), str(n.get("variant", "")))
        if key not in done and all(key):
            out.append(RunState(*key, "error", short_description(f"not run: {n.get('reason', '')}")))
            done.add(key)
    return out


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


def json_output(word: str, verdict: Verdict, usable: bool, states: list[RunState]) -> str:
    """The ``json`` output: one line, for ``fromJSON()`` in later steps."""
    doc = {"verdict": word, **counts(verdict, usable), "summary": verdict.summary() if usable else "",
           "runs": [s.to_dict() for s in states]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))
