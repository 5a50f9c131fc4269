"""What a target is to the pipeline: the whole protocol each stage calls, and its defaults.

A target is one object (``TARGET`` in its own module) found through ``targets.registered()``. What it
*is* (a kernel target or not, whether its benchmark numbers measure the module's performance,
whether one run can measure again) is its row in the core's ``buildbot_bsdkm/targets.py``, named
as ``facts``. How it runs is these hooks: the stages call them and never ask which target they
hold. ``KernelTarget`` implements them for a module that is built, loaded and judged by its kernel
log; such a target says only how its module is built and loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...config.bsdkm_yml import Config
from ...config.target_options import NoOptions
from ...contract import Milestone
from ...model import FailureCategory, LogFormat, LogResult, Problem, StageFailure
from ...parsers import ParseError, parse_file
from ...perf.instruction_counts import METADATA_KEY
from ...retry.classify_failure import DEFAULT_PATTERNS, Patterns, classify
from ...targets import TargetFacts
from ..job import CONFIGURE_ARGS, KO, MEASURE_LOCK, OUTCOME, REPEATS, SOURCE, Job
from ..runtime.console_lines import pattern_lines
from ..runtime.fips import is_fips
from ..runtime.instruction_counting import proxy_counts
from ..runtime.loading import ModuleLoadOutcome, outcome_from_record, outcome_record
from ..runtime.source import cache_root
from ..runtime.stage_error import StageError, infra_error


def source_of(job: Job) -> tuple[Path, str]:
    """The fetched tree's path, and what identifies its contents (digest, commit, else the path)."""
    src = job.need(SOURCE, "fetch")
    return Path(src["path"]), str(src.get("sha256") or src.get("commit") or src["path"])


@dataclass(frozen=True)
class Prerequisite:
    """One thing a worker needs for a target: whether it is there, what was found, and the fix.

    ``bsdkm-ci doctor`` prints one line per prerequisite; the configure stage fails on the first
    required one that is missing, naming its fix, as an infrastructure failure.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        """``name: detail; fix: fix``: what the doctor prints and a failed configure stage says."""
        return f"{self.name}: {self.detail}" + (f"; fix: {self.fix}" if self.fix else "")


def require(needs: Iterable[Prerequisite], stage: str = "configure") -> None:
    """Raise the infrastructure failure ``worker-setup`` naming the first missing required one."""
    for need in needs:
        if need.required and not need.ok:
            raise infra_error(stage, "worker-setup", need.line())


class Target:
    """One target: its facts (its row), and the hooks that run its stages on a ``Job``.

    ``check_worker`` is the target's own validation, run by the configure stage before anything
    is built. The facts are read from the row (``targets.TargetFacts``), never restated here.
    ``options_type`` is the dataclass of its own keys under ``targets.<name>`` (``option`` fields,
    ``support/yaml_schema.py``), read with the file, so a bad one fails before anything is fetched.
    """

    facts: ClassVar[TargetFacts]
    options_type: ClassVar[type[Any]] = NoOptions

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def perf_measurement(self) -> bool:
        return self.facts.perf_measurement

    @property
    def bench_repeats(self) -> bool:
        return self.facts.bench_repeats

    @property
    def perf_note(self) -> str:
        return self.facts.perf_note

    @property
    def per_os_release(self) -> bool:
        return self.facts.per_os_release

    def measures_base(self) -> bool:
        """Whether a PR build (or ``run --base-*``) builds the base and measures both in rounds."""
        return self.facts.measures_base

    def options(self, config: Config) -> Any:
        """This target's options, an ``options_type`` read when ``config`` was (else every default)."""
        read = config.target_options.get(self.name)
        return read if isinstance(read, self.options_type) else self.options_type()

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        """Every prerequisite of this target on this worker, one each, checked now."""
        return []

    def check_worker(self, config: Config) -> None:
        """Raise StageError when this worker cannot run the target at all: the first missing
        required prerequisite, with its fix."""
        require(self.prerequisites(config))

    def configure(self, job: Job) -> None:
        """The configure stage: records ``CONFIGURE_ARGS``."""
        raise NotImplementedError

    def make(self, job: Job) -> None:
        """The build stage: records what the load stage runs."""
        raise NotImplementedError

    def measure(self, job: Job) -> None:
        """The load stage's measurement (under ``MEASURE_LOCK``), recorded in the state."""
        raise NotImplementedError

    def repeat(self, job: Job, index: int) -> None:
        """Round ``index`` of a target whose benchmark repeats, recorded beside the first.

        Raises StageError when this side cannot go on measuring.
        """

    def measure_again(self, job: Job, tag: str) -> LogResult | None:
        """One measurement kept apart from the run (``confirm``): its log if it ran clean, else None."""
        return None

    def collect(self, job: Job) -> tuple[list[LogResult], StageFailure | None]:
        """Every log the run left, parsed, and the run's load or unload failure."""
        raise NotImplementedError

    def metadata(self, job: Job) -> dict[str, Any]:
        """What the run's results say about how it ran, beside the source and the flags."""
        return {"bench_args": None}

    def parts_not_run(self, job: Job) -> dict[str, str]:
        """Parts of the run this machine could not do, and why (a kernel whose inputs cannot be had)."""
        return {}

    def release_fips(self, flags: list[str]) -> bool:
        """Whether a release candidate's FIPS round trip applies to a variant with ``flags``."""
        return False


