"""What the GitHub service must remember across master restarts, kept in the master's database.

Approvals and the map of each PR's unfinished buildsets (``trust.PrRecord``), and the ids of
the webhook deliveries and comments already acted on (each is acted on at most once, even
when GitHub or an attacker re-posts it after a push). Stored through Buildbot's own
``object_state`` table (``master.db.state``), so it lives wherever the master's ``db_url``
points: sqlite by default, PostgreSQL when configured, and no extra schema to migrate.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

OBJECT_NAME = "bsdkm-github"
OBJECT_CLASS = "PullRequestBuilds"


class StateStore(Protocol):
    async def load(self, key: str) -> dict[str, Any] | None: ...

    async def save(self, key: str, doc: dict[str, Any]) -> None: ...

    async def first_time(self, key: str) -> bool:
        """Atomically mark ``key`` as seen; True only for the first caller ever."""
        ...


class MemoryStore:
    """For tests and for the pure rules: the same contract, forgotten on exit."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()

    async def load(self, key: str) -> dict[str, Any] | None:
        return self.docs.get(key)

    async def save(self, key: str, doc: dict[str, Any]) -> None:
        self.docs[key] = doc

    async def first_time(self, key: str) -> bool:
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


class BuildbotStateStore:
    """``StateStore`` over ``master.db.state`` (one object, one row per key)."""

    def __init__(self, master: Any) -> None:
        self.master = master
        self._objectid: int | None = None
        self._seen: set[str] = set()  # saves a database round trip for repeats in this process

    async def _object(self) -> int:
        if self._objectid is None:
            self._objectid = await self.master.db.state.getObjectId(OBJECT_NAME, OBJECT_CLASS)
        return self._objectid

    async def load(self, key: str) -> dict[str, Any] | None:
        value = await self.master.db.state.getState(await self._object(), key, None)
        return value if isinstance(value, dict) else None

    async def save(self, key: str, doc: dict[str, Any]) -> None:
        await self.master.db.state.setState(await self._object(), key, doc)

    async def first_time(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        token = uuid.uuid4().hex
        # The row is created by whoever gets there first; everyone else reads that one's token.
        stored = await self.master.db.state.atomicCreateState(await self._object(), key, lambda: token)
        return stored == token
