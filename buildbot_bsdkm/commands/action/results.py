"""``action outputs`` and ``action gate``: the results of ``bsdkm-ci run``.

``outputs`` publishes them (step outputs, job summary, one annotation per failed check),
``gate`` fails the job on their verdict. Both read them through the core's one PR report
(``report/pull_request.py``), as the Buildbot reporter does: the verdict the run stored, or, with
an explicit policy, baseline or base outcomes, the runs judged again here with what this shell
knows (``Judging``: the base branch's artifacts, and only their instruction counts of the base).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from functools import cached_property
from pathlib import Path

from ...config.bsdkm_yml import Config, ConfigError, default_config_path, load_config
from ...contract import BASE_RUNS_JSON, UndeclaredResults, check_declared
from ...model import ModelError, RunResult, from_json
from ...policy import Check, CheckKind, Policy, PolicyError, Verdict, kernel_health, load_policy
from ...policy.pairing import baseline_for
from ...report.commit_status import CommitStatus
from ...report.junit import junit_xml
from ...report.pull_request import Judging, PullRequestReport, pull_request_report
from ...report.sinks import PullRequestRef, deliver
from ...triage.known import KnownIssueError
from ..exit_codes import EXIT_FAILED, EXIT_OK, UsageError
from . import workflow as actions
from .annotations import check_annotation, check_location
from .provenance import Provenance
from .run_files import (
    RUN_EXIT_CODE,
    SUMMARY_JSON,
    optional_int,
    optional_path,
    read_text,
    write_runner_files,
    write_text,
)
from .states import FAIL_ON_NEVER, fail_on_choice, job_fails, json_output
from .states import counts as check_counts
from .summary_sinks import Annotations, JobSummary
from .triage_inputs import triage_for
from .workflow import Annotation, Level

REPORT_MD = "report.md"
JUNIT_XML = "junit.xml"

VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"
VERDICT_INCONCLUSIVE = "inconclusive"  # nothing failed, but gated items went unjudged (Verdict.status)
VERDICT_ERROR = "error"  # nothing measured failed, but the run could not produce (usable) results

TEST_KINDS = frozenset({CheckKind.SELFTEST, CheckKind.BENCHMARK})


def _results_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the --out DIR of `bsdkm-ci run`")
    p.add_argument("--results", type=optional_path, help="results JSON to read instead of DIR/summary.json")
    p.add_argument("--config", type=optional_path, help="bsdkm.yml, for its policy and baseline")
    p.add_argument("--policy", type=optional_path, help="threshold policy (re-judges the run with it)")
    p.add_argument("--baseline", type=optional_path, help="baseline results JSON (re-judges the run with it)")
    p.add_argument("--baseline-dir", type=optional_path,
                   help="a downloaded baseline artifact; its summary.json is used when present")
    p.add_argument("--base-outcomes-dir", type=optional_path,
                   help="a downloaded base-outcomes artifact: the base branch's last summary.json, "
                        "passed or failed, and/or a history directory (triage: pre-existing failures)")
    p.add_argument("--run-exit-code", type=optional_int,
                   help=f"exit status of `bsdkm-ci run` (default: DIR/{RUN_EXIT_CODE})")
    p.add_argument("--fork-run", default="",
                   help="'true': the results come from a fork PR's own run (the run-pr step's fork output)")
    p.add_argument("--judges-changed", default="",
                   help="what the PR changes of what judges it, one a line (the run-pr step's output): "
                        "every status is then an error")


def register_outputs(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("outputs", help="write step outputs, job summary and annotations")
    _results_args(p)
    p.add_argument("--max-annotations", type=int, default=actions.MAX_ANNOTATIONS_PER_LEVEL,
                   help="per level; GitHub shows 10 per step")
    p.set_defaults(func=run_outputs)


def register_gate(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("gate", help="exit 1 when the run's verdict failed, 0 when it passed")
    _results_args(p)
    p.add_argument("--fail-on", type=fail_on_choice, default="regression",
                   help="what fails the job: new (failures the base does not have), regression "
                        "(the policy's verdict, default), inconclusive (also unjudged items), never")
    p.set_defaults(func=run_gate)


@dataclass(frozen=True)
class ResultsRequest:
    """Where a finished ``bsdkm-ci run`` left its results, and how to judge them."""

    out: Path
    results: Path | None = None
    config: Path | None = None
    policy: Path | None = None
    baseline: Path | None = None
    baseline_dir: Path | None = None
    run_exit_code: int | None = None
    base_outcomes_dir: Path | None = None
    provenance: Provenance = field(default_factory=Provenance)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ResultsRequest:
        provenance = Provenance.from_args(getattr(args, "fork_run", ""), getattr(args, "judges_changed", ""))
        return cls(args.out, args.results, args.config, args.policy, args.baseline, args.baseline_dir,
                   args.run_exit_code, getattr(args, "base_outcomes_dir", None), provenance)

    @property
    def results_path(self) -> Path:
        return self.results or self.out / SUMMARY_JSON

    @property
    def rejudge(self) -> bool:
        """An explicit policy or baseline overrides the verdict the run stored; so do base outcomes."""
        return self.policy is not None or self.baseline_file is not None or self.base_outcomes_dir is not None

    @property
    def baseline_file(self) -> Path | None:
        if self.baseline is not None:
            return self.baseline
        if self.baseline_dir is not None and (self.baseline_dir / SUMMARY_JSON).is_file():
            return self.baseline_dir / SUMMARY_JSON
        return None

    @cached_property
    def configuration(self) -> Config:
        """The run's config: --config, else the default one the run used; read once."""
        try:
            return load_config(self.config or default_config_path())
        except ConfigError as e:
            raise UsageError(str(e)) from None

    @property
    def config_paths(self) -> tuple[Path | None, Path | None]:
        """The config's policy and baseline (None, None without --config)."""
        if self.config is None:
            return None, None
        return self.configuration.policy, self.configuration.baseline

    def check_declared(self, runs: Sequence[RunResult], where: Path) -> None:
        """Uploaded results name only pairs the config declares (the names are the PR's otherwise)."""
        cfg = self.configuration
        try:
            check_declared(runs, set(cfg.pairs(variants=list(cfg.variants))), str(where))
        except UndeclaredResults as e:
            raise UsageError(f"{e} ({cfg.path or 'the default config'})") from None

    def exit_code(self) -> int | None:
        """The run's exit status: given, or recorded by the action's run script."""
        if self.run_exit_code is not None:
            return self.run_exit_code
        recorded = self.out / RUN_EXIT_CODE
        if not recorded.is_file():
            return None
        text = recorded.read_text(encoding="utf-8", errors="replace").strip()
        if not text.lstrip("-").isdigit():
            raise UsageError(f"{recorded}: expected an exit status, found {text[:40]!r}")
        return int(text)


