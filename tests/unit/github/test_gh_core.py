"""Signature, event parsing, trigger phrases, trust rules and coalescing, on GitHub's example payloads."""

from __future__ import annotations

import pytest
from github_fake import payloads

from buildbot_bsdkm.github.coalesce import Coalescer
from buildbot_bsdkm.github.events import (
    EventError,
    parse_body,
    parse_comment_event,
    parse_pull_request_event,
    pull_request_from,
)
from buildbot_bsdkm.github.triggers import (
    Selector,
    TriggerConfig,
    TriggerKind,
    parse_comment,
    selected_builders,
)
from buildbot_bsdkm.github.trust import (
    Action,
    ApprovalBook,
    ReplyLimiter,
    TrustPolicy,
    decide_comment,
    decide_pull_request,
)
from buildbot_bsdkm.github.webhook_signature import SignatureError, sign, verify_signature

SECRET = "It's a Secret to Everybody"
NEW_HEAD = "f" * 40


# --- signature -------------------------------------------------------------------------------


def test_signature_matches_githubs_documented_example() -> None:
    # The worked example from GitHub's "Validating webhook deliveries" page.
    assert sign(SECRET, b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def test_valid_signature_on_real_payload_passes() -> None:
    body = payloads.encode(payloads.pull_request())
    verify_signature(SECRET, body, sign(SECRET, body))
    verify_signature(SECRET, body, sign(SECRET, body).encode())


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "not signed"),
        ("", "not signed"),
        ("sha1=" + "0" * 40, "malformed"),
        ("sha256=XYZ", "malformed"),
        ("sha256=" + "A" * 64, "malformed"),
        ("sha256 = " + "a" * 64, "malformed"),
        (b"sha256=\xff", "not ASCII"),
        ("sha256=" + "0" * 64, "does not match"),
    ],
)
def test_bad_signatures_are_refused_with_reason(header: str | bytes | None, reason: str) -> None:
    body = payloads.encode(payloads.pull_request())
    with pytest.raises(SignatureError, match=reason) as info:
        verify_signature(SECRET, body, header)
    assert info.value.status == 401
    assert SECRET not in str(info.value)


def test_signature_of_altered_body_or_other_secret_is_refused() -> None:
    body = payloads.encode(payloads.pull_request())
    header = sign(SECRET, body)
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature(SECRET, body.replace(b"OWNER", b"NONE"), header)
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature("another secret", body, header)


def test_oversized_body_is_refused_before_hashing() -> None:
    body = b"{" + b" " * 2048 + b"}"
    with pytest.raises(SignatureError, match="exceeds the 1024-byte limit") as info:
        verify_signature(SECRET, body, sign(SECRET, body), max_bytes=1024)
    assert info.value.status == 413


def test_no_secret_configured_refuses_everything() -> None:
    with pytest.raises(SignatureError, match="no webhook secret configured"):
        verify_signature("", b"{}", sign("x", b"{}"))


# --- event parsing ---------------------------------------------------------------------------


def test_pull_request_example_parses_to_its_real_values() -> None:
    event = parse_pull_request_event(payloads.example("pull_request", "synchronize"))
    assert event.action == "synchronize"
    pull = event.pull
    assert (pull.repo, pull.number, pull.head_sha) == (
        "Codertocat/Hello-World",
        2,
        "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    )
    assert (pull.author, pull.author_association, pull.draft, pull.from_fork) == (
        "Codertocat",
        "OWNER",
        False,
        False,
    )


def test_fork_is_detected() -> None:
    assert parse_pull_request_event(payloads.pull_request(fork=True)).pull.from_fork


def test_comment_example_is_on_a_plain_issue() -> None:
    event = parse_comment_event(payloads.example("issue_comment", "created"))
    assert (event.repo, event.issue_number, event.is_pull_request) == ("Codertocat/Hello-World", 1, False)
    assert event.body == "You are totally right! I'll get this fixed right away."


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.pop("pull_request"), "no 'pull_request'"),
        (lambda p: p["pull_request"]["head"].pop("sha"), "no 'head.sha'"),
        (lambda p: p["pull_request"].__setitem__("number", "2"), "'number' is str, not int"),
        (lambda p: p["pull_request"].__setitem__("number", True), "'number' is bool, not int"),
        (lambda p: p.__setitem__("repository", None), "no 'repository.full_name'"),
    ],
)
def test_malformed_pull_request_payload_names_the_field(mutate, message: str) -> None:
    payload = payloads.pull_request()
    mutate(payload)
    with pytest.raises(EventError, match=message):
        parse_pull_request_event(payload)


