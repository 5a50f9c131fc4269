"""Release-candidate builds on the Buildbot master: a tag scheduler, a force form, one step.

- ``release-tags``: a change whose branch is a tag matching ``release.tag_pattern``
  (``v*-stable``; ``refs/tags/`` is stripped) builds the candidate ``git:<repository>@<tag>``
  against ``release.previous`` from bsdkm.yml.
- ``release-force``: a form with ``candidate`` and ``previous`` (any SOURCE ``bsdkm-ci release``
  accepts).
- Builders: ``release/linux`` (every target but those run per FreeBSD release, ``freebsd-kmod``, on a
  worker that runs them) and one ``release/freebsd-<X.Y>`` per declared FreeBSD release some worker
  carries the tag of. The report of a release without a worker says "not covered".

The step runs ``bsdkm-ci release`` on the worker and attaches ``release.html`` as an HTML log and
``release.md`` as a text log; it decides nothing itself (exit 0 pass, 1 fail, 2 unusable input).
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from buildbot.plugins import schedulers, util
from buildbot.process import buildstep
from buildbot.process.results import FAILURE, SUCCESS
from buildbot.steps.worker import CompositeStepMixin
from twisted.python import log

from ..checks import status_of_summary
from ..config import builders as plan
from ..config.bsdkm_yml import Config, GitSource
from ..contract import (
    PROPERTY_SOURCE,
    RELEASE_OUTCOMES_FILE,
    RELEASE_VERDICT_PROPERTY,
    RUN_KIND_PROPERTY,
    verdict_word,
)
from ..model import load_document
from ..report.release_report import html_release
from ..targets import os_release_tag
from . import base_outcomes, worker_files
from .retrying_build import can_start_build
from .worker_passwords import WorkerSpec

OUT_DIR = "bsdkm-release"
LINUX_BUILDER = plan.LINUX_RELEASE_BUILDER
PROP_CANDIDATE = "candidate"
PROP_PREVIOUS = "previous"
OUTPUT_LIMIT = 64 * 1024
TAG_SCHEDULER = "release-tags"


def tag_of(branch: str | None) -> str | None:
    if not branch:
        return None
    return branch.removeprefix("refs/tags/")


def is_release_tag(branch: str | None, pattern: str) -> bool:
    tag = tag_of(branch)
    return bool(tag) and fnmatch.fnmatchcase(str(tag), pattern)


@util.renderer
def candidate_source(props: Any) -> str:
    """The force form's candidate, else the pushed tag of the change's repository."""
    given = props.getProperty(PROP_CANDIDATE)
    if given:
        return str(given)
    repo, tag = props.getProperty("repository"), tag_of(props.getProperty("branch"))
    return f"git:{repo}@{tag}" if repo and tag else ""


class ReleaseCandidate(CompositeStepMixin, buildstep.ShellMixin, buildstep.BuildStep):
    """``bsdkm-ci release`` on the worker; the report comes back as an HTML log."""

    renderables = ("candidate", "previous", "config_path")
    name = "release"
    haltOnFailure = True

    def __init__(self, *, candidate: Any, previous: Any, config_path: Any = None,
                 targets: tuple[str, ...] = (), freebsd_release: str | None = None,
                 bsdkm_ci: str = "bsdkm-ci", out_dir: str = OUT_DIR, repository: str | None = None,
                 **kwargs: Any) -> None:
        self.candidate, self.previous, self.config_path = candidate, previous, config_path
        self.repository = repository  # the configured source's repository: its candidates are the base's
        self.targets, self.freebsd_release = tuple(targets), freebsd_release
        self.bsdkm_ci, self.out_dir = bsdkm_ci, out_dir
        self.summary_text: str | None = None
        kwargs = self.setupShellMixin(kwargs, prohibitArgs=["command"])
        kwargs.setdefault("description", ["comparing"])
        super().__init__(**kwargs)

    def release_command(self) -> list[str]:
        cmd = [self.bsdkm_ci, "release", "--candidate", str(self.candidate), "--previous", str(self.previous),
               "--out", self.out_dir]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        for t in self.targets:
            cmd += ["--target", t]
        if self.freebsd_release:
            cmd += ["--freebsd-release", self.freebsd_release]
        return cmd

    async def run(self) -> int:
        if not self.candidate or not self.previous:
            missing = "candidate" if not self.candidate else "previous"
            self.summary_text = (f"no {missing} source: give it in the force form or set release.previous "
                                 "in bsdkm.yml")
            await self.addCompleteLog("error", self.summary_text)
            return FAILURE
        cmd = await self.makeRemoteShellCommand(command=self.release_command(), collectStdout=True,
                                                collectStderr=True)
        await self.runCommand(cmd)
        output = ((cmd.stdout or "") + (cmd.stderr or ""))[-OUTPUT_LIMIT:]
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        try:
            await self.keep_reports()
            await self.keep_baseline(lines)
            await self.keep_outcomes()
        except worker_files.WorkerFileTooLarge as e:  # the worker's files, next to the candidate's code
            self.summary_text = f"release: integrity: {e}"
            self.setProperty(RELEASE_VERDICT_PROPERTY, "error", PROPERTY_SOURCE)
            await self.addCompleteLog("error", str(e))
            return FAILURE
        # the core's summary line: PASS, FAIL or INCONCLUSIVE (policy Verdict.summary)
        verdict = next((ln for ln in reversed(lines) if ln.startswith(("PASS:", "FAIL:", "INCONCLUSIVE:"))),
                       None)
        if cmd.rc == 0:
            self.summary_text = f"release: {verdict or 'passed'}"
            word = verdict_word(status_of_summary(verdict) if verdict else None, True)
            self.setProperty(RELEASE_VERDICT_PROPERTY, word, PROPERTY_SOURCE)
            return SUCCESS
        self.setProperty(RELEASE_VERDICT_PROPERTY, "failed" if cmd.rc == 1 else "error", PROPERTY_SOURCE)
        why = verdict if cmd.rc == 1 and verdict else (lines[-1] if lines else f"exit {cmd.rc}")
        self.summary_text = f"release: {why}"
        return FAILURE

    async def keep_reports(self) -> None:
        """release.md as a text log, and the HTML report rendered here from release.json: HTML the
        worker wrote would run in the master's web UI with the viewer's session."""
        md = await worker_files.read_text(self, f"{self.out_dir}/release.md")
        if md is not None:
            await self.addCompleteLog("release.md", md)
        text = await worker_files.read_text(self, f"{self.out_dir}/release.json")
        if text is None:
            return
        try:
            html = html_release(load_document(text, "release.json"))
        except Exception as e:  # noqa: BLE001 - any shape the worker wrote: no report, said why
            await self.addCompleteLog("error", f"release.json: not a release report: {type(e).__name__}: {e}")
            return
        await self.addHTMLLog("release report", html)

    async def keep_baseline(self, lines: list[str]) -> None:
        """The candidate's results, the new baseline of its release line, kept with the build as a log."""
        path = next((ln.split(None, 1)[1] for ln in lines if ln.startswith("baseline:") and " " in ln), None)
        if not path:
            return
        text = await worker_files.read_text(self, path)
        if text is not None:
            await self.addCompleteLog(path.rsplit("/", 1)[-1], text)

    async def keep_outcomes(self) -> int:
        """A release run's candidate outcomes are base outcomes, recorded as a base-branch build's are."""
        if not base_outcomes.may_record(self) or not base_outcomes.enabled(self.master):
            return 0
        if not self.candidate_is_the_base():
            return 0
        content = await worker_files.read_text(self, f"{self.out_dir}/{RELEASE_OUTCOMES_FILE}")
        if content is None:
            return 0
        try:
            doc = json.loads(content)
            records = doc["base_outcomes"]
        except (ValueError, TypeError, KeyError) as e:
            log.msg(f"bsdkm: release outcomes unreadable: {type(e).__name__}: {e}")
            return 0
        return await base_outcomes.record_documents(self, records if isinstance(records, list) else [])

    def candidate_is_the_base(self) -> bool:
        """A pushed release tag (its scheduler), or a typed candidate of the configured repository:
        only those record base outcomes. Another repository's would make later PR failures
        "pre-existing" and start bisections."""
        if self.getProperty("scheduler") == TAG_SCHEDULER and not self.getProperty(PROP_CANDIDATE):
            return True
        return bool(self.repository) and same_repository(repository_of(str(self.candidate)), self.repository)

    def getResultSummary(self) -> dict[str, str]:
        if self.summary_text is None:
            return super().getResultSummary()
        return {"step": self.summary_text, "build": self.summary_text}


