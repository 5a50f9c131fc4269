"""Trust as the controller applies it to events in the order they arrive, and what a stranger's
comment costs: a head is trusted only from its own push, and no PR is read from GitHub for a
comment whose author could not start anything anyway."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from github_fake import payloads
from test_gh_inbox import settled
from twisted.internet.task import Clock

from buildbot_bsdkm.github.controller import PrBuilder, PullRequestBuilds
from buildbot_bsdkm.github.events import parse_comment_event, parse_pull_request_event
from buildbot_bsdkm.github.settings import parse_settings
from buildbot_bsdkm.github.state_store import MemoryStore
from buildbot_bsdkm.github.trust import Action, ApprovalBook, TrustPolicy, decide_pull_request

REPO = "Codertocat/Hello-World"
H1, H2 = "1" * 40, "2" * 40
ENV = {"GITHUB_TOKEN": "t0ken", "BSDKM_WEBHOOK_SECRET": "s3cret"}


@dataclass
class FakeClient:
    """What the controller asks GitHub: the PR's current state."""

    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    asked: list[int] = field(default_factory=list)

    async def get_pull(self, repo: str, number: int) -> Any:
        self.asked.append(number)
        return SimpleNamespace(status=200, data=self.pulls[number], headers={})


@dataclass
class FakePublisher:
    client: FakeClient = field(default_factory=FakeClient)
    replies: list[str] = field(default_factory=list)

    async def reply(self, repo: str, number: int, login: str, body: str) -> bool:
        self.replies.append(body)
        return True

    async def post_status(self, *args: Any, **kw: Any) -> bool:
        return True



def controller() -> tuple[PullRequestBuilds, list[Any], FakePublisher]:
    settings = parse_settings({"repo": REPO}, env=ENV)
    publisher = FakePublisher()
    ctl = PullRequestBuilds(settings, [PrBuilder("userspace", "noasm", "userspace/noasm")],
                            publisher=publisher, store=MemoryStore())  # type: ignore[arg-type]
    ctl._reactor = lambda: Clock()  # type: ignore[method-assign]  # no master here
    built: list[Any] = []

    async def build(pull: Any, record: Any, decision: Any, *args: Any) -> Any:
        built.append(decision)
        return SimpleNamespace(action="build", reason=decision.reason)

    ctl._build = build  # type: ignore[method-assign]
    return ctl, built, publisher


def _pr(action: str, head: str, sender: str, at: str, before: str = "") -> Any:
    payload = payloads.pull_request(action, association="MEMBER", login="alice", sender=sender, head_sha=head,
                                    number=7, updated_at=at)
    if action == "synchronize":
        payload["before"], payload["after"] = before or "0" * 40, head
    return parse_pull_request_event(payload)


# --- a head without its own recorded push is unvetted ------------------------------------------


def test_a_push_by_a_stranger_arriving_after_ready_for_review_is_not_built_as_trusted() -> None:
    """Fails on the old code: ready_for_review took the PR's author as H2's pusher, so H2 built with
    author_trusted=True before mallory's push of it arrived. In GitHub's order H2 waits for approval."""
    ctl, built, publisher = controller()
    sync_h1 = _pr("synchronize", H1, "alice", "2026-12-02T10:00:00Z")
    ready_h2 = _pr("ready_for_review", H2, "alice", "2026-12-02T10:02:00Z")
    sync_h2 = _pr("synchronize", H2, "mallory", "2026-12-02T10:01:00Z", before=H1)
    assert settled(ctl.on_pull_request(sync_h1, 0.0)).action == "build"
    assert [d.author_trusted for d in built] == [True]
    assert settled(ctl.on_pull_request(ready_h2, 0.0)).action == Action.AWAIT_APPROVAL
    assert settled(ctl.on_pull_request(sync_h2, 0.0)).action == Action.AWAIT_APPROVAL
    assert len(built) == 1, [d.reason for d in built]  # H2 was never built
    assert not ctl.approvals.head_vetted(REPO, 7, H2)
    # A maintainer's retest does not vouch for it either; only an approval builds it.
    publisher.client.pulls[7] = payloads.pull_request("synchronize", association="MEMBER", login="alice",
                                                      head_sha=H2, number=7)["pull_request"]
    retest = parse_comment_event(payloads.issue_comment("retest this please", association="MEMBER",
                                                        login="maintainer", number=7))
    assert settled(ctl.on_comment(retest, 0.0)).action == Action.REPLY
    assert len(built) == 1


