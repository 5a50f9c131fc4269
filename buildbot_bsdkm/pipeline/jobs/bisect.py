"""The real runner of a bisection: one commit built and run by the pipeline's own stages.

Each commit is fetched from the git source (``source.git_tree``, the same code a PR build uses),
built and run (``phases.build_phase``/``measure_phase``) and gated (``report_out.gate_runs``), under
the config's time limits. An ``infrastructure`` failure is tried again as the config's ``retry:``
allows; after that the commit is a skip. A commit that does not build for another reason than the
one bisected is a skip as well. Runs of a commit already built (the culprit's verification) run the
load stage of the same build again: no second build.

``FailureProbe`` turns one run into good/bad/skip for a failure signature; ``RegressionProbe``
measures a commit interleaved with the good end (``run.measure_pairs``: the rounds a PR build
measures, more while too noisy, ``run.extend_while_undecided``) and reads the learned gate's
verdict on one item.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...bisection.search import BisectResult, BisectSettings, Commit, Outcome, Probe, Purpose, bisect
from ...config.bsdkm_yml import Config, GitSource
from ...model import FailureCategory, RunResult
from ...perf import extend as perf_extend
from ...perf import gate as perf_gate
from ...perf.instruction_counts import compare_counts, geomean_change
from ...policy import CheckKind, Verdict, load_policy
from ...retry.decision import RetrySettings
from ...triage.signature import signature
from ..gating import GateInputs, gate_runs
from ..job import (
    EXTENDED,
    FAILURE,
    OUTCOME,
    PROGRAMS_RUN,
    REPEATS,
    ROUND_ORDER,
    Job,
    Progress,
    stderr_progress,
)
from ..phases import build_phase, measure_phase
from ..rounds import extend_while_undecided, measure_pairs
from ..runtime.instruction_counting import count_instructions
from ..runtime.locks import exclusive
from ..runtime.source import cache_root
from ..runtime.stage_error import StageError
from ..stages import run_stage

BUILD_STAGES = frozenset({"fetch", "configure", "build"})
INSTRUCTIONS = "instructions"
# The policy's own floor for counted instructions (policies/default.yml): rebuilds of one source
# count the same to the last instruction, so anything above it is the code's doing.
INSTRUCTION_LIMIT_PCT = 0.5


class HistoryError(ValueError):
    """The range cannot be bisected as given (unknown ref, good not before bad); the message says why."""


# --------------------------------------------------------------------------- the history


def _git(repo: Path, *args: str, timeout_s: float = 300) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise HistoryError(f"git {args[0]} failed: {err[-1] if err else 'exit ' + str(proc.returncode)}")
    return proc.stdout


def mirror(url: str, refs: list[str], cache: Path) -> Path:
    """A bare clone of ``url`` holding ``refs`` (in the cache), to read the history from."""
    repo = cache / "git" / f"bisect-{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"
    # Two bisections of one repository at once would both init it and race on its refs.
    with exclusive(repo.with_name(repo.name + ".lock")):
        if not (repo / "HEAD").is_file():
            repo.mkdir(parents=True, exist_ok=True)
            _git(repo, "init", "-q", "--bare")
        for ref in refs:
            _git(repo, "fetch", "-q", "--no-tags", url, f"+{ref}:refs/bisect/{_ref_name(ref)}", timeout_s=900)
    return repo


def _ref_name(ref: str) -> str:
    return re.sub(r"[^\w.-]", "_", ref)


def linear_history(repo: Path, good: str, bad: str) -> list[Commit]:
    """The good commit and every first-parent commit after it up to ``bad``, oldest first."""
    def resolve(ref: str) -> str:
        for name in (f"refs/bisect/{_ref_name(ref)}", ref):
            try:
                return _git(repo, "rev-parse", "--verify", "-q", f"{name}^{{commit}}").strip()
            except HistoryError:
                continue
        raise HistoryError(f"{ref!r} is not a commit of the repository")

    g, b = resolve(good), resolve(bad)
    if g == b:
        raise HistoryError(f"--good and --bad are the same commit ({g[:12]})")
    try:
        _git(repo, "merge-base", "--is-ancestor", g, b)
    except HistoryError:
        raise HistoryError(f"--good {good} ({g[:12]}) is not an ancestor of --bad {bad} ({b[:12]})") from None
    shas = _git(repo, "rev-list", "--first-parent", "--reverse", f"{g}..{b}").split()
    fmt = "%H%x1f%s%x1f%an <%ae>%x1f%aI"
    out = []
    for line in _git(repo, "show", "-s", f"--format={fmt}", g, *shas).splitlines():
        sha, subject, author, date = line.split("\x1f")
        out.append(Commit(sha, subject, author, date))
    return out


# --------------------------------------------------------------------------- what one run says


def _signature_of(check: Any, run: RunResult) -> str | None:
    """The triage signature of a failed check (``bsdkm-ci signature`` prints the same)."""
    try:
        return signature(check, run)
    except Exception:  # noqa: BLE001 - a signature that cannot be made falls back to name+message
        return None


@dataclass(frozen=True)
class FailureSpec:
    """What ``--failure SIGNATURE`` matches: a triage signature exactly, or ``NAME[: PATTERN]``.

    NAME is a failed check's name (a glob), PATTERN a regular expression searched in its message;
    the stage a run failed in matches as ``<stage>[: PATTERN]`` (``build: error: expected``).
    """

    text: str

    @property
    def name(self) -> str:
        return self.text.split(":", 1)[0].strip()

    @property
    def pattern(self) -> re.Pattern[str] | None:
        rest = self.text.split(":", 1)[1].strip() if ":" in self.text else ""
        return re.compile(rest) if rest else None

    def check(self) -> None:
        if not self.name:
            raise ValueError(f"--failure {self.text!r}: no check name before the ':'")
        try:
            _ = self.pattern
        except re.error as e:
            raise ValueError(f"--failure {self.text!r}: the pattern is no regular expression: {e}") from None

    def _name_and_message(self, name: str, message: str) -> bool:
        if not fnmatch.fnmatchcase(name, self.name):
            return False
        pattern = self.pattern
        return pattern is None or bool(pattern.search(message))

    def matches_check(self, check: Any, run: RunResult) -> bool:
        if _signature_of(check, run) == self.text:
            return True
        return self._name_and_message(check.name, check.message)

    def matches_stage(self, run: RunResult) -> bool:
        f = run.failure
        return f is not None and self._name_and_message(f.stage, f.message)


def failure_outcome(spec: FailureSpec, run: RunResult, verdict: Verdict) -> Probe:
    """good/bad/skip of one run for the failure ``spec``."""
    failed = [c for c in verdict.failures if c.kind != CheckKind.REGRESSION]
    hit = next((c for c in failed if spec.matches_check(c, run)), None)
    if hit is not None:
        return Probe(Outcome.BAD, f"{hit.run_label} {hit.name}: {hit.message}",
                     evidence={"check": hit.to_dict(), "signature": _signature_of(hit, run)})
    f = run.failure
    if f is not None and spec.matches_stage(run):
        return Probe(Outcome.BAD, f"{f.stage} failed: {f.message}", evidence={"failure": f.to_dict()})
    if f is not None and f.stage in BUILD_STAGES:
        return Probe(Outcome.SKIP, f"does not build ({f.stage}: {f.message})")
    if f is None:  # the run went to its end: another failed check hid nothing
        return Probe(Outcome.GOOD, f"(other failure: {failed[0].message})" if failed else "")
    # A stage stopped early for another reason: good only if the check bisected ran and passed.
    if any(c.passed and fnmatch.fnmatchcase(c.name, spec.name) for c in verdict.checks):
        return Probe(Outcome.GOOD, f"(other failure: {f.stage}: {f.message})")
    return Probe(Outcome.SKIP, f"another failure hides it: {f.stage}: {f.message}")


@dataclass(frozen=True)
class RegressionSpec:
    """``--regression ITEM [--pct P]``: an item (or ``geomean``) slower by about P %."""

    item: str
    pct: float | None = None
    metric: str = "time"  # time: interleaved wall-clock rounds and the learned gate; instructions: counts

    def find(self, verdict: Verdict, target: str, variant: str) -> dict[str, Any] | None:
        for entry in verdict.perf:
            if entry.get("target") != target or entry.get("variant") != variant:
                continue
            if self.item == perf_gate.GEOMEAN:
                return entry.get("geomean")
            for item in entry.get("items") or []:
                if item.get("name") == self.item:
                    return item
        return None


def regression_outcome(spec: RegressionSpec, item: dict[str, Any] | None, rounds: int,
                       resolve_pct: float) -> Probe:
    """good/bad/skip of one interleaved measurement (a commit against the good end) for ``spec``.

    bad: the gate calls the item a regression of at least half the size bisected (``pct``); good:
    no such regression, and the measurement could have seen one; else (inconclusive, too noisy
    after ``max_repeats`` rounds) skip.
    """
    if item is None:
        return Probe(Outcome.SKIP, f"{spec.item}: not measured on both sides", rounds=rounds)
    change = item.get("change")
    shown = _change_text(item)
    evidence = {"item": spec.item, "change_pct": None if change is None else round(100 * change, 2),
                "interval_pct": [None if item.get(k) is None else round(100 * item[k], 2)
                                 for k in ("ci_low", "ci_high")],
                "verdict": item.get("verdict"), "rounds": rounds}
    wanted = (spec.pct or 0.0) / 2
    if item.get("verdict") == perf_gate.REGRESSION and change is not None and -100 * change >= wanted:
        return Probe(Outcome.BAD, f"{spec.item} {shown}: regression", rounds=rounds, evidence=evidence)
    resolve = min(resolve_pct, spec.pct) if spec.pct else resolve_pct
    if item.get("verdict") == perf_gate.INCONCLUSIVE or perf_extend.unresolved(item, resolve):
        return Probe(Outcome.SKIP, f"{spec.item} {shown}: inconclusive after {rounds} round(s)",
                     rounds=rounds, evidence=evidence)
    return Probe(Outcome.GOOD, f"{spec.item} {shown}: {item.get('verdict')}", rounds=rounds,
                 evidence=evidence)


def _change_text(item: dict[str, Any]) -> str:
    change, lo, hi = item.get("change"), item.get("ci_low"), item.get("ci_high")
    if change is None:
        return "(no change measured)"
    interval = f" [{100 * lo:+.1f} %, {100 * hi:+.1f} %]" if lo is not None and hi is not None else ""
    return f"{100 * change:+.1f} %{interval}"


# --------------------------------------------------------------------------- the runner


@dataclass
class PipelineRunner:
    """Builds and runs commits of ``url`` for one (target, variant), as the pipeline does.

    ``failure`` or ``regression`` says what a run is judged for. Build directories, logs and the
    state of every commit's run are under ``out/commits/<sha12>`` (the good end's base for a perf
    bisection under ``out/good``).
    """

    config: Config
    target: str
    variant: str
    url: str
    out: Path
    failure: FailureSpec | None = None
    regression: RegressionSpec | None = None
    good: Commit | None = None
    progress: Progress = stderr_progress
    sleep: Callable[[float], None] = time.sleep
    jobs: dict[str, Job] = field(default_factory=dict)
    base: Job | None = None
    base_counts: Any = None  # the good end's instruction counts (--metric instructions)
    base_build_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if (self.failure is None) == (self.regression is None):
            raise ValueError("a bisection judges either a failure or a regression")
        self.gate = GateInputs.load(self.config, read_baseline=False)
        self.retry = RetrySettings.from_config(self.config.retry)

    def say(self, message: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:7.1f}s] bisect: {message}")

    def __call__(self, commit: Commit, purpose: Purpose) -> Probe:
        begun = time.monotonic()
        self.say(f"{purpose.value} {commit.short} {commit.subject[:60]}")
        job, built, build_s, failure = self._built(commit)
        if failure is not None:  # fetch/build infrastructure that outlived its retries, or a real one
            probe = self._judge_build_failure(job, failure)
        elif self.failure is not None:
            probe = self._run_for_failure(job, commit)
        else:
            fresh = self.base is None
            probe = (self._count(job, commit) if self.regression is not None
                     and self.regression.metric == INSTRUCTIONS else self._measure(job, commit))
            if fresh and self.base is not None:  # this run built the good end to measure against
                probe.extra_builds, build_s = 1, build_s + self.base_build_seconds
        probe.built, probe.build_seconds = built, build_s
        probe.seconds = time.monotonic() - begun
        self.say(f"{commit.short}: {probe.outcome.value} {probe.reason}".rstrip())
        return probe

    # -- building

    def _job(self, commit: Commit, root: Path, slot: str = "") -> Job:
        source = GitSource(self.url, ref=commit.sha, commit=commit.sha, slot=slot)
        config = replace(self.config, source=source)
        return Job(config, self.target, self.variant, root, jobs=self.config.jobs, progress=self.progress,
                   started=self.started, state={})

    def _built(self, commit: Commit, slot: str = "", root: Path | None = None
               ) -> tuple[Job, bool, float, Any]:
        """The commit's job, built (infrastructure tried again): (job, new build, seconds, failure)."""
        key = f"{slot}:{commit.sha}"
        if key in self.jobs:
            job = self.jobs[key]
            return job, False, 0.0, job.failure if _failed_building(job) else None
        job = self._job(commit, root or self.out / "commits" / commit.short, slot)
        begun = time.monotonic()
        retries = 0
        while True:  # fetch starts each attempt afresh and keeps the last one's outcome (run_stage)
            if run_stage(job, "fetch") is None:
                build_phase(job)
            failure = job.failure
            if failure is None or failure.category != FailureCategory.INFRASTRUCTURE:
                break
            if retries >= self.retry.max_infra_retries:
                break
            retries += 1
            wait = self.retry.backoff(retries)
            self.say(f"{commit.short}: infrastructure failure ({failure.message}); retry {retries} "
                     f"in {wait:g} s")
            self.sleep(wait)
        self.jobs[key] = job
        return job, True, time.monotonic() - begun, failure

    def _judge_build_failure(self, job: Job, failure: Any) -> Probe:
        if failure.category == FailureCategory.INFRASTRUCTURE:
            return Probe(Outcome.SKIP, f"infrastructure ({failure.stage}: {failure.message}), "
                                       f"after {self.retry.max_infra_retries} retries")
        if self.failure is not None:
            run = RunResult(job.variant, job.target, failure=failure)
            return failure_outcome(self.failure, run, Verdict())
        return Probe(Outcome.SKIP, f"does not build ({failure.stage}: {failure.message})")

    # -- failures

    def _run_for_failure(self, job: Job, commit: Commit) -> Probe:
        """Load and unload of the build, retried on infrastructure, judged for the failure."""
        assert self.failure is not None
        retries = 0
        while True:
            _reset_measurement(job)
            run = measure_phase(job)
            f = run.failure
            infra = f is not None and f.category == FailureCategory.INFRASTRUCTURE
            if not infra or retries >= self.retry.max_infra_retries:
                break
            retries += 1
            self.say(f"{commit.short}: infrastructure failure ({f.message}); retry {retries}")
            self.sleep(self.retry.backoff(retries))
        if f is not None and f.category == FailureCategory.INFRASTRUCTURE:
            return Probe(Outcome.SKIP, f"infrastructure ({f.stage}: {f.message}), after {retries} retries")
        verdict = gate_runs(self.gate, [run])
        return failure_outcome(self.failure, run, verdict)

    # -- regressions

    def _measure(self, job: Job, commit: Commit) -> Probe:
        assert self.regression is not None and self.good is not None
        base = self._good_end()
        _reset_measurement(job)
        _reset_measurement(base)
        pair = (job.target, job.variant)
        repeats = max(1, self.config.benchmark.repeats)
        heads, bases = measure_pairs([job], {pair: base}, repeats, self.say)
        if heads[0].failure is not None:
            f = heads[0].failure
            return Probe(Outcome.SKIP, f"does not run ({f.stage}: {f.message})")
        if bases[0].failure is not None:
            raise StageError(bases[0].failure)

        def judge(h: list[RunResult], b: list[RunResult]) -> Verdict:
            return gate_runs(self.gate, h, b)

        last = extend_while_undecided([job], {pair: base}, heads, bases, repeats, self.gate.policy.perf,
                                      judge, self.say)
        rounds = last.rounds.get(pair, (repeats, repeats))[1]
        item = self.regression.find(last.verdict, job.target, job.variant)
        return regression_outcome(self.regression, item, rounds, self.gate.policy.perf.resolve_pct)


    def _good_end(self) -> Job:
        """The good end, built once in a work tree of its own: what every commit is measured against."""
        assert self.good is not None
        if self.base is None:
            base, _, seconds, failure = self._built(self.good, "base", self.out / "good")
            if failure is not None:
                raise StageError(failure)  # nothing can be measured without the good end
            self.base, self.base_build_seconds = base, seconds
        return self.base

    def _count(self, job: Job, commit: Commit) -> Probe:
        """The item's instructions in this commit's build against the good end's (1 vs 1: deterministic)."""
        assert self.regression is not None and self.good is not None

        settings = load_policy(self.config.policy).instructions
        wanted = self.regression.item
        items = dict(settings.items) if wanted == perf_gate.GEOMEAN else {
            wanted: settings.items.get(wanted, 1 << 20)}

        def counted(j: Job) -> Any:
            return count_instructions(Path(j.state["build_dir"]), items, block=settings.block_bytes,
                                      cache=cache_root(self.config),
                                      timeout_s=self.config.timeout("benchmark"))

        if self.base_counts is None:
            self.base_counts = counted(self._good_end())
        changes = compare_counts(self.base_counts, counted(job), INSTRUCTION_LIMIT_PCT)
        if wanted == perf_gate.GEOMEAN:
            pct = geomean_change(changes)
            reason = None if pct is not None else "no item counted on both sides"
        else:
            one = next((c for c in changes if c.name == wanted), None)
            pct = one.change_pct if one is not None else None
            reason = one.reason if one is not None else "not counted"
        if pct is None:
            return Probe(Outcome.SKIP, f"{wanted}: instructions not counted ({reason})")
        limit = max(INSTRUCTION_LIMIT_PCT, (self.regression.pct or 0.0) / 2)
        evidence = {"item": wanted, "metric": INSTRUCTIONS, "change_pct": round(pct, 3),
                    "interval_pct": [round(pct, 3), round(pct, 3)]}
        text = f"{wanted} {pct:+.2f} % instructions (a bad step: more than +{limit:g} %)"
        return Probe(Outcome.BAD if pct > limit else Outcome.GOOD, text, evidence=evidence)


