"""Turning accepted webhook events into Buildbot buildsets, one per PR head.

The change hook (``hook.py``) verifies and parses; this service applies the trust and
trigger rules (``trust.py``), coalesces duplicates (``coalesce.py``), supersedes builds of a
PR's older heads, and creates the buildset directly (no Change, so the master's generic
branch scheduler does not also build it and a per-variant retest builds only that variant).

The hook answers GitHub as soon as an event is verified, parsed and written to the inbox
(``inbox.py``); this service acts on it afterwards, so the answer never waits for the database.
Each PR's events are acted on one at a time, in the order they arrived; a push whose PR has a
newer head queued behind it builds nothing (that build would be superseded at once), and neither
does one GitHub shows older than a head already acted on (``head_order``: pushes can arrive out
of order). What must survive a restart (approvals, the PR's unfinished buildsets, the deliveries
and comments already acted on) is in the master's database (``store.py``), and an event answered
but not acted on is in the inbox, acted on after the restart: a PR head with an unfinished
buildset for the same builders is not built again.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from buildbot.util import service
from twisted.internet import defer
from twisted.python import log

from ..contract import (
    PR_AUTHOR_TRUSTED_PROPERTY,
    PR_BASE_REF_PROPERTY,
    PR_BASE_SHA_PROPERTY,
    PR_HEAD_PROPERTY,
    PR_NUMBER_PROPERTY,
    PR_REPO_PROPERTY,
    PR_TRIGGER_PROPERTY,
    PR_URL_PROPERTY,
    status_context,
)
from .bodylimit import install
from .client import GitHubError
from .coalesce import Coalescer
from .errors import CredentialsError
from .events import (
    CommentEvent,
    EventError,
    PullRequest,
    PullRequestEvent,
    parse_body,
    parse_comment_event,
    parse_pull_request_event,
    pull_request_from,
)
from .head_order import NO_HEAD, HeadMark, shown_later
from .inbox import Inbox, Queued
from .publisher import Publisher
from .settings import GitHubSettings
from .store import BuildbotStateStore, StateStore
from .triggers import Trigger, parse_comment, selected_builders
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

SCHEDULER_NAME = "github-pr"
QUEUED_EVENTS = ("pull_request", "issue_comment")  # acted on after the answer (the rest: before it)
HEAD_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review")  # a PR event naming a new head


@dataclass(frozen=True)
class PrBuilder:
    target: str
    variant: str
    name: str  # Buildbot builder name

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)


@dataclass(frozen=True)
class Outcome:
    """What the hook did with one event, for the HTTP answer and the log."""

    action: str
    reason: str
    buildset: int | None = None
    latency_ms: float | None = None


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
        super().__init__(**kw)
        self.settings = settings
        self.builders = builders
        self.publisher = publisher
        self.store: StateStore | None = store  # None: the master's database, once running
        self.inbox = inbox or Inbox(None)
        self._queues: dict[tuple[str, int], deque[tuple[Queued, Any]]] = {}  # per PR, in arrival order
        self._stopping = False
        self._acted_heads: dict[tuple[str, int], set[str]] = {}  # heads whose PR events were acted on
        # After a restart with events left: the PR buildsets already in the database, unfinished, by
        # (repo, PR, head). A replayed event may have made one and been killed before its PR's
        # record was saved.
        self._unfinished: dict[tuple[str, int, str], list[int]] = {}
        self._acted: dict[int, defer.Deferred[None]] = {}  # inbox seq -> fires once acted on
        self.approvals = ApprovalBook()
        self.coalescer = Coalescer()
        self.limiter = ReplyLimiter(window_seconds=settings.reply_window_s)
        self._buildsets: dict[int, tuple[str, int, str]] = {}  # bsid -> (repo, PR, head)
        self._loaded: set[tuple[str, int]] = set()  # PRs whose record was read from the store
        self._pr_locks: dict[tuple[str, int], defer.DeferredLock] = {}
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
        self.settings.secrets.bind(self.master)
        self._in_background(check_secrets(self.settings))
        if self.store is None:
            self.store = BuildbotStateStore(self.master)
        self._limit_bodies()
        self._consumer = yield self.master.mq.startConsuming(
            self._buildset_complete, ("buildsets", None, "complete")
        )
        self._stopping = False
        self.publisher.outbox.start_writer(self.master.reactor)
        left = self.inbox.start(self.master.reactor, time.monotonic())
        if left:
            log.msg(f"bsdkm github: acting on {len(left)} event(s) answered before the master stopped")
            yield defer.ensureDeferred(self._find_unfinished())
        for item in left:
            try:
                self._schedule(item, parse_queued(item))
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
        self._stopping = True  # what is still queued stays in the inbox for the next start
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
        acted = self._schedule(item, parsed)
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

    async def _find_unfinished(self) -> None:
        try:
            for bs in await self.master.db.buildsets.getBuildsets(complete=False):
                props = await self.master.db.buildsets.getBuildsetProperties(bs.bsid)
                repo, number, head = (props.get(name, (None,))[0]
                                      for name in (PR_REPO_PROPERTY, PR_NUMBER_PROPERTY, PR_HEAD_PROPERTY))
                if repo and number and head:
                    key = (str(repo).lower(), int(number), str(head))
                    self._unfinished.setdefault(key, []).append(bs.bsid)
        except Exception as e:  # noqa: BLE001 - without it a replay may build a head again, never lose one
            log.msg(f"bsdkm github: unfinished buildsets not read: {type(e).__name__}: {e}")

    async def _adopt(self, pull: PullRequest, record: PrRecord) -> bool:
        """A replayed event's head already has an unfinished buildset in the database: it goes into
        the PR's record (a later push cancels it) and nothing is built again."""
        bsids = self._unfinished.pop((pull.repo.lower(), pull.number, pull.head_sha), [])
        contexts = {await self._builder_id(b.name): b.context for b in self.builders}
        for bsid in bsids:
            if str(bsid) in record.buildsets:
                continue
            rows = await self.master.db.buildrequests.getBuildRequests(bsid=bsid)
            record.buildsets[str(bsid)] = {"head": pull.head_sha, "requests": {
                str(_brid(r)): contexts.get(_builderid(r), "") for r in rows}}
            self._buildsets[bsid] = (pull.repo, pull.number, pull.head_sha)
        return bool(bsids)

    def _reactor(self) -> Any:
        if self.master is not None:
            return self.master.reactor
        from twisted.internet import reactor  # a controller used without a master (the Action's)

        return reactor

    def _schedule(self, item: Queued, parsed: Any) -> defer.Deferred[None]:
        """Queue ``item``; the Deferred fires once it was acted on (cancelling it changes nothing)."""
        acted: defer.Deferred[None] = defer.Deferred()
        self._acted[item.seq] = acted
        key = _queue_key(parsed)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            queue.append((item, parsed))
            self._in_background(self._drain(key, queue))
        else:
            queue.append((item, parsed))
        return acted

    async def _drain(self, key: tuple[str, int], queue: deque[tuple[Queued, Any]]) -> None:
        try:
            while queue and not self._stopping:
                item, parsed = queue[0]
                newer = [p for _, p in list(queue)[1:]]
                try:
                    superseded = _newer_head_queued(parsed, newer, self._acted_heads.get(key, set()))
                    queued = _heads_of(newer, self._newest_mark(parsed))
                    await act_on(self, item, parsed, superseded=superseded, queued_heads=queued)
                except Exception as e:  # noqa: BLE001 - one event's bug must not stop its PR's queue
                    log.err(e, f"bsdkm github: delivery {item.delivery} ({item.event}) failed")
                queue.popleft()
                self._in_background(self.inbox.done(item.seq))
                acted = self._acted.pop(item.seq, None)
                if acted is not None and not acted.called:
                    acted.callback(None)
        finally:
            if not queue and self._queues.get(key) is queue:
                del self._queues[key]

    def _newest_mark(self, parsed: Any) -> HeadMark:
        """The newest head acted on for ``parsed``'s PR, as far as this master knows yet."""
        repo, number = ((parsed.pull.repo, parsed.pull.number) if isinstance(parsed, PullRequestEvent)
                        else (parsed.repo, parsed.issue_number))
        record = self.approvals.records.get((repo, number))
        return _record_mark(record) if record is not None else NO_HEAD

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())

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
        async with self._pr(event.pull.repo, event.pull.number, save=not superseded) as record:
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
            self._acted_heads.setdefault((pull.repo.lower(), pull.number), set()).add(pull.head_sha)
            # A retest of this head later must know whether someone untrusted pushed it.
            self.approvals.saw_head(pull.repo, pull.number, pull.head_sha, pull.updated_at,
                                    vetted=push_vetted(event, self.settings.trust), before=event.before)
        decision = decide_pull_request(event, self.settings.trust, self.approvals)
        if decision.action == Action.AWAIT_APPROVAL:
            self._supersede(pull, record)
            await self._explain(decision, self._approval_request(pull))
            return Outcome(decision.action, decision.reason)
        if not decision.builds:
            return Outcome(decision.action, decision.reason)
        if superseded:
            self._supersede(pull, record)
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
        async with self._pr(event.repo, event.issue_number) as record:
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
    async def _pr(self, repo: str, number: int, save: bool = True) -> AsyncIterator[PrRecord]:
        """The PR's record, read from the store the first time; events of one PR run one at a time."""
        key = (repo, number)
        lock = self._pr_locks.setdefault(key, defer.DeferredLock())
        await lock.acquire()
        try:
            if key not in self._loaded:
                assert self.store is not None
                doc = await self.store.load(_store_key(repo, number))
                self.approvals.records[key] = PrRecord.from_doc(doc)
                for bsid, entry in self.approvals.records[key].buildsets.items():
                    self._buildsets[int(bsid)] = (repo, number, str(entry.get("head", "")))
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

    def _selected(self, trigger: Trigger | None) -> list[PrBuilder]:
        if trigger is None:
            return list(self.builders)
        wanted = set(selected_builders(trigger, [(b.target, b.variant) for b in self.builders]))
        return [b for b in self.builders if (b.target, b.variant) in wanted]

    async def _build(
        self,
        pull: PullRequest,
        record: PrRecord,
        decision: TrustDecision,
        trigger: Trigger | None,
        received: float,
        replayed: bool = False,
    ) -> Outcome:
        chosen = self._selected(trigger)
        if not chosen:
            return Outcome("ignore", "no configured builder matches the request")
        scope = tuple(sorted(b.name for b in chosen))
        self._supersede(pull, record)
        pending = f"a build of PR #{pull.number} head {pull.head_sha[:12]} is already pending"
        if replayed and await self._adopt(pull, record):
            return Outcome("coalesced", pending)
        if _unfinished_for(record, pull.head_sha, {b.context for b in chosen}):
            # The record outlives a restart, the coalescer does not: an event acted on again after
            # one (or redelivered under a new id) finds the buildset it made.
            return Outcome("coalesced", pending)
        if not self.coalescer.claim(pull.repo, pull.number, pull.head_sha, scope, time.monotonic()):
            return Outcome("coalesced", pending)
        bsid = await self._add_buildset(pull, record, chosen, decision.reason, decision.author_trusted)
        latency = (time.monotonic() - received) * 1000.0
        self.latencies_ms.append(latency)
        log.msg(
            f"bsdkm github: PR #{pull.number} head {pull.head_sha}: buildset {bsid} for "
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

    async def _add_buildset(
        self, pull: PullRequest, record: PrRecord, chosen: list[PrBuilder], reason: str,
        author_trusted: bool = False,
    ) -> int:
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
            # Every PR build carries these; the steps and the reporters read them back.
            PR_REPO_PROPERTY: (pull.repo, source),
            PR_NUMBER_PROPERTY: (pull.number, source),
            PR_HEAD_PROPERTY: (pull.head_sha, source),
            PR_URL_PROPERTY: (pull.html_url, source),
            PR_BASE_REF_PROPERTY: (pull.base_ref, source),
            PR_BASE_SHA_PROPERTY: (pull.base_sha, source),  # the perf gate builds it next to the head
            PR_TRIGGER_PROPERTY: (reason, source),
            PR_AUTHOR_TRUSTED_PROPERTY: (author_trusted, source),  # which workers may run it
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
        contexts = {b.name: b.context for b in chosen}
        names = {self._builder_ids[b.name]: b.name for b in chosen}
        record.buildsets[str(bsid)] = {
            "head": pull.head_sha,
            "requests": {str(brid): contexts[names[builderid]] for builderid, brid in brids.items()},
        }
        return bsid

    async def _builder_id(self, name: str) -> int:
        if name not in self._builder_ids:
            self._builder_ids[name] = await self.master.data.updates.findBuilderId(name)
        return self._builder_ids[name]

    def _buildset_url(self, bsid: int) -> str | None:
        base = getattr(self.master.config, "buildbotURL", None)
        return f"{base}#/buildsets/{bsid}" if base else None

    def _supersede(self, pull: PullRequest, record: PrRecord) -> None:
        """A new head makes every unfinished build of the PR's older heads pointless: cancel them."""
        old = {bsid: entry for bsid, entry in record.buildsets.items() if entry.get("head") != pull.head_sha}
        for bsid, entry in old.items():
            del record.buildsets[bsid]
            self._buildsets.pop(int(bsid), None)
            # Cancelling is the master's work, not the webhook's: GitHub does not wait for it.
            self._in_background(self._cancel_buildset(pull.repo, int(bsid), entry, pull.head_sha))

    async def _cancel_buildset(self, repo: str, bsid: int, entry: dict[str, Any], new_head: str) -> None:
        """Cancel the buildset's unfinished requests and resolve their pending statuses.

        Queued requests go in one claim + complete, running ones by Buildbot's own cancel (which
        stops the build). Cancelling request by request costs the master's single sqlite thread
        about six transactions each; under a burst of pushes that, not the hook, bounded throughput.
        """
        from buildbot.db.buildrequests import AlreadyClaimedError
        from buildbot.process.results import CANCELLED

        wanted = {int(brid): str(context) for brid, context in (entry.get("requests") or {}).items()}
        # After a restart the record may name requests that finished meanwhile: leave those alone.
        rows = await self.master.db.buildrequests.getBuildRequests(bsid=bsid)
        live = [_brid(r) for r in rows if _brid(r) in wanted and not _complete(r)]
        if not live:
            return
        reason = f"superseded by {new_head}"
        try:
            await self.master.db.buildrequests.claimBuildRequests(brids=live)
        except AlreadyClaimedError:
            for brid in live:  # some already run: stop those builds the standard way
                await self.master.data.control("cancel", {"reason": reason}, ("buildrequests", brid))
        else:
            await self.master.data.updates.completeBuildRequests(live, CANCELLED)
        log.msg(f"bsdkm github: cancelled {len(live)} request(s) of buildset {bsid}: {reason}")
        if self.settings.statuses:
            old_head = str(entry.get("head", ""))
            for brid in live:
                await self.publisher.post_status(
                    repo, old_head, wanted[brid], "error", reason, self._buildset_url(bsid)
                )

    def _buildset_complete(self, key: tuple[str, ...], msg: dict[str, Any]) -> None:
        entry = self._buildsets.pop(msg.get("bsid"), None)
        if entry is not None:
            self.coalescer.release(*entry)
            self._in_background(self._forget_buildset(entry[0], entry[1], int(msg["bsid"])))

    async def _forget_buildset(self, repo: str, number: int, bsid: int) -> None:
        async with self._pr(repo, number) as record:
            record.buildsets.pop(str(bsid), None)

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
        self._in_background(self.publisher.reply(decision.repo, decision.number, login, text))

    def _in_background(self, work: Any) -> None:
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


def parse_queued(item: Queued) -> Any:
    """The event of an inbox entry, parsed as the hook parsed it (``EventError`` if it is not one)."""
    payload = parse_body(item.body, item.content_type)
    if item.event == "pull_request":
        return parse_pull_request_event(payload)
    if item.event == "issue_comment":
        return parse_comment_event(payload)
    raise EventError(f"event '{item.event}' is not queued")


async def act_on(controller: Any, item: Queued, parsed: Any, *, superseded: bool = False,
                 queued_heads: frozenset[str] = frozenset()) -> Outcome | None:
    """One queued event: acted on once per delivery (``once_keys``), then by its kind.

    A replayed event (read back after a restart) may have been marked handled just before the
    master stopped, before its buildset was made: it is acted on again, and the PR's record, not
    the mark, keeps it from building twice.
    """
    for key in item.once_keys:
        first = await controller.first_delivery(key)
        if not first and not item.replayed:
            log.msg(f"bsdkm github: delivery {item.delivery} ({item.event}) was handled before: ignored")
            return None
    if item.event == "pull_request":
        outcome = await controller.on_pull_request(parsed, item.received, superseded=superseded,
                                                   replayed=item.replayed)
    else:
        outcome = await controller.on_comment(parsed, item.received, replayed=item.replayed,
                                              queued_heads=queued_heads)
    log.msg(f"bsdkm github: delivery {item.delivery} ({item.event}): {outcome.action}: {outcome.reason}")
    return outcome


def _queue_key(parsed: Any) -> tuple[str, int]:
    if isinstance(parsed, PullRequestEvent):
        return (parsed.pull.repo.lower(), parsed.pull.number)
    return (str(parsed.repo).lower(), int(parsed.issue_number))


def _newer_head_queued(parsed: Any, later: list[Any], acted: set[str]) -> bool:
    """Whether a PR event naming a newer head of the same PR waits behind ``parsed``: one that will
    build or wait for approval, either of which supersedes this head's build. Which head is newer is
    GitHub's to say (``head_order``); where it does not say, a head whose events were acted on
    already is an older one (a late or redelivered event). A draft builds nothing."""
    if not isinstance(parsed, PullRequestEvent) or parsed.action not in HEAD_ACTIONS:
        return False
    mark = HeadMark.of(parsed)
    for p in later:
        if not isinstance(p, PullRequestEvent) or p.action not in HEAD_ACTIONS or p.pull.draft:
            continue
        other = HeadMark.of(p)
        if other.head == mark.head or shown_later(mark, other):
            continue
        if shown_later(other, mark) or other.head not in acted:
            return True
    return False


def _heads_of(events: list[Any], newest: HeadMark = NO_HEAD) -> frozenset[str]:
    """The heads PR events among ``events`` name (those that build or wait for approval), less those
    GitHub showed before ``newest``, whose events will build nothing."""
    return frozenset(p.pull.head_sha for p in events
                     if isinstance(p, PullRequestEvent) and p.action in HEAD_ACTIONS and not p.pull.draft
                     and not shown_later(newest, HeadMark.of(p)))


def _record_mark(record: PrRecord) -> HeadMark:
    return HeadMark(record.head, record.head_seen_at, record.head_before)


def _unfinished_for(record: PrRecord, head: str, contexts: set[str]) -> bool:
    """Whether ``record`` holds an unfinished buildset of ``head`` for exactly these contexts."""
    for entry in record.buildsets.values():
        if entry.get("head") == head and set((entry.get("requests") or {}).values()) == contexts:
            return True
    return False


def _store_key(repo: str, number: int) -> str:
    return f"pr:{repo.lower()}#{number}"


def _brid(row: Any) -> int:
    return int(row["buildrequestid"] if isinstance(row, dict) else row.buildrequestid)


def _builderid(row: Any) -> int:
    return int(row["builderid"] if isinstance(row, dict) else row.builderid)


def _complete(row: Any) -> bool:
    return bool(row["complete"] if isinstance(row, dict) else row.complete)
