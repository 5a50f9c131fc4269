"""Buildbot reporter: a commit status per (target, variant) build, and the PR's one comment.

Built on Buildbot's ``ReporterBase`` with its ``BuildStartEndStatusGenerator`` (build
started / finished events with properties). A finished build makes the core's one PR report over
every build of its buildset (``aggregate.PrReport``, off the reactor in ``render.Renderer``'s child
process with a time limit), which sinks deliver (``pr_sinks.py``: the statuses and the comment, through
our ``Publisher``, so rate limits and outages are retried and nothing is dropped; ``extra_sinks``:
anywhere else).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from buildbot.data import resultspec
from buildbot.reporters.base import ReporterBase
from buildbot.reporters.generators.build import BuildStartEndStatusGenerator
from buildbot.reporters.message import MessageFormatterRenderable
from twisted.internet import defer, threads
from twisted.python import log

from ..contract import PR_HEAD_PROPERTY, PR_NUMBER_PROPERTY, PR_REPO_PROPERTY
from ..report.pull_request import PullRequestReport
from ..report.sinks import PullRequestRef, ReportSink, deliver
from .aggregate import BuildFacts, PrReport, plain_properties, progress_status
from .auth_notice import BuilderNotice
from .buildsets import PrBuilder
from .master_secrets import MasterSecrets
from .pr_sinks import CommitStatuses, PullRequestComment
from .publisher import Publisher
from .render import Renderer, fallback_status

POSTED_KEPT = 4096  # statuses remembered as posted, so one that did not change is not posted again


class GitHubPrReporter(ReporterBase):
    name = "bsdkm-github-reporter"

    def __init__(
        self,
        publisher: Publisher,
        builders: list[PrBuilder],
        report: PrReport | None,
        statuses: bool = True,
        resend_interval_s: float = 60.0,
        renderer: Renderer | None = None,
        secrets: MasterSecrets | None = None,
        comment: bool = True,
        extra_sinks: Sequence[ReportSink] = (),
        **kwargs: Any,
    ) -> None:
        """``report``: what the PR is judged with (None: no usable policy, so statuses say the build's
        result alone and there is no comment); ``comment``: whether the PR's comment is written."""
        self.publisher = publisher
        self.secrets = secrets  # {secret: NAME} credentials: read through this master's providers
        self.renderer = renderer or Renderer()
        # One rendering at a time: waiting for the child happens here, not in the thread pool.
        self._rendering = defer.DeferredLock()
        self.pr_builders = {b.name: b for b in builders}
        self.report = report
        self.statuses = statuses
        self.comment = comment and report is not None
        self.extra_sinks = list(extra_sinks)
        self._posted: OrderedDict[tuple[str, str, str], tuple[str, str]] = OrderedDict()
        self.resend_interval_s = resend_interval_s
        self._resend_call: Any = None
        self.notice: BuilderNotice | None = None
        super().__init__(**kwargs)

    def checkConfig(self, *args: Any, **kwargs: Any) -> None:
        super().checkConfig(generators=self._generators())

    @defer.inlineCallbacks
    def reconfigService(self, *args: Any, **kwargs: Any) -> Any:
        yield super().reconfigService(generators=self._generators())

    def _generators(self) -> list[Any]:
        return [
            BuildStartEndStatusGenerator(
                builders=list(self.pr_builders) or None,
                start_formatter=MessageFormatterRenderable("started"),
                end_formatter=MessageFormatterRenderable("finished"),
            )
        ]

    @defer.inlineCallbacks
    def startService(self) -> Any:
        yield super().startService()
        if self.secrets is not None:
            self.secrets.bind(self.master)  # before the first re-send below asks for credentials
        from twisted.internet import task

        # Re-send whatever GitHub did not accept earlier (outage, long rate limit, restart).
        self._resend_call = task.LoopingCall(lambda: defer.ensureDeferred(self._resend()))
        self._resend_call.clock = self.master.reactor
        self._resend_call.start(self.resend_interval_s, now=True)
        if self.notice is None:  # the UI says when GitHub auth fails, on the builders whose reports wait
            self.notice = BuilderNotice(self.master, self.pr_builders)
            self.publisher.client.auth_health.subscribe(self.notice.changed)
        if self.report is not None:
            threads.deferToThread(self.renderer.start).addErrback(
                log.err, "bsdkm github: the report renderer did not start (tried again per report)")

    @defer.inlineCallbacks
    def stopService(self) -> Any:
        if self._resend_call is not None and self._resend_call.running:
            self._resend_call.stop()
        yield threads.deferToThread(self.renderer.close)
        yield super().stopService()

    async def _resend(self) -> None:
        if self.publisher.outbox.pending():
            sent = await self.publisher.resend_pending()
            log.msg(f"bsdkm github: re-sent {sent} kept report(s)")

    def sendMessage(self, reports: list[dict[str, Any]]) -> defer.Deferred[None]:
        return defer.ensureDeferred(self._send(reports))

    async def _send(self, reports: list[dict[str, Any]]) -> None:
        for report in reports:
            for build in report.get("builds", []):
                try:
                    await self._report_build(build)
                except Exception as e:  # one bad build must not stop the others' reports
                    log.err(e, "bsdkm github: reporting a build failed")

    async def _render(self, fn: Any, *args: Any) -> Any:
        return await self._rendering.run(threads.deferToThread, fn, *args)

    def _facts(self, build: dict[str, Any]) -> BuildFacts | None:
        builder = self.pr_builders.get(build.get("builder", {}).get("name", ""))
        if builder is None:
            return None
        props = plain_properties(build.get("properties") or {})
        results = build.get("results") if build.get("complete") else None
        return BuildFacts(builder.target, builder.variant, results, build.get("url"), props)

    async def _report_build(self, build: dict[str, Any]) -> None:
        facts = self._facts(build)
        if facts is None or PR_NUMBER_PROPERTY not in facts.properties:
            return  # not a PR build (nightly, forced, branch push)
        props = facts.properties
        where = PullRequestRef(str(props[PR_REPO_PROPERTY]), str(props[PR_HEAD_PROPERTY]),
                               int(props[PR_NUMBER_PROPERTY]), facts.url)
        if facts.results is None:
            # A started build's status reads nothing the PR wrote: no need to leave the reactor.
            if self.statuses:
                state, text = progress_status(facts) or ("pending", "building")
                await self._post(where, facts.context, state, text, facts.url)
            return
        if self.report is None:
            if self.statuses:
                state, text = fallback_status(facts, "not judged: the master has no usable policy")
                await self._post(where, facts.context, state, text, facts.url)
            return
        builds = await self._builds_of_buildset(build)
        if facts.context not in {b.context for b in builds}:
            builds = sorted([*builds, facts], key=lambda b: b.context)
        made = await self._render(self.renderer.report, self.report, builds)
        if made.error:
            log.msg(f"bsdkm github: PR #{where.number} report {made.error}")
        report: PullRequestReport = made.value
        # This build's status; and another finished build's that its runs changed (a speedup
        # compares this variant with that one), unless the report could not be made.
        changed = {facts.context} if made.error else self._changed(where, report, facts.context)
        sinks: list[ReportSink] = [CommitStatuses(self.publisher, changed)] if self.statuses else []
        if self.comment:
            sinks.append(PullRequestComment(self.publisher))
        await deliver(report, where, [*sinks, *self.extra_sinks])
        for s in report.statuses:
            if self.statuses and s.context in changed:
                self._remember(where, s.context, s.state, s.description)

    def _changed(self, where: PullRequestRef, report: PullRequestReport, context: str) -> set[str]:
        running = set(report.running)
        return {s.context for s in report.statuses if s.context == context or (
            s.context not in running and self._posted.get((where.repo, where.head, s.context))
            not in (None, (s.state, s.description)))}

    async def _post(self, where: PullRequestRef, context: str, state: str, text: str,
                    url: str | None) -> None:
        await self.publisher.post_status(where.repo, where.head, context, state, text, url)
        self._remember(where, context, state, text)

    def _remember(self, where: PullRequestRef, context: str, state: str, text: str) -> None:
        key = (where.repo, where.head, context)
        self._posted[key] = (state, text)
        self._posted.move_to_end(key)
        while len(self._posted) > POSTED_KEPT:
            self._posted.popitem(last=False)

    async def _builds_of_buildset(self, build: dict[str, Any]) -> list[BuildFacts]:
        """Every builder's latest build for this PR head (one buildset per head)."""
        bsid = build.get("buildset", {}).get("bsid")
        requests = await self.master.data.get(
            ("buildrequests",), filters=[resultspec.Filter("buildsetid", "eq", [bsid])]
        )
        out: list[BuildFacts] = []
        for request in requests:
            builds = await self.master.data.get(
                ("buildrequests", request["buildrequestid"], "builds"),
            )
            if not builds:
                continue
            latest = max(builds, key=lambda b: b["buildid"])
            props = await self.master.data.get(("builds", latest["buildid"], "properties"))
            builder = await self.master.data.get(("builders", latest["builderid"]))
            latest = dict(latest, properties=props or {}, builder=builder or {})
            latest["url"] = self._build_url(latest)
            facts = self._facts(latest)
            if facts is not None:
                out.append(facts)
        return sorted(out, key=lambda f: f.context)

    def _build_url(self, build: dict[str, Any]) -> str | None:
        base = getattr(self.master.config, "buildbotURL", None)
        if not base:
            return None
        return f"{base}#/builders/{build['builderid']}/builds/{build['number']}"
