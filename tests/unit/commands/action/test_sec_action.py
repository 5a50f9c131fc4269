"""The Action retests the head the comment was about; the PR example judges
with the base commit's config and policy; a gate that checked nothing is not a pass."""

from __future__ import annotations

from pathlib import Path

import yaml
from github_fake.payloads import github_time, issue_comment, pull_request
from test_action_github import FakeGitHubWithPermissions, action, read_outputs, workflow_env

from buildbot_bsdkm.model import LogResult, RunResult
from buildbot_bsdkm.policy import evaluate, parse_policy

EXAMPLES = Path(__file__).resolve().parents[4] / "action" / "examples"


def _retest(github: FakeGitHubWithPermissions, tmp: Path, *, suites: list[str], written: str) -> dict:
    github.add_pull(pull_request(number=9, head_sha="b" * 40, fork=True))
    github.suites["b" * 40] = suites
    github.permissions["maintainer"] = "write"
    event = issue_comment("retest this please", number=9, login="maintainer", association="MEMBER",
                          created_at=written)
    proc = action(workflow_env(github, event, tmp), "trigger")
    assert proc.returncode == 0, proc.stderr
    return read_outputs((tmp / "github_output").read_text())


def test_a_head_pushed_after_the_comment_is_not_retested(tmp_path: Path) -> None:
    github = FakeGitHubWithPermissions().start()
    try:
        out = _retest(github, tmp_path, suites=[github_time(-10)], written=github_time(-60))
        assert out["run"] == "false" and "may be newer than the comment" in out["reason"], out
        (tmp_path / "github_output").write_text("")
        out = _retest(github, tmp_path, suites=[], written=github_time(-60))
        assert out["run"] == "false" and "no check suite" in out["reason"], out
        (tmp_path / "github_output").write_text("")
        out = _retest(github, tmp_path, suites=[github_time(-120), github_time(-5)], written=github_time(-60))
        assert out["run"] == "true" and out["head-sha"] == "b" * 40, out
    finally:
        github.stop()


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
