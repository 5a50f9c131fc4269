"""Signed GitHub webhooks into a real Buildbot master (no worker: requests stay queued).

GitHub's example payloads (npm @octokit/webhooks-examples) with associations, drafts, forks,
heads and comment bodies varied; GitHub's side is the OpenAPI-validated loopback fake.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
import yaml
from github_fake import payloads
from github_fake.master import Master, deliver, write_config
from github_fake.restart import wait_for
from github_fake.server import FakeGitHub

pytestmark = pytest.mark.slow
PUBLIC_URL = "https://ci.example.org/bsdkm/"


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()
    assert fake.invalid == [], "a request did not follow GitHub's OpenAPI description"


@pytest.fixture(scope="module")
def master(github: FakeGitHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    base = tmp_path_factory.mktemp("gh-master")
    config = write_config(
        base / "bsdkm.yml", github.url, max_payload_bytes=262144, trusted_users=["wolfssl-bot"]
    )
    doc = yaml.safe_load(config.read_text())
    doc["www"] = {"url": PUBLIC_URL}  # statuses must link to the public address, not 127.0.0.1
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    running = Master(base, github).start(config, with_worker=False)
    yield running
    running.stop()
    assert github.token not in running.log()


def pr_event(github: FakeGitHub, number: int, action: str = "opened", **kw: Any) -> dict[str, Any]:
    payload = payloads.pull_request(action, number=number, **kw)
    github.add_pull(payload)  # what GET /pulls/{n} answers from now on
    return payload


def builders_of(master: Master, bsid: int) -> list[str]:
    names = master.rest.builder_names()
    return sorted(names[r["builderid"]] for r in master.requests_of(bsid))


# --- signatures over HTTP ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (None, "request is not signed"),
        ("sha1=0123456789abcdef0123456789abcdef01234567", "malformed X-Hub-Signature-256"),
        ("sha256=" + "0" * 64, "does not match the payload"),
    ],
)
def test_bad_signatures_are_refused(
    master: Master, github: FakeGitHub, signature: str | None, reason: str
) -> None:
    response, _ = deliver(None, master.hook_url, "pull_request", pr_event(github, 101), signature=signature)
    assert response.status_code == 400 and reason in response.text
    assert master.buildsets_for(101) == []
    assert "refused delivery" in master.log() and reason in master.log()
    assert "loopback webhook secret" not in master.log()


def test_oversized_and_malformed_bodies_are_refused(master: Master) -> None:
    big = b'{"pad": "' + b"x" * 300000 + b'"}'
    response, _ = deliver(None, master.hook_url, "pull_request", big)
    assert response.status_code == 413 and "exceeds the 262144-byte limit" in response.text
    garbage = b"{not json"
    response, _ = deliver(None, master.hook_url, "pull_request", garbage)
    assert response.status_code == 400 and "not JSON" in response.text
    wrong_shape = b'{"action": "opened"}'
    response, _ = deliver(None, master.hook_url, "pull_request", wrong_shape)
    assert response.status_code == 400 and "no 'repository.full_name'" in response.text


def test_form_encoded_signed_delivery_builds(master: Master, github: FakeGitHub) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": payloads.encode(pr_event(github, 102)).decode()}).encode()
    response, _ = deliver(
        None, master.hook_url, "pull_request", body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code in (200, 202), response.text
    assert len(master.buildsets_for(102)) == 1


# --- pull_request events ----------------------------------------------------------------------


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened", "ready_for_review"])
def test_building_actions_start_both_variants(master: Master, github: FakeGitHub, action: str) -> None:
    number = {"opened": 110, "synchronize": 111, "reopened": 112, "ready_for_review": 113}[action]
    if action in ("reopened", "ready_for_review"):
        # These name no pusher: the head's own push (here, while a draft) is what vets it.
        deliver(None, master.hook_url, "pull_request", pr_event(github, number, draft=True))
    payload = pr_event(github, number, action)
    response, _ = deliver(None, master.hook_url, "pull_request", payload)
    assert response.status_code in (200, 202)
    (buildset,) = master.buildsets_for(number)
    assert builders_of(master, buildset["bsid"]) == ["userspace/intelasm", "userspace/noasm"]
    head = payload["pull_request"]["head"]["sha"]
    statuses = wait_for(
        lambda: len(github.latest_statuses(head)) >= 2 and github.latest_statuses(head), "statuses"
    )
    assert {"bsdkm/userspace/intelasm", "bsdkm/userspace/noasm"} <= set(statuses)


def test_draft_and_closed_do_not_build(master: Master, github: FakeGitHub) -> None:
    deliver(None, master.hook_url, "pull_request", pr_event(github, 120, draft=True))
    deliver(None, master.hook_url, "pull_request", pr_event(github, 120, "closed"))
    time.sleep(0.5)
    assert master.buildsets_for(120) == []


def test_push_supersedes_queued_builds(master: Master, github: FakeGitHub) -> None:
    deliver(None, master.hook_url, "pull_request", pr_event(github, 130, head_sha="1" * 40))
    (first,) = master.buildsets_for(130)
    deliver(None, master.hook_url, "pull_request", pr_event(github, 130, "synchronize", head_sha="2" * 40))
    wait_for(lambda: len(master.buildsets_for(130)) == 2, "second buildset")
    cancelled = wait_for(
        lambda: (
            all(r["complete"] for r in master.requests_of(first["bsid"]))
            and master.requests_of(first["bsid"])
        ),
        "old requests cancelled",
    )
    assert {r["results"] for r in cancelled} == {6}  # CANCELLED
    second = [b for b in master.buildsets_for(130) if b["bsid"] != first["bsid"]][0]
    assert not any(r["complete"] for r in master.requests_of(second["bsid"]))


# --- trust -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("association", "login", "builds"),
    [
        ("OWNER", "Codertocat", True),
        ("MEMBER", "Codertocat", True),
        ("COLLABORATOR", "Codertocat", True),
        ("CONTRIBUTOR", "Codertocat", False),
        ("FIRST_TIME_CONTRIBUTOR", "Codertocat", False),
        ("FIRST_TIMER", "Codertocat", False),
        ("NONE", "wolfSSL-Bot", True),  # allow-listed
    ],
)
def test_pr_author_trust(
    master: Master, github: FakeGitHub, association: str, login: str, builds: bool
) -> None:
    number = 140 + [
        "OWNER",
        "MEMBER",
        "COLLABORATOR",
        "CONTRIBUTOR",
        "FIRST_TIME_CONTRIBUTOR",
        "FIRST_TIMER",
        "NONE",
    ].index(association)
    deliver(
        None, master.hook_url, "pull_request", pr_event(github, number, association=association, login=login)
    )
    assert len(master.buildsets_for(number)) == (1 if builds else 0)
    if not builds:
        reply = wait_for(lambda: github.comments_on(number), "approval request")
        assert "ok to test" in reply[0]["body"] and f"@{login}" in reply[0]["body"]


def test_fork_needs_ok_to_test_and_a_push_needs_a_new_one(master: Master, github: FakeGitHub) -> None:
    n = 150
    fork = dict(association="FIRST_TIME_CONTRIBUTOR", login="newcomer", fork=True)
    deliver(None, master.hook_url, "pull_request", pr_event(github, n, head_sha="a" * 40, **fork))
    assert master.buildsets_for(n) == []
    # The author cannot approve themselves; a member can.
    deliver(
        None,
        master.hook_url,
        "issue_comment",
        payloads.issue_comment("ok to test", association="CONTRIBUTOR", login="newcomer", number=n),
    )
    assert master.buildsets_for(n) == []
    deliver(
        None,
        master.hook_url,
        "issue_comment",
        payloads.issue_comment("OK to test", association="MEMBER", login="maintainer", number=n),
    )
    (approved,) = master.buildsets_for(n)
    assert approved["sourcestamps"][0]["revision"] == "a" * 40
    # A push: no build, the approved head's queued builds are superseded, retests are refused.
    deliver(
        None, master.hook_url, "pull_request", pr_event(github, n, "synchronize", head_sha="b" * 40, **fork)
    )
    assert len(master.buildsets_for(n)) == 1
    deliver(
        None,
        master.hook_url,
        "issue_comment",
        payloads.issue_comment("retest this please", association="MEMBER", login="maintainer", number=n),
    )
    assert len(master.buildsets_for(n)) == 1
    wait_for(lambda: any("not approved" in c["body"] for c in github.comments_on(n)), "explanation")
    deliver(
        None,
        master.hook_url,
        "issue_comment",
        payloads.issue_comment("ok to test", association="MEMBER", login="maintainer", number=n),
    )
    heads = sorted(b["sourcestamps"][0]["revision"] for b in master.buildsets_for(n))
    assert heads == ["a" * 40, "b" * 40]


# --- comments ---------------------------------------------------------------------------------


def test_plain_issue_edited_and_deleted_comments_trigger_nothing(master: Master, github: FakeGitHub) -> None:
    pr_event(github, 160)
    for payload in (
        payloads.issue_comment("retest this please", on_pull_request=False, number=160),
        payloads.issue_comment("retest this please", action="edited", number=160),
        payloads.issue_comment("retest this please", action="deleted", number=160),
        payloads.issue_comment("You are totally right! I'll get this fixed right away.", number=160),
    ):
        response, _ = deliver(None, master.hook_url, "issue_comment", payload)
        assert response.status_code in (200, 202)
    assert master.buildsets_for(160) == []


def pushed_as_draft(master: Master, github: FakeGitHub, number: int) -> None:
    """The PR's author pushed its head while it was a draft: the master saw a trusted push, built nothing."""
    deliver(None, master.hook_url, "pull_request", pr_event(github, number, draft=True))


