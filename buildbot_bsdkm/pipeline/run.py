"""The whole matrix: fetch once, build (target, variant) pairs in parallel, measure one at a time."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config
from ..model import FailureCategory, RunResult, StageFailure
from ..policy import Verdict
from .errors import StageError
from .report_out import check_gate_inputs, gate_runs, write_combined, write_run_outputs
from .source import SourceTree, cache_root, fetch_source
from .stages import Job, Progress, collect, run_stage, stage_fetch, stderr_progress


@dataclass
class MatrixResult:
    runs: list[RunResult]
    verdict: Verdict
    outputs: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict.passed and all(r.failure is None for r in self.runs)


def _concurrency(config: Config, pairs: int) -> tuple[int, int]:
    """(builds at once, make -j per build): never more compile jobs than the config's budget."""
    cores = os.cpu_count() or 1
    parallel = max(1, min(config.parallel, pairs, cores))
    return parallel, max(1, config.jobs // parallel)


def _record_failure(job: Job, err: StageError) -> None:
    job.state["failure"] = {**err.failure.__dict__, "category": str(err.failure.category)}
    job.save()


def _build_phase(job: Job) -> None:
    for stage in ("configure", "build"):
        if run_stage(job, stage) is not None:
            return


def _measure_phase(job: Job) -> RunResult:
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
        _record_failure(job, StageError(failure))
        run = RunResult(job.variant, job.target)
    run.failure = job.failure
    run.stages = dict(job.state.get("stages", {}))
    return run


def run_matrix(
    config: Config,
    variants: list[str] | None,
    targets: list[str] | None,
    out_dir: Path,
    *,
    progress: Progress = stderr_progress,
    jobs: int | None = None,
) -> MatrixResult:
    """All (target, variant) pairs (or the named subset) into ``out_dir``; never raises StageError."""
    started = time.monotonic()
    pairs = config.pairs(variants, targets)
    check_gate_inputs(config)
    if jobs is not None:
        config = _with_jobs(config, jobs)
    parallel, per_build = _concurrency(config, len(pairs))
    out_dir.mkdir(parents=True, exist_ok=True)
    say = _timed(progress, started)
    names = ", ".join(f"{t}/{v}" for t, v in pairs)
    say(f"{len(pairs)} run(s): {names}; {parallel} at once, make -j{per_build}")

    tree: SourceTree | None = None
    fetch_failure: StageError | None = None
    try:
        tree = fetch_source(
            config.source, cache=cache_root(config), timeout_s=config.timeout("fetch"), progress=say
        )
        say(f"source: {tree.origin} wolfSSL {tree.version} at {tree.path}")
    except StageError as e:
        fetch_failure = e
        say(f"fetch FAILED ({e.failure.category}): {e.failure.message}")

    jobs_list = [
        Job(config, t, v, out_dir, jobs=per_build, progress=progress, started=started, state={})
        for t, v in pairs
    ]
    for job in jobs_list:
        job.state = {"target": job.target, "variant": job.variant, "stages": {}}  # a run starts clean
        if tree is not None:
            stage_fetch(job, tree)
            job.state["stages"]["fetch"] = 0.0
        job.save()

    if fetch_failure is not None:
        for job in jobs_list:
            _record_failure(job, fetch_failure)
    else:
        # Builds overlap; measurements run one at a time after every build has finished, so
        # no benchmark shares the cores with a compiler.
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="bsdkm-build") as pool:
            list(pool.map(_build_phase, jobs_list))
    runs = [_measure_phase(job) for job in jobs_list]

    verdict = gate_runs(config, runs)
    for job, run in zip(jobs_list, runs, strict=True):
        write_run_outputs(job.dir, run, verdict)
    seconds = time.monotonic() - started
    outputs = write_combined(
        out_dir,
        runs,
        verdict,
        extra={
            "seconds": round(seconds, 2),
            "source": tree.as_dict() if tree else None,
            "config": str(config.path) if config.path else None,
        },
    )
    say(f"done in {seconds:.1f} s: {verdict.summary()}")
    return MatrixResult(runs, verdict, outputs, seconds)


def _with_jobs(config: Config, jobs: int) -> Config:
    from dataclasses import replace

    return replace(config, jobs=jobs, parallel=min(config.parallel, jobs))


def _timed(progress: Progress, started: float) -> Progress:
    def say(message: str) -> None:
        progress(f"[{time.monotonic() - started:7.1f}s] {message}")

    return say
