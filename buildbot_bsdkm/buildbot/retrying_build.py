"""Buildbot glue for the bounded retry policy in ``buildbot_bsdkm.retry.decision``.

* ``BoundedRetryBuild`` replaces Buildbot's "RETRY means re-queue forever": when
  a build ends it turns what happened (a step's ``bsdkm_failure`` record, a lost
  worker, a CI exception) into an ``Attempt``, reads the earlier attempts of the
  same build request back from the data API, and lets ``decision.decide`` say
  whether to re-queue (RETRY) or stop with a final result.
* ``RetryHolds`` keeps the backoff and the workers to avoid per build request;
  ``can_start_build`` and ``next_worker`` (builder hooks) apply them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from buildbot.process.build import Build
from buildbot.process.factory import BuildFactory
from buildbot.process.results import (
    CANCELLED,
    EXCEPTION,
    FAILURE,
    RETRY,
    SKIPPED,
    SUCCESS,
    WARNINGS,
    worst_status,
)
from twisted.internet import defer
from twisted.python import log

from ..contract import (
    ATTEMPT_PROPERTY,
    FAILURE_PROPERTY,
    HISTORY_PROPERTY,
    PROPERTY_SOURCE,
    RETRY_SUMMARY_PROPERTY,
    TRIAGE_PROPERTY,
    VERDICT_PROPERTY,
    failure_from_property,
)
from ..model import FailureCategory, StageFailure
from ..retry.decision import (
    Attempt,
    AttemptVerdict,
    RetryDecision,
    RetrySettings,
    ci_exception_failure,
    decide,
    pick_worker,
    worker_lost_failure,
)
from .trust_levels import worker_may_take


@dataclass
class _Hold:
    not_before: float
    avoid: tuple[str, ...]


@dataclass
class RetryHolds:
    """Per build request: not before when, and on which workers not, to run the next attempt.

    In memory: after a master restart a retry simply runs at once on any worker.
    """

    holds: dict[int, _Hold] = field(default_factory=dict)

    def hold(self, brids: Sequence[int], not_before: float, avoid: Sequence[str]) -> None:
        for brid in brids:
            self.holds[brid] = _Hold(not_before, tuple(avoid))

    def ready(self, brid: int, now: float) -> bool:
        h = self.holds.get(brid)
        return h is None or now >= h.not_before

    def avoid(self, brid: int) -> tuple[str, ...]:
        h = self.holds.get(brid)
        return h.avoid if h else ()

    def release(self, brids: Sequence[int]) -> None:
        for brid in brids:
            self.holds.pop(brid, None)


HOLDS = RetryHolds()


def can_start_build(builder: Any, wfb: Any, buildrequest: Any) -> bool:
    """Builder hook: a request waiting out its backoff does not start yet, and a worker takes only
    what its trust level allows (trust_levels.worker_may_take)."""
    if not worker_may_take(wfb, buildrequest):
        return False
    return HOLDS.ready(buildrequest.id, builder.master.reactor.seconds())


def next_worker(builder: Any, workers: Sequence[Any], buildrequest: Any) -> Any:
    """Builder hook: prefer a worker this request has not failed on."""
    if not workers:
        return None
    avoid = HOLDS.avoid(buildrequest.id) if buildrequest is not None else ()
    by_name = {w.worker.workername: w for w in workers}
    chosen = pick_worker(sorted(by_name), avoid)
    return by_name.get(chosen) if chosen else None


RESULT_OF_VERDICT = {
    AttemptVerdict.FAILED: FAILURE,
    AttemptVerdict.FLAKY: FAILURE,
    AttemptVerdict.INFRASTRUCTURE: EXCEPTION,
}


class BoundedRetryBuild(Build):
    """A Build whose RETRY is decided by ``decision.decide`` instead of meaning "forever"."""

    def retry_settings(self) -> RetrySettings:
        config = self.builder.config if self.builder else None
        factory = getattr(config, "factory", None)
        return getattr(factory, "retry_settings", None) or RetrySettings()

    @defer.inlineCallbacks
    def buildFinished(self, text: list[str], results: int) -> Any:
        try:
            text, results = yield self._apply_retry_policy(text, results)
        except Exception as e:  # never let the policy stop the build from finishing
            log.err(e, "bsdkm: retry policy failed; finishing the build as it stands")
        yield super().buildFinished(text, results)

    async def _apply_retry_policy(self, text: list[str], results: int) -> tuple[list[str], int]:
        effective = worst_status(self.results, results)
        if effective in (SKIPPED, CANCELLED):
            return text, results  # a person stopped it: not ours to retry
        if effective == FAILURE and self.failed_only_by_policy_waived():
            effective = WARNINGS
        earlier = await self.earlier_attempts()
        attempt = self.this_attempt(effective, len(earlier) + 1)
        decision = decide([*earlier, attempt], self.retry_settings())
        self.setProperty(ATTEMPT_PROPERTY, attempt.to_dict(), PROPERTY_SOURCE)
        self.setProperty(HISTORY_PROPERTY, decision.history_dicts(), PROPERTY_SOURCE)
        self.setProperty(RETRY_SUMMARY_PROPERTY, decision.summary, PROPERTY_SOURCE)
        log.msg(f"bsdkm: {self.builder.name}: {attempt.describe()} -> {decision.summary}")
        brids = [br.id for br in self.requests]
        if decision.retry:
            self.hold_retry(brids, decision)
            final = RETRY
        else:
            HOLDS.release(brids)
            final = RESULT_OF_VERDICT.get(decision.verdict, effective)
            if decision.verdict != AttemptVerdict.PASSED:
                self.setProperty(VERDICT_PROPERTY, "failed" if final == FAILURE else "infrastructure",
                                 PROPERTY_SOURCE)
        self.results = final  # worst_status would keep RETRY over FAILURE; the policy decides
        await self.master.data.updates.setBuildProperties(self.buildid, self)
        return [decision.summary], final

    def hold_retry(self, brids: list[int], decision: RetryDecision) -> None:
        now = self.master.reactor.seconds()
        HOLDS.hold(brids, now + decision.delay_s, decision.avoid_workers)
        if decision.delay_s > 0:
            # Nothing else wakes the distributor when the backoff ends.
            self.master.reactor.callLater(
                decision.delay_s, self.master.botmaster.maybeStartBuildsForBuilder, self.builder.name
            )

    def failed_only_by_policy_waived(self) -> bool:
        """The steps failed on real failures the gate's triage lets pass (pre-existing on the base,
        known, flaky by policy): the build is not red for what no PR caused. Infrastructure still
        retries; a gate that did not pass, or did not triage, leaves the build as it stands."""
        triage = self.getProperty(TRIAGE_PROPERTY)
        if self.getProperty(VERDICT_PROPERTY) != "passed" or not isinstance(triage, dict):
            return False
        counts = triage.get("counts") if isinstance(triage.get("counts"), dict) else {}
        waived = sum(n for w, n in counts.items() if w not in ("new", "fixed") and isinstance(n, int))
        if triage.get("blocking") != 0 or waived <= 0:
            return False
        recorded = failure_from_property(self.getProperty(FAILURE_PROPERTY))
        return recorded is None or recorded.category == FailureCategory.REAL

    # -- what this attempt was

    def this_attempt(self, effective: int, number: int) -> Attempt:
        worker = self.getProperty("workername") or self.workername
        if effective in (SUCCESS, WARNINGS):
            return Attempt.passing(number, worker)
        return Attempt.failing(number, worker, self.failure_of_this_attempt(effective))

    def failure_of_this_attempt(self, effective: int) -> StageFailure:
        """The step's own record when it wrote one; otherwise what Buildbot's result implies."""
        recorded = failure_from_property(self.getProperty(FAILURE_PROPERTY))
        if recorded is not None:
            return recorded
        stage = self.interrupted_stage()
        if effective == RETRY:  # Buildbot's RETRY without a record: the connection to the worker went
            return worker_lost_failure(stage)
        if effective == EXCEPTION:
            return ci_exception_failure(stage, " ".join(self.text) or "exception in a step")
        return StageFailure(stage=stage or "unknown", message="step failed without a failure record",
                            category=FailureCategory.REAL, reason="unknown")

    def interrupted_stage(self) -> str | None:
        """The stage of the step that ended the build (the last one that did not succeed)."""
        for step in reversed(self.executedSteps):
            if step.results not in (SUCCESS, WARNINGS, SKIPPED):
                return getattr(step, "stage", None) or step.name
        return self.executedSteps[-1].name if self.executedSteps else None

    async def earlier_attempts(self) -> list[Attempt]:
        attempts: list[Attempt] = []
        for br in self.requests:
            builds = await self.master.data.get(("buildrequests", br.id, "builds"))
            for b in sorted(builds or [], key=lambda x: x["buildid"]):
                if b["buildid"] == self.buildid or not b.get("complete"):
                    continue
                attempts.append(await self._attempt_of(b, len(attempts) + 1))
        return attempts

    async def _attempt_of(self, build: dict[str, Any], number: int) -> Attempt:
        props = await self.master.data.get(("builds", build["buildid"], "properties")) or {}
        raw = props.get(ATTEMPT_PROPERTY)
        if raw and isinstance(raw[0], dict):
            try:
                return Attempt.from_dict({**raw[0], "number": number})
            except ValueError:
                pass
        # A build that ended before the policy ran (master restart): count it, as infrastructure,
        # so an unexplained loop still hits the limit.
        worker = (props.get("workername") or [None])[0]
        if build.get("results") in (SUCCESS, WARNINGS):
            return Attempt.passing(number, worker)
        unknown = StageFailure(stage="unknown", message="earlier attempt left no record",
                               category=FailureCategory.INFRASTRUCTURE, reason="unknown")
        return Attempt.failing(number, worker, unknown)


class BsdkmBuildFactory(BuildFactory):
    """A BuildFactory whose builds follow the bounded retry policy."""

    buildClass = BoundedRetryBuild

    def __init__(
        self, steps: Sequence[Any] | None = None, retry_settings: RetrySettings | None = None
    ) -> None:
        super().__init__(steps)
        self.retry_settings = retry_settings or RetrySettings()

