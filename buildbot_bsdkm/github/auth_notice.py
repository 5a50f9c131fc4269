"""The web UI's notice that GitHub auth is failing: the PR builders' description, while it lasts.

Buildbot shows a builder's description at the top of its page ("Description: ..."); the PR builders
are the ones whose statuses and comments wait, so their pages are where an admin looks. The
description the builders had is put back once GitHub takes the credentials again (a reconfig also
puts back the configured one).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from twisted.internet import defer
from twisted.python import log

from .auth_health import AuthHealth


def notice_text(health: AuthHealth) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(health.failing_since or 0.0))
    return (f"GitHub auth is failing since {since}: {health.reason}. Statuses and comments are kept and "
            "re-sent until it works again; see the master's log.")


class BuilderNotice:
    """Shows ``AuthHealth``'s state on the named builders' pages."""

    def __init__(self, master: Any, builder_names: Iterable[str]) -> None:
        self.master = master
        self.builder_names = list(builder_names)
        self._before: dict[int, str | None] = {}  # builderid -> its description before the notice
        self._lock = defer.DeferredLock()
        self.shown: str | None = None

    def changed(self, health: AuthHealth) -> defer.Deferred[None]:
        text = notice_text(health) if health.failing else None
        d = self._lock.run(lambda: defer.ensureDeferred(self._show(text)))
        d.addErrback(log.err, "bsdkm github: the web UI's GitHub auth notice was not updated")
        return d

    async def _show(self, text: str | None) -> None:
        updates = self.master.data.updates
        for name in self.builder_names:
            builderid = await updates.findBuilderId(name)
            builder = await self.master.data.get(("builders", builderid))
            if not builder:
                continue
            if text is not None:
                self._before.setdefault(builderid, builder.get("description"))
                description = text
            elif builderid in self._before:
                description = self._before.pop(builderid)
            else:
                continue
            await updates.updateBuilderInfo(builderid, description, None, None, builder.get("projectid"),
                                            builder.get("tags") or [])
        self.shown = text
