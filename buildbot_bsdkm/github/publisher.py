"""Delivering statuses, the single PR report comment and replies, with nothing dropped.

Every delivery either reaches GitHub, or (transient failure) waits in the outbox for
``resend_pending``, or (GitHub refused it: 4xx) is logged and dropped because re-sending
the same request cannot succeed.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.python import log

from .client import GitHubClient, GitHubError
from .outbox import Delivery, Outbox

REPORT_MARKER = "<!-- bsdkm-ci:pr-report -->"
STATUS_DESCRIPTION_LIMIT = 140  # GitHub answers 422 above this


def short_description(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= STATUS_DESCRIPTION_LIMIT else line[: STATUS_DESCRIPTION_LIMIT - 1] + "…"


class Publisher:
    def __init__(self, client: GitHubClient, outbox: Outbox) -> None:
        self.client = client
        self.outbox = outbox
        self._comment_locks: dict[tuple[str, int], defer.DeferredLock] = {}
        self.delivered = 0
        self.dropped: list[str] = []

    async def post_status(
        self, repo: str, sha: str, context: str, state: str, description: str, target_url: str | None = None
    ) -> bool:
        payload = {
            "sha": sha,
            "context": context,
            "state": state,
            "description": short_description(description),
            "target_url": target_url,
        }
        return await self._deliver(Delivery("status", repo, payload))

    async def upsert_report(self, repo: str, number: int, body: str) -> bool:
        """Create the PR's report comment once; edit it afterwards."""
        if not body.startswith(REPORT_MARKER):
            body = f"{REPORT_MARKER}\n{body}"
        return await self._deliver(Delivery("comment", repo, {"number": number, "body": body}))

    async def reply(self, repo: str, number: int, login: str, body: str) -> bool:
        return await self._deliver(Delivery("reply", repo, {"number": number, "login": login, "body": body}))

    async def resend_pending(self) -> int:
        """Try every kept delivery once more; returns how many got through."""
        sent = 0
        for delivery in self.outbox.pending():
            if await self._deliver(delivery):
                sent += 1
        return sent

    async def _deliver(self, delivery: Delivery) -> bool:
        try:
            await self._send(delivery)
        except GitHubError as e:
            if e.transient:
                self.outbox.keep(delivery)
                log.msg(f"bsdkm github: kept {delivery.key} for re-sending: {e}")
            else:
                self.outbox.discard(delivery)
                self.dropped.append(f"{delivery.key}: {e}")
                log.msg(f"bsdkm github: GitHub refused {delivery.key}, not re-sending: {e}")
            return False
        except Exception as e:  # a bug here must not kill the reporter; keep the report instead
            self.outbox.keep(delivery)
            log.err(e, f"bsdkm github: unexpected error delivering {delivery.key}")
            return False
        self.outbox.discard(delivery)
        self.delivered += 1
        return True

    async def _send(self, delivery: Delivery) -> None:
        p = delivery.payload
        if delivery.kind == "status":
            await self.client.create_status(
                delivery.repo, p["sha"], p["state"], p["context"], p["description"], p.get("target_url")
            )
        elif delivery.kind == "comment":
            await self._locked_upsert(delivery.repo, p["number"], p["body"])
        elif delivery.kind == "reply":
            await self.client.create_comment(delivery.repo, p["number"], p["body"])
        else:
            raise GitHubError(f"unknown delivery kind {delivery.kind!r}")

    async def _locked_upsert(self, repo: str, number: int, body: str) -> None:
        # Two builders finishing together must not both create "the" comment.
        lock = self._comment_locks.setdefault((repo, number), defer.DeferredLock())
        await lock.acquire()
        try:
            await self._upsert(repo, number, body)
        finally:
            lock.release()

    async def _upsert(self, repo: str, number: int, body: str) -> None:
        comment_id = self.outbox.comment_id(repo, number)
        if comment_id is None:
            comment_id = await self._find_report_comment(repo, number)
        if comment_id is not None:
            try:
                await self.client.update_comment(repo, comment_id, body)
                self.outbox.set_comment_id(repo, number, comment_id)
                return
            except GitHubError as e:
                if e.status != 404:
                    raise
                self.outbox.set_comment_id(repo, number, None)  # someone deleted it: start afresh
        created = await self.client.create_comment(repo, number, body)
        self.outbox.set_comment_id(repo, number, _comment_id(created.data))

    async def _find_report_comment(self, repo: str, number: int) -> int | None:
        """Our comment from before a restart (or a lost outbox), found by its hidden marker."""
        for comment in await self.client.list_issue_comments(repo, number):
            if str(comment.get("body") or "").startswith(REPORT_MARKER):
                return _comment_id(comment)
        return None


def _comment_id(data: Any) -> int:
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise GitHubError("GitHub's comment response has no numeric 'id'", transient=True)
    return data["id"]
