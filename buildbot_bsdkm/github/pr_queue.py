"""The per-PR event queue: accepted webhook events, acted on one PR at a time, in arrival order.

The hook (``hook.py``) answers GitHub as soon as an event is verified, parsed and written to the
inbox (``inbox.py``); the queue acts on it afterwards, so the answer never waits for the database.
Each PR's events are acted on one at a time, in the order they arrived; a push whose PR has a newer
head queued behind it builds nothing (that build would be superseded at once), and neither does one
GitHub shows older than a head already acted on (``head_order``: pushes can arrive out of order).
What to do with an event is the controller's (``controller.py``); an event answered but not acted on
stays in the inbox and is queued again after a restart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer
from twisted.python import log

from .events import (
    EventError,
    PullRequestEvent,
    parse_body,
    parse_comment_event,
    parse_pull_request_event,
)
from .head_order import NO_HEAD, HeadMark, shown_later
from .inbox import Queued

QUEUED_EVENTS = ("pull_request", "issue_comment")  # acted on after the answer (the rest: before it)
HEAD_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review")  # a PR event naming a new head



@dataclass(frozen=True)
class Outcome:
    """What the hook did with one event, for the HTTP answer and the log."""

    action: str
    reason: str
    buildset: int | None = None


# Acts on one event: (item, parsed, superseded, queued_heads).
Act = Callable[[Queued, Any, bool, frozenset[str]], Awaitable[Any]]


class PrEventQueue:
    """Every PR's queued events, each PR's drained in order by one background task."""

    def __init__(self, act: Act, newest: Callable[[Any], HeadMark], done: Callable[[int], Any],
                 in_background: Callable[[Any], None]) -> None:
        self._act = act
        self._newest = newest  # the newest head acted on for an event's PR
        self._done = done  # the inbox's mark that an event was acted on
        self._in_background = in_background
        self._queues: dict[tuple[str, int], deque[tuple[Queued, Any]]] = {}  # per PR, in arrival order
        self._acted: dict[int, defer.Deferred[None]] = {}  # inbox seq -> fires once acted on
        self.acted_heads: dict[tuple[str, int], set[str]] = {}  # heads whose PR events were acted on
        self.stopping = False  # what is still queued stays in the inbox for the next start

    def schedule(self, item: Queued, parsed: Any) -> defer.Deferred[None]:
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

    def saw_head(self, repo: str, number: int, head: str) -> None:
        self.acted_heads.setdefault((repo.lower(), number), set()).add(head)

    async def _drain(self, key: tuple[str, int], queue: deque[tuple[Queued, Any]]) -> None:
        try:
            while queue and not self.stopping:
                item, parsed = queue[0]
                newer = [p for _, p in list(queue)[1:]]
                try:
                    superseded = _newer_head_queued(parsed, newer, self.acted_heads.get(key, set()))
                    queued = _heads_of(newer, self._newest(parsed))
                    await self._act(item, parsed, superseded, queued)
                except Exception as e:  # noqa: BLE001 - one event's bug must not stop its PR's queue
                    log.err(e, f"bsdkm github: delivery {item.delivery} ({item.event}) failed")
                queue.popleft()
                self._in_background(self._done(item.seq))
                acted = self._acted.pop(item.seq, None)
                if acted is not None and not acted.called:
                    acted.callback(None)
        finally:
            if not queue and self._queues.get(key) is queue:
                del self._queues[key]

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())


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