def test_ready_for_review_builds_a_head_whose_trusted_push_was_seen() -> None:
    ctl, built, _ = controller()
    settled(ctl.on_pull_request(_pr("synchronize", H2, "alice", "2026-12-02T10:01:00Z"), 0.0))
    assert settled(ctl.on_pull_request(_pr("ready_for_review", H2, "alice", "2026-12-02T10:02:00Z"), 0.0)
                ).action == "build"
    assert [d.author_trusted for d in built] == [True, True]


def test_the_heads_own_push_arriving_after_ready_for_review_builds_it() -> None:
    """The events of a trusted push, out of order: the push, when it comes, vets its head."""
    ctl, built, _ = controller()
    assert settled(ctl.on_pull_request(_pr("ready_for_review", H2, "alice", "2026-12-02T10:02:00Z"), 0.0)
                ).action == Action.AWAIT_APPROVAL
    assert settled(ctl.on_pull_request(_pr("synchronize", H2, "alice", "2026-12-02T10:01:00Z"), 0.0)
                ).action == "build"
    assert [d.author_trusted for d in built] == [True]


@pytest.mark.parametrize("action", ["reopened", "ready_for_review"])
def test_an_event_that_names_no_pusher_does_not_vet_a_head_never_seen_pushed(action: str) -> None:
    event = parse_pull_request_event(payloads.pull_request(action, association="MEMBER", login="alice"))
    decision = decide_pull_request(event, TrustPolicy.build(), ApprovalBook())
    assert decision.action == Action.AWAIT_APPROVAL and "saw no push" in decision.reason
    assert not decision.author_trusted


def test_a_trusted_push_does_not_clear_an_untrusted_push_of_the_same_head() -> None:
    book = ApprovalBook()
    book.saw_head(REPO, 7, H2, "2026-12-02T10:01:00Z", vetted=False)
    book.saw_head(REPO, 7, H2, "2026-12-02T10:01:00Z", vetted=True)
    assert not book.head_vetted(REPO, 7, H2) and book.pushed_untrusted(REPO, 7, H2)
    book.saw_head(REPO, 7, H1, "2026-12-02T10:02:00Z", vetted=None)  # a new head: starts afresh
    assert not book.head_vetted(REPO, 7, H1) and not book.pushed_untrusted(REPO, 7, H1)


# --- a stranger's comment costs no API call -----------------------------------------------------


def test_strangers_trigger_comments_read_no_pull_request() -> None:
    """Fails on the old code: the controller fetched the PR (GET /pulls/{n}) before it looked at who
    wrote the comment, so 100 strangers' "retest this please" made 100 API calls."""
    ctl, built, publisher = controller()
    for _ in range(100):
        comment = payloads.issue_comment("retest this please", association="NONE", login="drive-by",
                                         number=7)
        assert settled(ctl.on_comment(parse_comment_event(comment), 0.0)).action == Action.REPLY
    assert publisher.client.asked == [] and built == []
    assert len(publisher.replies) == 1 and "@drive-by" in publisher.replies[0]  # rate-limited replies
    # A trusted commenter's retest still reads the PR, once.
    opened = payloads.pull_request("opened", association="MEMBER", number=7)
    publisher.client.pulls[7] = opened["pull_request"]
    member = payloads.issue_comment("retest this please", association="MEMBER", login="maintainer", number=7)
    settled(ctl.on_comment(parse_comment_event(member), 0.0))
    assert publisher.client.asked == [7]
