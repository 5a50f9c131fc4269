"""One PR's builds → commit-status lines and the single PR comment.

Each (target, variant) builder reports on its own; the PR comment needs all of them at
once (speedups compare an accelerated variant with the software one). We collect every
finished build's results and call ``report.markdown_report`` once: the formatting is the
core's, only the collecting is here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import contract
from ..contract import (
    BASE_OUTCOMES_PROPERTY,
    FAILURE_PROPERTY,
    HISTORY_PROPERTY,
    INCONCLUSIVE_PROPERTY,
    REGRESSIONS_PROPERTY,
    RESULTS_PATH_PROPERTY,
    RESULTS_PROPERTY,
    SELFTEST_PROPERTY,
    TRIAGE_PROPERTY,
    VERDICT_PROPERTY,
    failure_from_property,
    status_context,
)
from ..model import FailureCategory, ModelError, RunResult, StageFailure, from_json
from ..policy import BaselineMismatch, Check, CheckKind, Policy, Verdict, evaluate
from ..report.markdown import markdown_report
from ..report.triage_summary import triage_words
from ..triage.classify import TriageInputs
from ..triage.known import KnownIssueError, KnownIssues
from ..triage.outcomes import BaseOutcome
from .publisher import REPORT_MARKER

GITHUB_COMMENT_LIMIT = 65536
STATUS_DESCRIPTION_LIMIT = 140  # GitHub cuts a commit status description there

# Buildbot result codes (buildbot.process.results) without importing Buildbot here.
SUCCESS, WARNINGS, FAILURE, SKIPPED, EXCEPTION, RETRY, CANCELLED = range(7)


@dataclass
class BuildFacts:
    """What a reporter knows about one build of a PR builder."""

    target: str
    variant: str
    results: int | None  # None: still running
    url: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)  # name -> value

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)


def plain_properties(props: Mapping[str, Any]) -> dict[str, Any]:
    """Buildbot's ``{name: (value, source)}`` → ``{name: value}``."""
    return {k: (v[0] if isinstance(v, list | tuple) and len(v) == 2 else v) for k, v in props.items()}


def _results_file(build: BuildFacts) -> str | None:
    """The results document the Buildbot step kept on the master (``bsdkm_results_path``)."""
    path = build.properties.get(RESULTS_PATH_PROPERTY)
    if not isinstance(path, str) or not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None  # pruned or never written: the build is reported from its other properties


def runs_of(build: BuildFacts) -> list[RunResult]:
    """The build's results; a build that never produced any still gets a run saying why."""
    doc = build.properties.get(RESULTS_PROPERTY) or _results_file(build)
    if doc:
        try:
            text = doc if isinstance(doc, str) else json.dumps(doc)
            runs = from_json(text, f"{build.context} {RESULTS_PROPERTY}")
            # The worker wrote them: a run naming another pair would speak for a builder it is not.
            contract.check_declared(runs, {(build.target, build.variant)}, f"{build.context} results")
            if runs:
                return runs
        except ModelError:
            pass  # fall through: report the build from its properties
        except contract.UndeclaredResults as e:
            return [RunResult(variant=build.variant, target=build.target, failure=StageFailure(
                stage="collect", message=str(e), category=FailureCategory.REAL, reason="integrity"))]
    return [RunResult(variant=build.variant, target=build.target, failure=_failure(build))]


def _failure(build: BuildFacts) -> StageFailure | None:
    recorded = failure_from_property(build.properties.get(FAILURE_PROPERTY))
    if recorded is not None:
        return recorded
    if build.results in (SUCCESS, WARNINGS, None):
        return None
    return StageFailure(
        stage="build", message=f"build ended with result {build.results}", reason="ci-exception"
    )


def retries_of(build: BuildFacts) -> list[dict[str, Any]]:
    """Infrastructure attempts before this build's final one, as rows for the report."""
    attempts = build.properties.get(HISTORY_PROPERTY)
    if not isinstance(attempts, list):
        return []
    rows = []
    for a in attempts:
        if isinstance(a, Mapping) and not a.get("passed") and a.get("category") == "infrastructure":
            rows.append(
                {
                    "builder": build.context,
                    "attempt": a.get("number", "?"),
                    "worker": a.get("worker") or "",
                    "stage": a.get("stage") or "",
                    "reason": a.get("reason") or "",
                    "message": a.get("message") or "",
                }
            )
    return rows


def _retry_note(build: BuildFacts) -> str:
    rows = retries_of(build)
    if not rows:
        return ""
    reasons = ", ".join(sorted({str(r["reason"]) or "unknown" for r in rows}))
    return f"retried {len(rows)}× ({reasons})"


def _failed_selftests(runs: Sequence[RunResult]) -> list[str]:
    return [t.name for run in runs for t in run.tests if not t.passed]


