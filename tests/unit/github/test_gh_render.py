"""The PR comment and commit statuses are rendered off the master's reactor, with a time limit.

A report that takes long (a pathological PR line, a huge result) must neither stop the reactor
nor keep the status from arriving: past the limit the child is killed, the status says the
build's result and the comment says it was not rendered.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from github_fake import reactor_thread
from twisted.internet import task

from buildbot_bsdkm.contract import PR_HEAD_PROPERTY, PR_NUMBER_PROPERTY, PR_REPO_PROPERTY, RESULTS_PROPERTY
from buildbot_bsdkm.github.aggregate import FAILURE, SUCCESS, BuildFacts, PrReport
from buildbot_bsdkm.github.controller import PrBuilder
from buildbot_bsdkm.github.publisher import REPORT_MARKER
from buildbot_bsdkm.github.render import Renderer, fallback_status
from buildbot_bsdkm.github.reporters import GitHubPrReporter
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure, to_json
from buildbot_bsdkm.policy import load_policy
from buildbot_bsdkm.report.pull_request import PullRequestReport
from buildbot_bsdkm.support.resources import default_policy_path

TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _child_finds_this_module(monkeypatch: pytest.MonkeyPatch) -> None:
    # The renderer's child unpickles SlowReport from this module.
    paths = [str(Path(__file__).resolve().parent), str(TESTS), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


@dataclass
class SlowReport(PrReport):
    seconds: float = 5.0

    def report(self, builds: Any, links: Any = None) -> PullRequestReport:
        time.sleep(self.seconds)
        return dataclasses.replace(super().report(builds, links), markdown="slow but rendered\n")


PR = {PR_NUMBER_PROPERTY: 7, PR_REPO_PROPERTY: "wolfSSL/wolfssl", PR_HEAD_PROPERTY: "a" * 40}


class FakePublisher:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str, str]] = []
        self.comments: list[str] = []

    async def post_status(self, repo: str, sha: str, context: str, state: str, text: str,
                          url: str | None) -> None:
        self.statuses.append((context, state, text))

    async def upsert_report(self, repo: str, number: int, body: str) -> None:
        self.comments.append(body)


class Reporter(GitHubPrReporter):
    def __init__(self, facts: list[BuildFacts], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.facts = facts

    async def _builds_of_buildset(self, build: dict[str, Any]) -> list[BuildFacts]:
        return self.facts


def _build(results: int, props: dict[str, Any]) -> dict[str, Any]:
    return {"builder": {"name": "freebsd-kmod-noasm"}, "complete": True, "results": results,
            "url": "http://master/#/builders/1/builds/1", "properties": {**PR, **props}}


def _panic_results() -> str:
    """A FreeBSD panic line of dashes: seconds of judging in the signature's patterns before they
    were made linear; whatever they take now, the reactor must not wait for it."""
    run = RunResult(variant="noasm", target="freebsd-kmod", failure=StageFailure(
        stage="load", message="panic: " + "-" * 1500, category=FailureCategory.REAL, reason="panic"))
    return to_json([run])


@pytest.fixture
def renderer() -> Iterator[Renderer]:
    r = Renderer(body_limit_s=2.0, status_limit_s=20.0)
    yield r
    r.close()


def _report_watching_the_reactor(reporter: GitHubPrReporter, build: dict[str, Any]) -> float:
    """Reports ``build`` on the reactor; returns the longest the reactor went without a turn."""
    from twisted.internet import reactor

    async def go() -> float:
        gaps = [0.0]
        last = [time.monotonic()]

        def tick() -> None:
            now = time.monotonic()
            gaps.append(now - last[0])
            last[0] = now

        loop = task.LoopingCall(tick)
        loop.clock = reactor
        loop.start(0.01)
        try:
            await reporter._report_build(build)
            await task.deferLater(reactor, 0.05, lambda: None)
        finally:
            loop.stop()
        return max(gaps)

    return reactor_thread.run(go)


def test_a_slow_report_leaves_the_reactor_free_and_the_status_and_a_comment_still_arrive(
        renderer: Renderer) -> None:
    """Fails on the old code: the comment was rendered on the reactor, which stood still meanwhile."""
    policy = load_policy(default_policy_path())
    facts = [BuildFacts("freebsd-kmod", "noasm", SUCCESS, "http://master/#/builders/1/builds/1", dict(PR))]
    publisher = FakePublisher()
    reporter = Reporter(facts, publisher=publisher, builders=[PrBuilder("freebsd-kmod", "noasm",
                                                                        "freebsd-kmod-noasm")],
                        report=SlowReport(policy, seconds=60.0), renderer=renderer)
    started = time.monotonic()
    gap = _report_watching_the_reactor(reporter, _build(SUCCESS, {}))
    took = time.monotonic() - started
    assert gap < 1.0, f"the reactor stood still for {gap:.2f} s"
    assert [s[:2] for s in publisher.statuses] == [("bsdkm/freebsd-kmod/noasm", "success")]
    (comment,) = publisher.comments
    assert comment.startswith(REPORT_MARKER)
    assert "not rendered within 2 s" in comment and "`bsdkm/freebsd-kmod/noasm`: success" in comment
    assert took < 30, f"the limit did not stop the rendering ({took:.1f} s)"
    # the killed child is replaced: the next report renders
    renderer.body_limit_s = 20.0
    reporter.report = SlowReport(policy, seconds=0.0)
    _report_watching_the_reactor(reporter, _build(SUCCESS, {}))
    assert publisher.comments[-1] == REPORT_MARKER + "\nslow but rendered\n"


def test_a_pathological_panic_line_never_stops_the_reactor(renderer: Renderer) -> None:
    """Fails on the old code: the reactor waited for the whole judging of the panic line."""
    props = {RESULTS_PROPERTY: _panic_results()}
    facts = [BuildFacts("freebsd-kmod", "noasm", FAILURE, None, {**PR, **props})]
    publisher = FakePublisher()
    reporter = Reporter(facts, publisher=publisher,
                        builders=[PrBuilder("freebsd-kmod", "noasm", "freebsd-kmod-noasm")],
                        report=PrReport(load_policy(default_policy_path())), renderer=renderer)
    gap = _report_watching_the_reactor(reporter, _build(FAILURE, props))
    assert gap < 1.0, f"the reactor stood still for {gap:.2f} s"
    ((context, state, _),) = publisher.statuses
    assert (context, state) == ("bsdkm/freebsd-kmod/noasm", "failure")
    (comment,) = publisher.comments
    assert comment.startswith(REPORT_MARKER) and ("FAIL" in comment or "not rendered within" in comment)


def test_the_fallback_status_never_passes_what_did_not_pass() -> None:
    build = BuildFacts("freebsd-kmod", "noasm", FAILURE)
    assert fallback_status(build, "not rendered within 20 s")[0] == "failure"
    assert fallback_status(BuildFacts("t", "v", 4), "x")[0] == "error"  # EXCEPTION
    assert fallback_status(BuildFacts("t", "v", SUCCESS), "x")[0] == "success"


def test_the_renderer_survives_a_child_that_died(renderer: Renderer) -> None:
    assert renderer.sleep(0, 10).value == "slept"
    pid = renderer.child_pid
    assert pid is not None
    os.kill(pid, 9)
    time.sleep(0.2)
    assert renderer.sleep(0, 10).value == "slept" and renderer.child_pid != pid
    assert renderer.sleep(5, 0.5).error == "not rendered within 0.5 s"


def test_the_child_runs_the_masters_own_code_from_any_directory(
        renderer: Renderer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the old code where the interpreter's own search finds another copy of the package
    (an editable install of another checkout): the child judged with that code."""
    from buildbot_bsdkm.github import render

    monkeypatch.chdir(tmp_path)
    assert Path(renderer.where().value).resolve() == Path(render.__file__).resolve()
