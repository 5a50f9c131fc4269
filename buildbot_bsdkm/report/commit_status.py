"""The commit status of one (target, variant) of a PR, read from its part of the PR's one verdict.

GitHub shows 140 characters of a status, so its words say the most telling thing first: the triage
of the failures (``failed — 1 new failure: selftest: AES-GCM (-216)``), else the failed self-tests,
else the regressions; a pass says what it let pass, or its self-test line. The state is GitHub's:
``error`` when nothing judged the code (not run, an infrastructure failure, or failing checks that
all say they could not be evaluated, with no stage of the run failing for a real reason),
``failure`` when something failed it, ``success`` otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import STATUS_INCONCLUSIVE, CheckKind, Verdict
from ..contract import status_context
from ..model import FailureCategory, RunResult, SelfTest, StageFailure
from .triage_summary import triage_property, triage_words

STATUS_DESCRIPTION_LIMIT = 140  # GitHub answers 422 above this
MINUS = "\u2212"  # a real minus sign reads better than a hyphen next to a percentage
MAX_NAMED = 3  # items named in a one-line summary before "and N more"

SUCCESS, FAILURE, ERROR, PENDING = "success", "failure", "error", "pending"


def short_description(text: str) -> str:
    """One line, cut to GitHub's limit."""
    line = " ".join(text.split())
    return line if len(line) <= STATUS_DESCRIPTION_LIMIT else line[: STATUS_DESCRIPTION_LIMIT - 1] + "…"


def _failure_label(t: SelfTest) -> str:
    return f"{t.name} failed {t.code}" if t.code is not None else f"{t.name} failed"


def selftest_summary(run: RunResult) -> str | None:
    """``self-test: 41/42 passed (ECC failed -216)``; None when the run printed no self-test."""
    tests = run.tests
    if tests:
        failed = [t for t in tests if not t.passed]
        text = f"self-test: {len(tests) - len(failed)}/{len(tests)} passed"
        if failed:
            named = ", ".join(_failure_label(t) for t in failed[:MAX_NAMED])
            more = f" and {len(failed) - MAX_NAMED} more" if len(failed) > MAX_NAMED else ""
            text += f" ({named}{more})"
        return text
    # Kernel builds without verbose debug print only the overall line.
    overall = [log.selftest_summary for log in run.logs if log.selftest_summary is not None]
    if overall:
        return "self-test: passed" if all(overall) else "self-test: FAILED"
    return None


def _pct(value: float) -> str:
    sign = MINUS if value < 0 else "+"
    return f"{sign}{abs(value):.0f} %"


def regression_labels(verdict: Mapping[str, Any]) -> list[str]:
    """``AES-128-GCM-enc −31 %`` for every failed regression check of a ``Verdict.to_dict()``."""
    labels = []
    for c in verdict.get("checks", []) or []:
        if not isinstance(c, Mapping) or c.get("passed", True) or c.get("kind") != CheckKind.REGRESSION:
            continue
        delta = c.get("delta_pct")
        name = str(c.get("name", "?"))
        labels.append(f"{name} {_pct(float(delta))}" if isinstance(delta, int | float) else name)
    return labels


def retry_note(retries: Sequence[Mapping[str, Any]]) -> str:
    """``retried 2× (network, worker-lost)``: the infrastructure attempts before the final one."""
    if not retries:
        return ""
    reasons = ", ".join(sorted({str(r.get("reason") or "") or "unknown" for r in retries}))
    return f"retried {len(retries)}× ({reasons})"


def inconclusive_words(count: int | None) -> str:
    """The gate's INCONCLUSIVE (``Verdict.status``) with its count: never "passed"."""
    counted = f"{count} gated item(s)" if isinstance(count, int) and count > 0 else "gated items"
    return f"⚠️ inconclusive: {counted} not judged (too few repeats or too noisy)"


@dataclass(frozen=True)
class CommitStatus:
    """One (target, variant)'s commit status, named as both shells name it (``contract.status_context``)."""

    target: str
    variant: str
    state: str  # success / failure / error / pending (GitHub's commit status states)
    description: str
    url: str | None = None  # where it links: the build, or the run that made it

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)

    def to_dict(self) -> dict[str, str]:
        return {"context": self.context, "target": self.target, "variant": self.variant,
                "state": self.state, "description": self.description}


