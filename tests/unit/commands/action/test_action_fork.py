"""``action status``, ``action run-pr`` and ``action comment`` as GITHUB_TOKEN sees GitHub: the
loopback GitHub (every request checked against GitHub's OpenAPI description) with no user of its
own for the token (``GET /user`` is 403) and comments by ``github-actions[bot]`` made through its
App. No ``BSDKM_BOT_LOGIN``: our earlier comment is still found and edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from act.harness import BOT, CONFIG, FORK, POLICY, REPO, ActionsGitHub
from conftest import FIXTURES
from github_fake.payloads import issue_comment, pull_request

from buildbot_bsdkm.commands.action.workflow import read_outputs

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
HEAD = "c" * 40


@pytest.fixture
def github() -> Iterator[ActionsGitHub]:
    fake = ActionsGitHub().start()
    yield fake
    fake.stop()
    assert fake.invalid == [], "a request did not follow GitHub's OpenAPI description"
    assert fake.invalid_responses == []


def env_for(github: ActionsGitHub, event: dict[str, Any], tmp: Path) -> dict[str, str]:
    (tmp / "event.json").write_text(json.dumps(event))
    (tmp / "out.txt").write_text("")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BSDKM_BOT"))},
            "GITHUB_ACTIONS": "true", "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_PATH": str(tmp / "event.json"), "GITHUB_OUTPUT": str(tmp / "out.txt"),
            "GITHUB_TOKEN": github.token, "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77"}


def action(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", *map(str, args)], capture_output=True, text=True,
                          timeout=180, env=env)


def results_dir(tmp: Path) -> Path:
    """A judged run: the fixture log as userspace/intelasm (its self-test failed under ulimit)."""
    out = tmp / "results"
    out.mkdir()
    doc = subprocess.run([str(BSDKM_CI), "parse", "--json", "--variant", "intelasm", "--target", "userspace",
                          str(FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")],
                         capture_output=True, text=True, timeout=120)
    assert doc.returncode in (0, 1), doc.stderr
    (out / "summary.json").write_text(doc.stdout)
    return out


def passing_results(tmp: Path) -> Path:
    """A run that passes the base's policy: what a fork's forged artifact would hold."""
    out = tmp / "passing"
    out.mkdir(exist_ok=True)
    doc = subprocess.run([str(BSDKM_CI), "parse", "--json", "--variant", "intelasm", "--target", "userspace",
                          str(FIXTURES / "noise/accel_r01.txt")], capture_output=True, text=True, timeout=120)
    assert doc.returncode in (0, 1), doc.stderr
    (out / "summary.json").write_text(doc.stdout)
    return out


def test_status_per_run_on_the_pr_head(github: ActionsGitHub, tmp_path: Path) -> None:
    env = env_for(github, pull_request(number=3, head_sha=HEAD), tmp_path)
    proc = action(env, "status", "--out", results_dir(tmp_path))
    assert proc.returncode == 0, proc.stderr
    statuses = github.latest_statuses(HEAD)
    assert set(statuses) == {"bsdkm/userspace/intelasm"}
    assert statuses["bsdkm/userspace/intelasm"]["state"] == "failure"
    assert statuses["bsdkm/userspace/intelasm"]["target_url"] == "https://github.com/Codertocat/Hello-World/actions/runs/77"
    # A comment event names no head: the caller must (the retest's head-sha).
    env = env_for(github, {"issue": {"number": 3}, "repository": {"full_name": REPO}}, tmp_path)
    proc = action(env, "status", "--out", tmp_path / "results")
    assert proc.returncode == 2 and "is not a 40-digit sha" in proc.stderr


def workflow_run(head: str, repo: str = FORK) -> dict[str, Any]:
    return {"workflow_run": {"id": 5, "event": "pull_request", "head_sha": head,
                             "head_repository": {"full_name": repo}, "pull_requests": []},
            "repository": {"full_name": REPO}}


def test_run_pr_takes_the_pr_only_when_the_api_confirms_its_head(github: ActionsGitHub,
                                                                tmp_path: Path) -> None:
    pr = pull_request(number=9, head_sha=HEAD, fork=True)
    pr["pull_request"]["head"]["repo"]["full_name"] = FORK
    github.add_pull(pr)
    uploaded = tmp_path / "bsdkm-event"
    uploaded.mkdir()
    (uploaded / "event.json").write_text(json.dumps(pr))
    env = env_for(github, workflow_run(HEAD), tmp_path)
    # What the PR changes is GitHub's to say; without an answer nothing is reported.
    proc = action(env, "run-pr", "--event-dir", uploaded)
    assert proc.returncode == 2 and "/compare/" in proc.stderr, proc.stderr
    basehead = f"{pr['pull_request']['base']['sha']}...{HEAD}"
    github.changes[basehead] = [("modified", "wolfcrypt/src/aes.c", None)]
    proc = action(env, "run-pr", "--event-dir", uploaded)
    assert proc.returncode == 0, proc.stderr
    assert read_outputs((tmp_path / "out.txt").read_text()) == {"pr": "9", "head-sha": HEAD, "fork": "true",
                                                                "judges-changed": ""}
    # The uploaded event came from the PR's own job: a number pointing at another PR is refused.
    env = env_for(github, workflow_run("d" * 40), tmp_path)
    proc = action(env, "run-pr", "--event-dir", uploaded)
    assert proc.returncode == 2 and "not reporting on it" in proc.stderr
    (uploaded / "event.json").write_text("{}")
    proc = action(env, "run-pr", "--event-dir", uploaded)
    assert proc.returncode == 2 and "no pull_request.number" in proc.stderr


def test_comment_edits_our_earlier_comment_without_being_told_our_login(github: ActionsGitHub,
                                                                        tmp_path: Path) -> None:
    env = env_for(github, pull_request(number=4, head_sha=HEAD), tmp_path)
    github.plant_comment(REPO, 4, "<!-- bsdkm-ci:pr-report -->\ncopied by someone", "mallory")
    report = tmp_path / "r.md"
    for text in ("first", "second"):
        report.write_text(text)
        proc = action(env, "comment", "--report", report, "--mode", "always", "--verdict", "fail")
        assert proc.returncode == 0, proc.stderr
    ours = [c for c in github.comments_on(4) if c["user"]["login"] == BOT]
    assert len(ours) == 1 and ours[0]["body"].endswith("\nsecond")
    assert len(github.comments_on(4)) == 2  # mallory's copy of the marker is left alone
    assert [r.status for r in github.calls("GET", "/user")] == [403, 403]
    # failures: a passing run writes no new comment, but edits the one a failure left.
    report.write_text("third")
    proc = action(env, "comment", "--report", report, "--mode", "failures", "--verdict", "pass")
    assert proc.returncode == 0 and ours[0]["id"] == [c for c in github.comments_on(4)
                                                      if c["user"]["login"] == BOT][0]["id"]
    env = env_for(github, pull_request(number=5, head_sha=HEAD), tmp_path)
    proc = action(env, "comment", "--report", report, "--mode", "failures", "--verdict", "pass")
    assert proc.returncode == 0 and "left as it is" in proc.stdout and github.comments_on(5) == []


def test_retest_look_ups_are_answered_as_github_describes_them(github: ActionsGitHub, tmp_path: Path) -> None:
    """The permission and timeline answers the act runs' retests get are valid (teardown checks)."""
    github.add_pull(pull_request(number=6, head_sha=HEAD, fork=True))
    github.permissions["maintainer"] = "write"
    github.pushed(6, HEAD)
    event = issue_comment(f"retest this please {HEAD}", number=6, login="maintainer")
    github.commented(event)
    env = env_for(github, event, tmp_path)
    proc = action(env, "trigger")
    assert proc.returncode == 0, proc.stderr
    out = read_outputs((tmp_path / "out.txt").read_text())
    assert out["head-sha"] == HEAD and out["base-sha"] == next(iter(github.pulls.values()))["base"]["sha"]


