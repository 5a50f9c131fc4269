"""A real master whose GitHub token and webhook secret come from Buildbot's ``SecretInAFile`` through
``{secret: NAME}``, against the loopback GitHub: the round trip (signed webhook in, buildset, commit
statuses out), its writes a second apart, and what the master says when GitHub stops taking its
token and when it takes it again (no worker: requests stay queued)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import yaml
from github_fake import payloads
from github_fake.master import WEBHOOK_SECRET, Master, deliver, write_config
from github_fake.restart import wait_for
from github_fake.server import FakeGitHub

pytestmark = pytest.mark.slow
CONTEXTS = {"bsdkm/userspace/intelasm", "bsdkm/userspace/noasm"}
FAILING = "GitHub auth is failing"


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(token="ghp_from_secret_in_a_file").start()
    yield fake
    fake.stop()
    assert fake.invalid == [], "a request did not follow GitHub's OpenAPI description"


@pytest.fixture(scope="module")
def master(github: FakeGitHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    base = tmp_path_factory.mktemp("gh-secrets")
    config = write_config(base / "bsdkm.yml", github.url)
    doc = yaml.safe_load(config.read_text())
    section = doc["github"]
    del section["token_env"], section["webhook_secret_env"], section["write_interval_s"]  # the default: 1 s
    section["token"] = {"secret": "github-token"}
    section["webhook_secret"] = {"secret": "github-webhook"}
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    running = Master(base, github).start(config, with_worker=False, secrets={
        "github-token": github.token, "github-webhook": WEBHOOK_SECRET})
    yield running
    running.stop()
    log = running.log()
    assert github.token not in log and WEBHOOK_SECRET not in log


def pr(github: FakeGitHub, number: int, head: str) -> dict:
    payload = payloads.pull_request("opened", number=number, association="MEMBER", head_sha=head)
    github.add_pull(payload)
    return payload


def test_token_and_webhook_secret_from_secret_in_a_file_pass_the_round_trip(
    master: Master, github: FakeGitHub
) -> None:
    head = "5" * 40
    response, _ = deliver(None, master.hook_url, "pull_request", pr(github, 501, head),
                          signature="sha256=" + "0" * 64)
    assert response.status_code == 400  # the secret the hook checks against is the provider's
    response, _ = deliver(None, master.hook_url, "pull_request", pr(github, 501, head))
    assert response.status_code in (200, 202), response.text
    (buildset,) = master.buildsets_for(501)
    statuses = wait_for(lambda: set(github.latest_statuses(head)) >= CONTEXTS
                        and github.latest_statuses(head), "both queued statuses")
    assert {s["state"] for s in statuses.values()} == {"pending"}
    posts = [r for r in github.calls("POST", f"/statuses/{head}")]
    assert {r.headers["Authorization"] for r in posts} == {f"Bearer {github.token}"}
    # GitHub's guidance on secondary rate limits: writes a second apart (from the end of one to
    # the start of the next; `at` is when the fake had answered).
    gaps = [b.at - a.at for a, b in zip(posts, posts[1:], strict=False)]
    assert gaps and min(gaps) >= 0.95, gaps
    assert buildset["bsid"]


def test_a_refused_token_is_said_once_in_the_log_and_the_ui_and_nothing_is_lost(
    master: Master, github: FakeGitHub
) -> None:
    accepted = github.token
    with github.lock:
        github.token = "ghp_another"  # GitHub no longer takes the master's token
    head = "6" * 40
    try:
        deliver(None, master.hook_url, "pull_request", pr(github, 502, head))
        wait_for(lambda: FAILING in master.log(), "the log saying GitHub auth is failing")
        notice = wait_for(lambda: [b for b in master.rest.get("builders")
                                   if FAILING in str(b.get("description"))], "the builders' notice")
        assert {b["name"] for b in notice} == {"userspace/intelasm", "userspace/noasm"}
        assert "401" in notice[0]["description"] and accepted not in notice[0]["description"]
        time.sleep(5)  # two more re-send rounds (resend_interval_s 2) fail the same way
        assert master.log().count(FAILING) == 1
        assert github.latest_statuses(head) == {}
    finally:
        with github.lock:
            github.token = accepted
    # Kept in the outbox, the statuses go out with the next re-send; the log and the UI say so.
    wait_for(lambda: set(github.latest_statuses(head)) >= CONTEXTS, "kept statuses re-sent", timeout=60)
    wait_for(lambda: "GitHub auth works again" in master.log(), "the log saying it works again")
    wait_for(lambda: not any(b.get("description") for b in master.rest.get("builders")), "the notice cleared")
    assert master.log().count(FAILING) == 1
