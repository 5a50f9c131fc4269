"""GitHub client, outbox and publisher against the loopback GitHub (OpenAPI-validated)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_fake import reactor_thread
from github_fake.server import FakeGitHub, Fault, served
from twisted.python import log

from buildbot_bsdkm.github.backoff import RetryPolicy, advise, rate_limit_wait
from buildbot_bsdkm.github.client import GitHubClient, GitHubError
from buildbot_bsdkm.github.outbox import Outbox, OutboxError
from buildbot_bsdkm.github.publisher import REPORT_MARKER, Publisher

REPO = "Codertocat/Hello-World"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
FAST = RetryPolicy(max_attempts=4, base_delay=0.05, max_delay=0.2, max_inline_wait=5.0)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with served() as fake:
        yield fake


@pytest.fixture
def logged() -> Iterator[list[str]]:
    lines: list[str] = []

    def observer(event: dict) -> None:
        lines.append(" ".join(str(m) for m in event.get("message", ())) + str(event.get("why") or ""))

    log.addObserver(observer)
    yield lines
    log.removeObserver(observer)


def _publisher(
    github: FakeGitHub, tmp_path: Path, policy: RetryPolicy = FAST, timeout: float = 5.0
) -> Publisher:
    client = GitHubClient(github.url, github.token, policy=policy, timeout=timeout)
    return Publisher(client, Outbox(tmp_path / "outbox.json"), bot_login="bsdkm-ci[bot]")


# --- pure retry advice -----------------------------------------------------------------------


def test_rate_limit_headers() -> None:
    assert rate_limit_wait(429, {"Retry-After": "7"}, now=0) == 7
    assert rate_limit_wait(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"}, now=990) == 11
    assert rate_limit_wait(403, {"X-RateLimit-Remaining": "12"}, now=0) is None  # a permission error
    assert rate_limit_wait(429, {}, now=0) == 60
    assert rate_limit_wait(500, {"Retry-After": "7"}, now=0) is None


def test_advice() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=1, max_delay=3)
    assert [advise(policy, n, 502, {}, 0).delay for n in (1, 2)] == [1, 2]
    assert not advise(policy, 3, 502, {}, 0).retry and advise(policy, 3, 502, {}, 0).transient
    assert not advise(policy, 1, 422, {}, 0).retry and not advise(policy, 1, 422, {}, 0).transient
    far = advise(policy, 1, 403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "4000"}, 0)
    assert not far.retry and far.transient  # too long to sleep inline: keep it instead
    assert advise(policy, 1, None, {}, 0, "timed out").retry


# --- statuses ---------------------------------------------------------------------------------


def test_status_is_posted_and_valid(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)
    ok = reactor_thread.run(
        lambda: pub.post_status(
            REPO, SHA, "bsdkm/userspace/noasm", "failure", "2 regressions", "http://ci/b/1"
        )
    )
    assert ok
    status = github.latest_statuses(SHA)["bsdkm/userspace/noasm"]
    assert (status["state"], status["description"], status["target_url"]) == (
        "failure",
        "2 regressions",
        "http://ci/b/1",
    )


def test_long_description_is_cut_to_githubs_limit(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "error", "x " * 200))
    assert len(github.latest_statuses(SHA)["bsdkm/a/b"]["description"]) == 140


def test_5xx_is_retried_with_backoff(github: FakeGitHub, tmp_path: Path) -> None:
    github.fail_next(Fault(502), Fault(503))
    pub = _publisher(github, tmp_path)
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
    assert [r.status for r in github.calls("POST", "/statuses/")] == [502, 503, 201]
    assert pub.client.sleeps == [0.05, 0.1]


def test_retry_after_is_honoured(github: FakeGitHub, tmp_path: Path) -> None:
    github.fail_next(Fault(429, {"Retry-After": "1"}, {"message": "secondary rate limit"}))
    pub = _publisher(github, tmp_path)
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
    calls = github.calls("POST", "/statuses/")
    assert [c.status for c in calls] == [429, 201]
    assert calls[1].at - calls[0].at >= 0.95


def test_primary_rate_limit_reset_is_honoured(github: FakeGitHub, tmp_path: Path) -> None:
    reset = int(time.time()) + 1
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}
    github.fail_next(Fault(403, headers, {"message": "API rate limit exceeded"}))
    pub = _publisher(github, tmp_path)
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
    calls = github.calls("POST", "/statuses/")
    assert [c.status for c in calls] == [403, 201]
    assert time.time() >= reset  # did not come back before the window reset


def test_timeout_is_retried(github: FakeGitHub, tmp_path: Path) -> None:
    github.fail_next(Fault(201, delay=1.5))
    pub = _publisher(github, tmp_path, timeout=0.5)
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "pending", "building"))
    assert github.latest_statuses(SHA)["bsdkm/a/b"]["state"] == "pending"
    assert pub.client.sleeps == [0.05]


def test_permission_error_is_not_retried_and_not_kept(
    github: FakeGitHub, tmp_path: Path, logged: list[str]
) -> None:
    github.fail_next(Fault(403, {}, {"message": "Resource not accessible by integration"}))
    pub = _publisher(github, tmp_path)
    assert not reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
    assert len(github.calls("POST")) == 1 and pub.outbox.pending() == []
    assert "Resource not accessible by integration" in pub.dropped[0]
    assert all(github.token not in line for line in logged)


def test_undeliverable_report_is_kept_on_disk_and_resent(
    github: FakeGitHub, tmp_path: Path, logged: list[str]
) -> None:
    github.fail_next(*[Fault(500) for _ in range(FAST.max_attempts)])
    pub = _publisher(github, tmp_path)
    assert not reactor_thread.run(
        lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "failure", "self-test failed: ECC")
    )
    assert github.latest_statuses(SHA) == {}
    saved = json.loads((tmp_path / "outbox.json").read_text())
    assert [d["payload"]["description"] for d in saved["pending"]] == ["self-test failed: ECC"]
    assert github.token not in (tmp_path / "outbox.json").read_text()

    # A restarted master reads the outbox back and delivers it once GitHub is healthy.
    restarted = Publisher(
        GitHubClient(github.url, github.token, policy=FAST), Outbox(tmp_path / "outbox.json")
    )
    assert reactor_thread.run(restarted.resend_pending) == 1
    assert github.latest_statuses(SHA)["bsdkm/a/b"]["description"] == "self-test failed: ECC"
    assert restarted.outbox.pending() == []
    assert all(github.token not in line for line in logged)
    assert any("kept status:" in line for line in logged)


def test_long_rate_limit_keeps_instead_of_sleeping(github: FakeGitHub, tmp_path: Path) -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)}
    github.fail_next(Fault(403, headers, {"message": "API rate limit exceeded"}))
    pub = _publisher(github, tmp_path)
    started = time.monotonic()
    assert not reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
    assert time.monotonic() - started < 2
    assert len(pub.outbox.pending()) == 1


def test_newest_status_wins_in_the_outbox(tmp_path: Path) -> None:
    from buildbot_bsdkm.github.outbox import Delivery

    box = Outbox(tmp_path / "o.json")
    box.keep(Delivery("status", REPO, {"sha": SHA, "context": "c", "state": "pending"}))
    box.keep(Delivery("status", REPO, {"sha": SHA, "context": "c", "state": "success"}))
    assert [d.payload["state"] for d in Outbox(tmp_path / "o.json").pending()] == ["success"]


def test_corrupt_outbox_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_text("{truncated")
    with pytest.raises(OutboxError, match="o.json: unreadable outbox"):
        Outbox(path)
    path.write_text(json.dumps({"version": 9, "pending": [], "comments": {}}))
    with pytest.raises(OutboxError, match="version 9"):
        Outbox(path)


def test_empty_token_is_refused() -> None:
    with pytest.raises(ValueError, match="token is empty"):
        GitHubClient("http://127.0.0.1:1", "")


# --- the single edited comment ---------------------------------------------------------------


def test_report_comment_is_created_once_then_edited(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)
    for n in range(3):
        assert reactor_thread.run(lambda n=n: pub.upsert_report(REPO, 2, f"report v{n}"))
    comments = github.comments_on(2)
    assert len(comments) == 1 and comments[0]["body"] == f"{REPORT_MARKER}\nreport v2"
    assert len(github.calls("POST", "/comments")) == 1 and len(github.calls("PATCH")) == 2


def test_concurrent_updates_still_make_one_comment(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)

    async def burst() -> list[bool]:
        from twisted.internet import defer

        ds = [defer.ensureDeferred(pub.upsert_report(REPO, 7, f"v{i}")) for i in range(10)]
        return list(await defer.gatherResults(ds))

    assert all(reactor_thread.run(burst))
    assert len(github.comments_on(7)) == 1


def test_lost_state_finds_the_comment_by_marker(github: FakeGitHub, tmp_path: Path) -> None:
    assert reactor_thread.run(lambda: _publisher(github, tmp_path / "a").upsert_report(REPO, 2, "first"))
    fresh = _publisher(github, tmp_path / "b")  # no outbox: e.g. a new master
    assert reactor_thread.run(lambda: fresh.upsert_report(REPO, 2, "second"))
    comments = github.comments_on(2)
    assert len(comments) == 1 and comments[0]["body"].endswith("second")


def test_deleted_comment_is_recreated(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)
    assert reactor_thread.run(lambda: pub.upsert_report(REPO, 2, "first"))
    with github.lock:
        github.comments.clear()
    assert reactor_thread.run(lambda: pub.upsert_report(REPO, 2, "second"))
    assert [c["body"].splitlines()[-1] for c in github.comments_on(2)] == ["second"]


def test_too_long_comment_is_refused_by_github_not_retried(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path)
    assert not reactor_thread.run(lambda: pub.upsert_report(REPO, 2, "x" * 70000))
    assert "maximum is 65536" in pub.dropped[0]


def test_client_error_carries_status(github: FakeGitHub) -> None:
    client = GitHubClient(github.url, github.token, policy=FAST)
    with pytest.raises(GitHubError, match="404") as info:
        reactor_thread.run(lambda: client.get_pull(REPO, 99))
    assert info.value.status == 404 and not info.value.transient


def test_comment_arrives_from_a_server_that_closes_every_connection(tmp_path: Path) -> None:
    # HTTP/1.0, the first two calls 502: the connection a pooled POST would reuse is already closed.
    fake = FakeGitHub(close_after_answer=True).start()
    try:
        fake.fail_next(Fault(502), Fault(502))
        pub = _publisher(fake, tmp_path)
        assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/a/b", "success", "ok"))
        for n in range(3):
            assert reactor_thread.run(lambda n=n: pub.upsert_report(REPO, 4, f"report v{n}"), timeout=60)
        comments = fake.comments_on(4)
        assert len(comments) == 1 and comments[0]["body"] == f"{REPORT_MARKER}\nreport v2"
        # Thirty creates in a row, each on a connection the server closes after answering.
        client = GitHubClient(fake.url, fake.token, policy=FAST)
        for i in range(30):
            made = reactor_thread.run(lambda i=i: client.create_comment(REPO, 5, f"n{i}", idempotent=False))
            assert made.status == 201
        assert len(fake.comments_on(5)) == 30
        assert fake.invalid == [] and fake.invalid_responses == []
    finally:
        fake.stop()
