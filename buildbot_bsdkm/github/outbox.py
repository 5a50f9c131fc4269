"""Reports GitHub has not accepted yet, and the id of each PR's report comment, on disk.

Write-ahead: every report is written here *before* its first attempt and removed once GitHub
accepted it, so a master killed in the middle of retries re-sends it after the restart (and a
report GitHub accepted is not sent again). Each slot keeps only the newest report (a late
``pending`` must never overwrite a delivered ``success``).

On the master the file is written in a thread of its own (``start_writer``): it holds every report
not yet accepted, so under a burst of webhooks one write takes long enough to matter to the
reactor, and writes asked for while one is waiting are made as one. ``keep`` then returns a
Deferred that fires once a write holding the report is on disk; without a writer (the Action's
commands, tests) every change is written at once and nothing is returned.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Twisted only where the master's writer thread runs: the Action's `comment` keeps an outbox too,
# and in the FreeBSD VM bsdkm-ci is installed without Twisted.
if TYPE_CHECKING:
    from twisted.internet import defer
    from twisted.python.threadpool import ThreadPool

OUTBOX_VERSION = 1


class OutboxError(ValueError):
    """The outbox file exists but cannot be read back."""


@dataclass(frozen=True)
class Delivery:
    kind: str  # "status" | "comment" | "reply"
    repo: str
    payload: dict[str, Any]

    @property
    def key(self) -> str:
        if self.kind == "status":
            return f"status:{self.repo}:{self.payload['sha']}:{self.payload['context']}"
        if self.kind == "comment":
            return f"comment:{self.repo}:{self.payload['number']}"
        return f"reply:{self.repo}:{self.payload['number']}:{self.payload['login'].lower()}"


class Outbox:
    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._pending: dict[str, Delivery] = {}
        self._comment_ids: dict[str, int] = {}
        self.bot_login: str | None = None  # the login our comments are made under, once seen
        self._writer: ThreadPool | None = None
        self._reactor: Any = None
        self._queued: defer.Deferred[None] | None = None  # the write asked for and not begun yet
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("version") != OUTBOX_VERSION:
                raise OutboxError(f"{path}: outbox version {doc.get('version')!r} is not {OUTBOX_VERSION}")
            for item in doc["pending"]:
                delivery = Delivery(kind=item["kind"], repo=item["repo"], payload=item["payload"])
                self._pending[delivery.key] = delivery
            self._comment_ids = {str(k): int(v) for k, v in doc["comments"].items()}
            login = doc.get("bot_login")
            self.bot_login = str(login) if login else None
        except OutboxError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise OutboxError(f"{path}: unreadable outbox ({type(e).__name__}: {e})") from None

    def start_writer(self, reactor: Any) -> None:
        """Write the file in a thread of its own from now on (the master's services call this)."""
        if self.path is None or self._writer is not None:
            return
        from twisted.python.threadpool import ThreadPool

        self._reactor = reactor
        self._writer = ThreadPool(1, 1, name="bsdkm-github-outbox")
        self._writer.start()

    def stop_writer(self) -> None:
        """Finish the writes asked for, then write in the caller's thread again."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.stop()

    def _save(self) -> defer.Deferred[None] | None:
        """Called with the lock held."""
        if self.path is None:
            return None
        if self._writer is None:
            self._write(self._doc())
            return None
        if self._queued is None:
            from twisted.internet import defer

            self._queued = defer.Deferred()
            self._writer.callInThread(self._write_queued)
        return self._queued

    def _write_queued(self) -> None:
        from twisted.python.failure import Failure

        with self._lock:  # held for the copy only: the reactor keeps and discards meanwhile
            done, self._queued = self._queued, None
            doc = self._doc()
        try:
            self._write(doc)
            outcome: Any = None
        except Exception:  # noqa: BLE001 - handed to whoever waits for the write
            outcome = Failure()
        assert done is not None
        fire = done.errback if isinstance(outcome, Failure) else done.callback
        self._reactor.callFromThread(fire, outcome)

    def _doc(self) -> dict[str, Any]:
        return {
            "version": OUTBOX_VERSION,
            "pending": [asdict(d) for d in self._pending.values()],
            "comments": dict(self._comment_ids),
            "bot_login": self.bot_login,
        }

    def _write(self, doc: dict[str, Any]) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a crash mid-write leaves the previous outbox intact.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".outbox-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, self.path)

    def keep(self, delivery: Delivery) -> defer.Deferred[None] | None:
        """Keep ``delivery``; with a writer, the Deferred fires once it is on disk."""
        with self._lock:
            self._pending.pop(delivery.key, None)
            self._pending[delivery.key] = delivery
            return self._save()

    def discard(self, delivery: Delivery) -> None:
        """Forget ``delivery`` once handled; a newer report kept in its slot meanwhile stays.
        Not waited for: a discard lost in a crash re-sends a report GitHub takes twice alike."""
        with self._lock:
            if self._pending.get(delivery.key) == delivery:
                del self._pending[delivery.key]
                self._quiet(self._save())

    def holds(self, delivery: Delivery) -> bool:
        with self._lock:
            return self._pending.get(delivery.key) == delivery

    def pending(self) -> list[Delivery]:
        with self._lock:
            return list(self._pending.values())

    def comment_id(self, repo: str, number: int) -> int | None:
        with self._lock:
            return self._comment_ids.get(f"{repo}#{number}")

    def set_bot_login(self, login: str) -> None:
        with self._lock:
            if login and login != self.bot_login:
                self.bot_login = login
                self._quiet(self._save())

    def set_comment_id(self, repo: str, number: int, comment_id: int | None) -> None:
        with self._lock:
            if comment_id is None:
                self._comment_ids.pop(f"{repo}#{number}", None)
            else:
                self._comment_ids[f"{repo}#{number}"] = comment_id
            self._quiet(self._save())

    @staticmethod
    def _quiet(saved: defer.Deferred[None] | None) -> None:
        """A write nobody waits for: its failure is logged, not left unhandled."""
        if saved is not None:
            from twisted.python import log

            saved.addErrback(lambda f: log.err(f, "bsdkm github: outbox not written"))
