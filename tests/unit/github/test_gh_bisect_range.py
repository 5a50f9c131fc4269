"""The bisection culprit's range check against the loopback GitHub (compare, checked against GitHub's
OpenAPI description)."""

from __future__ import annotations

from types import SimpleNamespace

from github_fake.reactor_thread import run
from github_fake.server import FakeGitHub

from buildbot_bsdkm.github.bisect_comment import checked_culprit
from buildbot_bsdkm.github.client import GitHubClient

REQ = SimpleNamespace(good="a" * 40, bad="c" * 40)  # what the check reads of the bisection request


def _doc(sha: str) -> dict:
    return {"decided": True, "culprit": {"sha": sha}, "failure": "selftest: SHA-256 (-1)"}


def test_the_range_check_against_the_loopback_github() -> None:
    github = FakeGitHub().start()
    try:
        github.histories["wolfSSL/wolfssl"] = ["a" * 40, "b" * 40, "c" * 40]
        client = GitHubClient(github.url, github.token)
        assert run(lambda: checked_culprit(client, "wolfSSL/wolfssl", _doc("b" * 40), REQ)) == "b" * 40
        try:
            run(lambda: checked_culprit(client, "wolfSSL/wolfssl", _doc("e" * 40), REQ))
        except Exception as e:  # noqa: BLE001 - GitHub's 404 for a commit it does not know
            assert "404" in str(e) or "not in the range" in str(e), e
        else:
            raise AssertionError("a commit outside the history was taken")
        assert github.invalid == [] and github.invalid_responses == []
    finally:
        github.stop()
