"""What crosses a process or shell boundary, named once.

The Buildbot steps, the retrying build, the GitHub controller and reporters, and the stage command
on the worker talk to each other through build properties, builder names, status contexts and the
stage's ``state.json``. Each of those names and shapes is defined here and nowhere else, so the two
ends of a boundary cannot drift apart. Pure: no Buildbot, no GitHub.

The failure record (``StageFailure``, with its ``FailureCategory`` and ``FailureReason``) is defined
here, beside the names that carry it; ``model`` holds it in a run's result. The records turn into
dicts and back with their own methods (``StageFailure.to_dict/from_dict``, ``Verdict.from_dict``
in ``policy``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# --------------------------------------------------------------------------- failure records


class FailureCategory(StrEnum):
    """Who is to blame for a failure; drives the retry policy."""

    INFRASTRUCTURE = "infrastructure"  # network, lost worker, CI exception: retry
    REAL = "real"  # compile error, failed self-test, panic, regression: never retry silently


class FailureReason(StrEnum):
    """Why a stage failed, in one short word: what the retry policy, the statuses and the reports key on.

    A ``str`` so that the failure records (``StageFailure.to_dict``) and every comparison with the
    words keep working. The stage names are reasons too: a stage that failed for no more precise
    reason is said to have failed its stage.
    """

    # Infrastructure: the machine, the network or the CI side, not the code under test.
    NETWORK = "network"
    FETCH = "fetch"
    WORKER_LOST = "worker-lost"
    WORKER_SETUP = "worker-setup"
    CI_EXCEPTION = "ci-exception"
    VM_BOOT = "vm-boot"  # the kernel fell over before the module was loaded
    TARGET_UNAVAILABLE = "target-unavailable"  # this machine cannot do the target (below)
    HUNG_AFTER_COMPLETE = "hung-after-complete"
    TIMEOUT = "timeout"
    LOGS_LOST = "logs-lost"
    INTEGRITY = "integrity"  # an input that is not what its pin or manifest says
    SNAPSHOT_CHANGING = "snapshot-changing"
    INFRA_PATTERN = "infra-pattern"  # a config's ``retry.infra_patterns`` matched
    UNKNOWN = "unknown"
    # Real: the code under test.
    CONFIG = "config"
    CONFIGURE = "configure"
    COMPILE = "compile"
    PANIC = "panic"
    SELFTEST = "selftest"
    LOAD_ERROR = "load-error"
    LOAD_TIMEOUT = "load-timeout"
    INCOMPLETE_LOG = "incomplete-log"
    CONSOLE_FLOOD = "console-flood"
    FIPS = "fips"
    INSTRUCTIONS = "instructions"
    REAL_PATTERN = "real-pattern"  # a config's ``retry.real_patterns`` matched
    # The remaining stages, for a failure of theirs with no more precise reason.
    BUILD = "build"
    LOAD = "load"
    BENCHMARK = "benchmark"
    UNLOAD = "unload"
    COLLECT = "collect"
    GATE = "gate"

    @classmethod
    def _missing_(cls, value: object) -> FailureReason | None:
        # A word records written before the words were one set may still hold.
        return cls.COMPILE if value == "compile-error" else None

    @classmethod
    def of_stage(cls, stage: str) -> FailureReason:
        """The reason of a stage that failed for no more precise reason: the stage itself."""
        try:
            return cls(stage)
        except ValueError:
            return cls.UNKNOWN


@dataclass
class StageFailure:
    """Why a pipeline stage failed, precisely enough for a retry policy to act."""

    stage: str  # fetch, configure, build, load, selftest, benchmark, unload, collect, gate
    message: str  # "configure failed: ...", "module load timed out after 600 s"
    category: FailureCategory = FailureCategory.REAL
    reason: FailureReason | None = None  # what the retry policy keys on: network, compile, panic, ...
    evidence: list[str] = field(default_factory=list)  # paths of logs kept
    # The output line the failure comes from, as printed: a compiler's error, a panic's header.
    line: str | None = None
    # The part of the run that failed, where a run has several (``debug kernel``): the message
    # begins with it.
    part: str | None = None

    def __post_init__(self) -> None:
        if self.reason is not None and not isinstance(self.reason, FailureReason):
            try:
                self.reason = FailureReason(self.reason)
            except ValueError:
                raise ValueError(f"unknown failure reason {self.reason!r} (known: "
                                 f"{', '.join(r.value for r in FailureReason)})") from None

    def to_dict(self) -> dict[str, Any]:
        """The failure record every process and shell exchanges (JSON-ready: category as its value)."""
        return {
            "stage": self.stage,
            "message": self.message,
            "category": self.category.value,
            "reason": None if self.reason is None else self.reason.value,
            "evidence": list(self.evidence),
            # absent while unset, as in the records written before these fields
            **({"line": self.line} if self.line is not None else {}),
            **({"part": self.part} if self.part is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageFailure:
        """``to_dict`` back; ValueError naming the problem when ``d`` is not a failure record."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a failure record is a mapping, not {type(d).__name__}")
        unknown = sorted(set(d) - {"stage", "message", "category", "reason", "evidence", "line", "part"})
        if unknown:
            raise ValueError(f"failure record has unknown keys: {', '.join(map(str, unknown))}")
        if not isinstance(d.get("stage"), str) or not isinstance(d.get("message"), str):
            raise ValueError("failure record needs 'stage' and 'message' strings")
        try:
            category = FailureCategory(d.get("category", FailureCategory.REAL.value))
        except ValueError:
            raise ValueError(f"failure record has unknown category {d.get('category')!r}") from None
        reason = d.get("reason")
        evidence = d.get("evidence") or []
        if not isinstance(evidence, list):
            raise ValueError("failure record 'evidence' is not a list")
        line, part = d.get("line"), d.get("part")
        if not isinstance(line, str | None) or not isinstance(part, str | None):
            raise ValueError("failure record 'line' and 'part' are strings when present")
        return cls(d["stage"], d["message"], category, None if reason is None else str(reason),
                   [str(e) for e in evidence], line, part)


