"""Accepted webhook events GitHub has been answered for but the master has not acted on yet, on disk.

The hook answers GitHub once an event is verified, parsed and written here; the controller then acts
on it (trust rules, buildsets, the database) and marks it done. A master killed in between acts on
it after the restart, so an answered event is never lost. The file is a journal: one JSON line
per event (``seq``, ``event``, ``delivery``, the raw body), then one ``{"done": seq}`` line once
acted on. Lines are appended and synced in one thread of their own, in order, so a slow disk
delays only the answer of the event being written, never the reactor; the file is rewritten with
only what is still pending when the master starts, and emptied whenever nothing is pending.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twisted.internet import defer, threads
from twisted.python import log
from twisted.python.threadpool import ThreadPool

INBOX_FILE = "github-inbox.jsonl"
COMPACT_BYTES = 4 * 1024 * 1024  # an emptied journal past this size is truncated


@dataclass(frozen=True)
class Queued:
    """One accepted event: what the hook verified, as the controller will act on it."""

    seq: int
    event: str  # X-GitHub-Event
    delivery: str  # X-GitHub-Delivery ("?" when none was sent)
    once_keys: tuple[str, ...]  # what marks it handled (hook._once_keys)
    body: bytes
    content_type: str | None
    received: float  # time.monotonic() when it arrived (this process) or was read back
    replayed: bool = False  # read back from the journal after a restart

    def to_line(self) -> str:
        return json.dumps({"seq": self.seq, "event": self.event, "delivery": self.delivery,
                           "keys": list(self.once_keys), "body": self.body.decode("latin-1"),
                           "content_type": self.content_type}) + "\n"

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], received: float) -> Queued:
        return cls(int(doc["seq"]), str(doc["event"]), str(doc["delivery"]),
                   tuple(str(k) for k in doc.get("keys") or ()), str(doc["body"]).encode("latin-1"),
                   doc.get("content_type"), received, replayed=True)


def read_journal(path: Path, received: float) -> list[Queued]:
    """The events of ``path`` not marked done, in order; a torn last line (a crash mid-write) is
    one whose answer GitHub never got, and is left out."""
    if not path.exists():
        return []
    pending: dict[int, Queued] = {}
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            try:
                doc = json.loads(line)
                if "done" in doc:
                    pending.pop(int(doc["done"]), None)
                else:
                    item = Queued.from_doc(doc, received)
                    pending[item.seq] = item
            except (ValueError, KeyError, TypeError) as e:
                log.msg(f"bsdkm github: {path}:{number}: unreadable inbox line left out ({type(e).__name__})")
    return [pending[seq] for seq in sorted(pending)]


class Inbox:
    """The journal at ``path`` (None: kept in memory only, as in tests)."""

    def __init__(self, path: str | os.PathLike[str] | None, reactor: Any = None) -> None:
        self.path = Path(path) if path is not None else None
        self.reactor = reactor
        self._next = 1
        self._pending: set[int] = set()
        self._file: Any = None
        self._pool: ThreadPool | None = None

    def start(self, reactor: Any, received: float) -> list[Queued]:
        """Open the journal; returns what a previous run left pending (to act on first)."""
        self.reactor = reactor
        if self.path is None:
            return []
        left = read_journal(self.path, received)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:  # only what is still pending
            for item in left:
                f.write(item.to_line())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")
        self._next = max((i.seq for i in left), default=0) + 1
        self._pending = {i.seq for i in left}
        self._pool = ThreadPool(1, 1, name="bsdkm-github-inbox")
        self._pool.start()
        return left

    def next_seq(self) -> int:
        seq, self._next = self._next, self._next + 1
        return seq

    def put(self, item: Queued) -> defer.Deferred[None]:
        """Write ``item``; fires once it is on disk (then the hook may answer)."""
        self._pending.add(item.seq)
        if self._file is None:
            return defer.succeed(None)
        return self._in_thread(self._append, item.to_line(), True)

    def done(self, seq: int) -> defer.Deferred[None]:
        """Mark ``seq`` acted on. Not synced: a mark lost in a crash makes the event act again after
        the restart, which the controller treats as a replay (nothing built twice)."""
        self._pending.discard(seq)
        if self._file is None:
            return defer.succeed(None)
        return self._in_thread(self._append, json.dumps({"done": seq}) + "\n", False, not self._pending)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _in_thread(self, fn: Any, *args: Any) -> defer.Deferred[None]:
        assert self._pool is not None
        return threads.deferToThreadPool(self.reactor, self._pool, fn, *args)

    def _append(self, line: str, sync: bool, empty: bool = False) -> None:
        self._file.write(line)
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())
        if empty and self._file.tell() > COMPACT_BYTES:
            # Nothing pending at the moment this mark was queued; this thread writes in order, so
            # an event put after it comes later and is written after the truncation.
            self._file.truncate(0)
            self._file.seek(0)

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.stop()  # runs what was queued first
            self._pool = None
        if self._file is not None:
            self._file.close()
            self._file = None