@pytest.mark.parametrize(
    ("body", "ctype", "message"),
    [
        (b"{not json", "application/json", "not JSON"),
        (b"[1, 2]", "application/json", "JSON list, not an object"),
        (b"\xff\xfe", "application/json", "not UTF-8"),
        (b"{}", "text/plain", "unsupported Content-Type"),
        (b"x=1", "application/x-www-form-urlencoded", "without a 'payload' field"),
    ],
)
def test_bad_bodies_are_refused_with_reason(body: bytes, ctype: str, message: str) -> None:
    with pytest.raises(EventError, match=message):
        parse_body(body, ctype)


def test_form_encoded_body_is_accepted() -> None:
    from urllib.parse import urlencode

    payload = payloads.pull_request()
    body = urlencode({"payload": payloads.encode(payload).decode()}).encode()
    assert parse_body(body, "application/x-www-form-urlencoded") == payload


# --- trigger phrases -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "retest this please",
        "Retest this please",
        "RETEST   THIS\tPLEASE",
        "  test this please!  ",
        "Jenkins flaked again.\n\nretest this please.",
        "`retest this please`",
    ],
)
def test_jenkins_phrases_trigger_a_full_retest(body: str) -> None:
    trigger = parse_comment(body)
    assert trigger is not None
    assert trigger.kind == TriggerKind.RETEST and trigger.everything


@pytest.mark.parametrize(
    "body",
    [
        "You are totally right! I'll get this fixed right away.",
        "should I retest this please?? no idea",
        "> retest this please\n\nwhy did you ask that?",
        "```\nretest this please\n```",
        "",
        "retest please",
    ],
)
def test_mentions_quotes_and_code_do_not_trigger(body: str) -> None:
    assert parse_comment(body) is None


def test_per_variant_form() -> None:
    config = TriggerConfig(
        known_variants=frozenset({"aesni-avx", "noasm", "intelasm"}),
        known_targets=frozenset({"userspace", "freebsd-kmod"}),
    )
    trigger = parse_comment("retest bsdkm/aesni-avx please", config)
    assert trigger is not None and trigger.selectors == (Selector("aesni-avx"),)
    builders = [("userspace", "aesni-avx"), ("userspace", "noasm"), ("freebsd-kmod", "aesni-avx")]
    assert selected_builders(trigger, builders) == [("userspace", "aesni-avx"), ("freebsd-kmod", "aesni-avx")]

    two = parse_comment("Retest bsdkm/userspace/noasm, intelasm please", config)
    assert two is not None
    assert two.selectors == (Selector("noasm", "userspace"), Selector("intelasm"))
    assert selected_builders(two, builders) == [("userspace", "noasm")]

    unknown = parse_comment("retest bsdkm/sparc please", config)
    assert unknown is not None and unknown.selectors == () and unknown.unknown == ("bsdkm/sparc",)


def test_ok_to_test_and_custom_phrases() -> None:
    approve = parse_comment("OK to test")
    assert approve is not None and approve.kind == TriggerKind.APPROVE
    config = TriggerConfig(retest_phrases=("bsdkm go",), approve_phrases=("lgtm, run it",))
    assert parse_comment("retest this please", config) is None
    go = parse_comment("BSDKM   go", config)
    assert go is not None and go.kind == TriggerKind.RETEST
    run = parse_comment("LGTM, run it", config)
    assert run is not None and run.kind == TriggerKind.APPROVE
    with pytest.raises(ValueError, match="empty trigger phrase"):
        TriggerConfig(retest_phrases=("  ",))


