"""Bisection on the Buildbot master: a ``bisect`` builder, started when the base branch breaks.

- ``BisectOnNewSignatures`` (a master service) looks at every finished base-branch build of a
  ``target/variant`` builder: the base outcomes its Gate step recorded (``base_outcomes``) say
  whether its newest build shows a failure signature the build before it did not
  (``bisection.bisect_requests.requests_for``), and the perf history of a perf target whether an
  item's level dropped (the drift detector's change point, ``regression_requests``). Each is
  bisected once (the keys asked for are kept in the master's state table), through the ``bisect``
  Triggerable scheduler.
- The ``bisect`` builder runs ``bsdkm-ci bisect`` on a worker (``BsdkmBisect``) between the last
  good and the first bad base build, attaches bisect.md/bisect.html, sets ``bsdkm_bisect`` (the
  result document) and, when ``bsdkm.yml`` has a ``github:`` section, comments on the culprit
  commit (``BsdkmBisectComment``: ``POST /repos/{owner}/{repo}/commits/{sha}/comments``).

The steps decide nothing: the command's exit status and bisect.json say what was found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from buildbot.plugins import schedulers, util
from buildbot.process import buildstep
from buildbot.process.results import FAILURE, SKIPPED, SUCCESS, WARNINGS
from buildbot.steps.worker import CompositeStepMixin
from buildbot.util import service
from twisted.internet import defer
from twisted.python import log

from ..bisection.bisect_requests import BisectRequest, regression_requests, requests_for
from ..config import builders as plan
from ..config.bsdkm_yml import Config, GitSource
from ..contract import (
    BISECT_REQUEST_PROPERTY,
    BISECT_RESULT_PROPERTY,
    BISECTED_STATE,
    PR_NUMBER_PROPERTY,
    PROPERTY_SOURCE,
    REPOSITORY_PROPERTY,
    TARGET_PROPERTY,
    VARIANT_PROPERTY,
)
from ..github.bisect_comment import checked_culprit, comment_body, post_commit_comment
from ..github.client import GitHubClient, GitHubError
from ..model import load_document
from ..perf.store import best_series
from ..report.bisection_report import html_page, result_from_json
from ..targets import measures_base
from . import base_outcomes, perf_history, worker_files
from .retrying_build import can_start_build
from .worker_passwords import WorkerSpec

BUILDER = plan.BISECT_BUILDER
SCHEDULER = "bisect"
OUT_DIR = "bsdkm-bisect"
OUTPUT_LIMIT = 64 * 1024


class BsdkmBisect(CompositeStepMixin, buildstep.ShellMixin, buildstep.BuildStep):
    """``bsdkm-ci bisect`` on the worker for the build's ``bsdkm_bisect_request``."""

    name = "bisect"
    renderables = ("config_path",)
    haltOnFailure = True

    def __init__(self, *, config_path: Any = None, bsdkm_ci: str = "bsdkm-ci", out_dir: str = OUT_DIR,
                 **kwargs: Any) -> None:
        self.config_path, self.bsdkm_ci, self.out_dir = config_path, bsdkm_ci, out_dir
        self.summary_text: str | None = None
        kwargs = self.setupShellMixin(kwargs, prohibitArgs=["command"])
        kwargs.setdefault("description", ["bisecting"])
        super().__init__(**kwargs)

    def bisect_command(self, req: BisectRequest, repository: str) -> list[str]:
        what = ([f"--regression={req.regression}", *([f"--pct={req.pct:g}"] if req.pct else [])]
                if req.regression else [f"--failure={req.signature}"])
        cmd = [self.bsdkm_ci, "bisect", f"--good={req.good}", f"--bad={req.bad}", "--target", req.target,
               "--variant", req.variant, *what, f"--source-git={repository}", "--out", self.out_dir]
        return [*cmd, "--config", str(self.config_path)] if self.config_path else cmd

    async def run(self) -> int:
        raw = self.getProperty(BISECT_REQUEST_PROPERTY)
        repository = self.getProperty(REPOSITORY_PROPERTY)
        try:
            req = BisectRequest.from_dict(raw)
        except (KeyError, TypeError, AttributeError, ValueError):  # no request, or not one
            req = None
        if req is None or not repository:
            self.summary_text = (f"bisect: no usable request ({BISECT_REQUEST_PROPERTY} and "
                                 f"{REPOSITORY_PROPERTY})")
            await self.addCompleteLog("error", self.summary_text)
            return FAILURE
        cmd = await self.makeRemoteShellCommand(command=self.bisect_command(req, str(repository)),
                                                collectStdout=True, collectStderr=True)
        await self.runCommand(cmd)
        doc = await self._read_back()
        if doc is not None:
            summary = {k: v for k, v in doc.items() if k != "steps"}
            self.setProperty(BISECT_RESULT_PROPERTY, summary, PROPERTY_SOURCE)
        output = ((cmd.stdout or "") + (cmd.stderr or ""))[-OUTPUT_LIMIT:]
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        said = doc["headline"] if doc else lines[-1] if lines else f"exit {cmd.rc}"
        self.summary_text = f"bisect: {said}"
        if cmd.rc == 0 and doc is not None:
            return SUCCESS
        return WARNINGS if cmd.rc == 1 and doc is not None else FAILURE

    async def _read_back(self) -> dict[str, Any] | None:
        """bisect.json and bisect.md as text logs (bounded), and the HTML report rendered here from
        the JSON: HTML the worker wrote would run in the master's web UI."""
        doc = None
        for name in ("bisect.md", "bisect.json"):
            try:
                text = await worker_files.read_text(self, f"{self.out_dir}/{name}")
            except worker_files.WorkerFileTooLarge as e:
                await self.addCompleteLog("error", str(e))
                continue
            if text is None:
                continue
            await self.addCompleteLog(name, text)
            if name == "bisect.json":
                try:
                    loaded = load_document(text, name)
                    doc = loaded if isinstance(loaded, dict) else None
                    result, about = result_from_json(loaded)
                except ValueError as e:  # ModelError too
                    await self.addCompleteLog("error", f"{name}: {e}")
                    continue
                await self.addHTMLLog("bisect report", html_page(result, about))
        return doc

    def getResultSummary(self) -> dict[str, str]:
        if self.summary_text is None:
            return super().getResultSummary()
        return {"step": self.summary_text, "build": self.summary_text}