# A run whose target this machine cannot do: no FreeBSD set reachable, freebsd-kmod on a host that
# is not FreeBSD. ``bsdkm-ci run`` and ``main`` report such a run "not run" (``RunResult.not_run``);
# Buildbot and the Action treat it as the infrastructure failure it is (retried, then an error).
TARGET_UNAVAILABLE = FailureReason.TARGET_UNAVAILABLE


# A configured baseline file that cannot be read: every shell exits 2 naming the file.
class BaselineError(ValueError):
    """The configured baseline cannot be read; the message names the file."""


# --------------------------------------------------------------------------- the run's directory

# The perf gate's base, built by the same stages beside the head: ``<out>/base/<target>/<variant>``.
BASE_DIR = "base"
# Perf history the Buildbot master puts next to the run before the gate stage reads it.
HISTORY_FILE = "history.json"
# The base runs a ``run --base-*`` measured next to the head, beside its summary.json: the Action's
# report job merges them and judges the merged heads against them.
BASE_RUNS_JSON = "base-runs.json"

# --------------------------------------------------------------------------- build properties

PROPERTY_SOURCE = "bsdkm"  # the "source" Buildbot shows next to every property we set

# Set by the stage steps (buildbot/steps.py).
FAILURE_PROPERTY = "bsdkm_failure"  # StageFailure.to_dict() of the first failing stage
VERDICT_PROPERTY = "bsdkm_verdict"  # passed | failed | inconclusive | infrastructure


def verdict_word(status: str | None, ok: bool) -> str:
    """``VERDICT_PROPERTY``'s (and a passed release's) value from the core's word (``Verdict.status``)
    and whether the step passed: unjudged items are never called passed."""
    return "inconclusive" if status == "inconclusive" else ("passed" if ok else "failed")