# --- trust -----------------------------------------------------------------------------------

POLICY = TrustPolicy.build(allow_list=["wolfSSL-Bot"])


@pytest.mark.parametrize(
    ("association", "login", "action"),
    [
        ("OWNER", "Codertocat", Action.BUILD),
        ("MEMBER", "Codertocat", Action.BUILD),
        ("COLLABORATOR", "Codertocat", Action.BUILD),
        ("CONTRIBUTOR", "Codertocat", Action.AWAIT_APPROVAL),
        ("FIRST_TIME_CONTRIBUTOR", "Codertocat", Action.AWAIT_APPROVAL),
        ("FIRST_TIMER", "Codertocat", Action.AWAIT_APPROVAL),
        ("NONE", "Codertocat", Action.AWAIT_APPROVAL),
        ("NONE", "wolfssl-bot", Action.BUILD),
    ],
)
def test_pull_request_author_trust(association: str, login: str, action: Action) -> None:
    event = parse_pull_request_event(payloads.pull_request(association=association, login=login))
    assert decide_pull_request(event, POLICY, ApprovalBook()).action == action


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened", "ready_for_review"])
def test_building_actions(action: str) -> None:
    event = parse_pull_request_event(payloads.pull_request(action))
    book = ApprovalBook()
    if action in ("reopened", "ready_for_review"):  # they name no pusher: the head's own push vets it
        pull = event.pull
        book.saw_head(pull.repo, pull.number, pull.head_sha, pull.updated_at, vetted=True)
    assert decide_pull_request(event, POLICY, book).action == Action.BUILD


@pytest.mark.parametrize("action", ["closed", "labeled", "assigned", "converted_to_draft", "edited"])
def test_other_actions_do_not_build(action: str) -> None:
    try:
        payload = payloads.pull_request(action)
    except LookupError:
        payload = payloads.pull_request("opened")
        payload["action"] = action
    decision = decide_pull_request(parse_pull_request_event(payload), POLICY, ApprovalBook())
    assert decision.action == Action.IGNORE and action in decision.reason


def test_draft_does_not_build_even_for_owner() -> None:
    event = parse_pull_request_event(payloads.pull_request(draft=True))
    decision = decide_pull_request(event, POLICY, ApprovalBook())
    assert decision.action == Action.IGNORE and "draft" in decision.reason


def _fork_pull(head: str | None = None):
    payload = payloads.pull_request(
        "synchronize", association="FIRST_TIME_CONTRIBUTOR", fork=True, head_sha=head
    )
    return parse_pull_request_event(payload)


def test_fork_needs_ok_to_test_and_push_invalidates_it() -> None:
    approvals = ApprovalBook()
    fork = _fork_pull()
    assert decide_pull_request(fork, POLICY, approvals).action == Action.AWAIT_APPROVAL

    # A contributor's own "ok to test" approves nothing.
    own = payloads.issue_comment("ok to test", association="CONTRIBUTOR", number=2)
    self_approval = parse_comment_event(own)
    decision = decide_comment(self_approval, parse_comment(self_approval.body), fork.pull, POLICY, approvals)
    assert decision.action == Action.REPLY and "nothing ran" in decision.reason

    # A member's approval builds that head...
    member = payloads.issue_comment("ok to test", association="MEMBER", login="maint", number=2)
    approval = parse_comment_event(member)
    decision = decide_comment(approval, parse_comment(approval.body), fork.pull, POLICY, approvals)
    assert decision.action == Action.BUILD and decision.approve_head
    assert decision.head_sha == fork.pull.head_sha
    approvals.approve(decision.repo, decision.number, decision.head_sha)
    assert decide_pull_request(fork, POLICY, approvals).action == Action.BUILD

    # ...and a later push needs a new approval, for builds and for retests alike.
    pushed = _fork_pull(NEW_HEAD)
    assert decide_pull_request(pushed, POLICY, approvals).action == Action.AWAIT_APPROVAL
    retest = parse_comment_event(payloads.issue_comment("retest this please", association="MEMBER", number=2))
    decision = decide_comment(retest, parse_comment(retest.body), pushed.pull, POLICY, approvals)
    assert decision.action == Action.REPLY and "not approved" in decision.reason