class KernelTarget(Target):
    """A kernel module built from ``facts.source_dir``, loaded, and judged by its kernel log.

    A subclass says how its module is built (``build``) and loaded (``load``); ``logs`` and
    ``measured_logs`` are there for a target whose run leaves more than one kernel log.
    """

    log_format: ClassVar[LogFormat]
    log_name: ClassVar[str]  # what the kernel log is called in the run's directory

    @property
    def source_dir(self) -> str:
        """The wolfSSL tree's directory the module is built from (``bsdkm``, ``linuxkm``)."""
        src = self.facts.source_dir
        if src is None:
            raise TypeError(f"{self.name}: a kernel target's row in targets.py names no source_dir")
        return src

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        """The variant's ``.ko``; the build output is appended to ``log``."""
        raise NotImplementedError

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        raise NotImplementedError

    def repeat_load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        """One more load cycle of the same module (a round of ``bench_repeats``), into ``work``."""
        return self.load(config, ko, work)

    def logs(self, state: dict[str, Any], run_dir: Path, timeout_s: float,
             patterns: Patterns | None = None) -> tuple[list[LogResult], StageFailure | None] | None:
        """Targets with more than one kernel log per run parse and judge them here; None: the default."""
        return None

    def measured_logs(self, state: dict[str, Any], run_dir: Path, outcome: ModuleLoadOutcome,
                      kernel_log: Path) -> list[LogResult]:
        """What the run measured beside the kernel log (AF_ALG, openssl speed through the driver)."""
        return []

    def beside_module(self, job: Job, source: Path) -> None:
        """What the run needs built next to the module (the build stage, after ``build``)."""

    # ------------------------------------------------------------------ the stages' hooks

    def configure(self, job: Job) -> None:
        # The module builders configure and make in one go (and cache the .ko); here only check
        # that the target can run on this worker at all.
        self.check_worker(job.config)
        job.put(CONFIGURE_ARGS, job.config.configure_flags(job.target, job.variant))

    def make(self, job: Job) -> None:
        path, _ = source_of(job)
        ko = self.build(job.config, job.variant, path, cache_root(job.config), job.jobs, job.build_log,
                        job.patterns)
        job.put(KO, str(ko))
        self.beside_module(job, path)
        self._count_proxy(job, path)

    def _count_proxy(self, job: Job, source: Path) -> None:
        """The target's workload counted in a user-space build of its flags (``kernel_proxy``)."""
        job.state.pop(METADATA_KEY, None)
        counts = proxy_counts(job.config, job.target, job.variant, source, cache_root(job.config), job.jobs,
                              job.dir / "instructions.log", job.say)
        if counts is not None:
            job.state[METADATA_KEY] = counts.to_dict()

    def measure(self, job: Job) -> None:
        ko = Path(job.need(KO, "build"))
        if self.facts.emulated:  # the module's self-test and benchmark run in the guest it boots
            job.reached(Milestone.BOOTING, job.round)
        outcome = self.load(job.config, ko, job.dir / "vm")
        job.put(OUTCOME, outcome_record(outcome))
        job.drop(REPEATS)  # a load run again starts its rounds again

    def load_cycle(self, job: Job, work: Path) -> ModuleLoadOutcome:
        """One more load cycle of the job's built module into ``work`` (measured alone: the lock)."""
        ko = Path(job.need(KO, "build"))
        with MEASURE_LOCK:
            return self.repeat_load(job.config, ko, work)

    def repeat(self, job: Job, index: int) -> None:
        outcome = self.load_cycle(job, job.dir / f"vm.{index}")
        job.state.setdefault(REPEATS.name, []).append({"index": index, "outcome": outcome_record(outcome)})
        job.save()

    def measure_again(self, job: Job, tag: str) -> LogResult | None:
        try:
            outcome = self.load_cycle(job, job.dir / f"vm.{tag}")
        except StageError:  # a confirmation that cannot run leaves the regression standing
            return None
        log, failure = self.judged_cycle(job, outcome, self.repeat_log_path(job, tag))
        return log if failure is None else None

    def judged_cycle(self, job: Job, outcome: ModuleLoadOutcome,
                     kept: Path) -> tuple[LogResult, StageFailure | None]:
        """A load cycle's kernel log (copied to ``kept``, parsed) and its failure, as the first one's."""
        if outcome.kernel_log.is_file() and outcome.kernel_log.resolve() != kept.resolve():
            kept.write_bytes(outcome.kernel_log.read_bytes())
        log = parse_kernel_log(self.log_format, kept if kept.is_file() else outcome.kernel_log)
        return log, judge_outcome(outcome, log, job.config.timeout("load"), job.patterns)

    def repeat_log_path(self, job: Job, index: int | str) -> Path:
        """``kernel.log`` -> ``kernel.<index>.log``: round ``index``'s kernel log in the run directory."""
        name = Path(self.log_name)
        return job.dir / f"{name.stem}.{index}{name.suffix}"

    def collect(self, job: Job) -> tuple[list[LogResult], StageFailure | None]:
        if OUTCOME.name not in job.state:
            return [], None
        own = self.logs(job.state, job.dir, job.config.timeout("load"), job.patterns)
        if own is not None:  # a target with one log per kernel judges its run itself
            return own
        outcome = outcome_from_record(job.state[OUTCOME.name])
        kept = job.dir / self.log_name
        log, failure = self.judged_cycle(job, outcome, kept)
        measured = self.measured_logs(job.state, job.dir, outcome, kept)
        again: list[LogResult] = []
        again_failure: StageFailure | None = None
        for rec in job.state.get(REPEATS.name, []):  # a failed round fails the run like the first would
            log_i, failure_i = self.judged_cycle(job, outcome_from_record(rec["outcome"]),
                                                 self.repeat_log_path(job, rec["index"]))
            again.append(log_i)
            again_failure = again_failure or failure_i
        return [log, *measured, *again], failure or again_failure

    def release_fips(self, flags: list[str]) -> bool:
        return is_fips(flags)


