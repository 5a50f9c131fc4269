"""The ``userspace`` target: run testwolfcrypt and the benchmark of a build, parse what they printed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import targets
from ..model import LogFormat, LogResult, Problem, StageFailure
from ..parsers import ParseError, parse_file
from ..retry.classify import Patterns, classify
from .build import CommandResult, run_logged
from .target import Target


class UserspaceTarget(Target):
    """``userspace``: testwolfcrypt and the benchmark program run natively on the worker."""

    facts = targets.USERSPACE


TARGET = UserspaceTarget()


@dataclass
class ProgramRun:
    name: str  # testwolfcrypt | benchmark
    log: Path
    argv: list[str]
    exit_code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    skipped: bool = False

    def record(self) -> dict[str, object]:
        return {
            "name": self.name,
            "log": str(self.log),
            "argv": self.argv,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timed_out": self.timed_out,
            "skipped": self.skipped,
        }

    @classmethod
    def from_record(cls, d: dict[str, object]) -> ProgramRun:
        run = cls(**d)  # type: ignore[arg-type]
        run.log = Path(run.log)
        return run


@dataclass
class UserspaceOutcome:
    runs: list[ProgramRun] = field(default_factory=list)

    def record(self) -> list[dict[str, object]]:
        return [r.record() for r in self.runs]


FORMATS = {"testwolfcrypt": LogFormat.WOLFCRYPT_TEST, "benchmark": LogFormat.WOLFCRYPT_BENCH}
TIMEOUT_STAGE = {"testwolfcrypt": "selftest", "benchmark": "benchmark"}


def run_programs(
    programs: dict[str, Path],
    out_dir: Path,
    *,
    bench_args: list[str],
    timeouts: dict[str, float],
    run_prefix: str | None = None,
) -> UserspaceOutcome:
    """Self-test first; the benchmark only after a passing self-test (else its numbers mean nothing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = UserspaceOutcome()
    plan = [("testwolfcrypt", out_dir / "test.log", []), ("benchmark", out_dir / "bench.log", bench_args)]
    for name, log, args in plan:
        prog = programs[name]
        run = ProgramRun(name, log, [str(prog), *args])
        outcome.runs.append(run)
        log.write_bytes(b"")
        if any(r.exit_code != 0 for r in outcome.runs[:-1]):
            run.skipped = True
            continue
        res: CommandResult = run_logged(
            run.argv,
            cwd=prog.parent.parent.parent,
            log=log,
            timeout_s=timeouts[name],
            shell_prefix=run_prefix,
            header=False,
        )
        run.exit_code, run.seconds, run.timed_out = res.exit_code, res.seconds, res.timed_out
    return outcome


def parse_program_log(run: ProgramRun) -> LogResult:
    try:
        return parse_file(run.log, FORMATS[run.name])
    except ParseError as e:
        return LogResult(
            source=str(run.log),
            format=FORMATS[run.name],
            problems=[Problem(str(e))],
            incomplete_reason=str(e),
        )


def judge(
    outcome: UserspaceOutcome,
    logs: list[LogResult],
    timeouts: dict[str, float],
    patterns: Patterns | None = None,
) -> StageFailure | None:
    """The first program that failed, classified; None when both ran clean and complete."""
    for run, log in zip(outcome.runs, logs, strict=True):
        if run.skipped:
            continue
        bad = run.timed_out or run.exit_code != 0 or not log.complete
        if run.name == "testwolfcrypt":
            bad = bad or bool(log.failed_tests) or log.selftest_summary is False
        if not bad:
            continue
        stage = TIMEOUT_STAGE[run.name]
        output = run.log.read_text(errors="replace") if run.log.is_file() else ""
        return classify(
            stage,
            exit_code=run.exit_code,
            output=output,
            log_results=[log],
            timed_out=run.timed_out,
            timeout_s=timeouts[run.name],
            patterns=patterns,
            evidence=[str(run.log)],
            program=run.name,
        )
    return None