class BsdkmBisectComment(buildstep.BuildStep):
    """The culprit's commit comment on GitHub (master side); skipped when none was named."""

    name = "comment on the culprit"
    flunkOnFailure = False
    warnOnFailure = True

    def __init__(self, *, client: Callable[[], Any], repo: str, **kwargs: Any) -> None:
        self.client, self.repo = client, repo
        self.summary_text: str | None = None
        super().__init__(**kwargs)

    async def run(self) -> int:
        doc = self.getProperty(BISECT_RESULT_PROPERTY)
        if not isinstance(doc, dict) or not doc.get("decided"):
            self.summary_text = "no culprit named: no comment"
            return SKIPPED
        link = self.build.getUrl() if hasattr(self.build, "getUrl") else None
        sha = ""
        try:
            raw = self.getProperty(BISECT_REQUEST_PROPERTY)
            request = BisectRequest.from_dict(raw) if isinstance(raw, dict) else None
            client = self.client()
            # bisect.json is the worker's: the culprit is only believed inside the range asked for
            sha = await checked_culprit(client, self.repo, doc, request)
            body = comment_body(doc, link=link if isinstance(link, str) else None)
            await post_commit_comment(client, self.repo, sha, body)
        except (ValueError, KeyError, TypeError, GitHubError) as e:
            self.summary_text = f"commit comment not posted: {e}"
            return FAILURE
        self.summary_text = f"commented on {sha[:12]} in {self.repo}"
        return SUCCESS

    def getResultSummary(self) -> dict[str, str]:
        return {"step": self.summary_text} if self.summary_text else super().getResultSummary()