# Gated items the gate could not judge (policy.Verdict.inconclusive): the commit status says how many.
INCONCLUSIVE_PROPERTY = "bsdkm_inconclusive"
REGRESSIONS_PROPERTY = "bsdkm_regressions"  # ["AES-128-GCM-enc −31 %", ...]
SELFTEST_PROPERTY = "bsdkm_selftest"  # "self-test: 70/71 passed (PWDBASED failed -125)"
BENCHMARKS_PROPERTY = "bsdkm_benchmarks"  # how many benchmark items the run printed
# The results document is too big for a property (81 KB for two variants): the master keeps it in
# a file and the property names that file; a build may carry the document itself instead.
RESULTS_PATH_PROPERTY = "bsdkm_results_path"
RESULTS_PROPERTY = "bsdkm_results"  # model.to_json document of the build's runs
# The gate's triage of the failed checks: {"counts": {"new": 1, "pre-existing": 2}, "blocking": 1,
# "since": "5.9.2"} (buildbot/summaries.triage_property), read by the commit-status description.
TRIAGE_PROPERTY = "bsdkm_triage"
# A PR build of a target that measures no base, with no base outcome recorded yet: it builds and
# loads the PR's base too, for correctness only (set by FetchSource).
BASE_CORRECTNESS_PROPERTY = "bsdkm_base_correctness"
# The base's recorded outcomes, written next to a PR build's run before ``stage gate`` reads them
# (``{"base_outcomes": [BaseOutcome.to_dict(), ...]}``, oldest first).
BASE_OUTCOMES_FILE = "base-outcomes.json"
# What ``stage gate`` triaged against (the file above and the base built next to the head), same
# form, written only when there was any: the Gate step keeps it as BASE_OUTCOMES_PROPERTY, so the PR
# comment, judged again on the master over every build, says what the statuses say.
BASE_OUTCOMES_USED_FILE = "base-outcomes.used.json"
BASE_OUTCOMES_PROPERTY = "bsdkm_base_outcomes"
# A release-candidate run's outcomes (the candidate judged on its own, same form as above), which the
# release step records like a base-branch build's: release runs are base outcomes too.
RELEASE_OUTCOMES_FILE = "release-outcomes.json"

# Set by the bounded-retry build (buildbot/retrying_build.py).
ATTEMPT_PROPERTY = "bsdkm_attempt_record"  # this build's own attempt (retry_rules.Attempt.to_dict())
HISTORY_PROPERTY = "bsdkm_attempts"  # every attempt of the build request so far
RETRY_SUMMARY_PROPERTY = "bsdkm_retry"  # the retry decision's one-line summary

# Set by the master's configuration (buildbot/master_config.py, buildbot/candidate.py).
TARGET_PROPERTY = "bsdkm_target"
VARIANT_PROPERTY = "bsdkm_variant"
CONFIG_PROPERTY = "bsdkm_config"  # bsdkm.yml as the worker sees it (a worker property)
TAGS_PROPERTY = "bsdkm_tags"  # which targets a worker can run (a worker property)
RUN_KIND_PROPERTY = "bsdkm_run"  # "release-candidate" for the nightly and release runs
RELEASE_VERDICT_PROPERTY = "bsdkm_release_verdict"  # passed | failed | inconclusive | error
# The bisect builder (buildbot/bisect_builder.py): its request, its result, what the master bisected already.
BISECT_REQUEST_PROPERTY = "bsdkm_bisect_request"  # BisectRequest.to_dict() of the build
BISECT_RESULT_PROPERTY = "bsdkm_bisect"  # bisect.json without its steps
BISECTED_STATE = "bsdkm_bisected"  # the keys already bisected, in the master's object state

# Set on every PR build by github/controller.py; read by the steps, the reporters, perf history.
PR_REPO_PROPERTY = "github_repo"
PR_NUMBER_PROPERTY = "github_pr"
PR_HEAD_PROPERTY = "github_head_sha"
PR_URL_PROPERTY = "github_pr_url"
PR_TRIGGER_PROPERTY = "github_trigger"
PR_BASE_REF_PROPERTY = "github_base_ref"
# The PR's base commit (the webhook's pull_request.base.sha): a PR build with it builds that commit
# too and measures both interleaved.
PR_BASE_SHA_PROPERTY = "github_base_sha"
# True when the PR's author (and whoever pushed its head) is trusted; False for a build a maintainer
# approved with `ok to test`: such a build runs only where worker_trust.may_run lets it.
PR_AUTHOR_TRUSTED_PROPERTY = "github_author_trusted"
# Buildbot's own, copied from the buildset's sourcestamp: the PR's clone URL on a PR build.
REPOSITORY_PROPERTY = "repository"


