"""Where a PR's report goes: a sink is one small class that delivers a ``PullRequestReport``.

The report is rendered once (``report/pull_request.py``); a sink only delivers it: the commit
statuses and the PR comment (``github/pr_sinks.py``, through the publisher both shells share), the
Action's job summary and annotations (``commands/action/summary_sinks.py``). A new place to report to is
one more class with ``deliver``; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from .pull_request import PullRequestReport


@dataclass(frozen=True)
class PullRequestRef:
    """Which PR and commit a report is about."""

    repo: str  # owner/name
    head: str  # the commit its statuses go on
    number: int | None = None  # None: no PR (a push's run), so no comment
    url: str | None = None  # where a status links when its pair has no link of its own


class ReportSink(Protocol):
    """Delivers a PR's report to one place."""

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        """True once it got there; False when it is kept to be sent again or was refused (said)."""
        ...


async def deliver(report: PullRequestReport, where: PullRequestRef, sinks: Iterable[ReportSink]) -> bool:
    """Every sink in turn, each whatever the others did; True when all of them got there."""
    delivered = True
    for sink in sinks:
        delivered = await sink.deliver(report, where) and delivered
    return delivered