@pytest.mark.parametrize(
    ("association", "login", "action"),
    [
        ("OWNER", "a", Action.BUILD),
        ("MEMBER", "a", Action.BUILD),
        ("COLLABORATOR", "a", Action.BUILD),
        ("CONTRIBUTOR", "a", Action.REPLY),
        ("FIRST_TIME_CONTRIBUTOR", "a", Action.REPLY),
        ("NONE", "a", Action.REPLY),
        ("NONE", "WOLFSSL-BOT", Action.BUILD),
    ],
)
def test_comment_author_trust(association: str, login: str, action: Action) -> None:
    pull = parse_pull_request_event(payloads.pull_request()).pull
    book = ApprovalBook()
    book.saw_head(pull.repo, pull.number, pull.head_sha, pull.updated_at, vetted=True)  # its author pushed it
    comment = payloads.issue_comment("retest this please", association=association, login=login)
    event = parse_comment_event(comment)
    decision = decide_comment(event, parse_comment(event.body), pull, POLICY, book)
    assert decision.action == action
    if action == Action.REPLY:
        assert decision.reply_to == login and "collaborators, members, owners" in decision.reason


def test_plain_issue_and_edits_and_deletes_trigger_nothing() -> None:
    pull = parse_pull_request_event(payloads.pull_request()).pull
    on_issue = parse_comment_event(payloads.issue_comment("retest this please", on_pull_request=False))
    assert decide_comment(on_issue, parse_comment(on_issue.body), None, POLICY, ApprovalBook()).action == (
        Action.IGNORE
    )
    for action in ("edited", "deleted"):
        event = parse_comment_event(payloads.issue_comment("retest this please", action=action))
        decision = decide_comment(event, parse_comment(event.body), pull, POLICY, ApprovalBook())
        assert decision.action == Action.IGNORE and action in decision.reason


def test_replies_are_rate_limited() -> None:
    limiter = ReplyLimiter(window_seconds=600, per_pr_limit=2)
    assert limiter.allow("o/r", 1, "eve", now=0)
    assert not limiter.allow("o/r", 1, "EVE", now=10)
    assert limiter.allow("o/r", 1, "mallory", now=20)
    assert not limiter.allow("o/r", 1, "trudy", now=30)  # PR cap reached
    assert limiter.allow("o/r", 2, "trudy", now=30)
    assert limiter.allow("o/r", 1, "eve", now=700)


# --- coalescing ------------------------------------------------------------------------------


def test_hundred_identical_triggers_claim_once() -> None:
    coalescer = Coalescer()
    claims = [coalescer.claim("o/r", 2, "a" * 40, (), now=float(i) / 100) for i in range(100)]
    assert claims.count(True) == 1 and claims[0]
    assert coalescer.claim("o/r", 2, "a" * 40, ("noasm",), now=2.0)  # a different scope is new work
    assert coalescer.release("o/r", 2, "a" * 40) == 2
    assert coalescer.claim("o/r", 2, "a" * 40, (), now=3.0)


def test_new_head_supersedes_and_stale_claims_expire() -> None:
    coalescer = Coalescer(max_pending_seconds=100)
    assert coalescer.claim("o/r", 2, "a" * 40, (), now=0)
    assert coalescer.claim("o/r", 2, "b" * 40, (), now=1)
    assert coalescer.pending("o/r", 2) == [("o/r", 2, "b" * 40, ())]
    assert not coalescer.claim("o/r", 2, "b" * 40, (), now=50)
    assert coalescer.claim("o/r", 2, "b" * 40, (), now=102)
    assert not coalescer.claim("o/r", 2, "a" * 40, (), now=103)  # a late event for the old head


def test_pull_request_from_api_shape() -> None:
    pr = payloads.pull_request()["pull_request"]
    assert pull_request_from(pr, "Codertocat/Hello-World").number == 2