def _fork_pr(github: ActionsGitHub, tmp: Path, changed: list[str]) -> tuple[dict[str, str], Path]:
    """A fork's PR whose head changes ``changed``; the companion's workspace holds the base's config."""
    pr = pull_request(number=11, head_sha=HEAD, fork=True)
    pr["pull_request"]["head"]["repo"]["full_name"] = FORK
    github.add_pull(pr)
    github.changes[f"{pr['pull_request']['base']['sha']}...{HEAD}"] = [("modified", p, None) for p in changed]
    uploaded = tmp / "bsdkm-event"
    uploaded.mkdir(exist_ok=True)
    (uploaded / "event.json").write_text(json.dumps(pr))
    workspace = tmp / "workspace"
    (workspace / ".github").mkdir(parents=True, exist_ok=True)
    (workspace / ".github" / "bsdkm.yml").write_text(
        CONFIG.replace("{cache}", str(tmp / "cache")) + "known_issues: known-issues.yml\n")
    (workspace / ".github" / "bsdkm-policy.yml").write_text(POLICY)
    (workspace / ".github" / "known-issues.yml").write_text("[]\n")
    return env_for(github, workflow_run(HEAD), tmp), workspace


def _run_pr(env: dict[str, str], tmp: Path, workspace: Path) -> dict[str, str]:
    (tmp / "out.txt").write_text("")
    proc = subprocess.run([str(BSDKM_CI), "action", "run-pr", "--event-dir", tmp / "bsdkm-event",
                           "--config", ".github/bsdkm.yml"], capture_output=True, text=True, timeout=180,
                          env=env, cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return read_outputs((tmp / "out.txt").read_text())


@pytest.mark.parametrize("changed", [".github/workflows/bsdkm-pr.yml", ".github/bsdkm-policy.yml",
                                     ".github/known-issues.yml", ".github/bsdkm.yml",
                                     ".github/actions/setup/action.yml", "action/action.yml"])
def test_a_fork_pr_that_changes_what_judges_it_gets_error_statuses(github: ActionsGitHub, tmp_path: Path,
                                                                   changed: str) -> None:
    env, workspace = _fork_pr(github, tmp_path, ["wolfcrypt/src/aes.c", changed])
    out = _run_pr(env, tmp_path, workspace)
    assert (out["fork"], out["judges-changed"]) == ("true", changed), out
    # The fork's artifact passes; the statuses are errors naming what the PR changed.
    proc = action(env, "status", "--out", passing_results(tmp_path), "--sha", HEAD, "--fork-run", "true",
                  "--judges-changed", out["judges-changed"])
    assert proc.returncode == 0, proc.stderr
    (status,) = github.latest_statuses(HEAD).values()
    assert status["state"] == "error", status
    assert status["description"].startswith(f"fork run: the PR changes what judges it ({changed})")
    assert len(github.calls("GET", "/compare/")) == 1


def test_a_fork_prs_statuses_say_they_come_from_its_own_run(github: ActionsGitHub, tmp_path: Path) -> None:
    env, workspace = _fork_pr(github, tmp_path, ["wolfcrypt/src/aes.c", "docs/x.md"])
    out = _run_pr(env, tmp_path, workspace)
    assert (out["fork"], out["judges-changed"]) == ("true", ""), out
    results = passing_results(tmp_path)
    proc = action(env, "status", "--out", results, "--sha", HEAD, "--fork-run", out["fork"],
                  "--judges-changed", out["judges-changed"])
    assert proc.returncode == 0, proc.stderr
    (status,) = github.latest_statuses(HEAD).values()
    assert status["state"] == "success" and status["description"].startswith("fork run: passed"), status
    # The report the comment is made from says so too.
    proc = action(env, "outputs", "--out", results, "--fork-run", "true")
    assert proc.returncode == 0, proc.stderr
    assert "fork's own `pull_request` run" in (results / "report.md").read_text()


def test_a_fork_pr_that_changes_its_judges_fails_the_report(github: ActionsGitHub, tmp_path: Path) -> None:
    results = passing_results(tmp_path)
    env = env_for(github, workflow_run(HEAD), tmp_path)
    args = ("--out", results, "--fork-run", "true", "--judges-changed", ".github/workflows/bsdkm-pr.yml")
    proc = action(env, "outputs", *args)
    assert proc.returncode == 0, proc.stderr
    outputs = read_outputs((tmp_path / "out.txt").read_text())
    assert outputs["verdict"] == "error" and json.loads(outputs["json"])["runs"][0]["state"] == "error"
    report = (results / "report.md").read_text()
    assert report.startswith("> [!CAUTION]") and "`.github/workflows/bsdkm-pr.yml`" in report
    assert action(env, "gate", *args).returncode == 1
    assert action(env, "gate", *args, "--fail-on", "never").returncode == 0


def test_a_compare_github_may_have_cut_counts_as_changing_everything() -> None:
    from buildbot_bsdkm.commands.action.provenance import JudgePaths, changed_judges

    files = [{"filename": f"src/{i}.c"} for i in range(300)]
    assert changed_judges(files, JudgePaths())[0].startswith("300+ files")
    renamed = [{"filename": "docs/ci.yml", "previous_filename": ".github/workflows/bsdkm-pr.yml"}]
    assert changed_judges(renamed, JudgePaths()) == [".github/workflows/bsdkm-pr.yml"]