def failure_property(failure: StageFailure) -> dict[str, Any]:
    """The ``bsdkm_failure`` property's value for ``failure``."""
    return failure.to_dict()


def failure_from_property(value: Any) -> StageFailure | None:
    """A ``bsdkm_failure`` property back to its record; None when it holds none (unset or garbage)."""
    if not value:
        return None
    try:
        return StageFailure.from_dict(value)
    except ValueError:
        return None


# --------------------------------------------------------------------------- names

STATUS_CONTEXT_PREFIX = "bsdkm/"


def builder_name(target: str, variant: str) -> str:
    """The Buildbot builder of one (target, variant)."""
    return f"{target}/{variant}"


def status_context(target: str, variant: str) -> str:
    """The GitHub commit-status context of that builder: ``bsdkm/<target>/<variant>``."""
    return STATUS_CONTEXT_PREFIX + builder_name(target, variant)


# --------------------------------------------------------------------------- the stage's state.json

STATE_FILE = "state.json"
# Stages ``bsdkm-ci stage`` still runs after an earlier stage failed (pipeline/stages.run_stage);
# state.json then still holds that earlier failure, which is not theirs.
RUNS_AFTER_FAILURE = frozenset({"collect", "gate"})


class StateError(ValueError):
    """A ``state.json`` that cannot be read as one; the message names the file and the problem."""


def run_dir(out_dir: str, target: str, variant: str) -> str:
    """Where ``bsdkm-ci stage --out OUT_DIR`` keeps one (target, variant): ``OUT/<target>/<variant>``."""
    return f"{out_dir}/{target}/{variant}"


def state_path(out_dir: str, target: str, variant: str) -> str:
    return f"{run_dir(out_dir, target, variant)}/{STATE_FILE}"


def read_state(text: str, where: str) -> dict[str, Any]:
    """``state.json`` text → its document; ``StateError`` when it is not a JSON object."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise StateError(f"{where}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise StateError(f"{where}: not a state document (a JSON object), but {type(doc).__name__}")
    return doc


@dataclass(frozen=True)
class StageOutcome:
    """What a failed ``bsdkm-ci stage`` left in ``state.json`` about the stage it was asked to run."""

    failure: StageFailure | None = None  # its own failure, classified on the worker (it had the logs)
    skipped_after: str | None = None  # the earlier stage whose failure made it refuse to run


def stage_outcome(doc: Mapping[str, Any], stage: str, where: str) -> StageOutcome:
    """Read ``stage``'s outcome from a state document; ``StateError`` when its records are malformed.

    A stage that ran has its time in ``stages``; one skipped after an earlier failure has none, and
    the failure recorded is that earlier one. Neither: the stage failed without a record (a gate
    whose verdict failed), and whoever asks classifies what it printed.
    """
    ran = doc.get("stages", {})
    if not isinstance(ran, Mapping):
        raise StateError(f"{where}: 'stages' is not a mapping")
    raw = doc.get("failure")
    if raw is None:
        return StageOutcome()
    try:
        failure = StageFailure.from_dict(raw)
    except ValueError as e:
        raise StateError(f"{where}: {e}") from None
    if stage not in ran:
        return StageOutcome(skipped_after=failure.stage)
    if stage in RUNS_AFTER_FAILURE and failure.stage != stage:
        return StageOutcome()
    return StageOutcome(failure=failure)


# --------------------------------------------------------------------------- live progress


class Milestone(StrEnum):
    """What a stage is doing now, in the words its progress lines, the Buildbot step summary and the
    Action's log groups all show."""

    FETCHING = "fetching"
    CONFIGURING = "configuring"
    BUILDING = "building"
    LOADING = "loading"
    BOOTING = "booting"
    SELF_TEST = "self-test"
    BENCHMARK = "benchmark"
    COUNTING = "counting instructions"
    COLLECTING = "collecting"
    UNLOADING = "unloading"
    GATING = "gating"

    @property
    def stage(self) -> str:
        """The stage (pipeline/stages.STAGES) this milestone belongs to."""
        return next((s for s, m in STAGE_MILESTONES.items() if m is self), "load")


