"""The phases of one job that ``run`` and ``release`` share: build, measure, finish, and their timing.

A phase runs stages of one ``Job`` and records, never raises, a failure (``StageError`` becomes the
job's failure in ``state.json``), so one pair's trouble never stops the matrix.
"""

from __future__ import annotations

import os
import time

from ..config.bsdkm_yml import Config
from ..model import FailureCategory, RunResult, StageFailure
from .job import Job, Progress
from .runtime.stage_error import StageError
from .stages import collect, run_stage


def record_failure(job: Job, err: StageError) -> None:
    job.state["failure"] = err.failure.to_dict()
    job.save()


def concurrency(config: Config, pairs: int) -> tuple[int, int]:
    """(builds at once, make -j per build): never more compile jobs than the config's budget."""
    cores = os.cpu_count() or 1
    parallel = max(1, min(config.parallel, pairs, cores))
    return parallel, max(1, config.jobs // parallel)


def build_phase(job: Job) -> None:
    for stage in ("configure", "build"):
        if run_stage(job, stage) is not None:
            return


def measure_phase(job: Job) -> RunResult:
    """load and unload (unless an earlier stage failed), then the run as collected."""
    if job.failure is None:
        for stage in ("load", "unload"):
            if run_stage(job, stage) is not None:
                break
    try:
        run, _ = collect(job)
    except Exception as e:  # noqa: BLE001 - a run whose logs cannot be read is reported, not raised
        failure = StageFailure(
            "collect",
            f"collect: internal error {type(e).__name__}: {e}",
            FailureCategory.INFRASTRUCTURE,
            "ci-exception",
            [str(job.state_path)],
        )
        record_failure(job, StageError(failure))
        run = RunResult(job.variant, job.target)
    run.failure = job.failure
    run.stages = dict(job.state.get("stages", {}))
    return run


def finish(job: Job) -> RunResult:
    """The run with every repeat's log; a failed repeat fails the run like the first would."""
    run, failure = collect(job)
    if failure is not None and job.failure is None:
        record_failure(job, StageError(failure))
    run.failure = job.failure
    run.stages = dict(job.state.get("stages", {}))
    return run


def timed(progress: Progress, started: float, prefix: str = "") -> Progress:
    """``progress`` with the seconds since ``started`` (and ``prefix``) before every message."""

    def say(message: str) -> None:
        progress(f"[{time.monotonic() - started:7.1f}s] {prefix}{message}")

    return say
