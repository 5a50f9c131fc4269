"""``bsdkm-ci action comment`` and ``action trigger`` against the loopback GitHub fake.

The fake (tests/github_fake) answers and checks requests with GitHub's own OpenAPI
description and example payloads; ``bsdkm-ci`` runs as a real process talking HTTP to it,
with the environment a workflow gives it (``GITHUB_EVENT_PATH``, ``GITHUB_REPOSITORY``, ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github_fake.payloads import issue_comment, pull_request
from github_fake.server import FakeGitHub, Fault

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.github.publisher import REPORT_MARKER

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
PERMISSION_PATH = "/repos/{repo}/collaborators/{login}/permission"


class FakeGitHubWithPermissions(FakeGitHub):
    """The fake plus GET .../collaborators/{user}/permission, which its OpenAPI subset lacks."""

    def __init__(self) -> None:
        super().__init__()
        self.permissions: dict[str, str] = {}
        self.timelines: dict[int, list[dict[str, Any]]] = {}  # PR number -> its events, oldest first

    def route(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 6 and parts[3] == "collaborators" and parts[5] == "permission":
            login = parts[4]
            if login not in self.permissions:
                return 404, {"message": "Not Found"}
            perm = self.permissions[login]
            return 200, {"permission": perm, "role_name": perm, "user": {"login": login}}
        if method == "GET" and len(parts) == 6 and parts[3] == "issues" and parts[5] == "timeline":
            return 200, self.timelines.get(int(parts[4]), [])
        return super().route(method, path, payload)

    def validate_request(self, method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
        if "/collaborators/" in url or "/timeline" in url:
            return None  # not in the served OpenAPI subset (tests/act/harness.py serves them checked)
        return super().validate_request(method, url, headers, body)

    def validate_response(self, method: str, url: str, headers: dict[str, str], body: bytes, status: int,
                          answer: Any) -> None:
        if "/collaborators/" not in url and "/timeline" not in url:
            super().validate_response(method, url, headers, body, status, answer)


@pytest.fixture
def github() -> Iterator[FakeGitHubWithPermissions]:
    fake = FakeGitHubWithPermissions().start()
    yield fake
    fake.stop()
    assert fake.invalid == [], "a request did not follow GitHub's OpenAPI description"
    assert fake.invalid_responses == []


def workflow_env(github: FakeGitHub, event: dict[str, Any], tmp: Path,
                 token: str | None = None) -> dict[str, str]:
    event_path = tmp / "event.json"
    event_path.write_text(json.dumps(event))
    (tmp / "github_output").touch()
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": event["repository"]["full_name"],
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_OUTPUT": str(tmp / "github_output"),
        "GITHUB_TOKEN": github.token if token is None else token,
        "BSDKM_BOT_LOGIN": "bsdkm-ci[bot]",  # the fake's comment author (github-actions[bot] on GitHub)
    }


def action(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def test_one_comment_is_kept_up_to_date(github: FakeGitHub, tmp_path: Path) -> None:
    event = pull_request(number=42)
    env = workflow_env(github, event, tmp_path)
    report = tmp_path / "report.md"
    report.write_text("## bsdkm-ci results\n\n❌ FAIL: 1 of 76 checks failed (selftest)\n")
    first = action(env, "comment", "--report", report)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "bsdkm-ci: PR #42 report comment is up to date"
    report.write_text("## bsdkm-ci results\n\n✅ PASS: 76 checks passed\n")
    github.fail_next(Fault(status=502, method="PATCH"))  # GitHub hiccups: the shared client retries
    second = action(env, "comment", "--report", report)
    assert second.returncode == 0, second.stderr
    comments = github.comments_on(42)
    assert len(comments) == 1
    assert comments[0]["body"] == f"{REPORT_MARKER}\n## bsdkm-ci results\n\n✅ PASS: 76 checks passed\n"
    assert [c.status for c in github.calls("PATCH")] == [502, 200]


def test_the_comment_links_the_perf_history_page(github: FakeGitHub, tmp_path: Path) -> None:
    env = workflow_env(github, pull_request(number=43), tmp_path)
    report = tmp_path / "report.md"
    report.write_text("## bsdkm-ci results\n\n✅ PASS: 76 checks passed\n")
    url = "https://wolfssl.github.io/wolfssl/"
    done = action(env, "comment", "--report", report, "--history-url", url)
    assert done.returncode == 0, done.stderr
    (comment,) = github.comments_on(43)
    link = f"Performance history of the base branch, with trend charts: [{url}]({url})"
    assert comment["body"].endswith(f"\n\n{link}\n")
    # the input left empty: no link
    assert action(env, "comment", "--report", report, "--history-url", "").returncode == 0
    assert "Performance history" not in github.comments_on(43)[0]["body"]
    bad = action(env, "comment", "--report", report, "--history-url", "javascript:alert(1)")
    assert bad.returncode == 2 and "--history-url 'javascript:alert(1)': not an http(s) URL" in bad.stderr


def test_issue_comment_event_finds_its_pr(github: FakeGitHub, tmp_path: Path) -> None:
    env = workflow_env(github, issue_comment("retest this please", number=7), tmp_path)
    report = tmp_path / "report.md"
    report.write_text("report")
    assert action(env, "comment", "--report", report).returncode == 0
    assert [c["body"] for c in github.comments_on(7)] == [f"{REPORT_MARKER}\nreport"]


def test_push_event_writes_no_comment(github: FakeGitHub, tmp_path: Path) -> None:
    event = {"ref": "refs/heads/master", "repository": pull_request()["repository"]}
    env = workflow_env(github, event, tmp_path)
    (tmp_path / "r.md").write_text("x")
    proc = action(env, "comment", "--report", tmp_path / "r.md")
    assert proc.returncode == 0
    assert proc.stdout.startswith("::notice title=bsdkm-ci::not a pull request event")
    assert github.requests == []


def test_bad_token_is_reported_without_the_token(github: FakeGitHub, tmp_path: Path) -> None:
    secret = "ghp_wrongtokenwrongtokenwrongtoken0000"
    env = workflow_env(github, pull_request(number=5), tmp_path, token=secret)
    (tmp_path / "r.md").write_text("x")
    proc = action(env, "comment", "--report", tmp_path / "r.md")
    assert proc.returncode == 2
    assert "401" in proc.stderr and "Bad credentials" in proc.stderr
    assert secret not in proc.stdout + proc.stderr
    env["GITHUB_TOKEN"] = ""
    proc = action(env, "comment", "--report", tmp_path / "r.md")
    assert proc.returncode == 2 and "no token: $GITHUB_TOKEN is empty" in proc.stderr
    env = workflow_env(github, pull_request(number=5), tmp_path)
    proc = action(env, "comment", "--report", tmp_path / "no.md")
    assert proc.returncode == 2 and "cannot read report" in proc.stderr


def retest_setup(github: FakeGitHubWithPermissions, tmp: Path, body: str, login: str,
                 permission: str | None) -> dict[str, str]:
    pr = pull_request(number=9, head_sha="a" * 40, fork=True)
    github.add_pull(pr)
    if permission is not None:
        github.permissions[login] = permission
    event = issue_comment(body, number=9, login=login, association="CONTRIBUTOR")
    # The PR's timeline: the head pushed, then the comment.
    github.timelines[9] = [{"event": "committed", "sha": "a" * 40},
                           {"event": "commented", "id": event["comment"]["id"]}]
    return workflow_env(github, event, tmp)


def test_maintainer_retest_runs_the_pr_head(github: FakeGitHubWithPermissions, tmp_path: Path) -> None:
    env = retest_setup(github, tmp_path, f"Retest bsdkm/noasm please {'a' * 40}", "maintainer", "admin")
    proc = action(env, "trigger")
    assert proc.returncode == 0, proc.stderr
    base = next(iter(github.pulls.values()))["base"]["sha"]
    assert read_outputs((tmp_path / "github_output").read_text()) == {
        "run": "true", "reason": "retest of noasm at aaaaaaaaaaaa requested by @maintainer (admin)",
        "pr": "9",
        "head-sha": "a" * 40, "base-sha": base, "variants": "noasm"}  # the base the PR check measured


def test_read_only_commenter_is_refused(github: FakeGitHubWithPermissions, tmp_path: Path) -> None:
    env = retest_setup(github, tmp_path, "retest this please", "drive-by", "read")
    proc = action(env, "trigger")
    assert proc.returncode == 0, proc.stderr
    out = read_outputs((tmp_path / "github_output").read_text())
    assert out["run"] == "false"
    assert out["reason"] == "refused: @drive-by has 'read' permission, 'write' needed"
    assert github.calls("GET", "/pulls/") == []  # nothing about the PR head was even looked up


def test_other_comments_do_not_trigger_or_call_the_api(github: FakeGitHubWithPermissions,
                                                        tmp_path: Path) -> None:
    env = retest_setup(github, tmp_path, "> retest this please\nthanks!", "maintainer", "admin")
    assert action(env, "trigger").returncode == 0
    out = read_outputs((tmp_path / "github_output").read_text())
    assert (out["run"], out["reason"]) == ("false", "ignored: the comment does not ask for a retest")
    assert github.requests == []


def test_unknown_commenter_and_bad_event_are_clear_errors(github: FakeGitHubWithPermissions,
                                                          tmp_path: Path) -> None:
    env = retest_setup(github, tmp_path, "retest this please", "stranger", None)
    proc = action(env, "trigger")
    assert proc.returncode == 2
    assert "GitHub API: GET /repos/Codertocat/Hello-World/collaborators/stranger/permission" in proc.stderr
    Path(env["GITHUB_EVENT_PATH"]).write_text("{\"action\": \"created\"}")
    proc = action(env, "trigger")
    assert proc.returncode == 2 and "payload has no 'issue'" in proc.stderr
    Path(env["GITHUB_EVENT_PATH"]).write_text("not json")
    proc = action(env, "trigger")
    assert proc.returncode == 2 and "is not JSON" in proc.stderr
