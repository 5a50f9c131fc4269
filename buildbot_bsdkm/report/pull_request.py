"""A pull request's runs → one verdict, a commit status per (target, variant), and one comment.

Both shells report a PR through ``pull_request_report``: the Buildbot reporter over the finished
builds of a PR head (``github/aggregate.py``), and ``bsdkm-ci action`` over a job's results
(``commands/action/results.py``). Fed the same runs and the same ``Judging``, they say the same.
What only one shell knows is an input here, never a rule of that shell:

* ``Judging`` holds what judges the runs: the policy, the baseline, the known issues, the base
  branch's outcomes, notes; whether the base's instruction counts measured beside the head are
  trusted (the Action trusts only the base branch's own, ``base_branch_runs``); a verdict the runs
  already carry (``stored``); and whether a bad known issue or baseline is an error in the verdict
  (``lenient``, the reporter: the comment must still be written) or raised (the command: exit 2).
* ``PairFacts`` holds what a shell knows of a (target, variant) beyond its runs: still running,
  cancelled, how its own run ended where it ran, its retries and its link (``report/commit_status.py``).
* ``preface`` opens the report (where fork results came from), ``links`` follow its headline.

Sinks (``report/sinks.py``) deliver the result: statuses, the comment, a job summary, annotations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks import Check, CheckKind, Verdict
from ..contract import status_context
from ..model import RunResult
from ..perf.instruction_counts import BASE_METADATA_KEY, METADATA_KEY
from ..policy import BaselineMismatch, Policy, evaluate
from ..triage.classify_checks import TriageInputs
from ..triage.known import KnownIssueError, KnownIssues
from ..triage.outcomes import BaseOutcome
from .commit_status import PENDING, CommitStatus, PairFacts, pair_part, pair_status
from .markdown import markdown_report

REPORT_MARKER = "<!-- bsdkm-ci:pr-report -->"  # opens the one report comment: how it is found again
COMMENT_LIMIT = 65536  # GitHub refuses a longer comment (and cuts a job summary there)

BASE_COUNTS_NOTE = ("instruction counts of the base: the base branch's artifact's only (the test jobs "
                    "counted theirs beside the PR's code)")


@dataclass
class Judging:
    """What judges a PR's runs, besides the runs."""

    policy: Policy | None = None  # None only beside a stored verdict: nothing is judged then
    baseline: list[RunResult] | None = None  # the base runs each head run is compared with
    known: KnownIssues = field(default_factory=KnownIssues)  # the config's known_issues
    base: list[BaseOutcome] = field(default_factory=list)  # the base branch's outcomes, oldest first
    notes: list[str] = field(default_factory=list)  # said in the report, after the judging's own
    # False: the base's instruction counts measured beside the head are dropped (the PR's code ran
    # first where they were counted); the base branch's own runs give theirs instead.
    counts_beside_head: bool = True
    base_branch_runs: list[RunResult] | None = None
    stored: Verdict | None = None  # the verdict the runs carry from where they ran: used as it is
    lenient: bool = True  # a bad known issue or baseline: an error check (True) or raised (False)


@dataclass
class PullRequestReport:
    """What both shells publish of a PR: the verdict, the statuses and the report."""

    verdict: Verdict
    statuses: list[CommitStatus]
    markdown: str  # the report: the job summary, and the comment below its marker
    running: list[str] = field(default_factory=list)  # contexts whose builds have not finished

    @property
    def body(self) -> str:
        """The PR comment: the marker its author finds it by, then the report."""
        return f"{REPORT_MARKER}\n{self.markdown}"

    def status(self, context: str) -> CommitStatus | None:
        return next((s for s in self.statuses if s.context == context), None)


def pull_request_report(runs: Sequence[RunResult], judging: Judging, pairs: Sequence[PairFacts] = (), *,
                        links: Mapping[str, str] | None = None, preface: str = "") -> PullRequestReport:
    """The one verdict over ``runs`` (every finished run of the PR), a status per (target, variant)
    and the report. ``pairs``: the shell's facts of its (target, variant)s, running ones included.

    The runs are taken in the order of their statuses' names, whatever order a shell found them in
    (Buildbot's builds, the jobs an Action merged)."""
    runs = sorted(runs, key=lambda r: status_context(r.target, r.variant))
    verdict = judge(runs, judging)
    facts = {(p.target, p.variant): p for p in pairs}
    running = [p.context for p in pairs if p.running]
    retries = [row for p in pairs for row in p.retries]
    shown = {p.context: p.link for p in pairs if p.link}
    shown.update(links or {})
    head = REPORT_MARKER + "\n"
    if running:
        preface = (f"_Still running: {', '.join(running)}; this comment is updated as builds finish._\n\n"
                   + preface)
    text = markdown_report(runs, verdict, retries=retries or None, links=shown or None,
                           max_chars=COMMENT_LIMIT - len(head) - len(preface))
    return PullRequestReport(verdict, statuses(runs, verdict, facts), preface + text, running)


