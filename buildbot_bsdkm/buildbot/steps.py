"""Buildbot steps, one per pipeline stage, each a thin remote call to ``bsdkm-ci stage``.

The worker has ``bsdkm-ci`` installed; every step runs
``bsdkm-ci stage <stage> --variant V --target T --out DIR [--config FILE]`` there,
so parsing and policy stay in the core. On the master the steps only turn the
outcome into what Buildbot shows: a summary line, test results, logs and
build properties, plus the failure record the bounded-retry build reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from buildbot.process import buildstep
from buildbot.process.results import FAILURE, RETRY, SKIPPED, SUCCESS
from buildbot.steps.worker import CompositeStepMixin
from twisted.internet import threads
from twisted.python import log

from ..contract import (
    BASE_CORRECTNESS_PROPERTY,
    BASE_DIR,
    BASE_OUTCOMES_PROPERTY,
    BENCHMARKS_PROPERTY,
    FAILURE_PROPERTY,
    INCONCLUSIVE_PROPERTY,
    PR_BASE_SHA_PROPERTY,
    PR_HEAD_PROPERTY,
    PR_NUMBER_PROPERTY,
    PROPERTY_SOURCE,
    REGRESSIONS_PROPERTY,
    REPOSITORY_PROPERTY,
    RESULTS_PATH_PROPERTY,
    SELFTEST_PROPERTY,
    STAGE_MILESTONES,
    TRIAGE_PROPERTY,
    VERDICT_PROPERTY,
    StageOutcome,
    StageProgress,
    StateError,
    UndeclaredResults,
    check_declared,
    failure_property,
    read_state,
    stage_outcome,
    state_path,
    verdict_word,
)
from ..contract import run_dir as run_dir_of
from ..model import FailureCategory, ModelError, RunResult, StageFailure, from_json, to_json
from ..policy import Verdict
from ..targets import measures_base  # the target's own property (its row)
from . import base_outcomes, perf_history, summaries, worker_files
from .classification import classify_stage, logs_lost, missing_results
from .progress import StageProgressObserver

STAGE_OUTPUT_LIMIT = 256 * 1024  # tail kept for classification; enough for any error message
# A PR build (github_pr set) with the PR's base commit builds that commit too, into BASE_DIR beside
# the head, and measures both interleaved; without it the gate judges the head against
# history. The PR's clone URL is the build's "repository" property.
RESULTS_DIR = "bsdkm-results"  # under the master's basedir: the results documents (RESULTS_PATH_PROPERTY)
EXIT_FAILED = 1  # ``bsdkm-ci stage``: the stage failed (state.json says why) or was skipped
# What the UI shows while a step runs, until the stage's first progress line: its milestone's words.
STAGE_DOING = {stage: milestone.value for stage, milestone in STAGE_MILESTONES.items()}
# The logs a stage's progress lines arrive in: the stage's own, and its run for the PR's base.
PROGRESS_LOGS = ("stdio", "base")


def _parse_results(text: str, path: str, pair: tuple[str, str]) -> list[RunResult]:
    runs = from_json(text, path)
    # Written on the worker, next to the PR's code: only this builder's pair is its result.
    check_declared(runs, {pair}, path)
    return runs


def _reports(text: str, path: str, verdict: dict[str, Any]) -> tuple[list[RunResult], str, str]:
    runs = from_json(text, path)
    return runs, summaries.markdown_from(runs, verdict), summaries.html_from(runs, verdict)


class BsdkmStageStep(CompositeStepMixin, buildstep.ShellMixin, buildstep.BuildStep):
    """Runs one ``bsdkm-ci stage``; subclasses say what to read back and how to summarise."""

    stage: ClassVar[str] = ""
    # fetch/configure/build: after the head, the same stage for the PR's base (into BASE_DIR).
    base_side: ClassVar[bool] = False
    renderables = ("variant", "target", "out_dir", "config_path", "bsdkm_ci")
    haltOnFailure = True
    flunkOnFailure = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run" in cls.__dict__:
            cls.run = _files_bounded(cls.__dict__["run"])  # type: ignore[method-assign]

    def __init__(
        self,
        *,
        variant: str,
        target: str,
        out_dir: str = "bsdkm-out",
        config_path: Any = None,
        bsdkm_ci: str = "bsdkm-ci",
        patterns: Any = None,
        repeats: int = 5,
        **kwargs: Any,
    ) -> None:
        self.repeats = repeats  # rounds of base, head in a PR build's load (bsdkm.yml benchmark.repeats)
        self.variant = variant
        self.target = target
        self.out_dir = out_dir
        self.config_path = config_path
        self.bsdkm_ci = bsdkm_ci
        self.patterns = patterns  # handed to classify: bsdkm.yml's retry patterns
        self.stage_summary: str | None = None
        self.last_progress: StageProgress | None = None  # the last milestone the running stage announced
        self._states: dict[str, StageOutcome] = {}  # state.json read back, per output directory
        self._state_docs: dict[str, dict[str, Any] | StateError | None] = {}
        kwargs = self.setupShellMixin(kwargs, prohibitArgs=["command"])
        kwargs.setdefault("name", self.stage)
        kwargs.setdefault("description", [STAGE_DOING.get(self.stage, self.stage)])
        super().__init__(**kwargs)
        for logname in PROGRESS_LOGS:
            self.addLogObserver(logname, StageProgressObserver(self.reached))

    # -- the remote command

    def stage_command(self) -> list[str]:
        cmd = [self.bsdkm_ci, "stage", self.stage, "--variant", self.variant, "--target", self.target,
               "--out", self.out_dir]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        return cmd

    # -- the PR's base, built and measured next to the head

    def base_sha(self) -> str | None:
        """The PR base commit this build also builds, or None: not a PR build, or a target that
        measures no base and has the base's outcome recorded (``correctness_base``)."""
        if self.getProperty(PR_NUMBER_PROPERTY) in (None, ""):
            return None
        if not measures_base(self.target) and not self.correctness_base():
            return None
        return self.pr_base_sha()

    def correctness_base(self) -> bool:
        """The base is built and loaded for its failures only (FetchSource found no outcome of it)."""
        return bool(self.getProperty(BASE_CORRECTNESS_PROPERTY)) and not measures_base(self.target)

    def pr_base_sha(self) -> str | None:
        sha = self.getProperty(PR_BASE_SHA_PROPERTY)
        if not sha:
            return None
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", str(sha)):
            raise ValueError(f"PR build's '{PR_BASE_SHA_PROPERTY}' property {sha!r} is not a commit sha")
        return str(sha).lower()

    def base_out(self) -> str:
        return f"{self.out_dir}/{BASE_DIR}"  # where ``--side base`` puts it

    def base_command(self) -> list[str]:
        return [*self.stage_command(), "--side", "base"]

    async def run_base_side(self) -> None:
        """The base's stage; its failure never fails the PR build: the gate then uses history and says so."""
        cmd = await self.makeRemoteShellCommand(command=self.base_command(), collectStdout=True,
                                                collectStderr=True, stdioLogName="base")
        await self.runCommand(cmd)
        if cmd.rc == 0:
            self.stage_summary = f"{self.stage_summary}; base too"
            return
        output = ((cmd.stdout or "") + (cmd.stderr or ""))[-STAGE_OUTPUT_LIMIT:]
        reported = await self.worker_outcome(cmd.rc, self.base_out())
        if reported.skipped_after:
            self.stage_summary = f"{self.stage_summary}; base skipped ({reported.skipped_after} failed)"
            return
        failure = reported.failure or self.classify(cmd.rc, output)
        await self.addCompleteLog("base-failure", json.dumps(failure.to_dict(), indent=2))
        self.stage_summary = f"{self.stage_summary}; base {self.stage} failed ({failure.reason or 'unknown'})"

    def run_dir(self) -> str:
        return run_dir_of(self.out_dir, self.target, self.variant)

    async def run(self) -> int:
        cmd = await self.makeRemoteShellCommand(
            command=self.stage_command(), collectStdout=True, collectStderr=True
        )
        await self.runCommand(cmd)
        # stdout last: the stage's concluding line is there, its progress and notes on stderr
        output = (cmd.stderr or "") + (cmd.stdout or "")
        result = await self.evaluate(cmd.rc, output[-STAGE_OUTPUT_LIMIT:])
        if result == SUCCESS and self.base_side and self.base_sha():
            await self.run_base_side()
        return result

    async def evaluate(self, rc: int | None, output: str) -> int:
        if rc == 0:
            self.stage_summary = await self.describe_success(output)
            return SUCCESS
        reported = await self.worker_outcome(rc)
        if reported.skipped_after:
            self.stage_summary = f"{self.stage}: skipped ({reported.skipped_after} failed)"
            return SKIPPED
        return await self.fail_with(reported.failure or self.classify(rc, output))

    async def stage_failure(self, rc: int | None, output: str) -> StageFailure:
        """The worker's own record of this stage's failure, else the core's reading of the output."""
        return (await self.worker_outcome(rc)).failure or self.classify(rc, output)

    def classify(self, rc: int | None, output: str) -> StageFailure:
        """What the master saw, classified: for a stage the worker left no record of."""
        return classify_stage(self.stage, exit_code=rc, output=output, timed_out=self.timed_out,
                              patterns=self.patterns, timeout_s=self.maxTime)

    # -- the worker's report: the stage's state.json

    async def worker_outcome(self, rc: int | None, out_dir: str | None = None) -> StageOutcome:
        """Why the stage failed, as the worker recorded it in ``state.json`` (exit 1 only).

        Any other exit (killed by the time limit, lost, unusable input) left no record to read.
        A state.json that cannot be read back after exit 1 is logs lost: infrastructure.
        """
        if rc != EXIT_FAILED or self.timed_out:
            return StageOutcome()
        out_dir = out_dir or self.out_dir
        if out_dir not in self._states:
            path = state_path(out_dir, self.target, self.variant)
            doc = await self.state_document(out_dir)
            try:
                if doc is None:
                    raise StateError(f"{path} could not be read back from the worker")
                if isinstance(doc, StateError):
                    raise doc
                outcome = stage_outcome(doc, self.stage, path)
            except StateError as e:
                await self.addCompleteLog("state-error", str(e))
                outcome = StageOutcome(failure=logs_lost(self.stage, f"{self.stage} failed and {e}"))
            self._states[out_dir] = outcome
        return self._states[out_dir]

    async def state_document(self, out_dir: str | None = None) -> dict[str, Any] | StateError | None:
        """The stage's ``state.json`` from the worker, read once per step: None if it is not there."""
        out_dir = out_dir or self.out_dir
        if out_dir not in self._state_docs:
            path = state_path(out_dir, self.target, self.variant)
            text = await self.read_worker_text(path)
            try:
                self._state_docs[out_dir] = (None if text is None
                                             else await self.off_reactor(read_state, text, path))
            except StateError as e:
                self._state_docs[out_dir] = e
        return self._state_docs[out_dir]

    async def describe_success(self, output: str) -> str:
        """The stage's own last line, without the state-file path it appends for people debugging."""
        last = [line.strip() for line in output.splitlines() if line.strip()]
        if not last:
            return f"{self.stage}: done"
        line = last[-1].split(" (state: ", 1)[0]
        return line if line.startswith(self.stage) else f"{self.stage}: {line}"

    async def fail_with(self, failure: StageFailure) -> int:
        """Record why this stage failed for the retry policy; RETRY only for infrastructure."""
        if not self.getProperty(FAILURE_PROPERTY):  # the first failure explains the build, not unload's
            self.setProperty(FAILURE_PROPERTY, failure_property(failure), PROPERTY_SOURCE)
        kind = "infrastructure" if failure.category == FailureCategory.INFRASTRUCTURE else "failed"
        self.stage_summary = f"{self.stage} {kind} ({failure.reason or 'unknown'}): {failure.message}"
        await self.addCompleteLog("failure", json.dumps(failure.to_dict(), indent=2))
        return RETRY if failure.category == FailureCategory.INFRASTRUCTURE else FAILURE

    # -- what the UI shows

    def reached(self, progress: StageProgress) -> None:
        """The running stage announced a milestone: the step's summary says it (live)."""
        self.last_progress = progress
        self.updateSummary()

    def getCurrentSummary(self) -> dict[str, str]:
        if self.last_progress is None:
            return super().getCurrentSummary()
        return {"step": self.last_progress.words}

    def getResultSummary(self) -> dict[str, str]:
        if self.stage_summary is None:
            return super().getResultSummary()
        summary = {"step": self.stage_summary}
        if self.results not in (SUCCESS, None):
            summary["build"] = self.stage_summary
        return summary

    # -- reading files back

    async def off_reactor(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the reactor's thread pool: parsing or rendering a worker's file takes time
        that grows with the file (seconds for a few MiB of results), which the reactor, answering
        webhooks, workers and the UI, must not wait through."""
        reactor = self.master.reactor
        return await threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn, *args)

    async def read_worker_text(self, path: str) -> str | None:
        """A worker file, bounded by its kind's size limit (``worker_files``): past it the step fails
        as a real integrity failure naming the file and the limit."""
        return await worker_files.read_text(self, path)


def _files_bounded(run: Any) -> Any:
    """``run`` of a stage step, where a worker file over its limit fails the step as ``real``."""

    async def bounded(self: BsdkmStageStep) -> int:
        try:
            return await run(self)
        except worker_files.WorkerFileTooLarge as e:
            return await self.fail_with(e.failure(self.stage))

    bounded.__name__, bounded.__doc__ = run.__name__, run.__doc__
    return bounded


BsdkmStageStep.run = _files_bounded(BsdkmStageStep.run)  # type: ignore[method-assign]


class FetchSource(BsdkmStageStep):
    """Starts the build from an empty output directory: ``state.json`` must not outlive a build.

    A PR build fetches the PR's head (``refs/pull/N/head`` of the sourcestamp's repository)
    instead of the config's ``source:``, or it would measure the config's tree and report
    that against the PR. Other builds keep the config's source.
    """

    stage = "fetch"
    base_side = True

    async def run(self) -> int:
        await self.runRmdir(f"{self.workdir}/{self.out_dir}", abandonOnFailure=False)
        await self.decide_correctness_base()
        return await super().run()

    async def decide_correctness_base(self) -> None:
        """A PR build of a target that measures no base builds and loads its base too when the
        master has no outcome of the base recorded: otherwise every failure would look new."""
        if (self.getProperty(PR_NUMBER_PROPERTY) in (None, "") or measures_base(self.target)
                or not self.pr_base_sha()):
            return
        if not await base_outcomes.has_outcome(self.master, self.target, self.variant):
            self.setProperty(BASE_CORRECTNESS_PROPERTY, True, PROPERTY_SOURCE)

    def stage_command(self) -> list[str]:
        return super().stage_command() + self.pr_source_arguments()

    def base_command(self) -> list[str]:
        # The base is a commit of the same repository: fetched by its sha, and checked to be it.
        sha = self.base_sha()
        head = super().stage_command()
        return [*head, "--side", "base", "--source-git", str(self.getProperty(REPOSITORY_PROPERTY)),
                "--source-ref", str(sha), "--source-commit", str(sha)]

    def pr_source_arguments(self) -> list[str]:
        number = self.getProperty(PR_NUMBER_PROPERTY)
        if number in (None, ""):
            return []
        url = self.getProperty(REPOSITORY_PROPERTY)
        if not url:
            # A PR build that cannot name its repository must not quietly build the config's tree.
            raise ValueError(f"PR #{number} build has no '{REPOSITORY_PROPERTY}' property to fetch from")
        # int(): the ref is built from a number, so no property value can smuggle another ref in.
        args = ["--source-git", str(url), "--source-ref", f"refs/pull/{int(number)}/head"]
        head = self.getProperty(PR_HEAD_PROPERTY)
        if head:
            # The ref moves when the PR is pushed to; the head this build was queued (and approved)
            # for is the one it may build.
            args += ["--source-commit", str(head)]
        return args


class Configure(BsdkmStageStep):
    stage = "configure"
    base_side = True


class Build(BsdkmStageStep):
    stage = "build"
    base_side = True


class LoadModule(BsdkmStageStep):
    """Loads the module (or, for ``userspace``, runs the programs): self-test and benchmark.

    A PR build with its base measures base and head in alternating rounds (``--base-out``).
    """

    stage = "load"

    def stage_command(self) -> list[str]:
        cmd = super().stage_command()
        if self.base_sha() and not self.correctness_base():
            cmd += ["--base-out", self.base_out(), "--repeats", str(int(self.repeats))]
        return cmd

    async def run(self) -> int:
        result = await super().run()
        if self.base_sha() and self.correctness_base():
            # Loaded for its failures, not measured: after the head whatever the head did, since a
            # head that panics is exactly the case the base's outcome must explain.
            await self.run_base_side()
        return result


class UnloadModule(BsdkmStageStep):
    stage = "unload"
    alwaysRun = True  # a loaded module must not outlive a failed build on the worker
    haltOnFailure = False


class CollectResults(BsdkmStageStep):
    """Reads the results back: Buildbot test results, JUnit and Markdown logs, summary.

    Runs after a failed load too: a failing self-test is exactly what people need to see.
    """

    stage = "collect"
    alwaysRun = True

    async def evaluate(self, rc: int | None, output: str) -> int:
        if rc not in (0, 1):  # 1 is "a test failed": the results are still there to show
            return await super().evaluate(rc, output)
        runs = await self.read_results()
        if runs is None:
            return await self.fail_with(missing_results(self.stage, f"{self.run_dir()}/results.json"))
        await self.publish(runs)
        self.stage_summary = summaries.results_summary(runs)
        if rc == 0:
            return SUCCESS
        failure = await self.stage_failure(rc, output)
        await self.fail_with(failure)
        self.stage_summary = summaries.results_summary(runs)
        return RETRY if failure.category == FailureCategory.INFRASTRUCTURE else FAILURE

    async def read_results(self) -> list[RunResult] | None:
        text = await self.read_worker_text(f"{self.run_dir()}/results.json")
        if text is None:
            return None
        try:
            return await self.off_reactor(_parse_results, text, f"{self.run_dir()}/results.json",
                                          (self.target, self.variant))
        except (ModelError, UndeclaredResults) as e:
            await self.addCompleteLog("results-error", str(e))
            return None

    async def publish(self, runs: list[RunResult]) -> None:
        for run in runs:
            await self.add_selftests(run)
            await self.add_benchmarks(run)
            selftest = summaries.selftest_summary(run)
            if selftest:
                self.setProperty(SELFTEST_PROPERTY, selftest, PROPERTY_SOURCE)
            self.setProperty(BENCHMARKS_PROPERTY, len(run.benchmarks), PROPERTY_SOURCE)
        # The whole results document, for the GitHub reporter's per-PR comment: a file on
        # the master, its path the property, so the build's properties stay small.
        path = await self.off_reactor(lambda: self.store_results(to_json(runs)))
        if path:
            self.setProperty(RESULTS_PATH_PROPERTY, path, PROPERTY_SOURCE)
        await perf_history.provide(self, runs)  # the history window, for the gate on the worker
        await perf_history.record(self, runs)  # base-branch builds: perf history in the master's DB

    def store_results(self, text: str) -> str | None:
        basedir = getattr(self.master, "basedir", None)
        if not basedir:
            return None
        build_id = self.build.buildid if getattr(self.build, "buildid", None) is not None else "unknown"
        name = f"{build_id}-{self.target}-{self.variant}.json".replace("/", "_")
        path = Path(basedir) / RESULTS_DIR / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as e:
            log.msg(f"bsdkm: cannot keep the results of build {build_id} in {path}: {e}")
            return None
        return str(path)

    async def add_selftests(self, run: RunResult) -> None:
        rows = summaries.selftest_rows(run)
        if not rows:
            return
        setid = await self.addTestResultSet(f"self-test {run.target}/{run.variant}", "pass_fail", "boolean")
        for row in rows:
            self.addTestResult(setid, row.value, test_name=row.name, line=row.line)

    async def add_benchmarks(self, run: RunResult) -> None:
        for unit, rows in summaries.benchmark_rows_by_unit(run).items():
            setid = await self.addTestResultSet(f"benchmark {run.target}/{run.variant}", "performance", unit)
            for row in rows:
                self.addTestResult(setid, row.value, test_name=row.name, line=row.line)


class Gate(BsdkmStageStep):
    """Applies the policy; the verdict and regressions become build properties, the report a log."""

    stage = "gate"
    alwaysRun = True  # a failed load still has a verdict worth showing

    def stage_command(self) -> list[str]:
        cmd = super().stage_command()
        return cmd + ["--base-out", self.base_out()] if self.base_sha() else cmd

    async def run(self) -> int:
        # A PR build: the base's recorded outcomes, for the worker's triage and kept for the master's.
        self.provided_outcomes = await base_outcomes.provide(self)
        return await super().run()

    async def evaluate(self, rc: int | None, output: str) -> int:
        verdict = await self.read_verdict() if rc in (0, 1) else None
        if verdict is not None:
            passed = bool(verdict.get("passed")) and rc == 0
            # The core's word (Verdict.status): unjudged items are never called passed.
            self.setProperty(VERDICT_PROPERTY, verdict_word(verdict.get("verdict"), passed), PROPERTY_SOURCE)
            self.setProperty(INCONCLUSIVE_PROPERTY, int(verdict.get("inconclusive") or 0), PROPERTY_SOURCE)
            self.setProperty(REGRESSIONS_PROPERTY, summaries.regression_labels(verdict), PROPERTY_SOURCE)
            self.setProperty(TRIAGE_PROPERTY, summaries.triage_property(verdict), PROPERTY_SOURCE)
            runs = await self.attach_report(verdict)
            if runs is not None:
                await self.record_outcomes(verdict, runs)
            await self.keep_base_outcomes(verdict)
        if rc == 0:
            self.stage_summary = summaries.verdict_summary(verdict) if verdict else "gate passed"
            return SUCCESS
        if (await self.worker_outcome(rc)).skipped_after:
            return await super().evaluate(rc, output)
        result = await self.fail_with(await self.stage_failure(rc, output))
        if verdict is not None:
            self.stage_summary = summaries.verdict_summary(verdict)
        return result

    async def keep_base_outcomes(self, verdict: dict[str, Any]) -> None:
        """What the PR comment and status are judged by on the master: the outcomes the master read
        from its database for this build. The worker's own list (``base-outcomes.used.json``) also
        holds the base built next to the PR's head, beside its code, which may have changed it."""
        provided = getattr(self, "provided_outcomes", None)
        if provided:
            self.setProperty(BASE_OUTCOMES_PROPERTY, provided, PROPERTY_SOURCE)

    async def record_outcomes(self, verdict: dict[str, Any], runs: list[RunResult]) -> None:
        """A base-branch build: its outcome per kernel kind into the master's database."""
        if not base_outcomes.may_record(self):
            return
        try:
            judged = Verdict.from_dict(verdict)
        except ValueError as e:
            log.msg(f"bsdkm: base outcomes of {self.target}/{self.variant} not recorded: {e}")
            return
        await base_outcomes.record(self, runs, judged)

    async def read_verdict(self) -> dict[str, Any] | None:
        """``verdict`` from the run's state.json, where ``bsdkm-ci stage gate`` keeps it."""
        doc = await self.state_document()
        if doc is None:
            return None
        if isinstance(doc, StateError):
            await self.addCompleteLog("verdict-error", str(doc))
            return None
        verdict = doc.get("verdict")
        if not isinstance(verdict, dict):
            path = state_path(self.out_dir, self.target, self.variant)
            await self.addCompleteLog("verdict-error", f"{path}: no verdict recorded")
            return None
        return verdict

    async def attach_report(self, verdict: dict[str, Any]) -> list[RunResult] | None:
        """JUnit from the worker; the Markdown and HTML (with the chart) reports rendered by the core.
        Returns the runs read back (None when there were none to read)."""
        junit = await self.read_worker_text(f"{self.run_dir()}/junit.xml")
        if junit is not None:
            await self.addCompleteLog("junit.xml", junit)
        text = await self.read_worker_text(f"{self.run_dir()}/results.json")
        if text is None:
            return None
        try:
            runs, report, html = await self.off_reactor(_reports, text, f"{self.run_dir()}/results.json",
                                                        verdict)
        except (ModelError, TypeError, ValueError, KeyError) as e:
            await self.addCompleteLog("report-error", f"cannot render the report: {e}")
            return None
        await self.addCompleteLog("report.md", report)
        await self.addHTMLLog("report.html", html)
        return runs


STAGE_STEPS: tuple[type[BsdkmStageStep], ...] = (
    FetchSource, Configure, Build, LoadModule, CollectResults, UnloadModule, Gate,
)