@dataclass
class RunOutcome:
    """A run's verdict with the files the action publishes."""

    runs: list[RunResult]
    verdict: Verdict
    markdown: str
    report_path: Path | None
    junit_paths: list[Path]
    unusable: str | None = None  # the run left nothing to judge: why
    out: Path | None = None  # the run's directory (annotations point at its logs)
    provenance: Provenance = field(default_factory=Provenance)  # a fork's run; what of its judges it changed
    report: PullRequestReport | None = None  # the core's PR report (None: nothing to judge)

    @property
    def passed(self) -> bool:
        return self.unusable is None and self.verdict.accepted and not self.provenance.judged_by_pr

    @property
    def failed_tests(self) -> list[Check]:
        return [c for c in self.verdict.failures if c.kind in TEST_KINDS]

    def verdict_word(self) -> str:
        if self.provenance.judged_by_pr:
            return VERDICT_ERROR
        if self.unusable is None and self.verdict.status == VERDICT_INCONCLUSIVE:
            return VERDICT_INCONCLUSIVE
        if self.passed:
            return VERDICT_PASS
        failures = self.verdict.failures
        if self.unusable is not None or (failures and all(c.error for c in failures)):
            return VERDICT_ERROR
        return VERDICT_FAIL

    def headline(self) -> str:
        if self.unusable is not None:
            return f"ERROR: {self.unusable}"
        if self.provenance.judged_by_pr:
            return f"{self.provenance.headline()} (the fork's run said: {self.verdict.summary()})"
        return self.verdict.summary()

    def states(self) -> list[CommitStatus]:
        """The commit statuses, as the provenance of the results lets them be posted."""
        if self.unusable is not None or self.report is None:
            return []
        return self.provenance.states(self.report.statuses)

    def outputs(self) -> dict[str, str]:
        usable = self.unusable is None
        states = self.states()
        return {
            **{k: str(v) for k, v in check_counts(self.verdict, usable).items()},
            "json": json_output(self.verdict_word(), self.verdict, usable, states),
            "verdict": self.verdict_word(),
            "junit-path": "\n".join(str(p) for p in self.junit_paths),
            "report-path": str(self.report_path) if self.report_path else "",
            "regressions": str(len(self.verdict.regressions)),
            "failed-tests": str(len(self.failed_tests)),
            "summary": self.headline(),
        }

    def annotations(self, verdict: Verdict | None = None) -> list[Annotation]:
        """The annotations of ``verdict`` (the outcome's own by default), located in the run's logs."""
        if self.unusable is not None:
            return [Annotation(Level.ERROR, self.unusable, title="bsdkm-ci: no results")]
        verdict = self.verdict if verdict is None else verdict
        found = [Annotation(Level.ERROR, self.provenance.headline(), title="bsdkm-ci: not judged")
                 ] if self.provenance.judged_by_pr else []
        found += [dataclass_replace(check_annotation(c), **check_location(c, self.runs, self.out))
                  for c in verdict.failures]
        found += [Annotation(Level.WARNING, note, title="bsdkm-ci note") for note in verdict.notes]
        found += [Annotation(Level.WARNING, f"{c.run_label}: {c.message}", title=kernel_health.title(c))
                  for c in verdict.checks if kernel_health.is_warning(c)]
        return found