def statuses(runs: Sequence[RunResult], verdict: Verdict,
             facts: Mapping[tuple[str, str], PairFacts] | None = None) -> list[CommitStatus]:
    """A status per (target, variant) of the runs, per one the verdict says was not run, and per
    one the shell says is still running; in that order."""
    facts = facts or {}
    not_run = [(str(n.get("target", "")), str(n.get("variant", ""))) for n in verdict.not_run]
    pairs = [(r.target, r.variant) for r in runs] + [key for key in not_run if all(key)] + list(facts)
    out: list[CommitStatus] = []
    for key in dict.fromkeys(pairs):
        pair = facts.get(key)
        mine = [r for r in runs if (r.target, r.variant) == key]
        if pair is not None and pair.running and pair.said is None:
            state, text = PENDING, "building"
        else:
            state, text = pair_status(pair_part(verdict, *key), mine, pair)
        out.append(CommitStatus(*key, state, text, pair.link if pair is not None else None))
    return out


def judge(runs: list[RunResult], judging: Judging) -> Verdict:
    """The verdict over ``runs``: the stored one, or the policy's with the judging's inputs."""
    if judging.stored is not None:
        return dataclasses.replace(judging.stored, checks=list(judging.stored.checks),
                                   notes=list(judging.stored.notes))
    heads, bases, notes = runs, judging.baseline, []
    if not judging.counts_beside_head:
        heads, bases, notes = base_branch_counts(runs, bases, judging.base_branch_runs)
    verdict = _evaluate(heads, bases, judging, TriageInputs(known=judging.known, base=list(judging.base)))
    verdict.notes += notes + judging.notes
    return verdict


def _evaluate(runs: list[RunResult], baseline: list[RunResult] | None, judging: Judging,
              triage: TriageInputs) -> Verdict:
    try:
        return _against(runs, baseline, judging, triage)
    except KnownIssueError as e:  # expired for the version tested: the comment says so, never a PASS
        if not judging.lenient:
            raise
        verdict = _against(runs, baseline, judging, dataclasses.replace(triage, known=KnownIssues()))
        verdict.checks.append(Check("*", "*", "known_issues", CheckKind.COMPLETE, False,
                                    f"bad known issue: {e}", error=True))
        return verdict


def _against(runs: list[RunResult], baseline: list[RunResult] | None, judging: Judging,
             triage: TriageInputs) -> Verdict:
    if judging.policy is None:
        raise ValueError("no policy to judge the runs with, and no verdict stored with them")
    try:
        return evaluate(runs, judging.policy, baseline, triage=triage)
    except BaselineMismatch as e:  # a static baseline of other runs: said in the comment, never a PASS
        if not judging.lenient:
            raise
        verdict = evaluate(runs, judging.policy, None, triage=triage)
        verdict.checks.append(Check("*", "*", "baseline", CheckKind.REGRESSION, False,
                                    f"bad baseline: {e}", error=True))
        return verdict


def base_branch_counts(heads: Sequence[RunResult], bases: Sequence[RunResult] | None,
                       branch: Sequence[RunResult] | None) -> tuple[list[RunResult], list[RunResult] | None,
                                                                    list[str]]:
    """Heads without the base counts they carry, and the bases the gate compares with holding the
    base branch's counts of their pair (none when it has none), with a note when a count was dropped.

    Both dropped counts were made where the PR's code ran before the base's count."""
    counted = {(r.target, r.variant): r.metadata[METADATA_KEY] for r in branch or []
               if r.metadata.get(METADATA_KEY)}
    dropped = False

    def without(run: RunResult, keys: tuple[str, ...], graft: bool) -> RunResult:
        nonlocal dropped
        if not any(k in run.metadata for k in keys) and not graft:
            return run
        meta: dict[str, Any] = {k: v for k, v in run.metadata.items() if k not in keys}
        if graft and (run.target, run.variant) in counted:
            meta[METADATA_KEY] = counted[(run.target, run.variant)]
        dropped = dropped or any(run.metadata.get(k) != meta.get(k) for k in keys)
        return dataclasses.replace(run, metadata=meta)

    out_heads = [without(r, (BASE_METADATA_KEY,), False) for r in heads]
    both = (METADATA_KEY, BASE_METADATA_KEY)
    out_bases = None if bases is None else [without(r, both, True) for r in bases]
    return out_heads, out_bases, [BASE_COUNTS_NOTE] if dropped else []
