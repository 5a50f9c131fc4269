"""Turning accepted webhook events into Buildbot buildsets, one per PR head.

The change hook (``hook.py``) verifies and parses; this service applies the trust and
trigger rules (``trust.py``), coalesces duplicates (``coalesce.py``) and decides what a PR
event or comment builds. Two parts do the rest: the per-PR event queue (``pr_queue.py``: each
PR's events acted on one at a time, in arrival order, after GitHub has its answer) and the
buildset manager (``buildsets.py``: a head's buildset made, superseded by a newer head, found
again after a restart, forgotten once complete).

What must survive a restart (approvals, the PR's unfinished buildsets, the deliveries and
comments already acted on) is in the master's database (``state_store.py``), and an event answered
but not acted on is in the inbox (``inbox.py``), acted on after the restart.

The service takes its configuration the way Buildbot's services do: ``checkConfig`` refuses a
bad one when ``master.cfg`` is read, ``reconfigService`` applies the new ``github:`` section's rules
and builder list on a reconfig. The publisher (with its credentials), inbox and store it started
with stay: they hold what is on its way to and from GitHub.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from buildbot import config
from buildbot.util import service
from twisted.internet import defer
from twisted.python import log

from .bodylimit import install
from .buildsets import PrBuilder, PrBuildsets
from .client import GitHubError
from .events import (
    CommentEvent,
    EventError,
    PullRequest,
    PullRequestEvent,
    pull_request_from,
)
from .head_order import NO_HEAD, HeadMark, shown_later
from .inbox import Inbox, Queued
from .pr_queue import HEAD_ACTIONS, Outcome, PrEventQueue, act_on, parse_queued
from .publisher import Publisher
from .request_errors import CredentialsError
from .settings import GitHubSettings
from .state_store import BuildbotStateStore, StateStore
from .triggers import Trigger, parse_comment
from .trust import (
    Action,
    ApprovalBook,
    PrRecord,
    ReplyLimiter,
    TrustDecision,
    decide_comment,
    decide_commenter,
    decide_pull_request,
    push_vetted,
)

__all__ = ["Outcome", "PrBuilder", "PullRequestBuilds", "check_secrets"]


class PullRequestBuilds(service.BuildbotService):
    name = "bsdkm-github-pr-builds"

    def __init__(
        self,
        settings: GitHubSettings,
        builders: list[PrBuilder],
        publisher: Publisher,
        store: StateStore | None = None,
        inbox: Inbox | None = None,
        **kw: Any,
    ):
        # Buildbot's own configuration path: checkConfig now, reconfigService at start and reconfig.
        super().__init__(settings, builders, publisher, store=store, inbox=inbox, **kw)
        self.publisher = publisher
        self.store: StateStore | None = store  # None: the master's database, once running
        self.inbox = inbox or Inbox(None)
        self.approvals = ApprovalBook()
        self._loaded: set[tuple[str, int]] = set()  # PRs whose record was read from the store
        self._pr_locks: dict[tuple[str, int], defer.DeferredLock] = {}
        self._consumer: Any = None
        self._background: set[defer.Deferred[Any]] = set()
        self.queue = PrEventQueue(self._act, self._newest_mark, self.inbox.done, self.in_background)
        self.buildsets = PrBuildsets(self)
        self._configure(settings, builders)  # usable before a master starts it (the tests, a probe)

    def checkConfig(self, settings: GitHubSettings, builders: Sequence[PrBuilder], publisher: Publisher,
                    store: StateStore | None = None, inbox: Inbox | None = None) -> None:
        if not isinstance(settings, GitHubSettings):
            config.error(f"{self.name}: settings must be the github: section read by parse_settings")
        names = [b.name for b in builders]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            config.error(f"{self.name}: PR builders named twice: {', '.join(twice)}")
        super().checkConfig()

    @defer.inlineCallbacks
    def reconfigService(self, settings: GitHubSettings, builders: Sequence[PrBuilder], publisher: Publisher,
                        store: StateStore | None = None, inbox: Inbox | None = None) -> Any:
        self._configure(settings, builders)
        if self.master is not None and self.running:
            self.settings.secrets.bind(self.master)  # a new section's {secret: NAME}s: read by this master
        yield super().reconfigService()

    def _configure(self, settings: GitHubSettings, builders: Sequence[PrBuilder]) -> None:
        self.settings = settings
        self.builders = list(builders)
        limiter = getattr(self, "limiter", None)  # what it counted stays while its window does
        if limiter is None or limiter.window_seconds != settings.reply_window_s:
            self.limiter = ReplyLimiter(window_seconds=settings.reply_window_s)

    @property
    def coalescer(self) -> Any:
        return self.buildsets.coalescer

    @property
    def latencies_ms(self) -> list[float]:
        return self.buildsets.latencies_ms

    @defer.inlineCallbacks
    def startService(self) -> Any:
        yield super().startService()
        self.settings.secrets.bind(self.master)
        self.in_background(check_secrets(self.settings))
        if self.store is None:
            self.store = BuildbotStateStore(self.master)
        self._limit_bodies()
        self._consumer = yield self.master.mq.startConsuming(
            self.buildsets.complete, ("buildsets", None, "complete")
        )
        self.queue.stopping = False
        self.publisher.outbox.start_writer(self.master.reactor)
        left = self.inbox.start(self.master.reactor, time.monotonic())
        if left:
            log.msg(f"bsdkm github: acting on {len(left)} event(s) answered before the master stopped")
            yield defer.ensureDeferred(self.buildsets.find_unfinished())
        for item in left:
            try:
                self.queue.schedule(item, parse_queued(item))
            except EventError as e:
                log.msg(f"bsdkm github: inbox event {item.seq} ({item.event}) left out: {e}")
                self.inbox.done(item.seq)

    def _limit_bodies(self, tries: int = 0) -> None:
        """Refuse oversized webhook bodies as they arrive (``bodylimit``), once the web site exists."""
        site = getattr(getattr(self.master, "www", None), "site", None)
        if site is not None:
            install(site, self.settings.max_payload_bytes)
        elif tries < 60:
            self.master.reactor.callLater(1.0, self._limit_bodies, tries + 1)

    @defer.inlineCallbacks
    def stopService(self) -> Any:
        self.queue.stopping = True  # what is still queued stays in the inbox for the next start
        if self._consumer is not None:
            yield self._consumer.stopConsuming()
            self._consumer = None
        yield defer.ensureDeferred(self.idle())
        self.inbox.stop()
        self.publisher.outbox.stop_writer()  # the reporter's last reports are written at once
        yield super().stopService()

    # --- the queue ---------------------------------------------------------------------------

    async def enqueue(self, event: str, delivery: str, once_keys: list[str], body: bytes,
                      content_type: str | None, parsed: Any, received: float) -> Queued:
        """Keep an accepted event (``parsed``: its ``PullRequestEvent`` or ``CommentEvent``) in the
        inbox and queue it behind its PR's earlier events; returns once it is on disk."""
        item = Queued(self.inbox.next_seq(), event, delivery, tuple(once_keys), body, content_type, received)
        await self.inbox.put(item)
        acted = self.queue.schedule(item, parsed)
        # An idle master answers after acting, as GitHub's delivery log then shows; a busy one does
        # not keep GitHub waiting for the queue in front of the event.
        timeout = self._reactor().callLater(self.settings.answer_within_s, acted.cancel)
        try:
            await acted
        except defer.CancelledError:
            pass
        finally:
            if timeout.active():
                timeout.cancel()
        return item

    async def _act(self, item: Queued, parsed: Any, superseded: bool, queued_heads: frozenset[str]) -> Any:
        return await act_on(self, item, parsed, superseded=superseded, queued_heads=queued_heads)

    def _reactor(self) -> Any:
        if self.master is not None:
            return self.master.reactor
        from twisted.internet import reactor  # a controller used without a master (the Action's)

        return reactor

    def _newest_mark(self, parsed: Any) -> HeadMark:
        """The newest head acted on for ``parsed``'s PR, as far as this master knows yet."""
        repo, number = ((parsed.pull.repo, parsed.pull.number) if isinstance(parsed, PullRequestEvent)
                        else (parsed.repo, parsed.issue_number))
        record = self.approvals.records.get((repo, number))
        return _record_mark(record) if record is not None else NO_HEAD

    @property
    def queued(self) -> int:
        return self.queue.queued

    # --- events ------------------------------------------------------------------------------

    def accepts_repo(self, repo: str) -> bool:
        return repo.lower() in {r.lower() for r in self.settings.repos}

    async def first_delivery(self, delivery: str) -> bool:
        """False when this ``X-GitHub-Delivery`` was acted on before (a re-POST, or a replay)."""
        assert self.store is not None
        return await self.store.first_time(f"delivery:{delivery}")

    async def on_pull_request(self, event: PullRequestEvent, received: float,
                              superseded: bool = False, replayed: bool = False) -> Outcome:
        """``superseded``: a newer head of the PR is queued behind this event, so it builds nothing,
        and its record is saved with that event's (the inbox holds both until then)."""
        async with self.pr_record(event.pull.repo, event.pull.number, save=not superseded) as record:
            return await self._on_pull_request(event, record, received, superseded, replayed)

    async def _on_pull_request(self, event: PullRequestEvent, record: PrRecord, received: float,
                               superseded: bool = False, replayed: bool = False) -> Outcome:
        pull = event.pull
        if event.action in HEAD_ACTIONS:
            if shown_later(_record_mark(record), HeadMark.of(event)):
                # A push that reached us after a newer one: building it would cancel the newer head's
                # build, and its trust must not become the head's.
                return Outcome("superseded", f"GitHub showed PR #{pull.number} head {record.head} later "
                               f"than {pull.head_sha}")
            self.queue.saw_head(pull.repo, pull.number, pull.head_sha)
            # A retest of this head later must know whether someone untrusted pushed it.
            self.approvals.saw_head(pull.repo, pull.number, pull.head_sha, pull.updated_at,
                                    vetted=push_vetted(event, self.settings.trust), before=event.before)
        decision = decide_pull_request(event, self.settings.trust, self.approvals)
        if decision.action == Action.AWAIT_APPROVAL:
            self.buildsets.supersede(pull, record)
            await self._explain(decision, self._approval_request(pull))
            return Outcome(decision.action, decision.reason)
        if not decision.builds:
            return Outcome(decision.action, decision.reason)
        if superseded:
            self.buildsets.supersede(pull, record)
            return Outcome("superseded", f"a newer head of PR #{pull.number} is queued behind this event")
        return await self._build(pull, record, decision, None, received, replayed)

    async def on_comment(self, event: CommentEvent, received: float, replayed: bool = False,
                         queued_heads: frozenset[str] = frozenset()) -> Outcome:
        """``replayed``: read back from the inbox after a restart, maybe acted on already in part.
        ``queued_heads``: the heads that PR events queued behind this comment name."""
        trigger = parse_comment(event.body, self.settings.triggers)
        if event.action != "created" or not event.is_pull_request or trigger is None:
            decision = decide_comment(event, trigger, None, self.settings.trust, self.approvals)
            return Outcome(decision.action, decision.reason)
        assert self.store is not None
        if not await self.store.first_time(f"comment:{event.comment_id}") and not replayed:
            return Outcome("duplicate", f"comment {event.comment_id} was acted on before")
        early = decide_commenter(event, trigger, self.settings.trust)
        if early is not None:  # settled without reading the PR from GitHub
            if early.action == Action.REPLY:
                await self._explain(early, early.reason)
            return Outcome(early.action, early.reason)
        async with self.pr_record(event.repo, event.issue_number) as record:
            pull = await self._fetch_pull(event.repo, event.issue_number)
            if pull is None:
                return Outcome("error", f"could not read PR #{event.issue_number} from GitHub")
            decision = decide_comment(event, trigger, pull, self.settings.trust, self.approvals)
            if decision.action == Action.REPLY:
                await self._explain(decision, decision.reason)
                return Outcome(decision.action, decision.reason)
            if not decision.builds:
                return Outcome(decision.action, decision.reason)
            if decision.approve_head:
                self.approvals.approve(pull.repo, pull.number, pull.head_sha)
            if queued_heads:
                # A push queued behind this comment supersedes whatever it would build; and GitHub's
                # head may be newer than those pushes, which would then cancel it, and its own push
                # find it stale.
                return Outcome("coalesced", f"a push of PR #{pull.number} queued behind this comment builds")
            return await self._build(pull, record, decision, decision.trigger, received, replayed)

    @contextlib.asynccontextmanager
    async def pr_record(self, repo: str, number: int, save: bool = True) -> AsyncIterator[PrRecord]:
        """The PR's record, read from the store the first time; events of one PR run one at a time."""
        key = (repo, number)
        lock = self._pr_locks.setdefault(key, defer.DeferredLock())
        await lock.acquire()
        try:
            if key not in self._loaded:
                assert self.store is not None
                doc = await self.store.load(_store_key(repo, number))
                self.approvals.records[key] = PrRecord.from_doc(doc)
                self.buildsets.known(repo, number, self.approvals.records[key])
                self._loaded.add(key)
            record = self.approvals.record(repo, number)
            before = record.to_doc()
            yield record
            if save and record.to_doc() != before:
                assert self.store is not None
                await self.store.save(_store_key(repo, number), record.to_doc())
        finally:
            lock.release()
            if not lock.waiting:
                self._pr_locks.pop(key, None)

    async def _fetch_pull(self, repo: str, number: int) -> PullRequest | None:
        try:
            response = await self.publisher.client.get_pull(repo, number)
            return pull_request_from(response.data, repo)
        except (GitHubError, EventError) as e:
            log.msg(f"bsdkm github: cannot read PR #{number} of {repo}: {e}")
            return None

    # --- building ----------------------------------------------------------------------------

    async def _build(self, pull: PullRequest, record: PrRecord, decision: TrustDecision,
                     trigger: Trigger | None, received: float, replayed: bool = False) -> Outcome:
        return await self.buildsets.build(pull, record, decision, trigger, received, replayed)

    # --- replies -----------------------------------------------------------------------------

    def _approval_request(self, pull: PullRequest) -> str:
        return (
            f"Thanks for the pull request, @{pull.author}! CI loads this code into kernels, so it runs only "
            f"after a maintainer reviews it: a repository member can comment `ok to test` to build "
            f"{pull.head_sha[:12]}. Each new push needs a new `ok to test`."
        )

    async def _explain(self, decision: TrustDecision, text: str) -> None:
        login = decision.reply_to or ""
        if not self.limiter.allow(decision.repo, decision.number, login, time.monotonic()):
            log.msg(f"bsdkm github: not replying to {login} on #{decision.number} again (rate limit)")
            return
        self.in_background(self.publisher.reply(decision.repo, decision.number, login, text))

    def in_background(self, work: Any) -> None:
        """GitHub calls must not delay the webhook's answer; stopService waits for them."""
        d = defer.ensureDeferred(work)
        self._background.add(d)
        d.addBoth(lambda result: (self._background.discard(d), result)[1])

    async def idle(self) -> None:
        while self._background:
            await defer.DeferredList(list(self._background))


async def check_secrets(settings: GitHubSettings) -> None:
    """Say at start which ``{secret: NAME}`` of the github: section no secrets provider gives: they
    are read only when needed, and the webhook's would otherwise show only as refused deliveries."""
    for key, ref in settings.secret_refs:
        try:
            await settings.secrets.get(ref.name)
        except CredentialsError as e:
            log.msg(f"bsdkm github: github.{key}: {e}")


def _record_mark(record: PrRecord) -> HeadMark:
    return HeadMark(record.head, record.head_seen_at, record.head_before)


def _store_key(repo: str, number: int) -> str:
    return f"pr:{repo.lower()}#{number}"
