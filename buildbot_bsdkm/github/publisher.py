"""Delivering statuses, the single PR report comment and replies, with nothing dropped.

Every delivery is written to the outbox before its first attempt, and then either reaches
GitHub (and leaves the outbox), or (transient failure) waits there for ``resend_pending``, or
(GitHub refused it: 4xx) is logged and dropped because re-sending it cannot succeed. A failure
of our own credentials is not GitHub refusing the report: it waits too (``CredentialsError``),
and the credentials' ``AuthHealth`` says so once for all of them.

Reports for one slot (a commit's status context, a PR's comment) go out one at a time, in the
order they were made; one still waiting when a newer one arrives is not sent at all, so a
retried ``queued`` can never land after ``building`` or the final state.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, task
from twisted.python import log

from .client import GitHubClient, GitHubError, Superseded
from .outbox import Delivery, Outbox
from .request_errors import CredentialsError
from .texts import REPORT_MARKER, STATUS_DESCRIPTION_LIMIT, short_description

__all__ = ["REPORT_MARKER", "STATUS_DESCRIPTION_LIMIT", "Publisher", "short_description"]


class Publisher:
    def __init__(self, client: GitHubClient, outbox: Outbox, bot_login: str | None = None) -> None:
        self.client = client
        self.outbox = outbox
        # Only a comment by this login is ours; anyone can paste the marker into theirs.
        self.bot_login = bot_login or outbox.bot_login
        self._comment_locks: dict[tuple[str, int], defer.DeferredLock] = {}
        self._slot_locks: dict[str, defer.DeferredLock] = {}
        self._latest: dict[str, Delivery] = {}  # slot -> the newest report made for it
        self.delivered = 0
        self.superseded = 0
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
            if delivery.key in self._latest:
                continue  # being delivered right now (or a newer one for its slot is)
            if await self._deliver(delivery):
                sent += 1
        return sent

    async def _deliver(self, delivery: Delivery) -> bool:
        key = delivery.key
        saved = self.outbox.keep(delivery)
        self._latest[key] = delivery
        lock = self._slot_locks.setdefault(key, defer.DeferredLock())
        await lock.acquire()
        try:
            if saved is not None:
                await saved  # write-ahead: a crash from here on re-sends it after the restart
            if self._latest.get(key) is not delivery:
                self.superseded += 1  # a newer report for this slot is queued behind us
                return True
            return await self._attempt(delivery)
        finally:
            if self._latest.get(key) is delivery:
                del self._latest[key]
            lock.release()
            if not lock.waiting:
                self._slot_locks.pop(key, None)

    async def _attempt(self, delivery: Delivery) -> bool:
        try:
            await self._send(delivery)
        except Superseded as e:
            self.superseded += 1
            log.msg(f"bsdkm github: {delivery.key}: {e}")
            return True
        except CredentialsError:
            return False  # kept; said once for every report by the credentials' AuthHealth
        except GitHubError as e:
            if e.transient:
                log.msg(f"bsdkm github: kept {delivery.key} for re-sending: {e}")
            else:
                self.outbox.discard(delivery)
                self.dropped.append(f"{delivery.key}: {e}")
                log.msg(f"bsdkm github: GitHub refused {delivery.key}, not re-sending: {e}")
            return False
        except Exception as e:  # a bug here must not kill the reporter; the report stays kept
            log.err(e, f"bsdkm github: unexpected error delivering {delivery.key}")
            return False
        self.outbox.discard(delivery)
        self.delivered += 1
        return True

    async def _send(self, delivery: Delivery) -> None:
        p = delivery.payload
        if delivery.kind == "status":
            await self.client.create_status(
                delivery.repo,
                p["sha"],
                p["state"],
                p["context"],
                p["description"],
                p.get("target_url"),
                still_wanted=lambda: self._latest.get(delivery.key) is delivery,
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
        """Edit our comment, or create it; a create whose answer was lost is checked, not repeated."""
        policy = self.client.policy
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._upsert_once(repo, number, body)
                return
            except _MaybeCreated as e:
                if attempt >= policy.max_attempts:
                    raise e.error from None
                log.msg(f"bsdkm github: comment on #{number}: {e.error}; looking for it before retrying")
                await task.deferLater(self.client.reactor, policy.backoff(attempt), lambda: None)

    async def _upsert_once(self, repo: str, number: int, body: str) -> None:
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
        # Not repeated inline on a lost answer: GitHub may have made the comment; the next attempt
        # looks for it first.
        try:
            created = await self.client.create_comment(repo, number, body, idempotent=False)
        except CredentialsError:
            raise  # nothing was carried out: no credentials, or GitHub refused them
        except GitHubError as e:
            if e.status is None or e.status >= 500:  # not a refusal, not a rate limit: maybe done
                raise _MaybeCreated(e) from None
            raise
        login = _login(created.data)
        if login and not self.bot_login:
            self.bot_login = login
            self.outbox.set_bot_login(login)
        self.outbox.set_comment_id(repo, number, _comment_id(created.data))

    async def _find_report_comment(self, repo: str, number: int) -> int | None:
        """Our comment from before a restart (or a lost answer), by its hidden marker and our login."""
        if not self.bot_login:
            login = await self.client.own_login()  # the App's bot, or the token's user
            if login:
                self.bot_login = login
                self.outbox.set_bot_login(login)
        if not self.bot_login:
            return None  # can't tell ours from a copy of the marker in someone else's comment
        for comment in await self.client.list_issue_comments(repo, number):
            if str(comment.get("body") or "").startswith(REPORT_MARKER) and (
                _login(comment).lower() == self.bot_login.lower()
            ):
                return _comment_id(comment)
        return None


class _MaybeCreated(Exception):
    """A create that got no answer (or a 5xx): GitHub may have made the comment anyway."""

    def __init__(self, error: GitHubError) -> None:
        super().__init__(str(error))
        self.error = error


def _login(data: Any) -> str:
    user = data.get("user") if isinstance(data, dict) else None
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else ""


def _comment_id(data: Any) -> int:
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise GitHubError("GitHub's comment response has no numeric 'id'", transient=True)
    return data["id"]
