"""What the example workflows' structure allows, where act cannot show it.

Caches: GitHub keeps a run's caches in the scope of its ref. An ``issue_comment``,
``pull_request_target`` or ``workflow_run`` run's ref is the default branch, whose caches every
branch's runs restore, the nightly's included; a ``pull_request`` run's is the PR's own merge ref.
So a job of such an event that builds a PR's code must save no cache.

Concurrency: "there can be at most one running and one pending job in a concurrency group at any
time. When a concurrent job or workflow is queued, if another job or workflow using the same
concurrency group in the repository is in progress, the queued job or workflow will be pending.
Any existing pending job or workflow in the same concurrency group, if it exists, will be canceled
and the new queued job or workflow will take its place" (GitHub's "Control the concurrency of
workflows and jobs", docs.github.com/en/actions/using-jobs/using-concurrency; newer versions add an
optional ``queue: max``, not used here). A workflow-level group is entered by every run
the event starts; a job-level one only by a job that is queued, and a job whose ``if`` is false is
skipped, never queued ("jobs.<job_id>.if ... prevent a job from running unless a condition is
met"). act runs jobs but queues nothing by group, so ``QueueModel`` applies that rule to the
entries the workflow's structure makes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "action" / "examples"
ACTION = ROOT / "action" / "action.yml"
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
SHARED_SCOPE = {"issue_comment", "pull_request_target", "workflow_run"}
# What a checkout's ref names when it is a PR's head rather than the default branch or the base.
PR_HEAD = re.compile(r"head[-_]sha|pull_request\.head|workflow_run\.head")


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # "on" stays a key, values stay text


def events(workflow: dict[str, Any]) -> set[str]:
    on = workflow["on"]
    return {on} if isinstance(on, str) else set(on)


def builds_pr_code(job: dict[str, Any]) -> bool:
    return any(str(s.get("uses", "")).startswith("actions/checkout@")
               and PR_HEAD.search(str(s.get("with", {}).get("ref", ""))) for s in job.get("steps", []))


def cache_savers(job: dict[str, Any]) -> list[str]:
    """The steps of a job that would save a cache: actions/cache, or our action building with its cache."""
    found = []
    for step in job.get("steps", []):
        uses = str(step.get("uses", ""))
        inputs = step.get("with", {})
        if uses.startswith("actions/cache@") and not uses.startswith("actions/cache/restore"):
            found.append(uses)
        builds = "bsdkm-ci/action@" in uses and not inputs.get("results")
        if builds and inputs.get("cache", "true") != "false":
            found.append(f"{uses} (cache: {inputs.get('cache', 'true')!r}, builds)")
    return found


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yml")), ids=lambda p: p.name)
def test_no_job_that_builds_pr_code_in_the_default_branchs_scope_saves_a_cache(path: Path) -> None:
    workflow = load(path)
    if not events(workflow) & SHARED_SCOPE:
        return
    for name, job in workflow["jobs"].items():
        if builds_pr_code(job):
            assert cache_savers(job) == [], f"{path.name}: job {name} builds a PR's code and saves a cache"


def test_the_retest_builds_the_pr_head_in_an_issue_comment_run() -> None:
    """The premise of the rule above, for the example it is about."""
    workflow = load(EXAMPLES / "bsdkm-retest.yml")
    assert events(workflow) == {"issue_comment"} and builds_pr_code(workflow["jobs"]["test"])


def test_the_action_refuses_a_cache_in_a_default_branch_scoped_build(tmp_path: Path) -> None:
    """A workflow of one's own that keeps ``cache: 'true'`` fails before anything is saved."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    base["GITHUB_OUTPUT"] = str(tmp_path / "out")
    for event, refused in (("issue_comment", True), ("pull_request_target", True), ("workflow_run", True),
                           ("pull_request", False), ("schedule", False), ("push", False)):
        proc = subprocess.run([str(BSDKM_CI), "action", "cache-key", "--source", str(tmp_path)],
                              env={**base, "GITHUB_EVENT_NAME": event}, capture_output=True, text=True,
                              timeout=60)
        assert (proc.returncode == 2) == refused, (event, proc.stderr)
        if refused:
            assert f"in a {event} job that builds" in proc.stderr and "cache: 'false'" in proc.stderr


def test_every_cache_of_the_action_follows_its_cache_input_and_the_refusal() -> None:
    """The refusal fails the job in "Build cache key"; actions/cache saves only when the job succeeds
    (its post-if: success()), so a cache step before it saves nothing then and one after it does not
    run; the VM action's own caches follow the input."""
    steps = yaml.load(ACTION.read_text(), Loader=yaml.BaseLoader)["runs"]["steps"]
    names = [s.get("name") for s in steps]
    gate = names.index("Build cache key")
    assert steps[gate]["if"] == "inputs.cache == 'true' && inputs.results == ''"
    for i, step in enumerate(steps):
        uses = str(step.get("uses", ""))
        if uses.startswith("actions/cache@"):
            assert "always()" not in step.get("if", "") and "save-always" not in step.get("with", {})
            assert ("inputs.cache == 'true'" in step["if"]) if i < gate else ("cache" in step["if"]), step
        if uses.startswith("vmactions/freebsd-vm@"):
            assert step["with"]["disable-cache"] == "${{ inputs.cache != 'true' }}"


