"""Base-branch bisection: when a new failure signature asks for one, and the commit comment on the
culprit, posted to the loopback GitHub and checked against GitHub's OpenAPI description."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from github_fake.reactor_thread import run
from github_fake.server import FakeGitHub

from buildbot_bsdkm.bisection.bisect_requests import BisectRequest, requests_for
from buildbot_bsdkm.bisection.search import Commit, Outcome, Probe, Purpose, bisect
from buildbot_bsdkm.github.bisect_comment import MARKER, comment_body, post_commit_comment
from buildbot_bsdkm.github.client import GitHubClient
from buildbot_bsdkm.report.bisection_report import result_json

SIG = "selftest: SHA-256 (-1)"


def outcome(commit: str, *signatures: str, **kw: Any) -> dict[str, Any]:
    return {"target": "userspace", "variant": "noasm", "kernel": "", "commit": commit,
            "verdict": "fail" if signatures else "pass", "signatures": sorted(signatures), **kw}


def test_a_new_signature_asks_for_one_bisection_between_the_last_good_and_first_bad() -> None:
    rows = [outcome("a" * 40), outcome("b" * 40), outcome("c" * 40, SIG), outcome("d" * 40, SIG)]
    [req] = requests_for(rows)
    assert (req.good, req.bad, req.signature) == ("b" * 40, "c" * 40, SIG)
    assert req.key == f"userspace/noasm/:{SIG}"
    assert requests_for(rows, done=[req.key]) == []  # once per signature
    assert BisectRequest.from_dict(req.to_dict()) == req


def test_no_range_no_bisection() -> None:
    assert requests_for([outcome("c" * 40, SIG), outcome("d" * 40, SIG)]) == []  # never seen good
    assert requests_for([outcome("a" * 40, SIG), outcome("b" * 40)]) == []  # fixed since
    assert requests_for([]) == []
    assert requests_for([outcome("", SIG)]) == []  # no commit recorded


def test_two_signatures_two_bisections_each_with_its_own_range() -> None:
    other = "kernel BUG: oops | wc_AesGcmEncrypt"
    rows = [outcome("a" * 40), outcome("b" * 40, other), outcome("c" * 40, other, SIG)]
    got = {r.signature: (r.good, r.bad) for r in requests_for(rows)}
    assert got == {other: ("a" * 40, "b" * 40), SIG: ("b" * 40, "c" * 40)}


def _result_doc(subject: str = "sha256: faster") -> dict[str, Any]:
    commits = [Commit(f"{i:040x}", subject, "A <a@example.org>", "2026-12-01") for i in range(9)]

    def runner(c: Commit, _: Purpose) -> Probe:
        bad = int(c.sha, 16) >= 5
        why = "userspace/noasm SHA-256: self-test failed" if bad else ""
        return Probe(Outcome.BAD if bad else Outcome.GOOD, why)

    about = {"target": "userspace", "variant": "noasm", "failure": "SHA-256"}
    return result_json(bisect(commits, runner), about)


def test_comment_body_names_the_evidence_and_escapes() -> None:
    doc = _result_doc()
    doc["why"] = "[x](https://evil) @org/team"
    body = comment_body(doc, link="https://ci.example.org/#/builders/7/builds/3")
    assert body.startswith(MARKER)
    assert "`SHA-256`" in body and "`userspace`/`noasm`" in body
    assert "\\[x\\]" in body and "@\u200borg" in body  # a zero-width space: GitHub links even \\@org
    assert "verification:" in body and "[Bisection report](https://ci.example.org/" in body
    undecided = {**doc, "decided": False, "culprit": None}
    with pytest.raises(ValueError, match="no culprit"):
        comment_body(undecided)


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


def test_commit_comment_follows_githubs_openapi_description(github: FakeGitHub) -> None:
    doc = _result_doc()
    sha = doc["culprit"]["sha"]
    client = GitHubClient(github.url, github.token)
    response = run(lambda: post_commit_comment(client, "wolfSSL/wolfssl", sha, comment_body(doc)))
    assert response.status == 201
    assert github.invalid == [] and github.invalid_responses == []
    [posted] = github.commit_comments
    assert posted["commit_id"] == sha and MARKER in posted["body"]
    assert [c.path for c in github.calls("POST", "/commits/")] == [
        f"/repos/wolfSSL/wolfssl/commits/{sha}/comments"]


def test_the_loopback_github_refuses_a_malformed_commit_comment(github: FakeGitHub) -> None:
    """The check is real: a body GitHub's description does not allow is caught (and answered 422)."""
    client = GitHubClient(github.url, github.token)
    before = len(github.invalid)

    async def bad() -> Any:
        return await client.request("POST", f"/repos/wolfSSL/wolfssl/commits/{'e' * 40}/comments",
                                    {"text": "no body field"}, idempotent=False)

    with pytest.raises(Exception, match="422"):
        run(bad)
    assert len(github.invalid) == before + 1


def test_a_confirmed_regression_asks_for_a_bisection_across_the_change_point() -> None:
    from buildbot_bsdkm.bisection.bisect_requests import regression_requests

    commits = [f"{i:040x}" for i in range(14)]
    level = [100.0, 101.0, 99.5, 100.4, 99.8, 100.9, 100.2, 99.7, 88.1, 87.6, 88.4, 87.9, 88.2, 88.0]
    series = {"SHA-256": list(zip(commits, level, strict=True)),
              "AES-128-GCM-enc": [(c, 500.0 + (i % 3)) for i, c in enumerate(commits)]}
    [req] = regression_requests("userspace", "noasm", series)
    assert (req.regression, req.good, req.bad) == ("SHA-256", commits[7], commits[8])
    assert 10 <= (req.pct or 0) <= 14 and req.signature == ""
    assert regression_requests("userspace", "noasm", series, done=[req.key]) == []
    assert BisectRequest.from_dict(req.to_dict()) == req
    small = {"SHA-256": [(c, v if i < 8 else v * 0.98) for i, (c, v) in enumerate(series["SHA-256"][:8] * 2)]}
    assert regression_requests("userspace", "noasm", small) == []  # a 2 % shift is not bisected
