"""Turning accepted webhook events into Buildbot buildsets, one per PR head.

The change hook (``hook.py``) verifies and parses; this service applies the trust and
trigger rules (``trust.py``), coalesces duplicates (``coalesce.py``), supersedes builds of a
PR's older heads, and creates the buildset directly (no Change, so the master's generic
branch scheduler does not also build it and a per-variant retest builds only that variant).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from buildbot.util import service
from twisted.internet import defer
from twisted.python import log

from .coalesce import Coalescer
from .events import CommentEvent, EventError, PullRequest, PullRequestEvent, pull_request_from
from .publisher import Publisher
from .settings import GitHubSettings
from .triggers import Trigger, parse_comment, selected_builders
from .trust import Action, ApprovalBook, Decision, ReplyLimiter, decide_comment, decide_pull_request

SCHEDULER_NAME = "github-pr"
# Build properties every PR build carries; the reporters read them back.
PROP_REPO = "github_repo"
PROP_PR = "github_pr"
PROP_HEAD = "github_head_sha"
PROP_PR_URL = "github_pr_url"
PROP_TRIGGER = "github_trigger"
PROP_BASE = "github_base_ref"


@dataclass(frozen=True)
class PrBuilder:
    target: str
    variant: str
    name: str  # Buildbot builder name

    @property
    def context(self) -> str:
        return f"bsdkm/{self.target}/{self.variant}"


@dataclass(frozen=True)
class Outcome:
    """What the hook did with one event, for the HTTP answer and the log."""

    action: str
    reason: str
    buildset: int | None = None
    latency_ms: float | None = None


class PullRequestBuilds(service.BuildbotService):
    name = "bsdkm-github-pr-builds"

    def __init__(self, settings: GitHubSettings, builders: list[PrBuilder], publisher: Publisher, **kw: Any):
        super().__init__(**kw)
        self.settings = settings
        self.builders = builders
        self.publisher = publisher
        self.approvals = ApprovalBook()
        self.coalescer = Coalescer()
        self.limiter = ReplyLimiter(window_seconds=settings.reply_window_s)
        self._buildsets: dict[int, tuple[str, int, str]] = {}  # bsid -> (repo, PR, head)
        self._requests: dict[int, list[int]] = {}  # bsid -> its build request ids
        self._consumer: Any = None
        self._builder_ids: dict[str, int] = {}
        self._background: set[defer.Deferred[Any]] = set()
        self.latencies_ms: list[float] = []

    def checkConfig(self, *args: Any, **kwargs: Any) -> None:
        return None

    def reconfigService(self, *args: Any, **kwargs: Any) -> defer.Deferred[None]:
        return defer.succeed(None)

    @defer.inlineCallbacks
    def startService(self) -> Any:
        yield super().startService()
        self._consumer = yield self.master.mq.startConsuming(
            self._buildset_complete, ("buildsets", None, "complete")
        )

    @defer.inlineCallbacks
    def stopService(self) -> Any:
        if self._consumer is not None:
            yield self._consumer.stopConsuming()
            self._consumer = None
        yield defer.ensureDeferred(self.idle())
        yield super().stopService()

    # --- events ------------------------------------------------------------------------------

    async def on_pull_request(self, event: PullRequestEvent, received: float) -> Outcome:
        decision = decide_pull_request(event, self.settings.trust, self.approvals)
        if decision.action == Action.AWAIT_APPROVAL:
            await self._supersede(event.pull)
            await self._explain(decision, self._approval_request(event.pull))
            return Outcome(decision.action, decision.reason)
        if not decision.builds:
            return Outcome(decision.action, decision.reason)
        return await self._build(event.pull, decision, None, received)

    async def on_comment(self, event: CommentEvent, received: float) -> Outcome:
        trigger = parse_comment(event.body, self.settings.triggers)
        pull = None
        if event.action == "created" and event.is_pull_request and trigger is not None:
            pull = await self._fetch_pull(event.repo, event.issue_number)
            if pull is None:
                return Outcome("error", f"could not read PR #{event.issue_number} from GitHub")
        decision = decide_comment(event, trigger, pull, self.settings.trust, self.approvals)
        if decision.action == Action.REPLY:
            await self._explain(decision, decision.reason)
            return Outcome(decision.action, decision.reason)
        if not decision.builds or pull is None:
            return Outcome(decision.action, decision.reason)
        if decision.approve_head:
            self.approvals.approve(pull.repo, pull.number, pull.head_sha)
        return await self._build(pull, decision, decision.trigger, received)

    async def _fetch_pull(self, repo: str, number: int) -> PullRequest | None:
        from .client import GitHubError

        try:
            response = await self.publisher.client.get_pull(repo, number)
            return pull_request_from(response.data, repo)
        except (GitHubError, EventError) as e:
            log.msg(f"bsdkm github: cannot read PR #{number} of {repo}: {e}")
            return None

    # --- building ----------------------------------------------------------------------------

    def _selected(self, trigger: Trigger | None) -> list[PrBuilder]:
        if trigger is None:
            return list(self.builders)
        wanted = set(selected_builders(trigger, [(b.target, b.variant) for b in self.builders]))
        return [b for b in self.builders if (b.target, b.variant) in wanted]

    async def _build(
        self, pull: PullRequest, decision: Decision, trigger: Trigger | None, received: float
    ) -> Outcome:
        chosen = self._selected(trigger)
        if not chosen:
            return Outcome("ignore", "no configured builder matches the request")
        scope = tuple(sorted(b.name for b in chosen))
        await self._supersede(pull)
        if not self.coalescer.claim(pull.repo, pull.number, pull.head_sha, scope, time.monotonic()):
            return Outcome(
                "coalesced", f"a build of PR #{pull.number} head {pull.head_sha[:12]} is already pending"
            )
        bsid = await self._add_buildset(pull, chosen, decision.reason)
        latency = (time.monotonic() - received) * 1000.0
        self.latencies_ms.append(latency)
        log.msg(
            f"bsdkm github: PR #{pull.number} head {pull.head_sha[:12]}: buildset {bsid} for "
            f"{len(chosen)} builder(s), {latency:.1f} ms after the webhook arrived ({decision.reason})"
        )
        if self.settings.statuses:
            for builder in chosen:
                self._in_background(
                    self.publisher.post_status(
                        pull.repo,
                        pull.head_sha,
                        builder.context,
                        "pending",
                        "queued",
                        self._buildset_url(bsid),
                    )
                )
        return Outcome("build", decision.reason, bsid, latency)

    async def _add_buildset(self, pull: PullRequest, chosen: list[PrBuilder], reason: str) -> int:
        builderids = [await self._builder_id(b.name) for b in chosen]
        sourcestamp = {
            "codebase": "",
            "repository": self.settings.clone_url,
            "branch": f"refs/pull/{pull.number}/head",
            "revision": pull.head_sha,
            "project": pull.repo,
        }
        source = "github"
        properties = {
            PROP_REPO: (pull.repo, source),
            PROP_PR: (pull.number, source),
            PROP_HEAD: (pull.head_sha, source),
            PROP_PR_URL: (pull.html_url, source),
            PROP_BASE: (pull.base_ref, source),
            PROP_TRIGGER: (reason, source),
            "branch": (f"refs/pull/{pull.number}/head", source),
            "revision": (pull.head_sha, source),
        }
        bsid, brids = await self.master.data.updates.addBuildset(
            waited_for=False,
            scheduler=SCHEDULER_NAME,
            sourcestamps=[sourcestamp],
            reason=f"GitHub PR #{pull.number}: {reason}",
            properties=properties,
            builderids=builderids,
        )
        self._buildsets[bsid] = (pull.repo, pull.number, pull.head_sha)
        self._requests[bsid] = list(brids.values())
        return bsid

    async def _builder_id(self, name: str) -> int:
        if name not in self._builder_ids:
            self._builder_ids[name] = await self.master.data.updates.findBuilderId(name)
        return self._builder_ids[name]

    def _buildset_url(self, bsid: int) -> str | None:
        base = getattr(self.master.config, "buildbotURL", None)
        return f"{base}#/buildsets/{bsid}" if base else None

    async def _supersede(self, pull: PullRequest) -> None:
        """A new head makes every unfinished build of the PR's older heads pointless: cancel them."""
        # Claim the old buildsets before any await, so concurrent events never cancel one twice.
        old = [
            bsid
            for bsid, (repo, number, head) in list(self._buildsets.items())
            if (repo, number) == (pull.repo, pull.number) and head != pull.head_sha
        ]
        for bsid in old:
            self._buildsets.pop(bsid, None)
            # Cancelling is the master's work, not the webhook's: GitHub does not wait for it.
            self._in_background(self._cancel_buildset(bsid, f"superseded by {pull.head_sha[:12]}"))

    async def _cancel_buildset(self, bsid: int, reason: str) -> None:
        """Cancel the buildset's requests: queued ones in one claim + complete, running ones by
        Buildbot's own cancel (which stops the build).

        Cancelling request by request costs the master's single sqlite thread about six
        transactions each; under a burst of pushes that, not the hook, bounded throughput.
        """
        from buildbot.db.buildrequests import AlreadyClaimedError
        from buildbot.process.results import CANCELLED

        requests = self._requests.pop(bsid, [])
        if not requests:
            return
        try:
            await self.master.db.buildrequests.claimBuildRequests(brids=requests)
        except AlreadyClaimedError:
            for brid in requests:  # some already run: stop those builds the standard way
                await self.master.data.control("cancel", {"reason": reason}, ("buildrequests", brid))
        else:
            await self.master.data.updates.completeBuildRequests(requests, CANCELLED)
        log.msg(f"bsdkm github: cancelled {len(requests)} request(s) of buildset {bsid}: {reason}")

    def _buildset_complete(self, key: tuple[str, ...], msg: dict[str, Any]) -> None:
        self._requests.pop(msg.get("bsid"), None)
        entry = self._buildsets.pop(msg.get("bsid"), None)
        if entry is not None:
            self.coalescer.release(*entry)

    # --- replies -----------------------------------------------------------------------------

    def _approval_request(self, pull: PullRequest) -> str:
        return (
            f"Thanks for the pull request, @{pull.author}! CI loads this code into kernels, so it runs only "
            f"after a maintainer reviews it: a repository member can comment `ok to test` to build "
            f"{pull.head_sha[:12]}. Each new push needs a new `ok to test`."
        )

    async def _explain(self, decision: Decision, text: str) -> None:
        login = decision.reply_to or ""
        if not self.limiter.allow(decision.repo, decision.number, login, time.monotonic()):
            log.msg(f"bsdkm github: not replying to {login} on #{decision.number} again (rate limit)")
            return
        self._in_background(self.publisher.reply(decision.repo, decision.number, login, text))

    def _in_background(self, work: Any) -> None:
        """GitHub calls must not delay the webhook's answer; stopService waits for them."""
        d = defer.ensureDeferred(work)
        self._background.add(d)
        d.addBoth(lambda result: (self._background.discard(d), result)[1])

    async def idle(self) -> None:
        while self._background:
            await defer.DeferredList(list(self._background))
