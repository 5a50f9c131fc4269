"""Buildbot change hook for GitHub: strict HMAC-SHA256, then PR events go to the controller.

Buildbot's stock ``GitHubEventHandler`` checks only ``X-Hub-Signature`` (SHA-1) and only when
a signature is sent. This subclass refuses unsigned, mis-signed, malformed and oversized
requests before parsing the body. A pull-request or comment event is answered once it is
verified, parsed and in the controller's inbox: the trust rules, the database and the buildsets
come after the answer, so GitHub's delivery never waits for them. Buildbot's change-hook
resource answers every refusal (a ValueError) with HTTP 400 and our message as the reason; the
log line names the delivery and the reason, never the secret.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

from buildbot.process.properties import Properties
from buildbot.www.hooks.github import GitHubEventHandler
from twisted.internet import defer
from twisted.python import log

from .events import EventError, parse_body, parse_comment_event, parse_pull_request_event
from .pr_queue import QUEUED_EVENTS
from .webhook_signature import (
    DEFAULT_MAX_BODY_BYTES,
    SIGNATURE_HEADER,
    SignatureError,
    check_size,
    verify_signature,
)

if TYPE_CHECKING:
    from twisted.web.server import Request

    from .controller import PullRequestBuilds


class WebhookRefused(ValueError):
    """Why a webhook request was refused (Buildbot turns a ValueError into HTTP 400)."""


class WebhookSecretUnavailable(RuntimeError):
    """The master cannot check signatures now (HTTP 500: GitHub shows the failure and can redeliver)."""


def _header(request: Request, name: str) -> str | None:
    value = request.getHeader(name)
    if value is None:
        return None
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = _header(request, "Content-Length")
    if declared is not None and declared.isdigit():
        check_size(int(declared), max_bytes)
    content = request.content
    if content is None:
        return b""
    content.seek(0, 2)
    check_size(content.tell(), max_bytes)
    content.seek(0)
    return content.read()


def _repository(payload: dict[str, Any]) -> str:
    repo = payload.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else ""


def _once_keys(event: str, delivery: str, body: bytes) -> list[str]:
    """What marks this delivery as handled: its id, whatever the event (GitHub re-sends a delivery
    with the same id on a timeout). A push is also known by its body: the signature covers only
    the body, so a replay under a new id is still that push (each real push has its own
    ``pushed_at`` and ``after``), and base-branch pushes build and record history."""
    keys = [delivery] if delivery != "?" else []
    if event == "push":
        keys.append("push-sha256:" + hashlib.sha256(body).hexdigest())
    return keys


class BsdkmGitHubEventHandler(GitHubEventHandler):
    """Pass as ``class`` in the ``github`` change-hook dialect (see ``services.github_services``)."""

    def __init__(
        self,
        secret: Any,
        strict: bool,
        *,
        controller: PullRequestBuilds,
        max_payload_bytes: int = DEFAULT_MAX_BODY_BYTES,
        **kwargs: Any,
    ) -> None:
        if not secret:
            raise ValueError("the bsdkm GitHub hook needs a webhook secret")
        super().__init__(secret, True, **kwargs)  # always strict, whatever the dialect says
        self.controller = controller
        self.max_payload_bytes = max_payload_bytes
        self.refused = 0

    @defer.inlineCallbacks
    def _render_secret(self) -> Any:
        p = Properties()
        p.master = self.master
        try:
            secret = yield p.render(self._secret)
        except KeyError as e:  # {secret: NAME} that no provider gives: ours to fix, not GitHub's (500)
            log.msg(f"bsdkm github: github.webhook_secret: {e.args[0] if e.args else e}; deliveries are "
                    "answered 500 until a secrets provider gives it")
            raise WebhookSecretUnavailable("the webhook secret is given by no secrets provider") from None
        return secret

    @defer.inlineCallbacks
    def process(self, request: Request) -> Any:
        received = time.monotonic()
        event = _header(request, "X-GitHub-Event") or ""
        delivery = _header(request, "X-GitHub-Delivery") or "?"
        try:
            secret = yield self._render_secret()
            body = _read_body(request, self.max_payload_bytes)
            verify_signature(
                secret, body, _header(request, SIGNATURE_HEADER), max_bytes=self.max_payload_bytes
            )
            payload = parse_body(body, _header(request, "Content-Type"))
        except (SignatureError, EventError) as e:
            self.refused += 1
            log.msg(f"bsdkm github: refused delivery {delivery} ({event or 'no event'}): {e}")
            raise WebhookRefused(f"refused: {e}") from None
        repo = _repository(payload)
        # (A payload without a repository is refused by the event parser, naming the field.)
        if event not in ("ping", "") and repo and not self.controller.accepts_repo(repo):
            self.refused += 1
            log.msg(f"bsdkm github: refused delivery {delivery} ({event}): repository {repo!r} is not served")
            raise WebhookRefused(f"refused: repository {repo!r} is not one this CI serves")
        if event in QUEUED_EVENTS:
            try:
                parsed = (parse_pull_request_event(payload) if event == "pull_request"
                          else parse_comment_event(payload))
            except EventError as e:
                self.refused += 1
                log.msg(f"bsdkm github: refused delivery {delivery} ({event}): {e}")
                raise WebhookRefused(f"refused: {e}") from None
            yield defer.ensureDeferred(self.controller.enqueue(
                event, delivery, _once_keys(event, delivery, body), body,
                _header(request, "Content-Type"), parsed, received))
            return [], "git"
        for key in _once_keys(event, delivery, body):
            first = yield defer.ensureDeferred(self.controller.first_delivery(key))
            if not first:
                log.msg(f"bsdkm github: delivery {delivery} ({event or 'no event'}) was handled before: "
                        "ignored")
                return [], "git"
        result = yield defer.ensureDeferred(self._dispatch(event, delivery, payload, received))
        return result

    async def _dispatch(
        self, event: str, delivery: str, payload: dict[str, Any], received: float
    ) -> tuple[list[dict[str, Any]], str]:
        try:
            if event == "ping":
                return [], "git"
            elif event == "push":
                return await defer.maybeDeferred(self.handle_push, payload, event)
            else:
                log.msg(f"bsdkm github: delivery {delivery}: event '{event}' is not used")
                return [], "git"
        except EventError as e:
            log.msg(f"bsdkm github: refused delivery {delivery} ({event}): {e}")
            raise WebhookRefused(f"refused: {e}") from None
