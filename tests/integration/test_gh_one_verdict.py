"""One recorded set of PR runs, reported by both shells: the verdict, every commit status and the
comment body are the same.

The Buildbot side is the real reporter (``GitHubPrReporter``: its render child, its publisher and
GitHub client) fed the PR's builds as Buildbot's data API gives them, one build finishing after
another; the Action side is the ``bsdkm-ci action`` commands a workflow runs (``outputs``, ``status``,
``comment``, ``gate``) over the same runs in one ``summary.json``. Both write to the loopback GitHub
(every request checked against GitHub's OpenAPI description), on two PRs and heads.

The runs are real logs: an accelerated userspace build's benchmark (its AES-GCM speedup over the
portable build is judged against a minimum it cannot reach, so its status changes when the portable
build finishes), the portable build's self-test and benchmark, a self-test that failed under a memory
limit, and a FreeBSD pair this host cannot run. What only Buildbot knows (build links, retries) is
left out: those are inputs of the one report, and these builds have none.
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
from conftest import FIXTURES
from github_fake import reactor_thread
from github_fake.server import FakeGitHub, served

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.contract import (
    FAILURE_PROPERTY,
    PR_HEAD_PROPERTY,
    PR_NUMBER_PROPERTY,
    PR_REPO_PROPERTY,
    RESULTS_PROPERTY,
    failure_property,
)
from buildbot_bsdkm.github.aggregate import FAILURE, SUCCESS, BuildFacts
from buildbot_bsdkm.github.client import GitHubClient
from buildbot_bsdkm.github.controller import PrBuilder
from buildbot_bsdkm.github.outbox import Outbox
from buildbot_bsdkm.github.publisher import Publisher
from buildbot_bsdkm.github.render import Renderer
from buildbot_bsdkm.github.reporters import GitHubPrReporter
from buildbot_bsdkm.github.services import _pr_report
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure, to_json
from buildbot_bsdkm.parsers.api import parse_file
from buildbot_bsdkm.report.pull_request import PullRequestReport
from buildbot_bsdkm.report.sinks import PullRequestRef

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
REPO = "Codertocat/Hello-World"
BUILDBOT_PR, BUILDBOT_HEAD = 11, "a" * 40
ACTION_PR, ACTION_HEAD = 12, "b" * 40
POLICY = """\
version: 1
selftests: true
complete: true
speedups:
  - {pattern: "AES-128-GCM-enc", accelerated: intelasm, software: noasm, min: 1000, targets: [userspace]}
"""
CONFIG = """\
policy: {policy}
targets: {{userspace: null, freebsd-kmod: null}}
variants:
  intelasm: {{targets: [userspace]}}
  noasm: {{targets: [userspace, freebsd-kmod]}}
  aesni-avx: {{targets: [userspace]}}
"""
SELFTEST_FAILED = StageFailure("load", "self-test failed", FailureCategory.REAL, "selftest")


def recorded_runs() -> list[RunResult]:
    def run(variant: str, *logs: str, target: str = "userspace") -> RunResult:
        return RunResult(variant, target, logs=[parse_file(FIXTURES / log) for log in logs])

    return [
        run("intelasm", "noise/accel_r01.txt"),
        run("noasm", "userspace/noasm/testwolfcrypt.txt", "noise/noasm_r01.txt"),
        run("aesni-avx", "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt"),
        RunResult("noasm", "freebsd-kmod", not_run="not a FreeBSD host"),
    ]


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with served() as fake:
        yield fake


@pytest.fixture
def config(tmp_path: Path) -> Path:
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    path = tmp_path / "bsdkm.yml"
    path.write_text(CONFIG.format(policy=policy))
    return path


class Recorded:
    """A sink that keeps what it was given: the Buildbot side's last report, for its verdict."""

    def __init__(self) -> None:
        self.reports: list[PullRequestReport] = []

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        self.reports.append(report)
        return True


class Buildset(GitHubPrReporter):
    """The reporter, with Buildbot's data API answered from the builds the test has made so far."""

    builds: list[BuildFacts]

    async def _builds_of_buildset(self, build: dict[str, Any]) -> list[BuildFacts]:
        return sorted(self.builds, key=lambda b: b.context)


def _event(facts: BuildFacts, builder: str) -> dict[str, Any]:
    return {"builder": {"name": builder}, "complete": facts.results is not None, "results": facts.results,
            "url": facts.url, "properties": {k: (v, "test") for k, v in facts.properties.items()}}


