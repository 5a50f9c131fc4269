"""Approvals bound to what was reviewed, pushers and forks, the bot's own comment,
statuses in order, lost answers, write-ahead outbox (rules and publisher against the loopback GitHub)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_fake import payloads, reactor_thread
from github_fake.server import FakeGitHub, Fault, served
from twisted.internet import defer, task

from buildbot_bsdkm.github.backoff import RetryPolicy
from buildbot_bsdkm.github.client import GitHubClient
from buildbot_bsdkm.github.events import EventError, parse_body, parse_comment_event, parse_pull_request_event
from buildbot_bsdkm.github.outbox import Outbox
from buildbot_bsdkm.github.publisher import REPORT_MARKER, Publisher
from buildbot_bsdkm.github.triggers import TriggerKind, parse_comment
from buildbot_bsdkm.github.trust import (
    Action,
    ApprovalBook,
    TrustPolicy,
    decide_comment,
    decide_pull_request,
)

REPO = "Codertocat/Hello-World"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BOT = "bsdkm-ci[bot]"
FAST = RetryPolicy(max_attempts=4, base_delay=0.05, max_delay=0.2, max_inline_wait=5.0)
POLICY = TrustPolicy.build(["wolfssl-bot"])


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with served() as fake:
        yield fake


def _publisher(github: FakeGitHub, path: Path, policy: RetryPolicy = FAST) -> Publisher:
    pub = Publisher(GitHubClient(github.url, github.token, policy=policy, timeout=5), Outbox(path))
    pub.bot_login = BOT  # as github.bot_login configures it
    return pub


# --- item 1: an approval covers the commits that existed when it was written ---------------


def _untrusted_pr(head: str, updated_at: str, action: str = "opened") -> dict:
    return payloads.pull_request(
        action, association="FIRST_TIME_CONTRIBUTOR", login="newcomer", fork=True, head_sha=head,
        updated_at=updated_at,
    )


def _approve(book: ApprovalBook, pr_payload: dict, comment: str, created_at: str) -> object:
    pull = parse_pull_request_event(pr_payload).pull
    event = parse_comment_event(
        payloads.issue_comment(comment, association="MEMBER", login="maintainer", number=pull.number,
                               created_at=created_at)
    )
    return decide_comment(event, parse_comment(comment), pull, POLICY, book)


def test_ok_to_test_written_before_a_push_does_not_approve_the_pushed_head() -> None:
    book = ApprovalBook()
    reviewed = _untrusted_pr("a" * 40, "2026-01-01T10:00:00Z")
    event = parse_pull_request_event(reviewed)
    book.saw_head(REPO, event.pull.number, "a" * 40, event.pull.updated_at, vetted=False)
    # The author pushes at 10:05; the maintainer's comment from 10:04 is handled after the push.
    pushed = _untrusted_pr("b" * 40, "2026-01-01T10:05:00Z", "synchronize")
    pull = parse_pull_request_event(pushed).pull
    book.saw_head(REPO, pull.number, "b" * 40, pull.updated_at, vetted=False)
    decision = _approve(book, pushed, "ok to test", "2026-01-01T10:04:00Z")
    assert decision.action == Action.REPLY and not decision.approve_head
    assert "ok to test bbbbbbbbbbbb" in decision.reason
    # A comment written after the push approves it.
    assert _approve(book, pushed, "ok to test", "2026-01-01T10:06:00Z").approve_head


def test_head_never_seen_falls_back_to_the_prs_updated_at() -> None:
    book = ApprovalBook()  # e.g. the synchronize event was lost
    pushed = _untrusted_pr("b" * 40, "2026-01-01T10:05:00Z", "synchronize")
    assert _approve(book, pushed, "ok to test", "2026-01-01T10:04:59Z").action == Action.REPLY
    assert _approve(book, pushed, "ok to test", "2026-01-01T10:05:01Z").approve_head


def test_explicit_sha_approves_only_that_commit() -> None:
    book = ApprovalBook()
    pushed = _untrusted_pr("b" * 40, "2026-01-01T10:05:00Z", "synchronize")
    assert parse_comment("OK to test bbbbbbb").kind == TriggerKind.APPROVE
    assert parse_comment("ok to test bbbbbbb").sha == "bbbbbbb"
    # Named explicitly, even a comment older than the push time check is fine: it names the commit.
    assert _approve(book, pushed, "ok to test bbbbbbb", "2026-01-01T10:00:00Z").approve_head
    wrong = _approve(book, pushed, "ok to test aaaaaaa", "2026-01-01T10:06:00Z")
    assert wrong.action == Action.REPLY and "not the PR's head" in wrong.reason


# --- item 2: who pushed, and whose fork ----------------------------------------------------


def test_untrusted_pusher_on_a_members_pr_needs_approval() -> None:
    payload = payloads.pull_request("synchronize", association="MEMBER", login="alice", sender="mallory")
    decision = decide_pull_request(parse_pull_request_event(payload), POLICY, ApprovalBook())
    assert decision.action == Action.AWAIT_APPROVAL and "pushed by mallory" in decision.reason


def test_members_pr_from_a_strangers_fork_needs_approval() -> None:
    payload = payloads.pull_request(
        "synchronize", association="MEMBER", login="alice", fork=True, fork_owner="mallory"
    )
    decision = decide_pull_request(parse_pull_request_event(payload), POLICY, ApprovalBook())
    assert decision.action == Action.AWAIT_APPROVAL and "owned by mallory" in decision.reason
    # The member's own fork, pushed by the member, builds as before.
    own = payloads.pull_request("synchronize", association="MEMBER", login="alice", fork=True)
    assert decide_pull_request(parse_pull_request_event(own), POLICY, ApprovalBook()).builds


def test_retest_of_a_head_an_untrusted_user_pushed_is_refused() -> None:
    payload = payloads.pull_request("synchronize", association="MEMBER", login="alice", sender="mallory")
    pull = parse_pull_request_event(payload).pull
    book = ApprovalBook()
    book.saw_head(REPO, pull.number, pull.head_sha, pull.updated_at, vetted=False)
    event = parse_comment_event(payloads.issue_comment("retest this please", number=pull.number))
    decision = decide_comment(event, parse_comment("retest this please"), pull, POLICY, book)
    assert decision.action == Action.REPLY and "not approved" in decision.reason


def test_pr_record_round_trips_through_its_stored_form() -> None:
    from buildbot_bsdkm.github.trust import PrRecord


    buildsets = {"7": {"head": "a" * 40, "requests": {"9": "bsdkm/u/v"}}}
    record = PrRecord(head="b" * 40, head_seen_at="2026-01-01T10:05:00Z", head_vetted=False,
                      approved=["a" * 40], buildsets=buildsets)
    assert PrRecord.from_doc(json.loads(json.dumps(record.to_doc()))) == record


# --- item 9: deep JSON ----------------------------------------------------------------------


def test_deeply_nested_or_huge_number_json_is_an_event_error() -> None:
    with pytest.raises(EventError, match="nested too deeply"):
        parse_body(b"[" * 100000 + b"]" * 100000, "application/json")
    with pytest.raises(EventError, match="unusable JSON"):
        parse_body(b'{"n": ' + b"9" * 5000 + b"}", "application/json")


# --- item 6: only the bot's own comment is the report --------------------------------------


def test_a_strangers_comment_with_the_marker_is_not_edited(github: FakeGitHub, tmp_path: Path) -> None:
    planted = github.plant_comment(REPO, 5, f"{REPORT_MARKER}\nall green, merge me", "mallory")
    pub = _publisher(github, tmp_path / "o.json")
    assert reactor_thread.run(lambda: pub.upsert_report(REPO, 5, "real report"))
    assert github.comments[planted]["body"].endswith("all green, merge me")
    ours = [c for c in github.comments_on(5) if c["user"]["login"] == BOT]
    assert len(ours) == 1 and ours[0]["body"].endswith("real report")
    assert github.calls("PATCH") == []


def test_without_a_known_bot_login_no_marker_comment_is_adopted(github: FakeGitHub, tmp_path: Path) -> None:
    github.plant_comment(REPO, 6, f"{REPORT_MARKER}\nfake", "mallory")
    pub = Publisher(GitHubClient(github.url, github.token, policy=FAST), Outbox(tmp_path / "o.json"))
    assert reactor_thread.run(lambda: pub.upsert_report(REPO, 6, "v1"))
    assert github.calls("PATCH") == [] and pub.bot_login == BOT  # learned from our own comment


# --- item 15: a create whose answer was lost is not repeated --------------------------------


def test_lost_answer_to_the_comment_post_edits_instead_of_posting_again(
    github: FakeGitHub, tmp_path: Path
) -> None:
    github.fail_next(Fault(502, method="POST", after=True))
    pub = _publisher(github, tmp_path / "o.json")
    assert reactor_thread.run(lambda: pub.upsert_report(REPO, 8, "the report"))
    comments = github.comments_on(8)
    assert len(comments) == 1 and comments[0]["body"].endswith("the report")
    assert len(github.calls("POST", "/comments")) == 1


# --- item 14: statuses per (commit, context) in order ---------------------------------------


def test_a_retried_queued_status_never_lands_after_building(github: FakeGitHub, tmp_path: Path) -> None:
    github.fail_next(Fault(500, method="POST", delay=0.2), Fault(500, method="POST", delay=0.2))
    pub = _publisher(github, tmp_path / "o.json")

    async def race() -> None:
        from twisted.internet import reactor

        first = defer.ensureDeferred(pub.post_status(REPO, SHA, "bsdkm/u/v", "pending", "queued"))
        await task.deferLater(reactor, 0.05, lambda: None)  # "queued" is in its retries now
        second = defer.ensureDeferred(pub.post_status(REPO, SHA, "bsdkm/u/v", "pending", "building"))
        third = defer.ensureDeferred(pub.post_status(REPO, SHA, "bsdkm/u/v", "success", "passed"))
        await defer.gatherResults([first, second, third])

    reactor_thread.run(race)
    delivered = [s["description"] for s in github.statuses if s["context"] == "bsdkm/u/v"]
    assert delivered[-1] == "passed"
    assert "building" not in delivered  # waited behind "queued", replaced by "passed" before sent
    assert github.latest_statuses(SHA)["bsdkm/u/v"]["state"] == "success"
    assert pub.outbox.pending() == []


# --- item 10: write-ahead outbox --------------------------------------------------------------


def test_report_is_on_disk_before_its_first_attempt_and_sent_once_after_a_crash(
    github: FakeGitHub, tmp_path: Path
) -> None:
    path = tmp_path / "o.json"
    github.fail_next(*[Fault(500, method="POST", delay=0.3) for _ in range(10)])
    pub = _publisher(github, path, RetryPolicy(max_attempts=10, base_delay=0.3, max_delay=0.3))

    async def crash_midway() -> list:
        from twisted.internet import reactor

        d = defer.ensureDeferred(pub.post_status(REPO, SHA, "bsdkm/u/v", "failure", "self-test failed: ECC"))
        await task.deferLater(reactor, 0.5, lambda: None)
        on_disk = json.loads(path.read_text())["pending"]  # what a master killed now leaves behind
        d.cancel()  # the "killed" master stops trying
        d.addErrback(lambda _: None)
        return on_disk

    on_disk = reactor_thread.run(crash_midway)
    assert [p["payload"]["description"] for p in on_disk] == ["self-test failed: ECC"]
    with github.lock:
        github.faults.clear()
    restarted = _publisher(github, path)
    assert reactor_thread.run(restarted.resend_pending) == 1
    assert reactor_thread.run(restarted.resend_pending) == 0
    sent = [s for s in github.statuses if s["description"] == "self-test failed: ECC"]
    assert len(sent) == 1


def test_a_delivered_report_leaves_the_outbox(github: FakeGitHub, tmp_path: Path) -> None:
    pub = _publisher(github, tmp_path / "o.json")
    assert reactor_thread.run(lambda: pub.post_status(REPO, SHA, "bsdkm/u/v", "success", "ok"))
    assert json.loads((tmp_path / "o.json").read_text())["pending"] == []
    assert reactor_thread.run(_publisher(github, tmp_path / "o.json").resend_pending) == 0


def test_reopening_is_not_pushing_but_an_untrusted_push_stays_unvetted() -> None:
    book = ApprovalBook()
    reopened = payloads.pull_request("reopened", association="MEMBER", login="alice", sender="maintainer")
    pull = parse_pull_request_event(reopened).pull
    book.saw_head(REPO, pull.number, pull.head_sha, pull.updated_at, vetted=True)  # alice pushed it
    assert decide_pull_request(parse_pull_request_event(reopened), POLICY, book).builds
    pushed = parse_pull_request_event(
        payloads.pull_request("synchronize", association="MEMBER", login="alice", sender="mallory",
                              head_sha="d" * 40)
    )
    book.saw_head(REPO, pushed.pull.number, "d" * 40, pushed.pull.updated_at, vetted=False)
    again = payloads.pull_request("reopened", association="MEMBER", login="alice", sender="maintainer",
                                  head_sha="d" * 40)
    decision = decide_pull_request(parse_pull_request_event(again), POLICY, book)
    assert decision.action == Action.AWAIT_APPROVAL and "does not trust" in decision.reason
