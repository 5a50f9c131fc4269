"""``bsdkm-ci action ...``: what the GitHub Action's shell steps call.

The composite action in ``action/`` is plumbing only; every decision it needs
lives here, on top of the same core the Buildbot shell uses:

* ``outputs``  results of ``bsdkm-ci run`` → ``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``
  and ``::error``/``::warning`` annotations (one per failed check, titles with numbers);
* ``gate``     exit 1 when the verdict failed (the last step, after reports are out);
* ``retry``    run an infrastructure command again only when ``classify`` says infrastructure;
* ``comment``  keep the one marked PR comment up to date with the Markdown report;
* ``trigger``  ``issue_comment`` event → whether (and which variants) to retest, after
  checking the commenter's permission through the API.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .. import actions, kernel_health
from ..actions import Annotation, Level
from ..model import FailureCategory, ModelError, RunResult, StageFailure, from_json, to_json
from ..pipeline.report_out import BASE_RUNS_JSON
from ..policy import (
    KIND_BENCHMARK,
    KIND_COMPLETE,
    KIND_CROSSOVER,
    KIND_FLOOR,
    KIND_REGRESSION,
    KIND_SELFTEST,
    KIND_SPEEDUP,
    Check,
    PolicyError,
    Verdict,
    evaluate,
    fmt_num,
    load_policy,
)
from .errors import EXIT_FAILED, EXIT_OK, UsageError

SUMMARY_JSON = "summary.json"
RUN_EXIT_CODE = "run.exit-code"  # written by action/run-bsdkm-ci.sh
REPORT_MD = "report.md"
JUNIT_XML = "junit.xml"

VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"
VERDICT_ERROR = "error"  # nothing measured failed, but the run could not produce (usable) results

T = TypeVar("T")

TEST_KINDS = frozenset({KIND_SELFTEST, KIND_BENCHMARK})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("action", help="steps of the GitHub Action (outputs, gate, retry, comment, trigger)")
    asub = p.add_subparsers(dest="action_command", required=True, parser_class=type(p))
    _register_outputs(asub)
    _register_gate(asub)
    _register_retry(asub)
    _register_comment(asub)
    _register_trigger(asub)
    _register_vm_check(asub)
    _register_merge(asub)
    _register_config(asub)


def optional_path(text: str) -> Path | None:
    """An action input left empty arrives as ``--flag ""``: that means "not given"."""
    return Path(text) if text.strip() else None


def optional_int(text: str) -> int | None:
    if not text.strip():
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _results_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the --out DIR of `bsdkm-ci run`")
    p.add_argument("--results", type=optional_path, help="results JSON to read instead of DIR/summary.json")
    p.add_argument("--config", type=optional_path, help="bsdkm.yml, for its policy and baseline")
    p.add_argument("--policy", type=optional_path, help="threshold policy (re-judges the run with it)")
    p.add_argument("--baseline", type=optional_path, help="baseline results JSON (re-judges the run with it)")
    p.add_argument("--baseline-dir", type=optional_path,
                   help="a downloaded baseline artifact; its summary.json is used when present")
    p.add_argument("--run-exit-code", type=optional_int,
                   help=f"exit status of `bsdkm-ci run` (default: DIR/{RUN_EXIT_CODE})")


def _register_outputs(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("outputs", help="write step outputs, job summary and annotations")
    _results_args(p)
    p.add_argument("--max-annotations", type=int, default=actions.MAX_ANNOTATIONS_PER_LEVEL,
                   help="per level; GitHub shows 10 per step")
    p.set_defaults(func=run_outputs)


def _register_gate(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("gate", help="exit 1 when the run's verdict failed, 0 when it passed")
    _results_args(p)
    p.set_defaults(func=run_gate)


def _register_retry(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("retry", help="run CMD, retrying only infrastructure failures")
    p.add_argument("--stage", required=True,
                   help="what CMD does, for classification: fetch, deps, vm-boot, ...")
    p.add_argument("--attempts", type=int, default=3, help="at most this many runs in all (default 3)")
    p.add_argument("--delay", type=float, action="append", help="seconds before retry N (repeatable)")
    p.add_argument("--timeout", type=float, help="seconds one attempt may take")
    p.add_argument("--config", type=Path, help="bsdkm.yml, for its retry patterns and backoff")
    p.add_argument("--record", type=Path, help="append the attempts to this JSON file")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    p.set_defaults(func=run_retry)


def _register_comment(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("comment", help="create or update the single bsdkm-ci comment on the PR")
    p.add_argument("--report", type=Path, required=True, help="Markdown report (the report-path output)")
    p.add_argument("--pr", type=int, help="PR number (default: from $GITHUB_EVENT_PATH)")
    p.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.set_defaults(func=run_comment)


def _register_trigger(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("trigger", help="decide from an issue_comment event whether to retest")
    p.add_argument("--event", type=Path, help="event payload (default: $GITHUB_EVENT_PATH)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--min-permission", default="write", choices=list(PERMISSION_RANK)[1:],
                   help="least repository permission a commenter needs (default write)")
    p.set_defaults(func=run_trigger)


def _register_vm_check(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("vm-check", help="after a failed FreeBSD VM step: retry it (infrastructure) or not")
    p.add_argument("--out", type=Path, required=True, help="the out-dir the VM copies back")
    p.set_defaults(func=run_vm_check)


def _register_merge(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("merge", help="join the results of several jobs (downloaded artifacts) into one")
    p.add_argument("--out", type=Path, required=True, help="where the merged summary.json goes")
    p.add_argument("sources", nargs="+", type=Path, help="directories holding summary.json (searched deeply)")
    p.set_defaults(func=run_merge)


def _register_config(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("config", help="write a copy of bsdkm.yml that builds the given wolfSSL tree")
    p.add_argument("--config", type=optional_path, help="bsdkm.yml to start from (default: bsdkm-ci's own)")
    p.add_argument("--source", type=Path, required=True, help="wolfSSL source tree (the workspace)")
    p.add_argument("--write", type=Path, required=True, help="where the derived bsdkm.yml goes")
    p.set_defaults(func=run_config)


# =========================================================================== results of a run


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

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ResultsRequest:
        return cls(args.out, args.results, args.config, args.policy, args.baseline, args.baseline_dir,
                   args.run_exit_code)

    @property
    def results_path(self) -> Path:
        return self.results or self.out / SUMMARY_JSON

    @property
    def rejudge(self) -> bool:
        """An explicit policy or baseline overrides the verdict the run stored."""
        return self.policy is not None or self.baseline_file is not None

    @property
    def baseline_file(self) -> Path | None:
        if self.baseline is not None:
            return self.baseline
        if self.baseline_dir is not None and (self.baseline_dir / SUMMARY_JSON).is_file():
            return self.baseline_dir / SUMMARY_JSON
        return None

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

    @property
    def passed(self) -> bool:
        return self.unusable is None and self.verdict.passed

    @property
    def failed_tests(self) -> list[Check]:
        return [c for c in self.verdict.failures if c.kind in TEST_KINDS]

    def verdict_word(self) -> str:
        if self.passed:
            return VERDICT_PASS
        failures = self.verdict.failures
        if self.unusable is not None or (failures and all(c.error for c in failures)):
            return VERDICT_ERROR
        return VERDICT_FAIL

    def headline(self) -> str:
        if self.unusable is not None:
            return f"ERROR: {self.unusable}"
        return self.verdict.summary()

    def outputs(self) -> dict[str, str]:
        return {
            "verdict": self.verdict_word(),
            "junit-path": "\n".join(str(p) for p in self.junit_paths),
            "report-path": str(self.report_path) if self.report_path else "",
            "regressions": str(len(self.verdict.regressions)),
            "failed-tests": str(len(self.failed_tests)),
            "failures": str(len(self.verdict.failures)),
            "summary": self.headline(),
        }

    def annotations(self) -> list[Annotation]:
        if self.unusable is not None:
            return [Annotation(Level.ERROR, self.unusable, title="bsdkm-ci: no results")]
        found = [check_annotation(c) for c in self.verdict.failures]
        found += [Annotation(Level.WARNING, note, title="bsdkm-ci note") for note in self.verdict.notes]
        found += [Annotation(Level.WARNING, f"{c.run_label}: {c.message}", title=kernel_health.title(c))
                  for c in self.verdict.checks if kernel_health.is_warning(c)]
        return found


def check_annotation(c: Check) -> Annotation:
    """A failed check as an annotation whose title names the algorithm and the numbers."""
    return Annotation(Level.ERROR, f"{c.run_label}: {c.message}", title=check_title(c))


def check_title(c: Check) -> str:
    where = f"[{c.run_label}]"
    if c.kind == KIND_SELFTEST:
        code = f" (code {int(c.value)})" if c.value is not None else ""
        return f"Self-test failed: {c.name}{code} {where}"
    if c.kind == KIND_BENCHMARK:
        return f"Benchmark failed: {c.name} {where}"
    if c.kind == KIND_REGRESSION and c.delta_pct is not None:
        numbers = _numbers(c.value, c.baseline, c.unit, "vs baseline")
        limit = f", limit {fmt_num(c.threshold)}%" if c.threshold is not None else ""
        return f"Regression: {c.name} {c.delta_pct:+.1f}%{limit}{numbers} {where}"
    if c.kind == KIND_FLOOR:
        if c.metric == "cycles":
            return f"Too slow: {c.name}{_numbers(c.value, c.threshold, c.unit, '> limit')} {where}"
        return f"Below floor: {c.name}{_numbers(c.value, c.threshold, c.unit, '< floor')} {where}"
    if c.kind == KIND_SPEEDUP and c.value is not None:
        limit = f" < {fmt_num(c.threshold)}x" if c.threshold is not None else ""
        return f"Speedup too low: {c.name} {fmt_num(c.value)}x{limit} {where}"
    if c.kind == KIND_CROSSOVER:
        return f"Crossover: {c.name} {where}"
    if c.kind == KIND_COMPLETE:
        return f"Incomplete run: {c.name} {where}"
    if c.kind == kernel_health.CHECK_KIND:
        return kernel_health.title(c)
    return f"{c.kind} failed: {c.name} {where}"


def _numbers(value: float | None, other: float | None, unit: str | None, word: str) -> str:
    if value is None or other is None:
        return ""
    u = f" {unit}" if unit else ""
    return f" ({fmt_num(value)}{u} {word} {fmt_num(other)}{u})"


def load_outcome(req: ResultsRequest) -> RunOutcome:
    """Read the run's results and judge them with the core; UsageError names unusable input."""
    path = req.results_path
    if not path.is_file():
        code = req.exit_code()
        if code not in (None, 0):
            return _unusable_outcome(req, f"`bsdkm-ci run` exited {code} without writing {path}")
        raise UsageError(f"no results: {path} does not exist (did `bsdkm-ci run --out {req.out}` run?)")
    text = _read_text(path, "results")
    try:
        runs = from_json(text, str(path))
    except ModelError as e:
        raise UsageError(str(e)) from None
    stored = None if req.rejudge else stored_verdict(text, path)
    verdict = stored or _judge(req, runs)
    # Files the run wrote describe its stored verdict; one judged here gets files of its own.
    reuse = stored is not None
    report = _report_for(req, runs, verdict, reuse=reuse)
    markdown = _read_text(report, "report")
    return RunOutcome(runs, verdict, markdown, report, _junit_for(req, runs, verdict, reuse=reuse))


