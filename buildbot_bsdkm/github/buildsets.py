"""The buildset manager: a PR head's buildset made in the master, found again after a restart,
cancelled when a newer head supersedes it, and forgotten once complete.

The buildset is added directly (no Change, so the master's generic branch scheduler does not also
build it, and a per-variant retest builds only that variant). Which builds a PR has is part of its
record in the master's database (``PrRecord.buildsets``), so a restart neither loses an unfinished
buildset nor builds its head again. The controller (``controller.py``) decides whether to build;
this says what building, superseding and finishing do in Buildbot.
"""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from buildbot.db.buildrequests import AlreadyClaimedError
from buildbot.process.results import CANCELLED
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
from .coalesce import Coalescer
from .events import PullRequest
from .pr_queue import Outcome
from .publisher import Publisher
from .settings import GitHubSettings
from .triggers import Trigger, selected_builders
from .trust import PrRecord, TrustDecision

SCHEDULER_NAME = "github-pr"


@dataclass(frozen=True)
class PrBuilder:
    target: str
    variant: str
    name: str  # Buildbot builder name

    @property
    def context(self) -> str:
        return status_context(self.target, self.variant)


class BuildsetOwner(Protocol):
    """What the manager needs of the service it works for (``controller.PullRequestBuilds``)."""

    master: Any
    settings: GitHubSettings
    builders: list[PrBuilder]
    publisher: Publisher

    def in_background(self, work: Any) -> None: ...

    def pr_record(self, repo: str, number: int) -> AbstractAsyncContextManager[PrRecord]: ...


