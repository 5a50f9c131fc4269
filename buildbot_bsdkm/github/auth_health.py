"""Whether GitHub takes the master's credentials: said once when it stops, once when it works again.

Every report goes through the same credentials, so while they fail every delivery fails the same
way; one line in the log (and one notice in the web UI, ``reporters``) says so, instead of one per
delivery and re-send. Reports are kept in the outbox meanwhile (``errors.CredentialsError``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from twisted.python import log


class AuthHealth:
    """Shared by every client of one set of credentials (``tokens.TokenSource.health``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.failing_since: float | None = None
        self.reason = ""
        self.failures = 0  # failed attempts since it last worked
        self._listeners: list[Callable[[AuthHealth], None]] = []

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def subscribe(self, listener: Callable[[AuthHealth], None]) -> None:
        """``listener(self)`` is called when auth starts failing and when it works again."""
        self._listeners.append(listener)

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.reason = reason
        if self.failing_since is not None:
            return
        self.failing_since = self._clock()
        log.msg(f"bsdkm github: GitHub auth is failing: {reason}. Statuses and comments are kept in the "
                "outbox and re-sent until it works again (said once)")
        self._tell()

    def worked(self) -> None:
        if self.failing_since is None:
            return
        failures, self.failing_since, self.failures, self.reason = self.failures, None, 0, ""
        log.msg(f"bsdkm github: GitHub auth works again, after {failures} failed attempt(s)")
        self._tell()

    def _tell(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception as e:  # noqa: BLE001 - a notice must never stop a delivery
                log.err(e, "bsdkm github: telling about GitHub auth failed")