def repository_of(source: str) -> str | None:
    """The repository of a ``git:URL@REF`` SOURCE (None for other kinds)."""
    if not source.startswith("git:"):
        return None
    url = source.removeprefix("git:")
    return url.rsplit("@", 1)[0] if "@" in url.split("://", 1)[-1] else url


def same_repository(a: str | None, b: str | None) -> bool:
    def norm(u: str) -> str:
        return u.strip().rstrip("/").removesuffix(".git").lower()

    return bool(a and b) and norm(str(a)) == norm(str(b))


def release_builders(config: Config, specs: list[WorkerSpec], config_path: Any, bsdkm_ci: str) -> list[Any]:
    """``release/linux`` and one ``release/freebsd-X.Y`` per declared release a worker carries
    (``plan.release_builders``)."""
    previous = util.Property(PROP_PREVIOUS, default=config.release.previous or "")
    repository = config.source.url if isinstance(config.source, GitSource) else None
    out = []
    for b in plan.release_builders(config, specs):
        factory = util.BuildFactory()
        factory.addStep(ReleaseCandidate(candidate=candidate_source, previous=previous,
                                         config_path=config_path, targets=b.targets,
                                         freebsd_release=b.freebsd_release, bsdkm_ci=bsdkm_ci,
                                         repository=repository))
        tags = ["release"] + ([os_release_tag(b.freebsd_release, config.release.arch)]
                              if b.freebsd_release else [])
        out.append(util.BuilderConfig(name=b.name, workernames=list(b.workers), factory=factory, tags=tags,
                                      collapseRequests=False,
                                      canStartBuild=can_start_build))  # trusted workers only
    return out


