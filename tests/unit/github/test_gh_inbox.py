"""The hook answers GitHub before the master acts on an event, and loses none it answered.

A pull-request or comment event is verified, parsed and written to the inbox journal, then
answered; the controller acts on it afterwards, one PR's events in order. These tests: the answer
does not wait for the database; the journal gives back what was not acted on, in order, and a
torn last line is left out; a PR head already built is not built again when its event is acted
on a second time (after a restart); a push with a newer head of its PR queued behind it builds
nothing, and a late event of an older head does not stop the newer one.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from github_fake import payloads
from twisted.internet import defer
from twisted.internet.task import Clock

from buildbot_bsdkm.github.buildsets import _unfinished_for
from buildbot_bsdkm.github.controller import PrBuilder, PullRequestBuilds, _store_key
from buildbot_bsdkm.github.events import parse_comment_event, parse_pull_request_event
from buildbot_bsdkm.github.hook import BsdkmGitHubEventHandler
from buildbot_bsdkm.github.inbox import Inbox, Queued, read_journal
from buildbot_bsdkm.github.pr_queue import _newer_head_queued
from buildbot_bsdkm.github.settings import parse_settings
from buildbot_bsdkm.github.state_store import MemoryStore
from buildbot_bsdkm.github.trust import PrRecord
from buildbot_bsdkm.github.webhook_signature import sign

SECRET = "s3cret"
ENV = {"GITHUB_TOKEN": "t0ken", "BSDKM_WEBHOOK_SECRET": SECRET}


class StuckStore:
    """The master's database, far behind: nothing it is asked ever completes."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def first_time(self, key: str) -> bool:
        self.asked.append(key)
        return await defer.Deferred()

    async def load(self, key: str) -> dict[str, Any] | None:
        return await defer.Deferred()

    async def save(self, key: str, doc: dict[str, Any]) -> None:
        await defer.Deferred()


class Request:
    def __init__(self, event: str, body: bytes, delivery: str) -> None:
        self.content = io.BytesIO(body)
        self.headers = {"X-GitHub-Event": event, "Content-Type": "application/json",
                        "X-Hub-Signature-256": sign(SECRET, body), "Content-Length": str(len(body)),
                        "X-GitHub-Delivery": delivery}

    def getHeader(self, name: str) -> str | None:  # noqa: N802 - Twisted's name
        return self.headers.get(name)


def controller(store: Any, clock: Clock | None = None) -> PullRequestBuilds:
    settings = parse_settings({"repo": "Codertocat/Hello-World"}, env=ENV)
    ctl = PullRequestBuilds(settings, [PrBuilder("userspace", "noasm", "userspace/noasm")],
                            publisher=None, store=store)  # type: ignore[arg-type]
    ctl._reactor = lambda: clock or Clock()  # type: ignore[method-assign]  # no master here
    return ctl


def test_the_hook_answers_while_the_database_is_still_busy() -> None:
    """Fails on the old code: the answer waited for the delivery's mark in the database, which here
    never comes."""
    store, clock = StuckStore(), Clock()
    hook = BsdkmGitHubEventHandler(SECRET, True, controller=controller(store, clock))
    body = payloads.encode(payloads.pull_request("synchronize", head_sha="a" * 40, association="MEMBER"))
    answers: list[Any] = []
    hook.process(Request("pull_request", body, "d-1")).addBoth(answers.append)
    assert answers == []  # an idle master would have acted by now and answered
    clock.advance(0.5)  # github.answer_within_s
    assert answers == [([], "git")]
    assert store.asked == ["delivery:d-1"]  # acted on after the answer, and still waiting there
    assert hook.controller.queued == 1


def test_a_malformed_event_is_still_refused_before_the_answer() -> None:
    hook = BsdkmGitHubEventHandler(SECRET, True, controller=controller(StuckStore()))
    doc = payloads.pull_request("synchronize")
    del doc["pull_request"]["head"]
    answers: list[Any] = []
    hook.process(Request("pull_request", payloads.encode(doc), "d-2")).addBoth(answers.append)
    assert "refused" in str(answers[0].value), answers
    assert hook.controller.queued == 0


def _item(seq: int, head: str) -> Queued:
    body = payloads.encode(payloads.pull_request("synchronize", head_sha=head))
    return Queued(seq, "pull_request", f"d-{seq}", (f"d-{seq}",), body, "application/json", 0.0)


