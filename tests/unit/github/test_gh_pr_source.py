"""The PR buildset carries what the fetch step needs to build the PR's head, not the config's tree.

The controller's real ``_add_buildset`` output goes through Buildbot's own
``Build.setupBuildProperties`` (which turns the sourcestamp into build properties) into the
real ``FetchSource`` step's command line.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from buildbot.process import buildstep
from buildbot.process.build import Build
from buildbot.process.properties import Properties

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.contract import PR_HEAD_PROPERTY as PROP_HEAD
from buildbot_bsdkm.contract import PR_NUMBER_PROPERTY as PROP_PR
from buildbot_bsdkm.github.controller import PrBuilder, PullRequestBuilds
from buildbot_bsdkm.github.events import PullRequest
from buildbot_bsdkm.github.settings import GitHubSettings
from buildbot_bsdkm.github.trust import PrRecord

CLONE_URL = "https://github.com/wolfSSL/wolfssl.git"


class FakeUpdates:
    def __init__(self) -> None:
        self.buildsets: list[dict[str, Any]] = []

    async def findBuilderId(self, name: str) -> int:  # noqa: N802 - Buildbot's name
        return 7

    async def addBuildset(self, **kw: Any) -> tuple[int, dict[int, int]]:  # noqa: N802 - Buildbot's name
        self.buildsets.append(kw)
        return len(self.buildsets), {7: 100 + len(self.buildsets)}


class Service(PullRequestBuilds):
    master: Any = None  # a plain attribute instead of the service tree's: no master needed


def pr_buildset(pull: PullRequest) -> dict[str, Any]:
    settings = GitHubSettings(repo="wolfSSL/wolfssl", token="t", webhook_secret="s", clone_url=CLONE_URL)
    service = Service(settings, [PrBuilder("userspace", "accel", "userspace-accel")], publisher=None)
    updates = FakeUpdates()
    service.master = SimpleNamespace(data=SimpleNamespace(updates=updates))
    asyncio.run(service.buildsets._add(pull, PrRecord(), service.builders, "opened"))
    (buildset,) = updates.buildsets
    return buildset


def build_properties(buildset: dict[str, Any]) -> Properties:
    """The properties a build of ``buildset`` starts with, as Buildbot computes them."""
    props = Properties()
    for name, (value, source) in buildset["properties"].items():
        props.setProperty(name, value, source)
    stamps = [SimpleNamespace(**s) for s in buildset["sourcestamps"]]
    Build.setupBuildProperties(props, requests=None, sources=stamps, number=1)
    return props


def test_fork_pr_buildset_leads_the_fetch_step_to_the_pr_head_ref() -> None:
    pull = PullRequest(
        repo="wolfSSL/wolfssl", number=42, head_sha="c" * 40, head_repo="someone/wolfssl", base_ref="master",
        author="someone", author_association="CONTRIBUTOR", draft=False,
        html_url="https://github.com/wolfSSL/wolfssl/pull/42",
    )
    buildset = pr_buildset(pull)
    (stamp,) = buildset["sourcestamps"]
    # refs/pull/N/head lives in the base repository, also for a fork (even a deleted one).
    assert stamp["repository"] == CLONE_URL
    assert (stamp["branch"], stamp["revision"]) == ("refs/pull/42/head", "c" * 40)
    assert steps.PR_NUMBER_PROPERTY == PROP_PR  # the step reads the name the controller writes
    props = build_properties(buildset)
    step = buildstep.create_step_from_step_or_factory(steps.FetchSource(variant="accel", target="userspace"))
    step.setBuild(SimpleNamespace(getProperties=lambda: props, master=None))
    assert steps.PR_HEAD_PROPERTY == PROP_HEAD
    assert step.stage_command()[-6:] == [
        "--source-git", CLONE_URL, "--source-ref", "refs/pull/42/head", "--source-commit", "c" * 40,
    ]