def test_per_variant_retest_builds_only_that_variant(master: Master, github: FakeGitHub) -> None:
    pushed_as_draft(master, github, 170)
    deliver(
        None,
        master.hook_url,
        "issue_comment",
        payloads.issue_comment("Retest bsdkm/noasm please", number=170),
    )
    (buildset,) = master.buildsets_for(170)
    assert builders_of(master, buildset["bsid"]) == ["userspace/noasm"]


def test_untrusted_trigger_gets_one_polite_reply(master: Master, github: FakeGitHub) -> None:
    pr_event(github, 180)
    for _ in range(3):
        deliver(
            None,
            master.hook_url,
            "issue_comment",
            payloads.issue_comment("retest this please", association="NONE", login="drive-by", number=180),
        )
    replies = wait_for(lambda: github.comments_on(180), "reply")
    time.sleep(1.0)
    replies = github.comments_on(180)
    assert len(replies) == 1 and "@drive-by" in replies[0]["body"] and "nothing ran" in replies[0]["body"]
    assert master.buildsets_for(180) == []
    assert github.calls("GET", "/pulls/180") == []  # a stranger's comment costs no API call


def test_hundred_identical_triggers_make_one_build(master: Master, github: FakeGitHub) -> None:
    pushed_as_draft(master, github, 190)
    comment = payloads.issue_comment("retest this please", association="COLLABORATOR", number=190)
    with requests.Session() as session, ThreadPoolExecutor(max_workers=16) as pool:
        results = list(
            pool.map(
                lambda _: deliver(session, master.hook_url, "issue_comment", comment)[0].status_code,
                range(100),
            )
        )
    assert all(code in (200, 202) for code in results)
    assert len(master.buildsets_for(190)) == 1


