"""GitHub writes one at a time and at least a second apart per installation (GitHub's guidance on
secondary rate limits), on a clock the test controls: nothing here sleeps for real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from github_fake import reactor_thread
from github_fake.server import FakeApp, FakeGitHub, served
from twisted.internet import defer
from twisted.internet.task import Clock

from buildbot_bsdkm.github.app_auth import AppTokens
from buildbot_bsdkm.github.backoff import RetryPolicy
from buildbot_bsdkm.github.client import GitHubClient
from buildbot_bsdkm.github.settings import parse_settings
from buildbot_bsdkm.github.spacing import WriteSpacing

REPO = "Codertocat/Hello-World"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
FAST = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.1)


def test_writes_wait_a_second_after_the_previous_one_ended() -> None:
    clock = Clock()
    spacing = WriteSpacing(1.0, clock=clock)
    log: list[tuple[str, float]] = []

    async def write(name: str, takes: float) -> None:
        async with spacing.turn():
            log.append((f"{name} starts", clock.seconds()))
            if takes:
                d: defer.Deferred[None] = defer.Deferred()
                clock.callLater(takes, d.callback, None)
                await d
            log.append((f"{name} ends", clock.seconds()))

    done = [defer.ensureDeferred(write(n, t)) for n, t in (("a", 0.3), ("b", 0.0), ("c", 0.0))]
    assert log == [("a starts", 0.0)]  # one at a time: b and c wait
    clock.advance(0.3)
    assert log[-1] == ("a ends", 0.3)
    clock.advance(0.99)
    assert len(log) == 2  # not yet a second after a ended
    clock.advance(0.01)
    assert log[2:] == [("b starts", 1.3), ("b ends", 1.3)]
    clock.advance(1.0)
    assert log[4:] == [("c starts", 2.3), ("c ends", 2.3)]
    assert all(d.called for d in done)
    assert spacing.waits == pytest.approx([1.0, 1.0])
    clock.advance(5.0)
    before = len(spacing.waits)
    defer.ensureDeferred(write("d", 0.0))
    assert log[-1] == ("d ends", 7.3) and len(spacing.waits) == before  # long after: no wait


class CountingSpacing(WriteSpacing):
    def __init__(self) -> None:
        super().__init__(0.0)
        self.turns = 0

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        self.turns += 1
        async with super().turn():
            yield


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with served() as fake:
        yield fake


def test_the_client_spaces_its_writes_only(github: FakeGitHub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    github.install_app(FakeApp(key.public_key()))
    spacing = CountingSpacing()
    client = GitHubClient(github.url, AppTokens("4242", key, REPO, installation_id=31337), policy=FAST,
                          spacing=spacing)

    def run(make: Any) -> Any:
        return reactor_thread.run(make)

    run(lambda: client.create_status(REPO, SHA, "pending", "bsdkm/x", "queued", None))
    assert spacing.turns == 1  # the status; not the App's token request before it
    assert len(github.calls("POST", "/access_tokens")) == 1
    created = run(lambda: client.create_comment(REPO, 3, "hello"))
    run(lambda: client.update_comment(REPO, created.data["id"], "hello again"))
    assert spacing.turns == 3
    run(lambda: client.list_issue_comments(REPO, 3))
    assert spacing.turns == 3  # reads are not spaced


def test_the_interval_is_a_second_unless_configured() -> None:
    env = {"GITHUB_TOKEN": "t", "BSDKM_WEBHOOK_SECRET": "s"}
    assert parse_settings({"repo": "a/b"}, env=env).writes.interval_s == 1.0
    assert parse_settings({"repo": "a/b", "write_interval_s": 2.5}, env=env).writes.interval_s == 2.5
    settings = parse_settings({"repo": "a/b"}, env=env)
    assert settings.writes is settings.writes  # one slot per installation, shared by its clients
