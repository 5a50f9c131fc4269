"""Coalescing duplicate triggers and superseding old heads of a PR.

A key is (repo, PR, head commit, selected builders). While a build for a key is pending,
further identical triggers are dropped; a push (new head) forgets every key of the old head
so the new head always builds, and an old head seen again afterwards (a late or redelivered
event) is not built again. ``max_pending_seconds`` bounds how long a key whose release
was lost (master restart, cancelled build) keeps blocking retests.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

PendingKey = tuple[str, int, str, Hashable]


@dataclass
class Coalescer:
    max_pending_seconds: float = 6 * 3600.0
    _pending: dict[PendingKey, float] = field(default_factory=dict)
    _head: dict[tuple[str, int], str] = field(default_factory=dict)
    _stale: set[tuple[str, int, str]] = field(default_factory=set)

    def claim(self, repo: str, number: int, head_sha: str, scope: Hashable, now: float) -> bool:
        """True when this trigger should build; False when an identical build is already pending."""
        if (repo, number, head_sha) in self._stale:
            return False
        self._supersede(repo, number, head_sha)
        key = (repo, number, head_sha, scope)
        started = self._pending.get(key)
        if started is not None and now - started < self.max_pending_seconds:
            return False
        self._pending[key] = now
        return True

    def release(self, repo: str, number: int, head_sha: str) -> int:
        """The builds for this head finished: later triggers build again. Returns keys released."""
        keys = [k for k in self._pending if k[:3] == (repo, number, head_sha)]
        for key in keys:
            del self._pending[key]
        return len(keys)

    def pending(self, repo: str, number: int) -> list[PendingKey]:
        return [k for k in self._pending if k[:2] == (repo, number)]

    def _supersede(self, repo: str, number: int, head_sha: str) -> None:
        if self._head.get((repo, number)) == head_sha:
            return
        previous = self._head.get((repo, number))
        if previous is not None:
            self._stale.add((repo, number, previous))
        self._head[(repo, number)] = head_sha
        for key in [k for k in self._pending if k[:2] == (repo, number) and k[2] != head_sha]:
            del self._pending[key]