class BisectOnNewSignatures(service.BuildbotService):
    """Starts the ``bisect`` builder for each new failure signature of a base-branch build."""

    name = "bsdkm-bisect-on-new-signatures"

    def checkConfig(self, repository: str = "", **kwargs: Any) -> None:  # noqa: N802 - Buildbot's name
        pass

    async def reconfigService(self, repository: str = "", **kwargs: Any) -> None:  # noqa: N802
        self.repository = repository
        await super().reconfigService(**kwargs)

    async def startService(self) -> None:  # noqa: N802
        await super().startService()
        self._consumer = await self.master.mq.startConsuming(self._finished, ("builds", None, "finished"))

    async def stopService(self) -> None:  # noqa: N802
        consumer = getattr(self, "_consumer", None)
        if consumer is not None:
            consumer.stopConsuming()
        await super().stopService()

    def _finished(self, _key: Any, build: dict[str, Any]) -> defer.Deferred:
        # The message queue calls back plainly and waits on a Deferred, not on a coroutine.
        return defer.ensureDeferred(self._consider_quietly(build))

    async def _consider_quietly(self, build: dict[str, Any]) -> None:
        try:
            await self.consider(build)
        except Exception as e:  # noqa: BLE001 - a bisection not started never breaks the master
            log.msg(f"bsdkm bisect: not started after build {build.get('buildid')}: {type(e).__name__}: {e}")

    async def consider(self, build: dict[str, Any]) -> list[BisectRequest]:
        props = await self.master.data.get(("builds", build["buildid"], "properties")) or {}
        value = {k: v[0] for k, v in props.items()}
        target, variant = value.get(TARGET_PROPERTY), value.get(VARIANT_PROPERTY)
        if not target or not variant or value.get(PR_NUMBER_PROPERTY) not in (None, ""):
            return []  # not a target/variant build, or a PR's (its failures are the PR's)
        repository = value.get(REPOSITORY_PROPERTY) or self.repository
        rows = await base_outcomes.window(self.master, str(target), str(variant))
        done = await self._done()
        wanted: list[BisectRequest] = []
        for kernel in sorted({str(r.get("kernel") or "") for r in rows}):
            wanted += requests_for([r for r in rows if str(r.get("kernel") or "") == kernel], done)
        fingerprint = next((r.get("fingerprint") for r in reversed(rows) if r.get("fingerprint")), None)
        if fingerprint and measures_base(str(target)):  # a confirmed regression of a perf target
            series = await perf_series(self.master, str(fingerprint), str(target), str(variant))
            wanted += regression_requests(str(target), str(variant), series, done)
        if not wanted or not repository:
            return []
        await self._remember(done | {r.key for r in wanted})
        sched = self.master.scheduler_manager.namedServices.get(SCHEDULER)
        for req in wanted:
            log.msg(f"bsdkm bisect: {req.key} between {req.good[:12]} and {req.bad[:12]}")
            sched.trigger(waited_for=False,
                          sourcestamps=[{"codebase": "", "repository": repository, "branch": None,
                                         "revision": req.bad, "project": ""}],
                          set_props=_properties(req, str(repository)))
        return wanted

    async def _object(self) -> int:
        return await self.master.db.state.getObjectId(self.name, type(self).__name__)

    async def _done(self) -> set[str]:
        return set(await self.master.db.state.getState(await self._object(), BISECTED_STATE, []))

    async def _remember(self, keys: set[str]) -> None:
        await self.master.db.state.setState(await self._object(), BISECTED_STATE, sorted(keys))


async def perf_series(master: Any, fingerprint: str, target: str, variant: str,
                      n: int = 30) -> dict[str, list[tuple[str, float]]]:
    """Each item's best value per recorded base build of this machine, oldest first ({} when none)."""
    from twisted.internet import threads

    db_url = perf_history.master_db_url(master)
    if not db_url or db_url in ("sqlite://", "sqlite:///:memory:"):  # no table of ours there
        return {}

    def read() -> dict[str, list[tuple[str, float]]]:
        return best_series(perf_history.store_for(db_url).window(fingerprint, target, variant, n))

    return await threads.deferToThread(read)


def _properties(req: BisectRequest, repository: str) -> Any:
    from buildbot.process.properties import Properties

    props = Properties()
    props.setProperty(BISECT_REQUEST_PROPERTY, req.to_dict(), PROPERTY_SOURCE)
    props.setProperty(REPOSITORY_PROPERTY, repository, PROPERTY_SOURCE)
    return props


def bisect_factory(config_path: Any, bsdkm_ci: str, comment: BsdkmBisectComment | None) -> Any:
    factory = util.BuildFactory()
    # Each step is one build and run under the config's own time limits: no step limit of its own.
    factory.addStep(BsdkmBisect(config_path=config_path, bsdkm_ci=bsdkm_ci, maxTime=None, timeout=None))
    if comment is not None:
        factory.addStep(comment)
    return factory


def apply_bisect(c: dict[str, Any], config: Config, specs: list[WorkerSpec], config_path: Any,
                 bsdkm_ci: str = "bsdkm-ci", github: Any = None) -> None:
    """The ``bisect`` builder, its Triggerable scheduler and the service that starts it.

    ``github``: ``github.settings.GitHubSettings`` (the culprit gets a commit comment), or None.
    """
    names = list(plan.bisect_workers(config, specs))
    if not names:
        return
    comment = None
    if github is not None:
        comment = BsdkmBisectComment(client=lambda: GitHubClient(github.api_url, github.auth(),
                                                                 spacing=github.writes),
                                     repo=github.repo)
    c["builders"].append(util.BuilderConfig(name=BUILDER, workernames=names, tags=["bisect"],
                                            factory=bisect_factory(config_path, bsdkm_ci, comment),
                                            collapseRequests=False,
                                            canStartBuild=can_start_build))  # trusted workers only
    c["schedulers"].append(schedulers.Triggerable(name=SCHEDULER, builderNames=[BUILDER]))
    source = config.source.url if isinstance(config.source, GitSource) else ""
    c["services"].append(BisectOnNewSignatures(repository=source))