def report_with_buildbot(github: FakeGitHub, config: Path, tmp: Path) -> PullRequestReport:
    runs = recorded_runs()
    builders = [PrBuilder(r.target, r.variant, f"{r.target}-{r.variant}") for r in runs]
    pr = {PR_REPO_PROPERTY: REPO, PR_NUMBER_PROPERTY: BUILDBOT_PR, PR_HEAD_PROPERTY: BUILDBOT_HEAD}
    publisher = Publisher(GitHubClient(github.url, github.token, timeout=30), Outbox(tmp / "outbox.json"))
    recorded = Recorded()
    renderer = Renderer(body_limit_s=120.0)
    reporter = Buildset(publisher, builders, _pr_report(load_config(config)), renderer=renderer,
                        extra_sinks=[recorded])
    reporter.builds = []
    try:
        for builder, run in zip(builders, runs, strict=True):  # every build starts: pending
            started = BuildFacts(run.target, run.variant, None, None, dict(pr))
            reporter.builds.append(started)
            reactor_thread.run(lambda started=started, name=builder.name: reporter._report_build(
                _event(started, name)))
        # They finish one after another, the portable build after the accelerated one.
        for builder, run in zip(builders, runs, strict=True):
            failed = bool(run.tests) and not all(t.passed for t in run.tests)
            props = {**pr, RESULTS_PROPERTY: to_json([run])}
            if failed:
                props[FAILURE_PROPERTY] = failure_property(SELFTEST_FAILED)
            done = BuildFacts(run.target, run.variant, FAILURE if failed else SUCCESS, None, props)
            reporter.builds = [b for b in reporter.builds if b.context != done.context] + [done]
            reactor_thread.run(lambda done=done, name=builder.name: reporter._report_build(
                _event(done, name)))
    finally:
        renderer.close()
    return recorded.reports[-1]


def action(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", *map(str, args)], capture_output=True, text=True,
                          timeout=180, env=env)


def report_with_the_action(github: FakeGitHub, config: Path, tmp: Path) -> tuple[dict[str, str], int]:
    out = tmp / "results"
    out.mkdir()
    (out / "summary.json").write_text(to_json(recorded_runs()))
    (tmp / "outputs.txt").write_text("")
    (tmp / "summary.md").write_text("")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BSDKM_BOT"))},
           "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": github.token,
           "GITHUB_OUTPUT": str(tmp / "outputs.txt"), "GITHUB_STEP_SUMMARY": str(tmp / "summary.md")}
    judged = ["--out", out, "--config", config]
    proc = action(env, "outputs", *judged)
    assert proc.returncode == 0, proc.stderr
    outputs = read_outputs((tmp / "outputs.txt").read_text())
    proc = action(env, "status", *judged, "--sha", ACTION_HEAD)
    assert proc.returncode == 0, proc.stderr
    proc = action(env, "comment", "--report", outputs["report-path"], "--pr", str(ACTION_PR))
    assert proc.returncode == 0, proc.stderr
    return outputs, action(env, "gate", *judged).returncode


def test_the_buildbot_reporter_and_the_action_say_the_same_of_the_same_runs(
        github: FakeGitHub, config: Path, tmp_path: Path) -> None:
    (tmp_path / "bb").mkdir()
    (tmp_path / "action").mkdir()
    buildbot = report_with_buildbot(github, config, tmp_path / "bb")
    outputs, gate = report_with_the_action(github, config, tmp_path / "action")

    # The verdict.
    said = json.loads(outputs["json"])
    verdict = buildbot.verdict
    assert (said["verdict"], said["summary"]) == (verdict.status, verdict.summary()) == (
        "fail", "FAIL: 2 of 165 checks failed (selftest, speedup); 1 run not run: not a FreeBSD host")
    assert gate == 1 and outputs["summary"] == verdict.summary()
    # Every status: name, state and description.
    on_buildbots, on_actions = (
        {c: (s["state"], s["description"]) for c, s in github.latest_statuses(head).items()}
        for head in (BUILDBOT_HEAD, ACTION_HEAD))
    assert on_buildbots == on_actions == {s["context"]: (s["state"], s["description"]) for s in said["runs"]}
    assert on_actions["bsdkm/userspace/intelasm"][0] == "failure"  # posted again once noasm finished
    assert on_actions["bsdkm/freebsd-kmod/noasm"] == ("error", "not run: not a FreeBSD host")
    # The comment body.
    (from_buildbot,) = github.comments_on(BUILDBOT_PR)
    (from_action,) = github.comments_on(ACTION_PR)
    assert from_buildbot["body"] == from_action["body"] == buildbot.body
    assert (tmp_path / "action" / "summary.md").read_text().strip() == buildbot.markdown.strip()