# The milestone each stage starts with; booting, self-test, benchmark and counting happen in ``load``.
STAGE_MILESTONES: dict[str, Milestone] = {
    "fetch": Milestone.FETCHING, "configure": Milestone.CONFIGURING, "build": Milestone.BUILDING,
    "load": Milestone.LOADING, "collect": Milestone.COLLECTING, "unload": Milestone.UNLOADING,
    "gate": Milestone.GATING,
}
BASE_SIDE = "base"  # the side a PR's base, built and measured next to the head, is shown as

# A progress line is a stage's own timed line (``[  12.3s] target/variant: ...``) whose message
# starts with this mark; nothing else the stage prints does.
PROGRESS_MARK = ">>"
_PROGRESS_WORDS = re.compile(
    rf"(?P<milestone>{'|'.join(re.escape(m.value) for m in Milestone)})"
    r"(?: round (?P<round>\d{1,4}) of (?P<rounds>\d{1,4}))?(?: \((?P<side>base)\))?")
_PROGRESS_LINE = re.compile(rf"\[\s*\d+(?:\.\d+)?s\] (?:(?P<label>[\w.+-]+/[\w.+-]+): )?"
                            rf"{re.escape(PROGRESS_MARK)} (?P<words>.+)")


@dataclass(frozen=True)
class StageProgress:
    """One milestone of a stage: ``benchmark round 2 of 5 (base)``."""

    milestone: Milestone
    round: int | None = None  # a benchmark round, with ``rounds``: how many there are
    rounds: int | None = None
    side: str = ""  # BASE_SIDE for the PR's base; the head says nothing
    label: str = ""  # target/variant, as the line named it

    @property
    def words(self) -> str:
        """What a person is shown: the Buildbot step summary, the Action's log."""
        text = self.milestone.value
        if self.round is not None and self.rounds is not None:
            text += f" round {self.round} of {self.rounds}"
        return f"{text} ({self.side})" if self.side else text

    @property
    def message(self) -> str:
        """The message a stage prints for it (after its time and label)."""
        return f"{PROGRESS_MARK} {self.words}"

    @property
    def stage(self) -> str:
        return self.milestone.stage


def read_progress(line: str) -> StageProgress | None:
    """The milestone a stage's output line announces; None for every other line."""
    m = _PROGRESS_LINE.fullmatch(line.strip())
    words = _PROGRESS_WORDS.fullmatch(m["words"]) if m else None
    if m is None or words is None:
        return None
    rounds = (int(words["round"]), int(words["rounds"])) if words["round"] else (None, None)
    return StageProgress(Milestone(words["milestone"]), *rounds, side=words["side"] or "",
                         label=m["label"] or "")


# --------------------------------------------------------------------------- uploaded results

class UndeclaredResults(ValueError):
    """A results document names a (target, variant) its reader does not build."""


def undeclared(pairs: Iterable[tuple[str, str]], declared: Collection[tuple[str, str]]) -> list[str]:
    """``target/variant`` of each pair not in ``declared``, sorted, once each."""
    return sorted({builder_name(t, v) for t, v in pairs if (t, v) not in declared})


def check_declared(runs: Iterable[Any], declared: Collection[tuple[str, str]], where: str) -> None:
    """Refuse runs (anything with ``target`` and ``variant``) of a pair ``declared`` lacks.

    Uploaded results come from the worker or a job that ran the PR's code: the names in them are
    the PR's to choose. Only the config's (or the builder's) own pairs are reported or judged.
    """
    bad = undeclared(((r.target, r.variant) for r in runs), declared)
    if bad:
        known = ", ".join(builder_name(t, v) for t, v in sorted(declared)) or "none"
        raise UndeclaredResults(f"{where}: results for {', '.join(repr(b) for b in bad)}, which the "
                                f"configuration does not declare (declared: {known}): refused")