def commit_status(build: BuildFacts) -> tuple[str, str]:
    """(state, one-line reason) for the build's commit status."""
    retry = _retry_note(build)
    if build.results is None:
        return "pending", "building" + (f", {retry}" if retry else "")
    if build.results == RETRY:
        failure = _failure(build)
        why = failure.reason or failure.stage if failure else "infrastructure"
        return "pending", f"retrying after an infrastructure failure ({why})"
    if build.results == CANCELLED:
        return "error", "cancelled (superseded by a newer push or stopped by hand)"
    runs = runs_of(build)
    regressions = build.properties.get(REGRESSIONS_PROPERTY) or []
    failed_tests = _failed_selftests(runs)
    failure = _failure(build)
    triaged = triage_words(build.properties.get(TRIAGE_PROPERTY))
    if build.results in (SUCCESS, WARNINGS, SKIPPED):
        text = "passed" if build.properties.get(VERDICT_PROPERTY) != "inconclusive" else _inconclusive(build)
        selftest = build.properties.get(SELFTEST_PROPERTY)
        if triaged:  # failures the triage policy lets pass: said, so nobody mistakes them for none
            text += f" — {triaged}"
        elif isinstance(selftest, str) and selftest:
            text += f": {selftest}"
        return "success", _with(text, retry)
    if triaged:
        return "failure", _with(f"failed — {triaged}{_new_named(build)}", retry)
    if failed_tests:
        return "failure", _with(f"self-test failed: {', '.join(failed_tests)}", retry)
    if regressions:
        n = len(regressions)
        names = ", ".join(str(r) for r in regressions[:2])
        return "failure", _with(f"{n} regression{'s' if n != 1 else ''}: {names}", retry)
    if build.properties.get(VERDICT_PROPERTY) == "inconclusive":  # the policy's perf.inconclusive: fail
        return "failure", _with(_inconclusive(build), retry)
    if build.properties.get(VERDICT_PROPERTY) == "inconclusive":  # the policy's perf.inconclusive: fail
        return "failure", _with(_inconclusive(build), retry)
    if failure is not None and failure.category == FailureCategory.INFRASTRUCTURE:
        return "error", _with(f"infrastructure: {failure.reason or failure.stage}: {failure.message}", retry)
    if failure is not None:
        return "failure" if build.results == FAILURE else "error", _with(
            f"{failure.stage} failed: {failure.reason or failure.message}", retry
        )
    return ("failure" if build.results == FAILURE else "error"), _with(f"result {build.results}", retry)


def _inconclusive(build: BuildFacts) -> str:
    """The gate's INCONCLUSIVE verdict (policy.Verdict.status) with its count: never "passed"."""
    n = build.properties.get(INCONCLUSIVE_PROPERTY)
    count = f"{n} gated item(s)" if isinstance(n, int) and n > 0 else "gated items"
    return f"⚠️ inconclusive: {count} not judged (too few repeats or too noisy)"


def _with(text: str, retry: str) -> str:
    text = f"{text}; {retry}" if retry else text
    return text if len(text) <= STATUS_DESCRIPTION_LIMIT else text[:STATUS_DESCRIPTION_LIMIT - 1] + "…"


def _new_named(build: BuildFacts) -> str:
    """``: selftest: AES-GCM (-216)``: the first new failure's signature, when the triage named one."""
    triage = build.properties.get(TRIAGE_PROPERTY)
    new = triage.get("new") if isinstance(triage, Mapping) else None
    return f": {new[0]}" if isinstance(new, list) and new and isinstance(new[0], str) else ""


def base_outcomes_of(builds: Sequence[BuildFacts]) -> list[BaseOutcome]:
    """What each build's gate triaged against (``bsdkm_base_outcomes``), oldest first per build."""
    out: list[BaseOutcome] = []
    for b in builds:
        records = b.properties.get(BASE_OUTCOMES_PROPERTY)
        for rec in records if isinstance(records, list) else []:
            try:
                out.append(BaseOutcome.from_dict(rec))
            except ValueError:
                continue  # a property from an older master: that build's failures stay new
    return out


@dataclass
class PrReport:
    policy: Policy
    baseline: list[RunResult] | None = None
    known: KnownIssues = field(default_factory=KnownIssues)  # the config's known_issues

    def verdict(self, runs: list[RunResult], base: Sequence[BaseOutcome] = ()) -> Verdict:
        try:
            return self._verdict(runs, TriageInputs(known=self.known, base=list(base)))
        except KnownIssueError as e:  # expired for the version tested: the comment says so, never a PASS
            verdict = self._verdict(runs, TriageInputs(base=list(base)))
            verdict.checks.append(Check("*", "*", "known_issues", CheckKind.COMPLETE, False,
                                        f"bad known issue: {e}", error=True))
            return verdict

    def _verdict(self, runs: list[RunResult], triage: TriageInputs) -> Verdict:
        try:
            return evaluate(runs, self.policy, self.baseline, triage=triage)
        except BaselineMismatch as e:  # a static baseline of other runs: said in the comment, never a PASS
            verdict = evaluate(runs, self.policy, None, triage=triage)
            verdict.checks.append(Check("*", "*", "baseline", CheckKind.REGRESSION, False,
                                        f"bad baseline: {e}", error=True))
            return verdict

    def body(self, builds: Sequence[BuildFacts], links: Mapping[str, str] | None = None) -> str:
        """The whole comment: marker + ``markdown_report`` over every finished build."""
        finished = [b for b in builds if b.results is not None and b.results != RETRY]
        runs = [run for b in finished for run in runs_of(b)]
        retries = [row for b in builds for row in retries_of(b)]
        all_links: dict[str, str] = {}
        for b in builds:
            if b.url:
                all_links[b.context] = b.url
        all_links.update(links or {})
        running = [b.context for b in builds if b.results is None or b.results == RETRY]
        header = REPORT_MARKER + "\n"
        if running:
            header += f"_Still running: {', '.join(running)}; this comment is updated as builds finish._\n\n"
        text = markdown_report(
            runs,
            self.verdict(runs, base_outcomes_of(finished)),
            retries=retries or None,
            links=all_links or None,
            max_chars=GITHUB_COMMENT_LIMIT - len(header),
        )
        return header + text