@dataclass(frozen=True)
class PairFacts:
    """What a shell knows of one (target, variant) besides its runs: the Buildbot reporter knows its
    build's progress and end; ``bsdkm-ci action`` knows only runs and gives none of these."""

    target: str
    variant: str
    running: bool = False  # not finished: its runs are not judged yet, and the comment says so
    said: tuple[str, str] | None = None  # (state, words) the shell says itself: building, cancelled
    ended: str | None = None  # how its own run ended where it ran: success, failure or error
    # What its own gate found that cannot be judged here (a base measured beside it): its words.
    regressions: tuple[str, ...] = ()
    failure: StageFailure | None = None  # the failure its run recorded, when its results lack it
    retries: tuple[Mapping[str, Any], ...] = ()  # infrastructure attempts before the final one
    link: str | None = None

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)


def pair_part(verdict: Verdict, target: str, variant: str) -> Verdict:
    """The verdict of one (target, variant): its own checks and not-run entries, the rest kept."""
    return dataclasses.replace(
        verdict,
        checks=[c for c in verdict.checks if (c.target, c.variant) == (target, variant)],
        not_run=[n for n in verdict.not_run if (n.get("target"), n.get("variant")) == (target, variant)],
    )


def pair_status(part: Verdict, runs: Sequence[RunResult], facts: PairFacts | None = None) -> tuple[str, str]:
    """(state, description) of one pair: ``part`` is its ``pair_part`` of the PR's verdict."""
    if facts is not None and facts.said is not None:
        return facts.said
    retry = retry_note(facts.retries) if facts is not None else ""
    state, text = _judged(part, runs, facts)
    return state, short_description(f"{text}; {retry}" if retry else text)


def _judged(part: Verdict, runs: Sequence[RunResult], facts: PairFacts | None) -> tuple[str, str]:
    not_run = next((r.not_run for r in runs if r.not_run), None)
    if not_run is not None or part.not_run:
        # Nothing was tested: no checks is not a pass, whatever the rest of the PR did.
        return ERROR, f"not run: {not_run or part.not_run[0].get('reason', '')}"
    failure = next((r.failure for r in runs if r.failure is not None), None)
    if failure is None and facts is not None:
        failure = facts.failure
    judged = [c for c in part.failures if not c.error]
    if failure is not None and failure.category == FailureCategory.INFRASTRUCTURE and not judged:
        return ERROR, f"infrastructure: {failure.reason or failure.stage}: {failure.message}"
    ended = facts.ended if facts is not None else None
    if part.accepted and ended in (None, SUCCESS):
        return SUCCESS, _passed(part, runs)
    if part.accepted:  # its own gate failed it where it ran, on what cannot be judged here
        return str(ended), _failed_where_it_ran(facts, failure)
    # A stage that failed for a real reason (a compile error, a panic) failed the code, though its
    # check says it could not be evaluated; so did any judged check. The rest judged nothing.
    real = failure is not None and failure.category == FailureCategory.REAL and ended != ERROR
    state = FAILURE if judged or real or not part.failures else ERROR
    return state, _failed(part, runs, failure)


def _passed(part: Verdict, runs: Sequence[RunResult]) -> str:
    text = inconclusive_words(len(part.inconclusive)) if part.status == STATUS_INCONCLUSIVE else "passed"
    triaged = triage_words(triage_property(part.to_dict()))
    if triaged:  # failures the triage policy lets pass: said, so nobody mistakes them for none
        return f"{text} — {triaged}"
    selftest = next((s for s in map(selftest_summary, runs) if s), None)
    return f"{text}: {selftest}" if selftest else text


def _failed(part: Verdict, runs: Sequence[RunResult], failure: StageFailure | None) -> str:
    triage = triage_property(part.to_dict())
    triaged = triage_words(triage)
    if triaged:
        new = triage.get("new") or []
        return f"failed — {triaged}" + (f": {new[0]}" if new else "")
    failed_tests = [t.name for run in runs for t in run.tests if not t.passed]
    if failed_tests:
        return f"self-test failed: {', '.join(failed_tests)}"
    regressions = regression_labels(part.to_dict())
    if regressions:
        return _regressions(regressions)
    if part.passed and part.inconclusive:  # the policy's perf.inconclusive: fail
        return inconclusive_words(len(part.inconclusive))
    if failure is not None:
        return f"{failure.stage} failed: {failure.reason or failure.message}"
    return part.summary()


def _failed_where_it_ran(facts: PairFacts | None, failure: StageFailure | None) -> str:
    if facts is not None and facts.regressions:
        return _regressions(list(facts.regressions))
    if failure is not None:
        return f"{failure.stage} failed: {failure.reason or failure.message}"
    return "failed where it ran: see its log"


def _regressions(labels: list[str]) -> str:
    n = len(labels)
    return f"{n} regression{'s' if n != 1 else ''}: {', '.join(labels[:2])}"
