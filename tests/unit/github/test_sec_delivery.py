"""Every webhook delivery is handled once, whatever its event: a re-POSTed push builds nothing more."""

from __future__ import annotations

import io
from typing import Any

from github_fake import payloads
from twisted.internet import defer

from buildbot_bsdkm.github.hook import BsdkmGitHubEventHandler
from buildbot_bsdkm.github.inbox import Queued
from buildbot_bsdkm.github.pr_queue import act_on
from buildbot_bsdkm.github.state_store import MemoryStore
from buildbot_bsdkm.github.webhook_signature import sign

SECRET = "It's a Secret to Everybody"


class Controller:
    def __init__(self) -> None:
        self.store = MemoryStore()
        self.events: list[str] = []

    def accepts_repo(self, repo: str) -> bool:
        return True

    async def first_delivery(self, delivery: str) -> bool:
        return await self.store.first_time(f"delivery:{delivery}")

    async def on_pull_request(self, event: Any, received: float, **_: Any) -> Any:
        self.events.append("pull_request")
        return type("Outcome", (), {"action": "build", "reason": "test"})()

    async def enqueue(self, event: str, delivery: str, once_keys: list[str], body: bytes,
                      content_type: str | None, parsed: Any, received: float) -> Queued:
        # What the real controller does with a queued event, acted on at once here.
        item = Queued(1, event, delivery, tuple(once_keys), body, content_type, received)
        await act_on(self, item, parsed)
        return item


class Request:
    def __init__(self, event: str, body: bytes, delivery: str | None) -> None:
        self.content = io.BytesIO(body)
        self.headers = {"X-GitHub-Event": event, "Content-Type": "application/json",
                        "X-Hub-Signature-256": sign(SECRET, body), "Content-Length": str(len(body))}
        if delivery is not None:
            self.headers["X-GitHub-Delivery"] = delivery

    def getHeader(self, name: str) -> str | None:
        return self.headers.get(name)


class Handler(BsdkmGitHubEventHandler):
    def __init__(self) -> None:
        super().__init__(SECRET, True, controller=Controller())
        self.pushes = 0

    def handle_push(self, payload: dict[str, Any], event: str) -> Any:
        self.pushes += 1  # Buildbot's own turns it into changes, which start a buildset
        return defer.succeed(([{"revision": payload.get("after")}], "git"))


def post(handler: Handler, event: str, body: bytes, delivery: str | None) -> Any:
    results: list[Any] = []
    handler.process(Request(event, body, delivery)).addBoth(results.append)
    assert len(results) == 1  # everything above is synchronous
    if isinstance(results[0], Exception) or hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


def push_body(after: str = "a" * 40) -> bytes:
    push = payloads.example("push")
    push["after"] = after
    return payloads.encode(push)


def test_a_replayed_push_delivery_builds_once() -> None:
    handler = Handler()
    body = push_body()
    changes, _ = post(handler, "push", body, "d-1")
    assert changes and handler.pushes == 1
    assert post(handler, "push", body, "d-1") == ([], "git")  # byte for byte, same delivery id
    assert handler.pushes == 1


def test_a_replayed_push_under_a_new_or_no_delivery_id_builds_once() -> None:
    # The signature covers the body only: an id can be made up, the body cannot.
    handler = Handler()
    body = push_body()
    post(handler, "push", body, "d-1")
    post(handler, "push", body, "d-2")
    post(handler, "push", body, None)
    assert handler.pushes == 1
    post(handler, "push", push_body("b" * 40), "d-3")  # another push builds
    assert handler.pushes == 2


def test_every_event_is_handled_once_per_delivery_id() -> None:
    handler = Handler()
    body = payloads.encode(payloads.pull_request())
    post(handler, "pull_request", body, "d-9")
    post(handler, "pull_request", body, "d-9")
    assert handler.controller.events == ["pull_request"]