def load_outcome(req: ResultsRequest) -> RunOutcome:
    """Read the run's results and judge them with the core; UsageError names unusable input."""
    path = req.results_path
    if not path.is_file():
        code = req.exit_code()
        if code not in (None, 0):
            return _unusable_outcome(req, f"`bsdkm-ci run` exited {code} without writing {path}")
        raise UsageError(f"no results: {path} does not exist (did `bsdkm-ci run --out {req.out}` run?)")
    text = read_text(path, "results")
    try:
        runs = from_json(text, str(path))
    except ModelError as e:
        raise UsageError(str(e)) from None
    req.check_declared(runs, path)
    stored = None if req.rejudge else stored_verdict(text, path)
    try:
        report = pull_request_report(runs, _judging(req, runs, stored), preface=req.provenance.banner())
    except KnownIssueError as e:  # expired for the version the runs tested
        raise UsageError(f"bad known issue: {e}") from None
    path = req.out / REPORT_MD
    write_text(path, report.markdown)
    # Files the run wrote describe its stored verdict; one judged here gets files of its own.
    junit = _junit_for(req, runs, report.verdict, reuse=stored is not None)
    return RunOutcome(runs, report.verdict, report.markdown, path, junit, out=req.out,
                      provenance=req.provenance, report=report)


def _unusable_outcome(req: ResultsRequest, why: str) -> RunOutcome:
    markdown = f"## bsdkm-ci: no results\n\n{why}. See the job log; nothing was measured.\n"
    report = req.out / REPORT_MD
    write_text(report, markdown)
    return RunOutcome([], Verdict(), markdown, report, [], unusable=why)


def stored_verdict(text: str, path: Path) -> Verdict | None:
    """The verdict `bsdkm-ci run` stored beside the runs (``Verdict.to_dict``), if any."""
    doc = json.loads(text)  # already parsed once by from_json, so this cannot fail
    stored = doc.get("verdict")
    if stored is None:
        return None
    try:
        return Verdict.from_dict(stored)
    except ValueError as e:
        raise UsageError(f"{path}: {_bad_part(stored)}: {e}") from None