def test_the_journal_gives_back_what_was_not_acted_on_in_order(tmp_path: Path) -> None:
    path = tmp_path / "github-inbox.jsonl"
    lines = [_item(1, "a" * 40).to_line(), _item(2, "b" * 40).to_line(), json.dumps({"done": 1}) + "\n",
             _item(3, "c" * 40).to_line(), _item(4, "d" * 40).to_line()[:50]]  # the last: torn by a crash
    path.write_text("".join(lines))
    left = read_journal(path, 7.0)
    assert [i.seq for i in left] == [2, 3] and all(i.replayed and i.received == 7.0 for i in left)
    assert left[0].body == _item(2, "b" * 40).body

    inbox = Inbox(path)
    from twisted.internet import reactor

    again = inbox.start(reactor, 0.0)
    try:
        assert [i.seq for i in again] == [2, 3]
        assert [json.loads(x)["seq"] for x in path.read_text().splitlines()] == [2, 3]  # compacted
        assert inbox.next_seq() == 4
    finally:
        inbox.stop()


def test_a_head_with_an_unfinished_buildset_is_not_built_again() -> None:
    """Fails on the old code: after a restart the in-memory coalescer was empty, and an event acted on
    again (or redelivered under a new id) built the head a second time."""
    entry = {"head": "a" * 40, "requests": {"11": "bsdkm/userspace/noasm"}}
    record = PrRecord.from_doc({"buildsets": {"7": entry}})
    assert _unfinished_for(record, "a" * 40, {"bsdkm/userspace/noasm"})
    assert not _unfinished_for(record, "b" * 40, {"bsdkm/userspace/noasm"})
    assert not _unfinished_for(record, "a" * 40, {"bsdkm/userspace/noasm", "bsdkm/userspace/intelasm"})


def _event(head: str, **kw: Any) -> Any:
    return parse_pull_request_event(payloads.pull_request("synchronize", head_sha=head, **kw))


def test_only_a_newer_head_queued_behind_a_push_supersedes_it() -> None:
    a, b = "a" * 40, "b" * 40
    assert _newer_head_queued(_event(a), [_event(b)], set())
    assert not _newer_head_queued(_event(a), [_event(a)], set())  # a redelivery of the same head
    # B's event was acted on already: a late A behind it is older, and B must still build
    assert not _newer_head_queued(_event(b), [_event(a)], {a})
    assert not _newer_head_queued(_event(a), [_event(b, draft=True)], set())  # a draft builds nothing


def test_a_retest_whose_head_has_its_push_queued_leaves_the_build_to_that_push() -> None:
    """Found under load: a retest acted on late read GitHub's head, newer than the pushes queued before
    it; building it let those older pushes cancel it, and its own push then found it stale, so the
    PR's newest head was never built."""
    from buildbot_bsdkm.github.pr_queue import _heads_of

    a, b = "a" * 40, "b" * 40
    assert _heads_of([_event(a), _event(b, draft=True)]) == frozenset({a})

    class Client:
        async def get_pull(self, repo: str, number: int) -> Any:
            doc = payloads.pull_request("synchronize", head_sha=b, association="MEMBER", number=1)
            return SimpleNamespace(data=doc["pull_request"])

    ctl = controller(MemoryStore())
    ctl.store = store = MemoryStore()
    # b's push by its author was seen: a retest of b is a trusted one.
    store.docs[_store_key("Codertocat/Hello-World", 1)] = PrRecord(head=b, head_pushed=True,
                                                                   head_vetted=True).to_doc()
    ctl.publisher = SimpleNamespace(client=Client())  # type: ignore[assignment]
    built: list[str] = []

    async def build(pull: Any, *args: Any) -> Any:
        built.append(pull.head_sha)
        return SimpleNamespace(action="build", reason="test")

    ctl._build = build  # type: ignore[method-assign]
    comment = parse_comment_event(payloads.issue_comment("retest this please", association="COLLABORATOR"))
    got = settled(ctl.on_comment(comment, 0.0, queued_heads=frozenset({b})))
    assert got.action == "coalesced" and built == [], got
    comment = parse_comment_event(payloads.issue_comment("retest this please", association="COLLABORATOR"))
    got = settled(ctl.on_comment(comment, 0.0, queued_heads=frozenset({a})))  # an older push: b's comes later
    assert got.action == "coalesced" and built == [], got
    settled(ctl.on_comment(parse_comment_event(payloads.issue_comment(
        "retest this please", association="COLLABORATOR")), 0.0))
    assert built == [b]  # with nothing queued, the retest builds GitHub's head


