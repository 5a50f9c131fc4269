"""The ``userspace`` target: run testwolfcrypt and the benchmark of a build, parse what they printed."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import targets
from ...config.bsdkm_yml import Config
from ...contract import Milestone
from ...model import LogFormat, LogResult, Problem, StageFailure
from ...parsers import ParseError, parse_file
from ...perf.instruction_counts import BASE_METADATA_KEY, METADATA_KEY
from ...retry.classify_failure import Patterns, classify
from ..job import BUILD_DIR, CONFIGURE_ARGS, MEASURE_LOCK, PROGRAMS, PROGRAMS_RUN, Job
from ..runtime.instruction_counting import counts_for
from ..runtime.proc import CommandResult, run_logged
from ..runtime.source import cache_root
from ..runtime.userspace_build import UserspaceBuild, userspace_build
from . import prerequisites as needs
from .base import Prerequisite, Target, source_of


class UserspaceTarget(Target):
    """``userspace``: testwolfcrypt and the benchmark program run natively on the worker."""

    facts = targets.USERSPACE

    def _build(self, job: Job) -> UserspaceBuild:
        path, ident = source_of(job)
        return userspace_build(job.config, job.variant, path, ident, cache_root(job.config), job.jobs)

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        return [needs.c_compiler(), needs.make(), *needs.autotools(config),
                *needs.valgrind(config, kernel=False)]

    def configure(self, job: Job) -> None:
        self.check_worker(job.config)
        b = self._build(job)
        job.put(BUILD_DIR, str(b.build_dir))
        job.put(CONFIGURE_ARGS, b.configure_args)
        b.configure(job.build_log, job.config.timeout("configure"), job.patterns)

    def make(self, job: Job) -> None:
        b = self._build(job)
        b.make(job.build_log, job.config.timeout("build"), job.patterns)
        job.put(PROGRAMS, {k: str(v) for k, v in b.programs().items()})

    def measure(self, job: Job) -> None:
        programs = {k: Path(v) for k, v in job.need(PROGRAMS, "build").items()}
        out = run_programs(programs, job.dir, bench_args=list(job.config.benchmark.userspace_args),
                           timeouts=_timeouts(job), run_prefix=job.config.variants[job.variant].run_prefix,
                           starting=lambda name: _starting(job, name))
        job.put(PROGRAMS_RUN, out.record())
        _count_instructions(job)

    def repeat(self, job: Job, index: int) -> None:
        run = _bench_once(job, job.dir / f"bench.{index}.log")
        if run is not None:
            job.state.setdefault(PROGRAMS_RUN.name, []).append(run.record())
            job.save()

    def measure_again(self, job: Job, tag: str) -> LogResult | None:
        run = _bench_once(job, job.dir / f"bench.{tag}.log")
        if run is None or run.exit_code != 0 or run.timed_out:
            return None
        return parse_program_log(run)

    def collect(self, job: Job) -> tuple[list[LogResult], StageFailure | None]:
        runs = [ProgramRun.from_record(r) for r in job.get(PROGRAMS_RUN, [])]
        ran = [r for r in runs if not r.skipped]
        logs = [parse_program_log(r) for r in ran]
        return logs, judge(UserspaceOutcome(ran), logs, _timeouts(job), job.patterns) if ran else None

    def metadata(self, job: Job) -> dict[str, Any]:
        return {"bench_args": list(job.config.benchmark.userspace_args)}


TARGET = UserspaceTarget()


def _timeouts(job: Job) -> dict[str, float]:
    return {"testwolfcrypt": job.config.timeout("selftest"), "benchmark": job.config.timeout("benchmark")}


def _starting(job: Job, program: str) -> None:
    """A program of the first measurement starts: its milestone (the benchmark's with its round)."""
    job.reached(MILESTONES[program], job.round if program == "benchmark" else None)


def _count_instructions(job: Job) -> None:
    """The policy's fixed workload counted in this build (Callgrind), once per load, beside the clock's."""
    job.state.pop(METADATA_KEY, None)
    job.state.pop(BASE_METADATA_KEY, None)  # a base measured with this load brings its own again
    build_dir = job.get(BUILD_DIR)
    if build_dir is None:
        return
    counts = counts_for(job.config, Path(build_dir), job.dir / "instructions.log", job.say,
                        starting=lambda: job.reached(Milestone.COUNTING))
    if counts is not None:
        job.state[METADATA_KEY] = counts.to_dict()


def _bench_once(job: Job, log: Path) -> ProgramRun | None:
    """The built benchmark program run once more into ``log`` (None: nothing to run)."""
    programs = job.get(PROGRAMS)
    if job.failure is not None or not programs:
        return None
    prog = Path(programs["benchmark"])
    log.write_bytes(b"")
    run = ProgramRun("benchmark", log, [str(prog), *job.config.benchmark.userspace_args])
    with MEASURE_LOCK, program_cwd(prog) as cwd:
        res = run_logged(run.argv, cwd=cwd, log=log,
                         timeout_s=job.config.timeout("benchmark"),
                         shell_prefix=job.config.variants[job.variant].run_prefix, header=False)
    run.exit_code, run.seconds, run.timed_out = res.exit_code, res.seconds, res.timed_out
    return run


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


@contextlib.contextmanager
def program_cwd(prog: Path) -> Iterator[Path]:
    """A directory of its own for one run of a build's program, holding only the build's ``certs/``.

    testwolfcrypt reads ``./certs/`` and writes its keys and certificates into ``./``. The build
    directory is shared by every run of the same inputs, so two runs at once would read each
    other's half-written files there. The directory goes afterwards, so no upload of the run's
    folder carries the keys or the certificates.
    """
    build_dir = prog.parent.parent.parent
    with tempfile.TemporaryDirectory(prefix="bsdkm-run-") as tmp:
        cwd = Path(tmp)
        if (build_dir / "certs").is_dir():
            (cwd / "certs").symlink_to((build_dir / "certs").resolve())
        yield cwd


FORMATS = {"testwolfcrypt": LogFormat.WOLFCRYPT_TEST, "benchmark": LogFormat.WOLFCRYPT_BENCH}
TIMEOUT_STAGE = {"testwolfcrypt": "selftest", "benchmark": "benchmark"}
MILESTONES = {"testwolfcrypt": Milestone.SELF_TEST, "benchmark": Milestone.BENCHMARK}


def run_programs(
    programs: dict[str, Path],
    out_dir: Path,
    *,
    bench_args: list[str],
    timeouts: dict[str, float],
    run_prefix: str | None = None,
    starting: Callable[[str], None] | None = None,
) -> UserspaceOutcome:
    """Self-test first; the benchmark only after a passing self-test (else its numbers mean nothing).

    ``starting`` hears each program's name as it starts (the stage's progress).
    """
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
        if starting is not None:
            starting(name)
        with program_cwd(prog) as cwd:
            res: CommandResult = run_logged(
                run.argv,
                cwd=cwd,
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
