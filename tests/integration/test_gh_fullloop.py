"""The whole loop: a signed webhook → the real master builds the userspace target with real
wolfSSL → commit statuses and one created-then-edited PR comment arrive at the loopback GitHub.

GitHub itself is not reachable from here, so the PR lives in a local bare repository (the
configured `clone_url`): wolfSSL 5.9.2 from Debian's archive committed as the PR's head and
pushed to `refs/pull/N/head`, and the webhook carries that commit's SHA. The build fetches
exactly that ref and commit, as a PR build does against GitHub.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from github_fake import payloads
from github_fake.master import Master, deliver, write_config
from github_fake.server import FakeGitHub

from buildbot_bsdkm.github.publisher import REPORT_MARKER
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source

pytestmark = pytest.mark.slow
PR = 9714
CONTEXTS = {"bsdkm/userspace/intelasm", "bsdkm/userspace/noasm"}


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "PR author", "GIT_AUTHOR_EMAIL": "pr@example.invalid",
           "GIT_COMMITTER_NAME": "PR author", "GIT_COMMITTER_EMAIL": "pr@example.invalid",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def pr_repository(tmp: Path) -> tuple[Path, str]:
    """A bare repository whose refs/pull/PR/head is a commit of the real wolfSSL tree."""
    tree, gitdir, bare = wolfssl_source(), tmp / "pr.git-work", tmp / "pr.git"
    _git("init", "-q", "--bare", str(bare))
    _git("--git-dir", str(gitdir), "init", "-q")
    work = ["--git-dir", str(gitdir), "--work-tree", str(tree)]
    _git(*work, "add", "-A", "-f", ".")
    _git(*work, "commit", "-q", "-m", "PR head")
    head = _git("--git-dir", str(gitdir), "rev-parse", "HEAD")
    _git("--git-dir", str(gitdir), "push", "-q", str(bare), f"HEAD:refs/pull/{PR}/head")
    return bare, head


def test_signed_webhook_to_statuses_and_one_edited_comment(tmp_path: Path) -> None:
    github = FakeGitHub().start()
    master = Master(tmp_path, github)
    try:
        bare, head = pr_repository(tmp_path)
        master.start(write_config(tmp_path / "bsdkm.yml", github.url, clone_url=bare.as_uri()),
                     with_worker=True)
        payload = payloads.pull_request("opened", number=PR, association="MEMBER", head_sha=head)
        github.add_pull(payload)
        response, seconds = deliver(None, master.hook_url, "pull_request", payload)
        assert response.status_code in (200, 202), response.text
        (buildset,) = master.buildsets_for(PR)
        assert buildset["sourcestamps"][0]["revision"] == head
        master.rest.wait_buildset(buildset["bsid"], timeout=2400)

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            final = {c: s for c, s in github.latest_statuses(head).items() if s["state"] != "pending"}
            comment_done = any("Still running" not in c["body"] for c in github.comments_on(PR))
            if set(final) >= CONTEXTS and comment_done:
                break
            time.sleep(1)
        statuses = github.latest_statuses(head)
        assert set(statuses) >= CONTEXTS
        builds = master.rest.builds_of_buildset(buildset["bsid"])
        for context in CONTEXTS:
            status = statuses[context]
            assert status["state"] in ("success", "failure", "error")
            assert status["description"] and len(status["description"]) <= 140
            assert "/#/builders/" in status["target_url"]
        # Each build's verdict and its status agree.
        results = {b["builderid"]: b["results"] for b in builds}
        names = master.rest.builder_names()
        for builderid, result in results.items():
            context = "bsdkm/" + names[builderid]
            expected = "success" if result in (0, 1) else ("failure" if result == 2 else "error")
            assert statuses[context]["state"] == expected, (context, statuses[context])
        # Every status went pending first, then to its final state.
        history = [s for s in github.statuses if s["url"].endswith(head)]
        for context in CONTEXTS:
            states = [s["state"] for s in history if s["context"] == context]
            assert states[0] == "pending" and states[-1] != "pending"

        (comment,) = github.comments_on(PR)  # one comment, however many builds reported
        assert comment["body"].startswith(REPORT_MARKER)
        assert len(github.calls("POST", f"/issues/{PR}/comments")) == 1
        assert len(github.calls("PATCH", "/issues/comments/")) >= 1  # edited, not re-posted
        for context in CONTEXTS:
            assert context in comment["body"]
        assert "AES-128-GCM-enc" in comment["body"]  # the benchmark table from real runs
        # What was built is the PR's head, fetched by its ref, not the configured source.
        assert f"pr.git@refs/pull/{PR}/head` at `{head[:12]}`" in comment["body"]
        assert len(comment["body"]) <= 65536

        assert github.invalid == [], github.invalid
        assert github.invalid_responses == [], github.invalid_responses
        assert github.token not in master.log()
        (tmp_path / "comment.md").write_text(comment["body"], encoding="utf-8")  # kept for a human to read
        described = [(c, statuses[c]["description"]) for c in sorted(CONTEXTS)]
        print(f"webhook answered in {seconds * 1000:.0f} ms; statuses {described}")
    finally:
        master.stop()
        github.stop()