def _failed_building(job: Job) -> bool:
    f = job.failure
    return f is not None and f.stage in BUILD_STAGES


def _reset_measurement(job: Job) -> None:
    """A run of an existing build starts clean: no failure or rounds of an earlier run of it."""
    if job.failure is not None and job.failure.stage not in BUILD_STAGES:
        job.drop(FAILURE)
    for key in (PROGRAMS_RUN, OUTCOME, REPEATS, ROUND_ORDER, EXTENDED):
        job.drop(key)
    job.save()




# --------------------------------------------------------------------------- the whole bisection


@dataclass
class Bisection:
    """What ``bisect_range`` found and what it was asked (for the report's header)."""

    result: BisectResult
    about: dict[str, Any]


def bisect_range(config: Config, url: str, good: str, bad: str, target: str, variant: str, out: Path, *,
                 failure: FailureSpec | None = None, regression: RegressionSpec | None = None,
                 settings: BisectSettings | None = None, progress: Progress = stderr_progress,
                 sleep: Callable[[float], None] = time.sleep) -> Bisection:
    """Bisect ``good..bad`` of ``url`` on (``target``, ``variant``); HistoryError for an unusable range."""
    repo = mirror(url, [good, bad], cache_root(config))
    history = linear_history(repo, good, bad)
    runner = PipelineRunner(config, target, variant, url, out, failure=failure, regression=regression,
                            good=history[0], progress=progress, sleep=sleep)
    what = (f"the failure {failure.text!r}" if failure is not None
            else f"the regression of {regression.item}" if regression is not None else "it")
    result = bisect(history, runner, settings, what)
    about = {"repository": url, "good": f"{good} ({history[0].short})", "bad": f"{bad} ({history[-1].short})",
             "target": target, "variant": variant,
             "failure": failure.text if failure else None,
             "regression": regression.item if regression else None,
             "pct": regression.pct if regression else None,
             "flaky": (settings or BisectSettings()).flaky}
    return Bisection(result, about)
