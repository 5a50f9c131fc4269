"""One PR's builds → the core's one PR report: its verdict, a commit status per build, the comment.

Each (target, variant) builder reports on its own, but the PR is judged once, over every finished
build's runs together (speedups compare an accelerated variant with the software one), by the
same function ``bsdkm-ci action`` calls (``report/pull_request.py``). Only the collecting is here:
a build's runs, what Buildbot knows of it beyond them (building, retrying, cancelled, how it ended,
its retries and link: ``pair_facts``) and the base outcomes the master gave its gate.
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
    REGRESSIONS_PROPERTY,
    RESULTS_PATH_PROPERTY,
    RESULTS_PROPERTY,
    failure_from_property,
    status_context,
)
from ..model import FailureCategory, ModelError, RunResult, StageFailure, from_json
from ..policy import Policy, Verdict
from ..report.commit_status import PairFacts, retry_note, short_description
from ..report.pull_request import COMMENT_LIMIT, Judging, PullRequestReport, judge, pull_request_report
from ..triage.known import KnownIssues
from ..triage.outcomes import BaseOutcome

GITHUB_COMMENT_LIMIT = COMMENT_LIMIT

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


def progress_status(build: BuildFacts) -> tuple[str, str] | None:
    """What Buildbot says of a build that no verdict can: still building, retrying, cancelled."""
    if build.results is None:
        retry = retry_note(retries_of(build))
        return "pending", short_description("building" + (f", {retry}" if retry else ""))
    if build.results == RETRY:
        failure = _failure(build)
        why = failure.reason or failure.stage if failure else "infrastructure"
        return "pending", short_description(f"retrying after an infrastructure failure ({why})")
    if build.results == CANCELLED:
        return "error", "cancelled (superseded by a newer push or stopped by hand)"
    return None


def pair_facts(build: BuildFacts) -> PairFacts:
    """The build as the core's PR report reads it: running or not, how it ended, what its gate found
    against the base measured beside it (its regressions), its retries and its link."""
    running = build.results is None or build.results == RETRY
    ended = None if running else _ENDED.get(build.results, "error")  # type: ignore[arg-type]
    regressions = build.properties.get(REGRESSIONS_PROPERTY)
    return PairFacts(
        build.target, build.variant, running=running, said=progress_status(build), ended=ended,
        regressions=tuple(str(r) for r in regressions) if isinstance(regressions, list) else (),
        failure=failure_from_property(build.properties.get(FAILURE_PROPERTY)),
        retries=tuple(retries_of(build)), link=build.url,
    )


_ENDED = {SUCCESS: "success", WARNINGS: "success", SKIPPED: "success", FAILURE: "failure"}


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
    """What the master judges a PR with; ``report`` calls the core's one PR report over its builds."""

    policy: Policy
    baseline: list[RunResult] | None = None
    known: KnownIssues = field(default_factory=KnownIssues)  # the config's known_issues

    def judging(self, base: Sequence[BaseOutcome] = ()) -> Judging:
        """A bad known issue or baseline is said in the comment, never a reason to write none."""
        return Judging(self.policy, self.baseline, self.known, list(base), lenient=True)

    def verdict(self, runs: list[RunResult], base: Sequence[BaseOutcome] = ()) -> Verdict:
        return judge(runs, self.judging(base))

    def report(self, builds: Sequence[BuildFacts],
               links: Mapping[str, str] | None = None) -> PullRequestReport:
        """The PR's one verdict over every finished build, a status per build, and the comment."""
        finished = [b for b in builds if b.results is not None and b.results != RETRY]
        runs = [run for b in finished for run in runs_of(b)]
        return pull_request_report(runs, self.judging(base_outcomes_of(finished)),
                                   [pair_facts(b) for b in builds], links=links)

    def body(self, builds: Sequence[BuildFacts], links: Mapping[str, str] | None = None) -> str:
        """The whole comment: the marker, then the report over every finished build."""
        return self.report(builds, links).body
