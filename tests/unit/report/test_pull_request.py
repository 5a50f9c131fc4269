"""The core's one PR report: what a shell's own facts change, how bad judging inputs are said, and a
new place to report to added as one class (a toy sink) to the Buildbot reporter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from github_fake import reactor_thread

from buildbot_bsdkm.contract import PR_HEAD_PROPERTY, PR_NUMBER_PROPERTY, PR_REPO_PROPERTY, RESULTS_PROPERTY
from buildbot_bsdkm.github.aggregate import SUCCESS, BuildFacts, PrReport
from buildbot_bsdkm.github.controller import PrBuilder
from buildbot_bsdkm.github.render import Renderer
from buildbot_bsdkm.github.reporters import GitHubPrReporter
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers.api import parse_file
from buildbot_bsdkm.policy import BaselineMismatch, load_policy
from buildbot_bsdkm.report.commit_status import PairFacts
from buildbot_bsdkm.report.pull_request import Judging, PullRequestReport, pull_request_report
from buildbot_bsdkm.report.sinks import PullRequestRef, deliver


class ChatLine:
    """The toy sink: one line per report into a chat log, the verdict's headline and the red pairs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        red = [s.context for s in report.statuses if s.state in ("failure", "error")]
        with self.path.open("a", encoding="utf-8") as chat:
            chat.write(f"{where.repo}#{where.number}: {report.verdict.headline()}; red: {', '.join(red)}\n")
        return True


def run_of(variant: str, log: str) -> RunResult:
    return RunResult(variant, "userspace", logs=[parse_file(FIXTURES / log)])


class FakePublisher:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str, str]] = []
        self.comments: list[str] = []

    async def post_status(self, repo: str, sha: str, context: str, state: str, text: str,
                          url: str | None) -> bool:
        self.statuses.append((context, state, text))
        return True

    async def upsert_report(self, repo: str, number: int, body: str) -> bool:
        self.comments.append(body)
        return True


class OneBuild(GitHubPrReporter):
    facts: list[BuildFacts]

    async def _builds_of_buildset(self, build: dict[str, Any]) -> list[BuildFacts]:
        return self.facts


def test_a_toy_sink_is_one_class_and_gets_what_the_other_sinks_get(tmp_path: Path) -> None:
    run = run_of("aesni-avx", "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    pr = {PR_REPO_PROPERTY: "wolfSSL/wolfssl", PR_NUMBER_PROPERTY: 7, PR_HEAD_PROPERTY: "a" * 40,
          RESULTS_PROPERTY: to_json([run])}
    chat = ChatLine(tmp_path / "chat.log")
    publisher = FakePublisher()
    renderer = Renderer(body_limit_s=60.0)
    reporter = OneBuild(publisher, [PrBuilder("userspace", "aesni-avx", "userspace-aesni-avx")],
                        PrReport(load_policy()), renderer=renderer, extra_sinks=[chat])
    reporter.facts = [BuildFacts("userspace", "aesni-avx", SUCCESS, None, pr)]
    build = {"builder": {"name": "userspace-aesni-avx"}, "complete": True, "results": SUCCESS,
             "properties": {k: (v, "test") for k, v in pr.items()}}
    try:
        reactor_thread.run(lambda: reporter._report_build(build))
    finally:
        renderer.close()
    (line,) = (tmp_path / "chat.log").read_text().splitlines()
    assert line == ("wolfSSL/wolfssl#7: ❌ FAIL: 1 of 72 checks failed (selftest); "
                    "red: bsdkm/userspace/aesni-avx")
    (comment,) = publisher.comments
    assert "❌ FAIL: 1 of 72 checks failed (selftest)" in comment
    # The same report, delivered outside Buildbot: the sink needs no shell.
    report = pull_request_report([run], Judging(load_policy()))
    assert asyncio.run(deliver(report, PullRequestRef("wolfSSL/wolfssl", "b" * 40, 8), [chat]))
    assert (tmp_path / "chat.log").read_text().splitlines()[1] == line.replace("#7", "#8")


def test_what_the_shell_knows_of_a_pair_is_an_input() -> None:
    run = run_of("noasm", "userspace/noasm/testwolfcrypt.txt")
    retried = ({"reason": "network", "stage": "fetch"},)
    pairs = [PairFacts("userspace", "noasm", ended="success", retries=retried),
             PairFacts("userspace", "intelasm", running=True, said=("pending", "building"))]
    report = pull_request_report([run], Judging(load_policy()), pairs)
    assert [(s.context, s.state, s.description) for s in report.statuses] == [
        ("bsdkm/userspace/noasm", "success", "passed: self-test: 89/89 passed; retried 1× (network)"),
        ("bsdkm/userspace/intelasm", "pending", "building")]
    assert report.markdown.startswith("_Still running: bsdkm/userspace/intelasm;")
    assert "### Retries" in report.markdown
    # Its own gate failed it where it ran, on a base the judging here does not have.
    regressed = PairFacts("userspace", "noasm", ended="failure", regressions=("SHA-256 −31 %",))
    (status,) = pull_request_report([run], Judging(load_policy()), [regressed]).statuses
    assert (status.state, status.description) == ("failure", "1 regression: SHA-256 −31 %")


def test_a_bad_baseline_is_an_error_in_the_report_or_raised_as_the_shell_asks() -> None:
    run = run_of("noasm", "userspace/noasm/testwolfcrypt.txt")
    other = [RunResult("a", "t"), RunResult("b", "t")]
    report = pull_request_report([run], Judging(load_policy(), baseline=other, lenient=True))
    assert report.verdict.status == "fail" and "bad baseline" in report.markdown
    with pytest.raises(BaselineMismatch):
        pull_request_report([run], Judging(load_policy(), baseline=other, lenient=False))


def test_runs_are_reported_in_the_order_of_their_names_whatever_order_they_came_in() -> None:
    runs = [run_of("noasm", "noise/noasm_r01.txt"), run_of("intelasm", "noise/accel_r01.txt")]
    ahead, behind = (pull_request_report(order, Judging(load_policy())) for order in (runs, runs[::-1]))
    assert ahead.markdown == behind.markdown and ahead.statuses == behind.statuses
    assert [s.variant for s in ahead.statuses] == ["intelasm", "noasm"]