# --- trust and the hook's doors -----------------------------------------------------------------


def test_approval_covers_only_commits_that_existed_when_it_was_written(
    master: Master, github: FakeGitHub
) -> None:
    n = 200
    fork = dict(association="FIRST_TIME_CONTRIBUTOR", login="newcomer", fork=True)
    written = payloads.github_time(-30)  # the maintainer reviewed head a... and wrote "ok to test"
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, n, head_sha="a" * 40, updated_at=payloads.github_time(-60), **fork))
    # ... but the author pushed b... before the master handled the comment.
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, n, "synchronize", head_sha="b" * 40, updated_at=payloads.github_time(-10),
                     **fork))
    approval = payloads.issue_comment("ok to test", association="MEMBER", login="maintainer", number=n,
                                      created_at=written)
    response, _ = deliver(None, master.hook_url, "issue_comment", approval, delivery="approval-200")
    assert response.status_code in (200, 202)
    assert master.buildsets_for(n) == []
    wait_for(lambda: any("ok to test bbbbbbbbbbbb" in c["body"] for c in github.comments_on(n)), "reply")
    # A re-POST of the same delivery, or the same comment in a new delivery, approves nothing.
    for delivery in ("approval-200", None):
        deliver(None, master.hook_url, "issue_comment", approval, delivery=delivery)
    assert master.buildsets_for(n) == []
    # Naming the commit approves exactly it.
    deliver(None, master.hook_url, "issue_comment",
            payloads.issue_comment("ok to test bbbbbbb", association="MEMBER", login="maintainer", number=n))
    (built,) = master.buildsets_for(n)
    assert built["sourcestamps"][0]["revision"] == "b" * 40


def test_untrusted_pusher_on_a_members_pr_builds_nothing(master: Master, github: FakeGitHub) -> None:
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, 201, "synchronize", association="MEMBER", login="alice", sender="mallory"))
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, 202, "synchronize", association="MEMBER", login="alice", fork=True,
                     fork_owner="mallory"))
    assert master.buildsets_for(201) == [] and master.buildsets_for(202) == []