def _unusable_outcome(req: ResultsRequest, why: str) -> RunOutcome:
    markdown = f"## bsdkm-ci: no results\n\n{why}. See the job log; nothing was measured.\n"
    report = req.out / REPORT_MD
    _write(report, markdown)
    return RunOutcome([], Verdict(), markdown, report, [], unusable=why)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} file {path} is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"cannot read {what} file {path}: {e.strerror}") from None


def stored_verdict(text: str, path: Path) -> Verdict | None:
    """The verdict `bsdkm-ci run` stored beside the runs (``Verdict.to_dict``), if any."""
    doc = json.loads(text)  # already parsed once by from_json, so this cannot fail
    stored = doc.get("verdict")
    if stored is None:
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("checks"), list):
        raise UsageError(f"{path}: 'verdict' is not a verdict document (no 'checks' list)")
    try:
        checks = [Check(**c) for c in stored["checks"]]
    except TypeError as e:
        raise UsageError(f"{path}: verdict.checks is malformed: {e}") from None
    notes = stored.get("notes") or []
    return Verdict(checks=checks, notes=[str(n) for n in notes], policy_source=str(stored.get("policy", "")))


def _config_paths(req: ResultsRequest) -> tuple[Path | None, Path | None]:
    if req.config is None:
        return None, None
    from ..config import ConfigError, load_config

    try:
        cfg = load_config(req.config)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return cfg.policy, cfg.baseline