def module_flags(config: Config, target_name: str, variant: str) -> list[str]:
    """The variant's configure flags without the kernel switches the target adds itself."""
    # The loader adds --enable-linuxkm itself; a variant's lkcapi-register choice is the variant's own.
    return [f for f in config.configure_flags(target_name, variant)
            if ("linuxkm" not in f or "lkcapi" in f) and "freebsdkm" not in f]


def append_log(log: Path, other: Path, note: str = "") -> None:
    """``note`` (a line of its own) and then ``other``'s text at the end of ``log`` (a cached build's log)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        if note:
            out.write(note if note.endswith("\n") else note + "\n")
        if Path(other).is_file():
            out.write(Path(other).read_text(errors="replace"))


def parse_kernel_log(fmt: LogFormat, path: Path) -> LogResult:
    try:
        return parse_file(path, fmt)
    except ParseError as e:
        return LogResult(source=str(path), format=fmt, problems=[Problem(str(e))], incomplete_reason=str(e))


def judge_outcome(
    outcome: ModuleLoadOutcome, log: LogResult, timeout_s: float, patterns: Patterns | None = None
) -> StageFailure | None:
    """The load's failure, classified (self-test names and codes come from the parsed log)."""
    ev = [str(outcome.kernel_log)]
    if outcome.console_flood_bytes is not None:
        # Whatever else the console says, the module printed without end: its own doing, never retried.
        mib = outcome.console_flood_bytes / (1 << 20)
        return StageFailure("load", f"console flood: {mib:.1f} MiB; the guest was stopped at the console cap",
                            FailureCategory.REAL, "console-flood", ev)
    text = pattern_lines(outcome.kernel_log, patterns or DEFAULT_PATTERNS)
    # The console is the module's to write; only the loader's notes are the harness's own words.
    notes = "\n".join(outcome.notes)

    def judged(stage: str, exit_code: int | None, program: str = "the module", **extra: Any) -> StageFailure:
        return classify(stage, exit_code=exit_code, output=text, log_results=[log], patterns=patterns,
                        evidence=ev, program=program, harness=notes, **extra)

    if outcome.timed_out:
        stage = outcome.timed_out_stage if outcome.timed_out_stage in ("load", "unload") else "load"
        return judged(stage, outcome.load_rc, timed_out=True, timeout_s=timeout_s)
    if outcome.load_rc != 0:
        failure = judged("load", outcome.load_rc)
        if failure.reason in ("load-error", "incomplete-log") and outcome.notes:
            failure.message = f"module load failed: {outcome.notes[0]}"
            failure.reason = "load-error"
        return failure
    # A zero status is believed only with the loader's own word and the module list behind it.
    if outcome.load_errno is not None:
        return StageFailure("load", f"module load failed: the kernel returned errno {outcome.load_errno} "
                            f"though the load's status was {outcome.load_rc}", FailureCategory.REAL,
                            "load-error", ev)
    if not outcome.loaded_seen:
        return StageFailure("load", "module load failed: the load reported success but the module is not "
                            "in the kernel's module list", FailureCategory.REAL, "load-error", ev)
    if outcome.unload_rc not in (0, None) or outcome.unload_errno is not None:
        return judged("unload", outcome.unload_rc if outcome.unload_rc not in (0, None) else 1,
                      program="module unload")
    if not log.complete or log.failed_tests or log.selftest_summary is False:
        return judged("load", outcome.load_rc)
    return None
