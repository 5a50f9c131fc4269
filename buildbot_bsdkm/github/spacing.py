"""GitHub writes one at a time, at least a second apart, per set of credentials.

GitHub's REST guidance against its secondary rate limits: make requests serially, not at once,
and leave at least one second between POST, PATCH, PUT or DELETE requests. A burst of finished
builds (a status per builder, the PR comment, replies) otherwise reaches GitHub as a burst, and a
secondary limit then stops every write of the installation for a minute or more. Reads are not
spaced, nor are the App's own token requests (they are what the writes need).

The wait is measured from the end of the previous write to the start of the next, on a clock
that tests replace (``clock``: any ``IReactorTime``, e.g. ``twisted.internet.task.Clock``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet import defer, task

MUTATIVE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
DEFAULT_WRITE_INTERVAL_S = 1.0  # GitHub's "at least one second between each request"


class WriteSpacing:
    """Shared by every client of one installation (``GitHubSettings.writes``)."""

    def __init__(self, interval_s: float = DEFAULT_WRITE_INTERVAL_S, clock: Any = None) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = defer.DeferredLock()
        self._last_end: float | None = None
        self.waits: list[float] = []  # how long each write waited for its turn (measurements, tests)

    def _reactor(self) -> Any:
        if self._clock is None:
            from twisted.internet import reactor

            return reactor
        return self._clock

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the installation's one write slot, once ``interval_s`` has passed since the last."""
        clock = self._reactor()
        await self._lock.acquire()
        try:
            if self._last_end is not None:
                wait = self._last_end + self.interval_s - clock.seconds()
                if wait > 0:
                    self.waits.append(wait)
                    await task.deferLater(clock, wait, lambda: None)
            yield
        finally:
            self._last_end = clock.seconds()
            self._lock.release()
