"""Which of two heads of a PR GitHub showed later, from what its events say.

Pushes of one PR reach the hook on separate connections, so they can arrive in the other order.
Taking arrival order for push order then builds the older head and cancels the newer one, and the
PR's newest head is never built. GitHub says the order itself: ``pull_request.updated_at`` moves
with every push (to the second), and a ``synchronize`` event names the head it replaced
(``before``). When neither decides, arrival order is all there is.
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import PullRequestEvent, parse_time


@dataclass(frozen=True)
class HeadMark:
    """A head as one event showed it."""

    head: str
    updated_at: str = ""  # GitHub's clock when the event was sent
    before: str = ""  # the head this push replaced (``synchronize`` only)

    @classmethod
    def of(cls, event: PullRequestEvent) -> HeadMark:
        return cls(event.pull.head_sha, event.pull.updated_at, event.before)


NO_HEAD = HeadMark("")  # a PR no event has shown a head of yet: no head is older than it


def shown_later(a: HeadMark, b: HeadMark) -> bool:
    """True when GitHub showed head ``a`` after head ``b``; False when it did not, or cannot say."""
    if not a.head or not b.head or a.head == b.head:
        return False
    at, bt = parse_time(a.updated_at), parse_time(b.updated_at)
    if at is not None and bt is not None and at != bt:
        return at > bt
    # The same second: the push chain decides, unless it says both ways (a head pushed back again).
    return a.before == b.head and b.before != a.head