def _bad_part(stored: object) -> str:
    """Which part of a stored verdict ``Verdict.from_dict`` refused, in the words the Action has used."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("checks"), list):
        return "'verdict' is not a verdict document"
    if not isinstance(stored.get("perf") or [], list):
        return "verdict.perf is malformed"
    return "verdict.checks is malformed"


def _policy_for(req: ResultsRequest) -> Policy:
    try:
        return load_policy(req.policy or req.config_paths[0])
    except PolicyError as e:
        raise UsageError(str(e)) from None


def _judging(req: ResultsRequest, runs: list[RunResult], stored: Verdict | None) -> Judging:
    """What the core judges the runs with in the Action: the verdict the run stored, or the policy
    with the base branch's artifacts. A bad baseline or known issue stops the step (exit 2)."""
    if stored is not None:
        return Judging(stored=stored, lenient=False)
    policy = _policy_for(req)
    # Triage: the base branch's outcomes in the results store (the artifact) and a base built here.
    triage = triage_for(req.config, policy, runs, req.baseline_file, req.baseline_dir, req.base_outcomes_dir)
    notes = []
    if req.baseline_dir is not None and req.baseline is None and req.baseline_file is None:
        notes.append(f"baseline artifact has no {SUMMARY_JSON} ({req.baseline_dir}): "
                     "first run on this branch? regressions were not checked")
    # The base's instruction counts: the base branch's artifact's only, never the test job's.
    return Judging(policy, _baseline_for(req), triage.known, triage.base, notes, counts_beside_head=False,
                   base_branch_runs=_artifact_baseline(req), lenient=False)


def _baseline_for(req: ResultsRequest) -> list[RunResult] | None:
    path = req.baseline_file or req.config_paths[1]
    measured = _measured_base(req)
    if path is None:
        return baseline_for(measured, None, per_pair=True)
    try:
        baseline = from_json(read_text(path, "baseline"), str(path))
    except ModelError as e:
        raise UsageError(f"baseline: {e}") from None
    # A base measured next to the head (same runner, interleaved) beats the artifact's for its pairs.
    return baseline_for(measured, baseline, per_pair=True)


def _artifact_baseline(req: ResultsRequest) -> list[RunResult] | None:
    """The base branch's runs (baseline artifact, or the config's baseline): the base counts' source."""
    path = req.baseline_file or req.config_paths[1]
    try:
        return from_json(read_text(path, "baseline"), str(path)) if path is not None else None
    except ModelError as e:
        raise UsageError(f"baseline: {e}") from None


def _measured_base(req: ResultsRequest) -> list[RunResult]:
    """The base runs ``run --base-*`` (or the merge of such jobs) left beside the results."""
    path = req.results_path.parent / BASE_RUNS_JSON
    if not path.is_file():
        return []
    try:
        runs = from_json(read_text(path, "base runs"), str(path))
    except ModelError as e:
        raise UsageError(f"base runs: {e}") from None
    req.check_declared(runs, path)
    return runs


def _junit_for(req: ResultsRequest, runs: list[RunResult], verdict: Verdict, *, reuse: bool) -> list[Path]:
    """JUnit file(s) matching the published verdict (the run's own when they come from it)."""
    top = req.out / JUNIT_XML
    if reuse:
        if top.is_file():
            return [top]
        per_run = sorted(req.out.glob(f"*/*/{JUNIT_XML}"))
        if per_run:
            return per_run
    write_text(top, junit_xml(runs, verdict))
    return [top]


def run_outputs(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    outcome = load_outcome(ResultsRequest.from_args(args))
    outputs = outcome.outputs()
    sinks = [Annotations(outcome.annotations, args.max_annotations), JobSummary(env)]
    if outcome.report is None:  # nothing judged: the error is the one annotation, the summary says why
        report = PullRequestReport(outcome.verdict, [], outcome.markdown)
    else:
        report = outcome.report
    where = PullRequestRef(env.get("GITHUB_REPOSITORY", ""), env.get("GITHUB_SHA", ""))
    asyncio.run(deliver(report, where, sinks))
    write_runner_files(env, outputs, "")
    actions.say(f"bsdkm-ci: verdict {outputs['verdict']}: {outcome.headline()}", err=True)
    return EXIT_OK


def run_gate(args: argparse.Namespace) -> int:
    outcome = load_outcome(ResultsRequest.from_args(args))
    actions.say(f"bsdkm-ci: {outcome.headline()}")
    fails = job_fails(outcome.verdict, outcome.unusable is None, args.fail_on)
    fails = fails or (outcome.provenance.judged_by_pr and args.fail_on != FAIL_ON_NEVER)
    if fails != (not outcome.passed):
        print(f"bsdkm-ci: fail-on {args.fail_on}: the job {'fails' if fails else 'passes'}")
    return EXIT_FAILED if fails else EXIT_OK