class PrBuildsets:
    """The PR buildsets of one master, by buildset id, and the builders' ids."""

    def __init__(self, owner: BuildsetOwner) -> None:
        self.owner = owner
        self.coalescer = Coalescer()
        self.latencies_ms: list[float] = []
        self._buildsets: dict[int, tuple[str, int, str]] = {}  # bsid -> (repo, PR, head)
        self._builder_ids: dict[str, int] = {}
        # After a restart with events left: the PR buildsets already in the database, unfinished, by
        # (repo, PR, head). A replayed event may have made one and been killed before its PR's
        # record was saved.
        self._unfinished: dict[tuple[str, int, str], list[int]] = {}

    def known(self, repo: str, number: int, record: PrRecord) -> None:
        """The buildsets a PR's record (read from the database) names, to be forgotten once complete."""
        for bsid, entry in record.buildsets.items():
            self._buildsets[int(bsid)] = (repo, number, str(entry.get("head", "")))

    async def find_unfinished(self) -> None:
        master = self.owner.master
        try:
            for bs in await master.db.buildsets.getBuildsets(complete=False):
                props = await master.db.buildsets.getBuildsetProperties(bs.bsid)
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
        contexts = {await self._builder_id(b.name): b.context for b in self.owner.builders}
        for bsid in bsids:
            if str(bsid) in record.buildsets:
                continue
            rows = await self.owner.master.db.buildrequests.getBuildRequests(bsid=bsid)
            record.buildsets[str(bsid)] = {"head": pull.head_sha, "requests": {
                str(_brid(r)): contexts.get(_builderid(r), "") for r in rows}}
            self._buildsets[bsid] = (pull.repo, pull.number, pull.head_sha)
        return bool(bsids)

    def selected(self, trigger: Trigger | None) -> list[PrBuilder]:
        builders = self.owner.builders
        if trigger is None:
            return list(builders)
        wanted = set(selected_builders(trigger, [(b.target, b.variant) for b in builders]))
        return [b for b in builders if (b.target, b.variant) in wanted]

    async def build(self, pull: PullRequest, record: PrRecord, decision: TrustDecision,
                    trigger: Trigger | None, received: float, replayed: bool = False) -> Outcome:
        chosen = self.selected(trigger)
        if not chosen:
            return Outcome("ignore", "no configured builder matches the request")
        scope = tuple(sorted(b.name for b in chosen))
        self.supersede(pull, record)
        pending = f"a build of PR #{pull.number} head {pull.head_sha[:12]} is already pending"
        if replayed and await self._adopt(pull, record):
            return Outcome("coalesced", pending)
        if _unfinished_for(record, pull.head_sha, {b.context for b in chosen}):
            # The record outlives a restart, the coalescer does not: an event acted on again after
            # one (or redelivered under a new id) finds the buildset it made.
            return Outcome("coalesced", pending)
        if not self.coalescer.claim(pull.repo, pull.number, pull.head_sha, scope, time.monotonic()):
            return Outcome("coalesced", pending)
        bsid = await self._add(pull, record, chosen, decision.reason, decision.author_trusted)
        latency = (time.monotonic() - received) * 1000.0
        self.latencies_ms.append(latency)
        log.msg(
            f"bsdkm github: PR #{pull.number} head {pull.head_sha}: buildset {bsid} for "
            f"{len(chosen)} builder(s), {latency:.1f} ms after the webhook arrived ({decision.reason})"
        )
        if self.owner.settings.statuses:
            for builder in chosen:
                self.owner.in_background(self.owner.publisher.post_status(
                    pull.repo, pull.head_sha, builder.context, "pending", "queued", self.url(bsid)))
        return Outcome("build", decision.reason, bsid)

    async def _add(self, pull: PullRequest, record: PrRecord, chosen: list[PrBuilder], reason: str,
                   author_trusted: bool = False) -> int:
        builderids = [await self._builder_id(b.name) for b in chosen]
        sourcestamp = {
            "codebase": "",
            "repository": self.owner.settings.clone_url,
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
        bsid, brids = await self.owner.master.data.updates.addBuildset(
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
            self._builder_ids[name] = await self.owner.master.data.updates.findBuilderId(name)
        return self._builder_ids[name]

    def url(self, bsid: int) -> str | None:
        base = getattr(self.owner.master.config, "buildbotURL", None)
        return f"{base}#/buildsets/{bsid}" if base else None

    def supersede(self, pull: PullRequest, record: PrRecord) -> None:
        """A new head makes every unfinished build of the PR's older heads pointless: cancel them."""
        old = {bsid: entry for bsid, entry in record.buildsets.items() if entry.get("head") != pull.head_sha}
        for bsid, entry in old.items():
            del record.buildsets[bsid]
            self._buildsets.pop(int(bsid), None)
            # Cancelling is the master's work, not the webhook's: GitHub does not wait for it.
            self.owner.in_background(self._cancel(pull.repo, int(bsid), entry, pull.head_sha))

    async def _cancel(self, repo: str, bsid: int, entry: dict[str, Any], new_head: str) -> None:
        """Cancel the buildset's unfinished requests and resolve their pending statuses.

        Queued requests go in one claim + complete, running ones by Buildbot's own cancel (which
        stops the build). Cancelling request by request costs the master's single sqlite thread
        about six transactions each; under a burst of pushes that, not the hook, bounded throughput.
        """
        master = self.owner.master
        wanted = {int(brid): str(context) for brid, context in (entry.get("requests") or {}).items()}
        # After a restart the record may name requests that finished meanwhile: leave those alone.
        rows = await master.db.buildrequests.getBuildRequests(bsid=bsid)
        live = [_brid(r) for r in rows if _brid(r) in wanted and not _complete(r)]
        if not live:
            return
        reason = f"superseded by {new_head}"
        try:
            await master.db.buildrequests.claimBuildRequests(brids=live)
        except AlreadyClaimedError:
            for brid in live:  # some already run: stop those builds the standard way
                await master.data.control("cancel", {"reason": reason}, ("buildrequests", brid))
        else:
            await master.data.updates.completeBuildRequests(live, CANCELLED)
        log.msg(f"bsdkm github: cancelled {len(live)} request(s) of buildset {bsid}: {reason}")
        if self.owner.settings.statuses:
            old_head = str(entry.get("head", ""))
            for brid in live:
                await self.owner.publisher.post_status(repo, old_head, wanted[brid], "error", reason,
                                                       self.url(bsid))

    def complete(self, key: tuple[str, ...], msg: dict[str, Any]) -> None:
        """Buildbot's message that a buildset completed: its PR may build that head again."""
        entry = self._buildsets.pop(msg.get("bsid"), None)  # type: ignore[arg-type]
        if entry is not None:
            self.coalescer.release(*entry)
            self.owner.in_background(self._forget(entry[0], entry[1], int(msg["bsid"])))

    async def _forget(self, repo: str, number: int, bsid: int) -> None:
        async with self.owner.pr_record(repo, number) as record:
            record.buildsets.pop(str(bsid), None)


def _unfinished_for(record: PrRecord, head: str, contexts: set[str]) -> bool:
    """Whether ``record`` holds an unfinished buildset of ``head`` for exactly these contexts."""
    for entry in record.buildsets.values():
        if entry.get("head") == head and set((entry.get("requests") or {}).values()) == contexts:
            return True
    return False


def _brid(row: Any) -> int:
    return int(row["buildrequestid"] if isinstance(row, dict) else row.buildrequestid)


def _builderid(row: Any) -> int:
    return int(row["builderid"] if isinstance(row, dict) else row.builderid)


def _complete(row: Any) -> bool:
    return bool(row["complete"] if isinstance(row, dict) else row.complete)