def release_schedulers(config: Config, builder_names: list[str]) -> list[Any]:
    pattern = config.release.tag_pattern
    return [
        schedulers.AnyBranchScheduler(
            name=TAG_SCHEDULER, builderNames=builder_names, treeStableTimer=None,
            change_filter=util.ChangeFilter(branch_fn=lambda b: is_release_tag(b, pattern)),
            properties={RUN_KIND_PROPERTY: "release-candidate"},
        ),
        schedulers.ForceScheduler(
            name="release-force", builderNames=builder_names, buttonName="Compare release candidate",
            label="Release candidate against the previous release",
            properties=[
                util.StringParameter(name=PROP_CANDIDATE, label="candidate SOURCE", required=True, size=60,
                                     default=""),
                util.StringParameter(name=PROP_PREVIOUS, label="previous SOURCE", required=True, size=60,
                                     default=config.release.previous or ""),
            ],
        ),
    ]


def apply_release(c: dict[str, Any], config: Config, specs: list[WorkerSpec], config_path: Any,
                  bsdkm_ci: str = "bsdkm-ci") -> None:
    """Adds the release builders and their two schedulers to a ``BuildmasterConfig``."""
    builders = release_builders(config, specs, config_path, bsdkm_ci)
    if not builders:
        return
    c["builders"].extend(builders)
    c["schedulers"].extend(release_schedulers(config, [b.name for b in builders]))
