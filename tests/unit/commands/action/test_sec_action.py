"""The Action retests the head the comment was about (no push after it in the PR's timeline; on a
fork's PR, the whole sha the comment names); the PR example judges with the base commit's config
and policy; a gate that checked nothing is not a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from act.harness import FORK, REPO, ActionsGitHub
from github_fake.payloads import github_time, issue_comment, pull_request

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.model import LogResult, RunResult
from buildbot_bsdkm.policy import evaluate, parse_policy

EXAMPLES = Path(__file__).resolve().parents[4] / "action" / "examples"
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
OLD, REVIEWED, LATER = "0" * 39 + "1", "b" * 40, "c" * 40


@pytest.fixture
def github() -> Iterator[ActionsGitHub]:
    fake = ActionsGitHub().start()
    yield fake
    fake.stop()
    assert fake.invalid == [] and fake.invalid_responses == []  # timeline answers as GitHub describes


def _pr(github: ActionsGitHub, number: int, head: str, *, fork: bool) -> None:
    pr = pull_request(number=number, head_sha=head, fork=fork)
    if not fork:
        pr["pull_request"]["head"]["repo"]["full_name"] = REPO
    else:
        pr["pull_request"]["head"]["repo"]["full_name"] = FORK
    github.add_pull(pr)


def _trigger(github: ActionsGitHub, tmp: Path, event: dict[str, Any]) -> dict[str, str]:
    (tmp / "event.json").write_text(json.dumps(event))
    (tmp / "out.txt").write_text("")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
           "GITHUB_ACTIONS": "true", "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": REPO,
           "GITHUB_EVENT_PATH": str(tmp / "event.json"), "GITHUB_OUTPUT": str(tmp / "out.txt"),
           "GITHUB_TOKEN": github.token}
    proc = subprocess.run([str(BSDKM_CI), "action", "trigger"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return read_outputs((tmp / "out.txt").read_text())


def _comment(github: ActionsGitHub, number: int, body: str) -> dict[str, Any]:
    github.permissions["maintainer"] = "write"
    event = issue_comment(body, number=number, login="maintainer", association="MEMBER",
                          created_at=github_time(-1800))
    github.commented(event)
    return event


def test_a_push_back_to_an_older_head_after_the_comment_is_not_retested(github: ActionsGitHub,
                                                                        tmp_path: Path) -> None:
    """The older commit's check suite predates the comment; the timeline shows the force-push."""
    github.suites[OLD] = [github_time(-3600)]  # GitHub first saw it an hour before the comment
    github.pushed(3, OLD)
    github.pushed(3, REVIEWED)
    event = _comment(github, 3, "retest this please")  # reviewed head: REVIEWED
    github.pushed(3, OLD, force=True)  # then the branch is pushed back
    _pr(github, 3, OLD, fork=False)
    out = _trigger(github, tmp_path, event)
    assert out["run"] == "false", out
    assert "timeline shows a push after the comment (head_ref_force_pushed" in out["reason"], out


def test_a_commit_pushed_after_the_comment_is_not_retested(github: ActionsGitHub, tmp_path: Path) -> None:
    github.pushed(4, REVIEWED)
    event = _comment(github, 4, "retest this please")
    github.pushed(4, LATER)  # a plain push: its commit dates are its author's, its place is GitHub's
    _pr(github, 4, LATER, fork=False)
    out = _trigger(github, tmp_path, event)
    assert out["run"] == "false" and "(committed cccccccccccc)" in out["reason"], out
    # With no push after it, the same comment retests the head.
    github.timelines[4] = github.timelines[4][:2]
    _pr(github, 4, REVIEWED, fork=False)
    out = _trigger(github, tmp_path, event)
    assert out["run"] == "true" and out["head-sha"] == REVIEWED, out
    # A timeline that does not show the comment tells nothing: refused.
    github.timelines[4] = github.timelines[4][:1]
    out = _trigger(github, tmp_path, event)
    assert out["run"] == "false" and "does not show comment" in out["reason"], out


def test_a_forks_retest_names_the_whole_head_it_reviewed(github: ActionsGitHub, tmp_path: Path) -> None:
    github.pushed(5, REVIEWED)
    _pr(github, 5, REVIEWED, fork=True)
    out = _trigger(github, tmp_path, _comment(github, 5, "retest this please"))
    assert out["run"] == "false" and "name the commit you reviewed, all 40 digits" in out["reason"], out
    out = _trigger(github, tmp_path, _comment(github, 5, f"retest this please {REVIEWED[:12]}"))
    assert out["run"] == "false" and "whole 40-digit sha" in out["reason"], out
    out = _trigger(github, tmp_path, _comment(github, 5, f"retest bsdkm/noasm please {LATER}"))
    assert out["run"] == "false" and "not the commit the comment names" in out["reason"], out
    out = _trigger(github, tmp_path, _comment(github, 5, f"Retest bsdkm/noasm please {REVIEWED}"))
    assert (out["run"], out["head-sha"], out["variants"]) == ("true", REVIEWED, "noasm"), out


def _steps(workflow: str, job: str) -> list[dict]:
    wf = yaml.load((EXAMPLES / workflow).read_text(), Loader=yaml.BaseLoader)
    return wf["jobs"][job]["steps"]


def test_pr_example_reads_config_and_policy_from_the_base_commit() -> None:
    for job in ("test", "report"):
        steps = _steps("bsdkm-pr.yml", job)
        action_step = next(s for s in steps if "bsdkm-ci/action" in s.get("uses", ""))
        config = action_step["with"]["config"]
        base = [s for s in steps if s.get("uses", "").startswith("actions/checkout")
                and s.get("with", {}).get("ref") == "${{ github.event.pull_request.base.sha }}"]
        assert base, f"{job}: no checkout of the base commit"
        where = base[0]["with"].get("path", "")
        assert config == (f"{where}/.github/bsdkm.yml" if where else ".github/bsdkm.yml"), (job, config)


def test_a_gate_that_evaluated_nothing_is_an_error_not_a_pass() -> None:
    emptied = parse_policy("selftests: false\ncomplete: false\nregressions: []\n", "emptied.yml")
    run = RunResult(variant="noasm", target="userspace", logs=[LogResult(source="x", complete=True)])
    verdict = evaluate([run], emptied)
    assert not verdict.passed
    assert verdict.failures[0].error and "0 checks" in verdict.failures[0].message
    assert not evaluate([], parse_policy("selftests: true\n", "p.yml")).passed  # no results at all
