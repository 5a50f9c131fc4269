"""What a target is to the pipeline: one object per target, registered in ``registry.TARGETS``.

What a target *is* (a kernel target or not, whether its benchmark numbers measure the module's
performance, whether one run can measure again, its note) is its row in the core's
``buildbot_bsdkm/targets.py``, which the class names as ``facts``; config, kernel health, the policy
and the shells read the same row without importing the pipeline. A kernel target
(``KernelTarget``) also says how its module is built, loaded and judged; the stages only call these
methods, so adding a target is one file with one subclass (plus its row and a line in the registry).
The default ``judge`` suits a target with one kernel log per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..config.bsdkm_yml import Config
from ..model import FailureCategory, LogFormat, LogResult, Problem, StageFailure
from ..parsers import ParseError, parse_file
from ..retry.classify import DEFAULT_PATTERNS, Patterns, classify
from ..targets import TargetFacts
from .console import pattern_lines
from .loading import ModuleLoadOutcome


class Target:
    """What a target's benchmark is; the perf gate and the PR builds' base follow it, never a name.

    The facts are read from the row (``targets.TargetFacts``), never restated here.
    """

    facts: ClassVar[TargetFacts]

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def kernel(self) -> bool:
        return self.facts.kernel

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


class KernelTarget(Target):
    afalg: ClassVar[bool] = False  # an lkcapi variant's AF_ALG benchmark runs beside the module
    log_format: ClassVar[LogFormat]
    log_name: ClassVar[str]  # what the kernel log is called in the run's directory

    @property
    def source_dir(self) -> str:
        """The wolfSSL tree's directory the module is built from (``bsdkm``, ``linuxkm``)."""
        src = self.facts.source_dir
        if src is None:
            raise TypeError(f"{self.name}: a kernel target's row in targets.py names no source_dir")
        return src

    def check_worker(self, config: Config) -> None:
        """Configure stage: raise StageError when this worker cannot run the target at all."""

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


def module_flags(config: Config, target_name: str, variant: str) -> list[str]:
    """The variant's configure flags without the kernel switches the target adds itself."""
    # The loader adds --enable-linuxkm itself; a variant's lkcapi-register choice is the variant's own.
    return [f for f in config.configure_flags(target_name, variant)
            if ("linuxkm" not in f or "lkcapi" in f) and "freebsdkm" not in f]


def append_log(log: Path, other: Path, note: str) -> None:
    """``note`` and then ``other``'s text at the end of ``log`` (a cached build's log, say)."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(note + "\n")
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