def test_a_strangers_push_arriving_after_ready_for_review_is_not_built(
    master: Master, github: FakeGitHub
) -> None:
    """GitHub sent sync(H2, mallory) before ready_for_review(H2); they arrived the other way round."""
    n, h1, h2 = 205, "d" * 40, "e" * 40
    alice = dict(association="MEMBER", login="alice")
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, n, "synchronize", head_sha=h1, updated_at=payloads.github_time(-30), **alice))
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, n, "ready_for_review", head_sha=h2, updated_at=payloads.github_time(-10),
                     **alice))
    deliver(None, master.hook_url, "pull_request",
            pr_event(github, n, "synchronize", head_sha=h2, sender="mallory",
                     updated_at=payloads.github_time(-20), **alice))
    heads = [b["sourcestamps"][0]["revision"] for b in master.buildsets_for(n)]
    assert heads == [h1]
    wait_for(lambda: any("ok to test" in c["body"] for c in github.comments_on(n)), "approval request")


def test_events_for_other_repositories_are_refused(master: Master, github: FakeGitHub) -> None:
    payload = pr_event(github, 203, head_sha="c" * 40)
    payload["repository"]["full_name"] = "mallory/Hello-World"
    response, _ = deliver(None, master.hook_url, "pull_request", payload)
    assert response.status_code == 400 and "'mallory/Hello-World' is not one this CI serves" in response.text
    comment = payloads.issue_comment("retest this please", number=203)
    comment["repository"]["full_name"] = "mallory/Hello-World"
    response, _ = deliver(None, master.hook_url, "issue_comment", comment)
    assert response.status_code == 400
    time.sleep(0.5)
    assert github.calls("POST", "/repos/mallory/") == [] and master.buildsets_for(203) == []


def test_signed_deeply_nested_json_is_400_not_500(master: Master) -> None:
    body = b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    response, _ = deliver(None, master.hook_url, "pull_request", body)
    assert response.status_code == 400 and "nested too deeply" in response.text


def _raw_post(master: Master, headers: list[str], chunks: Iterator[bytes]) -> tuple[bytes, int]:
    """POST by hand; returns (the answer, body bytes we managed to send before the master closed)."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(master.hook_url)
    sent = 0
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        head = [f"POST {url.path} HTTP/1.1", f"Host: {url.hostname}", *headers, "", ""]
        sock.sendall("\r\n".join(head).encode())
        try:
            for chunk in chunks:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass
    return answer, sent


def test_huge_declared_body_is_refused_before_it_is_read(master: Master) -> None:
    declared = 300 * 1024 * 1024
    headers = ["Content-Type: application/json", f"Content-Length: {declared}",
               "X-GitHub-Event: pull_request"]

    def body() -> Iterator[bytes]:
        time.sleep(1.0)  # the answer comes before any byte of the body
        for _ in range(declared // 65536):
            yield b"x" * 65536

    answer, sent = _raw_post(master, headers, body())
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"declared Content-Length 314572800 exceeds the 262144-byte limit" in answer
    assert sent < 64 * 1024 * 1024  # the master hung up long before 300 MiB


def test_chunked_body_stops_being_read_at_the_limit(master: Master) -> None:
    headers = ["Content-Type: application/json", "Transfer-Encoding: chunked", "X-GitHub-Event: pull_request"]

    def body() -> Iterator[bytes]:
        piece = b"x" * 65536
        for _ in range(300 * 16):  # 300 MiB, if nobody stops us
            yield b"%x\r\n%s\r\n" % (len(piece), piece)

    answer, sent = _raw_post(master, headers, body())
    assert answer.startswith(b"HTTP/1.1 413") and b"body exceeds the 262144-byte limit" in answer
    assert sent < 64 * 1024 * 1024


def test_anonymous_users_can_read_but_not_force_stop_or_cancel(master: Master, github: FakeGitHub) -> None:
    from buildbot_bsdkm.buildbot import control

    deliver(None, master.hook_url, "pull_request", pr_event(github, 204))
    (buildset,) = master.buildsets_for(204)  # reading works anonymously
    with pytest.raises(control.ControlError, match="HTTP 403"):
        master.rest.force(["userspace/noasm"], "anonymous force")
    brid = master.requests_of(buildset["bsid"])[0]["buildrequestid"]
    body = {"jsonrpc": "2.0", "method": "cancel", "id": 1, "params": {"reason": "anonymous"}}
    r = requests.post(f"{master.url}api/v2/buildrequests/{brid}", json=body, timeout=30)
    assert r.status_code == 403
    assert not master.requests_of(buildset["bsid"])[0]["complete"]
    # The statuses link to the configured public address.
    head = pr_event(github, 204)["pull_request"]["head"]["sha"]
    status = wait_for(lambda: github.latest_statuses(head).get("bsdkm/userspace/noasm"), "status")
    assert status["target_url"].startswith(PUBLIC_URL)


def test_master_killed_and_restarted_loses_nothing(master: Master, github: FakeGitHub) -> None:
    """Last in this module: SIGKILL the module's (sqlite) master mid-retries and start it again."""
    from github_fake.restart import kill_and_restart_scenario

    kill_and_restart_scenario(master, github)
