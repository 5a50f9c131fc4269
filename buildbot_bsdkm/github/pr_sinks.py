"""The report's GitHub sinks: its commit statuses and the PR's one comment, through the publisher.

Both shells deliver through these (the Buildbot reporter and ``bsdkm-ci action status``), so the
publisher's write-ahead outbox, retries and ordering hold for either. What they deliver is the
core's (``report/pull_request.py``); nothing is rendered here.
"""

from __future__ import annotations

from collections.abc import Collection

from ..report.pull_request import PullRequestReport
from ..report.sinks import PullRequestRef
from .publisher import Publisher


class CommitStatuses:
    """The report's statuses on the PR's head; ``contexts``: only those (None: every one)."""

    def __init__(self, publisher: Publisher, contexts: Collection[str] | None = None) -> None:
        self.publisher = publisher
        self.contexts = contexts

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        delivered = True
        for s in report.statuses:
            if self.contexts is None or s.context in self.contexts:
                sent = await self.publisher.post_status(where.repo, where.head, s.context, s.state,
                                                        s.description, s.url or where.url)
                delivered = bool(sent) and delivered
        return delivered


class PullRequestComment:
    """The PR's one report comment, created once and edited afterwards."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        if where.number is None:
            return True  # no PR: nothing to comment on
        return bool(await self.publisher.upsert_report(where.repo, where.number, report.body))