def _policy_for(req: ResultsRequest) -> Any:
    policy_path = req.policy or _config_paths(req)[0]
    try:
        return load_policy(policy_path)
    except PolicyError as e:
        raise UsageError(str(e)) from None


def _judge(req: ResultsRequest, runs: list[RunResult]) -> Verdict:
    verdict = evaluate(runs, _policy_for(req), _baseline_for(req))
    if req.baseline_dir is not None and req.baseline is None and req.baseline_file is None:
        verdict.notes.append(f"baseline artifact has no {SUMMARY_JSON} ({req.baseline_dir}): "
                             "first run on this branch? regressions were not checked")
    return verdict


def _baseline_for(req: ResultsRequest) -> list[RunResult] | None:
    path = req.baseline_file or _config_paths(req)[1]
    measured = _measured_base(req)
    if path is None:
        return measured or None
    try:
        baseline = from_json(_read_text(path, "baseline"), str(path))
    except ModelError as e:
        raise UsageError(f"baseline: {e}") from None
    # A base measured next to the head (same runner, interleaved) beats the artifact's for its pairs.
    have = {(r.target, r.variant) for r in measured}
    return [*measured, *(r for r in baseline if (r.target, r.variant) not in have)]


def _measured_base(req: ResultsRequest) -> list[RunResult]:
    """The base runs ``run --base-*`` (or the merge of such jobs) left beside the results."""
    path = req.results_path.parent / BASE_RUNS_JSON
    if not path.is_file():
        return []
    try:
        return from_json(_read_text(path, "base runs"), str(path))
    except ModelError as e:
        raise UsageError(f"base runs: {e}") from None