# --- concurrency --------------------------------------------------------------------------------


@dataclass
class Entry:
    who: str  # the comment that started the run
    job: str
    group: str
    state: str = "queued"  # running, pending, cancelled, done


@dataclass
class QueueModel:
    """GitHub's documented rule for one concurrency group: one running, one pending, newest waits."""

    entries: list[Entry] = field(default_factory=list)

    def queue(self, entry: Entry, cancel_in_progress: bool) -> None:
        same = [e for e in self.entries if e.group.lower() == entry.group.lower()]
        for e in same:
            if e.state == "pending" or (cancel_in_progress and e.state == "running"):
                e.state = "cancelled"
        entry.state = "pending" if any(e.state == "running" for e in same) else "running"
        self.entries.append(entry)

    def finish_running(self) -> None:
        for e in [e for e in self.entries if e.state == "running"]:
            e.state = "done"
            waiting = next((p for p in self.entries if p.state == "pending" and p.group == e.group), None)
            if waiting is not None:
                waiting.state = "running"


def _expand(text: str, values: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1).strip()
        assert name in values, f"the model cannot evaluate {name!r}"
        return values[name]
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def _authorized_only(job: dict[str, Any]) -> bool:
    """The job runs only when `authorize` said run (its `if` requires it)."""
    return "needs.authorize.outputs.run == 'true'" in job.get("if", "")


def run_comments(workflow: dict[str, Any], comments: list[tuple[str, bool]], pr: str = "7") -> QueueModel:
    """Comments on one PR, each (who, authorized), arriving while the first retest still runs."""
    model = QueueModel()
    for who, authorized in comments:
        values = {"github.event.issue.number": pr}
        top = workflow.get("concurrency")
        if top:  # every run enters, authorized or not
            group = top if isinstance(top, str) else top["group"]
            model.queue(Entry(who, "<workflow>", _expand(group, values)),
                        isinstance(top, dict) and top.get("cancel-in-progress") == "true")
        for name, job in workflow["jobs"].items():
            conc = job.get("concurrency")
            if not conc or (_authorized_only(job) and not authorized):
                continue  # no group, or skipped by its `if`: never queued
            legs = job.get("strategy", {}).get("matrix", {}).get("include", [{}])
            for leg in legs:
                group = conc if isinstance(conc, str) else conc["group"]
                expanded = _expand(group, {**values, **{f"matrix.{k}": v for k, v in leg.items()}})
                model.queue(Entry(who, name, expanded),
                            isinstance(conc, dict) and conc.get("cancel-in-progress") == "true")
    return model


def test_a_strangers_comment_cannot_cancel_a_maintainers_queued_retest() -> None:
    workflow = load(EXAMPLES / "bsdkm-retest.yml")
    model = run_comments(workflow, [("maintainer-1", True), ("maintainer-2", True), ("stranger", False)])
    second = [e for e in model.entries if e.who == "maintainer-2"]
    states = [(e.who, e.job, e.state) for e in model.entries]
    assert second and all(e.state == "pending" for e in second), states
    assert [e for e in model.entries if e.who == "stranger"] == []
    model.finish_running()
    assert all(e.state == "running" for e in second)  # it runs once the first is done


def test_the_retest_keeps_one_retest_per_target_and_serves_every_comment() -> None:
    workflow = load(EXAMPLES / "bsdkm-retest.yml")
    assert "concurrency" not in workflow  # every comment's authorize runs at once, none waits or cancels
    assert "concurrency" not in workflow["jobs"]["authorize"]
    model = run_comments(workflow, [("maintainer-1", True), ("maintainer-2", True)])
    targets = {e.group for e in model.entries}
    assert len(targets) == 3  # freebsd-kmod, linux-kmod-qemu, userspace: each its own queue
    assert {e.state for e in model.entries if e.who == "maintainer-1"} == {"running"}
    # A third maintainer's request replaces the second one's while it waits: the newest wins.
    model = run_comments(workflow, [("m1", True), ("m2", True), ("m3", True)])
    assert {e.state for e in model.entries if e.who == "m2"} == {"cancelled"}


def test_the_model_shows_the_workflow_level_group_losing_the_retest() -> None:
    """The same comments with the group at the workflow's level: the stranger's run cancels it."""
    workflow = load(EXAMPLES / "bsdkm-retest.yml")
    workflow = {**workflow, "concurrency": {"group": "bsdkm-retest-${{ github.event.issue.number }}",
                                            "cancel-in-progress": "false"},
                "jobs": {k: {kk: vv for kk, vv in v.items() if kk != "concurrency"}
                         for k, v in workflow["jobs"].items()}}
    model = run_comments(workflow, [("maintainer-1", True), ("maintainer-2", True), ("stranger", False)])
    assert [e.state for e in model.entries if e.who == "maintainer-2"] == ["cancelled"]
