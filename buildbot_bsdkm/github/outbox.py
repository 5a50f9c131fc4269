"""Reports GitHub has not accepted yet, and the id of each PR's report comment, on disk.

Write-ahead: every report is written here *before* its first attempt and removed once GitHub
accepted it, so a master killed in the middle of retries re-sends it after the restart (and a
report GitHub accepted is not sent again). Each slot keeps only the newest report (a late
``pending`` must never overwrite a delivered ``success``).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {
            "version": OUTBOX_VERSION,
            "pending": [asdict(d) for d in self._pending.values()],
            "comments": self._comment_ids,
            "bot_login": self.bot_login,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a crash mid-write leaves the previous outbox intact.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".outbox-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, self.path)

    def keep(self, delivery: Delivery) -> None:
        with self._lock:
            self._pending.pop(delivery.key, None)
            self._pending[delivery.key] = delivery
            self._save()

    def discard(self, delivery: Delivery) -> None:
        """Forget ``delivery`` once handled; a newer report kept in its slot meanwhile stays."""
        with self._lock:
            if self._pending.get(delivery.key) == delivery:
                del self._pending[delivery.key]
                self._save()

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
                self._save()

    def set_comment_id(self, repo: str, number: int, comment_id: int | None) -> None:
        with self._lock:
            if comment_id is None:
                self._comment_ids.pop(f"{repo}#{number}", None)
            else:
                self._comment_ids[f"{repo}#{number}"] = comment_id
            self._save()