def _report_for(req: ResultsRequest, runs: list[RunResult], verdict: Verdict, *, reuse: bool) -> Path:
    """``report.md``: the run's own when its stored verdict is the one published, else written anew."""
    report = req.out / REPORT_MD
    if reuse and report.is_file():
        return report
    from ..report import markdown_report

    _write(report, markdown_report(runs, verdict))
    return report


def _junit_for(req: ResultsRequest, runs: list[RunResult], verdict: Verdict, *, reuse: bool) -> list[Path]:
    """JUnit file(s) matching the published verdict (the run's own when they come from it)."""
    top = req.out / JUNIT_XML
    if reuse:
        if top.is_file():
            return [top]
        per_run = sorted(req.out.glob(f"*/*/{JUNIT_XML}"))
        if per_run:
            return per_run
    from ..junit import junit_xml

    _write(top, junit_xml(runs, verdict))
    return [top]


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None


def run_outputs(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    outcome = load_outcome(ResultsRequest.from_args(args))
    outputs = outcome.outputs()
    for line in actions.cap_annotations(outcome.annotations(), args.max_annotations).commands():
        print(line)
    write_runner_files(env, outputs, outcome.markdown)
    print(f"bsdkm-ci: verdict {outputs['verdict']}: {outcome.headline()}", file=sys.stderr)
    return EXIT_OK


def write_runner_files(env: Mapping[str, str], outputs: Mapping[str, str], markdown: str) -> None:
    """Outputs and job summary into the runner's files; printed instead when run by hand."""
    try:
        out_file = actions.env_path(env, "GITHUB_OUTPUT")
        if out_file is not None:
            actions.write_outputs(out_file, outputs)
        else:
            for k, v in outputs.items():
                print(f"{k}={v}")
        summary_file = actions.env_path(env, "GITHUB_STEP_SUMMARY")
        if summary_file is not None and markdown:
            actions.append_step_summary(summary_file, markdown)
    except actions.ActionsError as e:
        raise UsageError(str(e)) from None


def merge_results(sources: Sequence[Path]) -> tuple[list[RunResult], list[str]]:
    """Every run found under ``sources``; a (target, variant) seen twice keeps its first copy.

    The merged document carries runs only: its verdict is evaluated afresh over all of them,
    since speedup and crossover gates compare variants that ran in different jobs.
    """
    runs: list[RunResult] = []
    notes: list[str] = []
    seen: dict[tuple[str, str], Path] = {}
    for source in sources:
        found = [source] if source.is_file() else sorted(source.rglob(SUMMARY_JSON))
        if not found:
            raise UsageError(f"merge: no {SUMMARY_JSON} under {source}")
        for path in found:
            try:
                doc_runs = from_json(_read_text(path, "results"), str(path))
            except ModelError as e:
                raise UsageError(f"merge: {e}") from None
            for run in doc_runs:
                key = (run.target, run.variant)
                if key in seen:
                    notes.append(f"{run.target}/{run.variant} is in {seen[key]} and {path}; kept the first")
                    continue
                seen[key] = path
                runs.append(run)
    return runs, notes


def merge_base_runs(sources: Sequence[Path]) -> list[RunResult]:
    """Every job's base runs (``base-runs.json`` beside its summary), first copy of a pair kept."""
    runs: list[RunResult] = []
    seen: set[tuple[str, str]] = set()
    for source in sources:
        for path in [] if source.is_file() else sorted(source.rglob(BASE_RUNS_JSON)):
            try:
                found = from_json(_read_text(path, "base runs"), str(path))
            except ModelError as e:
                raise UsageError(f"merge: {e}") from None
            for run in found:
                if (run.target, run.variant) not in seen:
                    seen.add((run.target, run.variant))
                    runs.append(run)
    return runs


def run_merge(args: argparse.Namespace) -> int:
    runs, notes = merge_results(args.sources)
    for note in notes:
        print(Annotation(Level.WARNING, note, title="bsdkm-ci merge").command())
    args.out.mkdir(parents=True, exist_ok=True)
    sources = [str(s) for s in args.sources]
    (args.out / SUMMARY_JSON).write_text(to_json(runs, merged_from=sources), encoding="utf-8")
    base_runs = merge_base_runs(args.sources)
    if base_runs:
        (args.out / BASE_RUNS_JSON).write_text(to_json(base_runs, merged_from=sources), encoding="utf-8")
    print(f"bsdkm-ci: merged {len(runs)} run(s) from {len(sources)} source(s) into {args.out / SUMMARY_JSON}",
          file=sys.stderr)
    return EXIT_OK


# Top-level keys holding paths relative to the config file; the copy lives elsewhere.
CONFIG_PATH_KEYS = ("policy", "baseline", "cache_dir")


def config_with_source(config: Path, source: Path) -> str:
    """``config``'s text with ``source: {local: SOURCE}`` and its relative paths made absolute."""
    import yaml

    from ..config import ConfigError, parse_config

    text = _read_text(config, "config")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"config {config} is not YAML: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"config {config} is not a mapping of settings")
    if not source.is_dir():
        raise UsageError(f"source {source} is not a directory")
    base = config.resolve().parent
    doc["source"] = {"local": str(source.resolve())}
    for key in CONFIG_PATH_KEYS:
        value = doc.get(key)
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            doc[key] = str(base / value)
    derived = yaml.safe_dump(doc, sort_keys=False)
    try:
        parse_config(derived, f"{config} with source {source}", base)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return derived


def run_config(args: argparse.Namespace) -> int:
    from ..config import default_config_path

    derived = config_with_source(args.config or default_config_path(), args.source)
    _write(args.write, derived)
    print(f"bsdkm-ci: {args.write}: builds {args.source.resolve()}", file=sys.stderr)
    return EXIT_OK


def run_gate(args: argparse.Namespace) -> int:
    outcome = load_outcome(ResultsRequest.from_args(args))
    print(f"bsdkm-ci: {outcome.headline()}")
    return EXIT_OK if outcome.passed else EXIT_FAILED


# =========================================================================== retry


# The last lines of an attempt are what classification needs; older ones are already on screen.
OUTPUT_TAIL_LINES = 400


@dataclass(frozen=True)
class AttemptRun:
    """One execution of the wrapped command."""

    exit_code: int
    output: str
    timed_out: bool
    seconds: float


@dataclass
class RetryOutcome:
    exit_code: int
    attempts: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


def run_with_retries(
    cmd: Sequence[str], stage: str, settings: Any, *, timeout: float | None = None,
    patterns: Any = None, sleep: Any = time.sleep,
) -> RetryOutcome:
    """Run ``cmd`` until it passes, a real failure happens, or infrastructure retries run out."""
    from ..classify import classify
    from ..retry_rules import Attempt, decide

    history: list[Attempt] = []
    while True:
        number = len(history) + 1
        run = run_attempt(cmd, timeout)
        if run.exit_code == 0 and not run.timed_out:
            history.append(Attempt.passing(number, None))
        else:
            failure = classify(stage, exit_code=run.exit_code, output=run.output, timed_out=run.timed_out,
                               timeout_s=timeout, patterns=patterns)
            history.append(Attempt.failing(number, None, failure))
        decision = decide(history, settings)
        if not decision.retry:
            return RetryOutcome(run.exit_code if not run.timed_out else 124, decision.history_dicts(),
                                decision.summary)
        print(Annotation(Level.WARNING, decision.summary,
                         title=f"bsdkm-ci: retrying {stage} (attempt {number + 1})").command(), flush=True)
        sleep(decision.delay_s)


def run_attempt(cmd: Sequence[str], timeout: float | None) -> AttemptRun:
    """Run once, echoing output live (with workflow commands disabled) and keeping its tail."""
    token = actions.stop_commands_token()
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
    print(actions.stop_commands(token), flush=True)
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        print(actions.resume_commands(token), flush=True)
        raise UsageError(f"retry: cannot run {cmd[0]!r}: {e.strerror}") from None
    timer = _Killer(proc, timeout)
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", errors="replace")
        sys.stdout.write(line)
        tail.append(line)
    code = proc.wait()
    timer.cancel()
    sys.stdout.flush()
    print(actions.resume_commands(token), flush=True)
    return AttemptRun(code, "".join(tail), timer.fired, time.monotonic() - started)


class _Killer:
    """Kills the attempt's whole process group when it overruns its timeout."""

    def __init__(self, proc: subprocess.Popen[bytes], timeout: float | None) -> None:
        self.fired = False
        self._proc = proc
        self._timer = threading.Timer(timeout, self._kill) if timeout else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        with contextlib.suppress(ProcessLookupError):  # it finished just before the deadline
            os.killpg(self._proc.pid, signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def retry_settings(attempts: int, delays: Sequence[float] | None, config: Path | None) -> tuple[Any, Any]:
    """Bounded-retry settings (never retrying a real failure) and the config's extra patterns."""
    from ..classify import Patterns
    from ..retry_rules import RetryConfigError, RetrySettings

    patterns = None
    backoff: tuple[float, ...] = (10.0, 30.0)
    if config is not None:
        from ..config import ConfigError, load_config

        try:
            cfg = load_config(config)
        except ConfigError as e:
            raise UsageError(str(e)) from None
        backoff = tuple(cfg.retry.backoff_s)
        patterns = Patterns.with_extra(cfg.retry.infra_patterns, cfg.retry.real_patterns)
    if delays:
        backoff = tuple(delays)
    try:
        # No reproducibility runs: the action retries infrastructure only, never a real failure.
        settings = RetrySettings(max_infra_retries=attempts - 1, backoff_s=backoff,
                                 reproduce_reasons=frozenset())
    except RetryConfigError as e:
        raise UsageError(str(e)) from None
    return settings, patterns


def run_retry(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given (use: bsdkm-ci action retry --stage S -- CMD ARGS...)")
    if args.attempts < 1:
        raise UsageError(f"--attempts must be at least 1, got {args.attempts}")
    settings, patterns = retry_settings(args.attempts, args.delay, args.config)
    outcome = run_with_retries(cmd, args.stage, settings, timeout=args.timeout, patterns=patterns)
    print(f"bsdkm-ci: {args.stage}: {outcome.summary}", file=sys.stderr)
    if outcome.exit_code != 0:
        print(Annotation(Level.ERROR, outcome.summary, title=f"bsdkm-ci: {args.stage} failed").command())
    if args.record is not None:
        append_record(args.record, args.stage, cmd, outcome)
    return outcome.exit_code


def append_record(path: Path, stage: str, cmd: Sequence[str], outcome: RetryOutcome) -> None:
    """Keep every wrapped step's attempts in one JSON list, for the report's retry history."""
    records: list[Any] = []
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError(f"retry record {path} is not a JSON list: {e}") from None
        if not isinstance(loaded, list):
            raise UsageError(f"retry record {path} is not a JSON list")
        records = loaded
    records.append({"stage": stage, "command": list(cmd), "exit_code": outcome.exit_code,
                    "summary": outcome.summary, "attempts": outcome.attempts})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")


def vm_failure(out: Path) -> StageFailure | None:
    """Why the VM step failed, or None when bsdkm-ci ran in it (then its results say what failed).

    The in-VM script always exits 0 once ``bsdkm-ci run`` has run and its results were copied
    back, so a failed step without them means the VM (boot, packages, sync) was lost: the
    worker-lost case of the Buildbot retry policy.
    """
    from ..retry_rules import worker_lost_failure

    if (out / SUMMARY_JSON).is_file() or (out / RUN_EXIT_CODE).is_file():
        return None
    return worker_lost_failure("vm-boot")


def run_vm_check(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    failure = vm_failure(args.out)
    retry_it = failure is not None and failure.category == FailureCategory.INFRASTRUCTURE
    why = failure.message if failure is not None else "bsdkm-ci ran in the VM; its results decide"
    level = Level.WARNING if retry_it else Level.NOTICE
    print(Annotation(level, why, title="bsdkm-ci: FreeBSD VM step failed").command())
    write_runner_files(env, {"retry": "true" if retry_it else "false", "reason": why}, "")
    return EXIT_OK


# =========================================================================== GitHub API

PERMISSION_RANK: dict[str, int] = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
DEFAULT_API_URL = "https://api.github.com"


@dataclass(frozen=True)
class ApiContext:
    """Where the REST API is and how to authenticate; the token is never printed."""

    api_url: str
    repo: str
    token: str = field(repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, token_env: str, api_url: str | None,
                 repo: str | None) -> ApiContext:
        token = env.get(token_env, "")
        if not token:
            raise UsageError(f"no token: ${token_env} is empty (pass the action's github-token input)")
        repo = repo or env.get("GITHUB_REPOSITORY", "")
        if repo.count("/") != 1:
            raise UsageError(f"repository {repo!r} is not owner/name (set --repo or $GITHUB_REPOSITORY)")
        return cls((api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"), repo, token)


def read_event(path: Path) -> dict[str, Any]:
    text = _read_text(path, "event")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"event file {path} is not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"event file {path} is not a JSON object")
    return doc


def pr_number_from_event(env: Mapping[str, str]) -> int | None:
    """The PR of a ``pull_request``/``pull_request_target``/``issue_comment`` event, else None."""
    path = actions.env_path(env, "GITHUB_EVENT_PATH")
    if path is None:
        return None
    event = read_event(path)
    pr = event.get("pull_request")
    if isinstance(pr, dict) and isinstance(pr.get("number"), int):
        return int(pr["number"])
    issue = event.get("issue")
    if isinstance(issue, dict) and isinstance(issue.get("pull_request"), dict):
        number = issue.get("number")
        return number if isinstance(number, int) else None
    return None


def run_comment(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    pr = args.pr if args.pr is not None else pr_number_from_event(env)
    if pr is None:
        print("::notice title=bsdkm-ci::not a pull request event; no PR comment written")
        return EXIT_OK
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=args.repo)
    body = _read_text(args.report, "report")
    upsert_comment(ctx, pr, body)
    print(f"bsdkm-ci: PR #{pr} report comment is up to date")
    return EXIT_OK


DEFAULT_BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN's comments are by


def upsert_comment(ctx: ApiContext, pr: int, body: str) -> None:
    """Create the PR's report comment or edit it: the Buildbot reporter's publisher, marker and retries."""
    from ..github.outbox import Outbox
    from ..github.publisher import Publisher

    # Only a comment by the workflow's own user is ours to edit; anyone can copy the marker.
    bot_login = os.environ.get("BSDKM_BOT_LOGIN") or DEFAULT_BOT_LOGIN

    async def work(client: Any) -> bool:
        return bool(await Publisher(client, Outbox(None), bot_login).upsert_report(ctx.repo, pr, body))

    publisher_ok = with_github(ctx, work)
    if not publisher_ok:
        raise UsageError(f"PR #{pr}: GitHub did not accept the report comment (see the messages above)")


def with_github(ctx: ApiContext, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(client)`` with the shared GitHub client on a Twisted reactor (once per process)."""
    from twisted.internet import defer, reactor
    from twisted.python import log
    from twisted.python.failure import Failure

    from ..github.client import GitHubClient, GitHubError

    # The client logs its retries through Twisted; show them (already token-free) on stderr.
    log.startLoggingWithObserver(_github_log_observer, setStdout=False)
    client = GitHubClient(ctx.api_url, ctx.token, reactor=reactor)
    box: dict[str, Any] = {}

    def finish(result: Any) -> None:
        box["result"] = result
        reactor.callLater(0, reactor.stop)  # type: ignore[attr-defined]

    reactor.callWhenRunning(  # type: ignore[attr-defined]
        lambda: defer.ensureDeferred(work(client)).addBoth(finish))
    reactor.run(installSignalHandlers=False)  # type: ignore[attr-defined]
    result = box.get("result")
    if isinstance(result, Failure):
        if result.check(GitHubError):
            raise UsageError(f"GitHub API: {result.value}") from None
        result.raiseException()
    return result  # type: ignore[return-value]


def _github_log_observer(event: dict[str, Any]) -> None:
    text = " ".join(str(m) for m in event.get("message", ()))
    if text.startswith("bsdkm github:"):
        print(text, file=sys.stderr)


@dataclass(frozen=True)
class TriggerDecision:
    run: bool
    reason: str
    pr: int | None = None
    head_sha: str = ""
    variants: tuple[str, ...] = ()

    def outputs(self) -> dict[str, str]:
        return {
            "run": "true" if self.run else "false",
            "reason": self.reason,
            "pr": str(self.pr) if self.pr is not None else "",
            "head-sha": self.head_sha,
            "variants": " ".join(self.variants),
        }


def decide_trigger(ctx: ApiContext, event_path: Path, *, min_permission: str) -> TriggerDecision:
    """Retest only for a phrase on a PR by someone whose permission the API confirms."""
    from ..github.events import EventError, parse_comment_event
    from ..github.triggers import TriggerKind, parse_comment

    try:
        event = parse_comment_event(read_event(event_path))
    except EventError as e:
        raise UsageError(f"event {event_path}: {e}") from None
    if event.action != "created" or not event.is_pull_request:
        return TriggerDecision(False, f"ignored: {event.action} comment, on a PR: {event.is_pull_request}")
    trigger = parse_comment(event.body)
    if trigger is None or trigger.kind != TriggerKind.RETEST:
        return TriggerDecision(False, "ignored: the comment does not ask for a retest")
    if event.repo != ctx.repo:
        raise UsageError(f"event is for {event.repo}, but the API context is {ctx.repo}")

    async def ask(client: Any) -> tuple[str, str | None, str | None]:
        perm = await client.request("GET", f"/repos/{ctx.repo}/collaborators/{event.author}/permission")
        permission = _permission_of(perm.data, event.author)
        if PERMISSION_RANK.get(permission, 0) < PERMISSION_RANK[min_permission]:
            return permission, None, None  # not allowed: nothing about the PR is looked up
        pull = await client.get_pull(ctx.repo, event.issue_number)
        head = _head_sha_of(pull.data, event.issue_number)
        suites = await client.request("GET", f"/repos/{ctx.repo}/commits/{head}/check-suites?per_page=100")
        return permission, head, _first_suite_at(suites.data)

    permission, head_sha, head_seen = with_github(ctx, ask)
    if head_sha is None:
        return TriggerDecision(False, f"refused: @{event.author} has {permission!r} permission, "
                                      f"{min_permission!r} needed", pr=event.issue_number)
    problem = _head_after_comment(event.created_at, head_sha, head_seen)
    if problem:
        return TriggerDecision(False, f"refused: {problem}", pr=event.issue_number)
    variants = tuple(dict.fromkeys(s.variant for s in trigger.selectors))
    what = ", ".join(variants) if variants else "every variant"
    return TriggerDecision(True, f"retest of {what} requested by @{event.author} ({permission})",
                           pr=event.issue_number, head_sha=head_sha, variants=variants)


def _first_suite_at(data: Any) -> str | None:
    """When GitHub first made a check suite for the head (on its push): a server-side time."""
    runs = data.get("check_suites") if isinstance(data, dict) else None
    times = [r["created_at"] for r in runs or []
             if isinstance(r, dict) and isinstance(r.get("created_at"), str)]
    return min(times) if times else None


def _head_after_comment(comment_at: str, head_sha: str, head_seen: str | None) -> str | None:
    """Why the PR's head now may not be what the commenter looked at (same rule as the Buildbot hook).

    The job runs later than the comment; a push in between must not be built on that comment.
    The head counts as reviewed only if GitHub made a check suite for it (it does on every push
    that runs workflows) before the comment was written; commit dates are the author's to choose.
    """
    from ..github.events import parse_time

    written, seen = parse_time(comment_at), parse_time(head_seen or "")
    if written is not None and seen is not None and seen < written:
        return None
    when = f"first seen {head_seen}" if head_seen else "no check suite shows when it was pushed"
    return (f"head {head_sha[:12]} may be newer than the comment ({when}, comment {comment_at or '?'}); "
            "comment again to test it")


def _permission_of(data: Any, login: str) -> str:
    permission = data.get("permission") if isinstance(data, dict) else None
    if not isinstance(permission, str):
        raise UsageError(f"permission of @{login}: response has no 'permission' string")
    return permission


def _head_sha_of(data: Any, number: int) -> str:
    head = data.get("head") if isinstance(data, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    if not isinstance(sha, str):
        raise UsageError(f"PR #{number}: response has no head.sha")
    return sha


def run_trigger(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    event_path = args.event or actions.env_path(env, "GITHUB_EVENT_PATH")
    if event_path is None:
        raise UsageError("no --event and no $GITHUB_EVENT_PATH")
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=None)
    decision = decide_trigger(ctx, event_path, min_permission=args.min_permission)
    print(f"bsdkm-ci: {decision.reason}", file=sys.stderr)
    write_runner_files(env, decision.outputs(), "")
    return EXIT_OK