def settled(coro: Any) -> Any:
    """What a coroutine that needs no reactor turn returns (or raises)."""
    got: list[Any] = []
    defer.ensureDeferred(coro).addBoth(got.append)
    assert got, "did not finish at once"
    if hasattr(got[0], "raiseException"):
        got[0].raiseException()
    return got[0]


def _push(head: str, at: str, before: str = "") -> Any:
    payload = payloads.pull_request("synchronize", head_sha=head, association="MEMBER", updated_at=at)
    payload["before"], payload["after"] = before or "0" * 40, head
    return parse_pull_request_event(payload)


def _building_controller() -> tuple[PullRequestBuilds, list[str]]:
    ctl = controller(MemoryStore())
    ctl.store = MemoryStore()
    built: list[str] = []

    async def build(pull: Any, *args: Any) -> Any:
        built.append(pull.head_sha)
        return SimpleNamespace(action="build", reason="test")

    ctl._build = build  # type: ignore[method-assign]
    return ctl, built


def test_a_push_that_arrives_after_a_newer_one_builds_nothing() -> None:
    """Fails on the old code: pushes of one PR sent a few ms apart on separate connections reached the
    master in the other order; the older was built last and cancelled the newer, so the PR's newest
    head was never built (seen under load)."""
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    for older, newer in [
        (_push(a, "2026-12-02T10:00:00Z"), _push(b, "2026-12-02T10:00:01Z")),  # GitHub's clock says
        (_push(a, "2026-12-02T10:00:00Z", c), _push(b, "2026-12-02T10:00:00Z", a)),  # the same second
    ]:
        ctl, built = _building_controller()
        assert settled(ctl.on_pull_request(newer, 0.0)).action == "build"
        late = settled(ctl.on_pull_request(older, 0.0))
        assert late.action == "superseded" and built == [b], (late, built)
        assert ctl.approvals.record("Codertocat/Hello-World", newer.pull.number).head == b
        # Queued behind the newer push, the late one neither supersedes it nor builds itself.
        assert not _newer_head_queued(newer, [older], set())
        assert _newer_head_queued(older, [newer], set())


def test_a_push_order_github_does_not_tell_is_arrival_order() -> None:
    a, b = "a" * 40, "b" * 40
    ctl, built = _building_controller()
    settled(ctl.on_pull_request(_push(b, "2026-12-02T10:00:00Z"), 0.0))
    settled(ctl.on_pull_request(_push(a, "2026-12-02T10:00:00Z"), 0.0))
    assert built == [b, a]
    # A head pushed back again within the second: each push names the other as replaced.
    ctl, built = _building_controller()
    settled(ctl.on_pull_request(_push(b, "2026-12-02T10:00:00Z", a), 0.0))
    settled(ctl.on_pull_request(_push(a, "2026-12-02T10:00:00Z", b), 0.0))
    assert built == [b, a]


def test_a_retest_does_not_wait_for_a_queued_push_that_is_older_than_the_built_head() -> None:
    """A retest left its build to a queued push; a push GitHub shows older builds nothing now, so
    the retest would have built nothing at all."""
    from buildbot_bsdkm.github.head_order import HeadMark
    from buildbot_bsdkm.github.pr_queue import _heads_of

    a, b = "a" * 40, "b" * 40
    older = _push(a, "2026-12-02T10:00:00Z")
    assert _heads_of([older], HeadMark(b, "2026-12-02T10:00:01Z")) == frozenset()
    assert _heads_of([older], HeadMark(b, "2026-12-02T09:59:59Z")) == frozenset({a})


def test_no_head_is_shown_later_than_an_unknown_one() -> None:
    from buildbot_bsdkm.github.head_order import HeadMark, shown_later

    assert not shown_later(HeadMark("a" * 40), HeadMark(""))
    assert not shown_later(HeadMark(""), HeadMark("a" * 40))
