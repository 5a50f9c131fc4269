"""The whole matrix: fetch once, build (target, variant) pairs in parallel, measure one at a time.

With a base source (``bsdkm-ci run --base-git/--base-dir``) the base is built next to the head on
the same worker and both are measured in alternating rounds (base, head, base, head, ...:
``repeats`` rounds), so drift of the machine hits both sides alike; the gate then judges the
head's repeats against the base's. Which targets do so is their own property
(their row in ``targets.py``, ``Target.measures_base``): ``userspace`` re-runs its benchmark program,
``freebsd-kmod`` kldloads and kldunloads base and head in turn. The QEMU targets' numbers are
emulator speeds: they build no base and are not regression-gated (the policy's ``perf_inputs``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...config.bsdkm_yml import Config, SourceSpec
from ...contract import BASE_DIR, BASE_RUNS_JSON, BASE_SIDE, TARGET_UNAVAILABLE, Milestone, StageProgress
from ...model import FailureCategory, RunResult, to_json
from ...perf.confirm import to_confirm
from ...policy import Verdict
from .. import targets as registry
from ..gating import GateInputs, base_outcomes_of, confirm, gate_runs, write_combined, write_run_outputs
from ..job import Job, Progress, stderr_progress
from ..phases import build_phase, concurrency, measure_phase, record_failure, timed
from ..rounds import extend_while_undecided, measure_pairs, measured_interleaved, remeasurer
from ..runtime.source import SourceTree, cache_root, fetch_source
from ..runtime.stage_error import StageError
from ..stages import stage_fetch


@dataclass
class MatrixResult:
    runs: list[RunResult]
    verdict: Verdict
    outputs: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """The verdict's, where every failed run is judged in it: a stage failure the triage lets pass
        (a known issue) passes, but a failed run with no failed check of its own never does."""
        judged = {(c.target, c.variant) for c in self.verdict.failures}
        return self.verdict.accepted and all(
            (r.target, r.variant) in judged for r in self.runs if r.failure is not None)


def run_matrix(
    config: Config,
    variants: list[str] | None,
    targets: list[str] | None,
    out_dir: Path,
    *,
    progress: Progress = stderr_progress,
    jobs: int | None = None,
    base_source: SourceSpec | None = None,
    repeats: int = 5,
    history: list[RunResult] | None = None,
    not_run_ok: bool = False,
) -> MatrixResult:
    """All (target, variant) pairs (or the named subset) into ``out_dir``; never raises StageError.

    ``base_source``: also build this source (into ``out_dir/base``) and gate the head against it,
    measured interleaved in ``repeats`` rounds. ``history``: healthy past runs of this machine for
    the learned limits (the base when there is no base build). ``not_run_ok``: a run this machine
    cannot do (``TARGET_UNAVAILABLE``) is reported not run instead of failed.
    """
    started = time.monotonic()
    pairs = config.pairs(variants, targets)
    gate = GateInputs.load(config)  # read once: here, and by every gate and confirm below
    if jobs is not None:
        config = _with_jobs(config, jobs)
    parallel, per_build = concurrency(config, len(pairs))
    out_dir.mkdir(parents=True, exist_ok=True)
    say = timed(progress, started)
    names = ", ".join(f"{t}/{v}" for t, v in pairs)
    say(f"{len(pairs)} run(s): {names}; {parallel} at once, make -j{per_build}")

    tree: SourceTree | None = None
    fetch_failure: StageError | None = None
    say(StageProgress(Milestone.FETCHING).message)
    try:
        tree = fetch_source(
            config.source, cache=cache_root(config), timeout_s=config.timeout("fetch"), progress=say
        )
        say(f"source: {tree.origin} wolfSSL {tree.version} at {tree.path}")
    except StageError as e:
        fetch_failure = e
        say(f"fetch FAILED ({e.failure.category}): {e.failure.message}")

    jobs_list = _jobs(config, pairs, out_dir, tree, fetch_failure, per_build, progress, started)
    base_jobs: list[Job] = []
    base_tree: SourceTree | None = None
    # Only perf targets whose benchmark repeats get a base (the QEMU targets' speeds are the emulator's).
    base_pairs = [(t, v) for t, v in pairs if measured_interleaved(t)] if base_source is not None else []
    if base_source is not None:
        for t, v in pairs:
            if (t, v) not in base_pairs:
                say(f"{t}/{v}: no base built ({_why_no_base(t)})")
    if base_source is not None and base_pairs:
        base_config = replace(config, source=base_source)
        base_failure: StageError | None = None
        say(StageProgress(Milestone.FETCHING, side=BASE_SIDE).message)
        try:
            base_tree = fetch_source(base_source, cache=cache_root(config), timeout_s=config.timeout("fetch"),
                                     progress=say)
            say(f"base source: {base_tree.origin} wolfSSL {base_tree.version} at {base_tree.path}")
        except StageError as e:
            base_failure = e
            say(f"base fetch FAILED ({e.failure.category}): {e.failure.message}")
        base_jobs = _jobs(base_config, base_pairs, out_dir / BASE_DIR, base_tree, base_failure, per_build,
                          progress, started, side=BASE_SIDE)

    if fetch_failure is None:
        # Builds overlap; measurements run one at a time after every build has finished, so
        # no benchmark shares the cores with a compiler.
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="bsdkm-build") as pool:
            list(pool.map(build_phase, [*jobs_list, *[j for j in base_jobs if j.failure is None]]))
    if base_jobs:
        bases = {(j.target, j.variant): j for j in base_jobs}
        runs, base_runs = measure_pairs(jobs_list, bases, max(1, repeats), say)
        if not_run_ok:
            runs = [as_not_run(r) for r in runs]

        def judge(heads: list[RunResult], bases_now: list[RunResult]) -> Verdict:
            # A base side that failed (fetch, build, any round) is no base: its pair is gated against history.
            # Every base run, failed ones too, is what the base did: the triage's newest base outcome.
            return gate_runs(gate, heads, [r for r in bases_now if r.failure is None], history,
                             base_outcomes=base_outcomes_of(bases_now, gate.policy))

        last = extend_while_undecided(jobs_list, bases, runs, base_runs, max(1, repeats), gate.policy.perf,
                                      judge, say)
        verdict, runs, base_runs = last.verdict, last.runs, last.base_runs
        say(StageProgress(Milestone.GATING).message)
        policy = gate.policy
        if policy.perf.confirm and to_confirm(verdict):
            say(f"confirm: {len(to_confirm(verdict))} regression(s) found: measuring their pairs again")
            # as many rounds as the first measurement ended with (more when it was extended)
            rounds = max([max(1, repeats), *(after for _, after in last.rounds.values())])
            again = remeasurer(jobs_list, bases, runs, base_runs, rounds, say)
            confirm(verdict, policy, again, history)
        verdict.notes[:0] = _base_notes(base_tree.origin if base_tree else str(base_source), bases,
                                        max(1, repeats))
    else:
        runs = [measure_phase(job) for job in jobs_list]
        if not_run_ok:
            runs = [as_not_run(r) for r in runs]
        say(StageProgress(Milestone.GATING).message)
        verdict = gate_runs(gate, runs, None, history)
        # Against history there is no base to measure again: the regressions stand, noted.
        confirm(verdict, gate.policy, None, history)
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
            "base_source": base_tree.as_dict() if base_tree else None,
            "config": str(config.path) if config.path else None,
        },
    )
    if base_jobs:
        (out_dir / BASE_RUNS_JSON).write_text(to_json(base_runs))
    say(f"done in {seconds:.1f} s: {verdict.summary()}")
    return MatrixResult(runs, verdict, outputs, seconds)


def as_not_run(run: RunResult) -> RunResult:
    """A run failed only because this machine cannot do its target, as a run not run (with why);
    one that ran but for some parts (``not_run_parts``: a kernel it could not get) is judged on
    what ran, the parts said not run."""
    f = run.failure
    if f is None or f.reason != TARGET_UNAVAILABLE or f.category is not FailureCategory.INFRASTRUCTURE:
        return run
    if run.not_run_parts and run.logs:
        run.failure = None
        return run
    run.not_run = f.message.removeprefix("target not available: ")
    run.failure = None
    return run


def _jobs(config: Config, pairs: list[tuple[str, str]], out_dir: Path, tree: SourceTree | None,
          failure: StageError | None, per_build: int, progress: Progress, started: float,
          side: str = "") -> list[Job]:
    out = [Job(config, t, v, out_dir, jobs=per_build, progress=progress, started=started, state={}, side=side)
           for t, v in pairs]
    for job in out:
        job.state = {"target": job.target, "variant": job.variant, "stages": {}}  # a run starts clean
        if tree is not None:
            stage_fetch(job, tree)
            job.state["stages"]["fetch"] = 0.0
        job.save()
        if failure is not None:
            record_failure(job, failure)
    return out


def _with_jobs(config: Config, jobs: int) -> Config:
    return replace(config, jobs=jobs, parallel=min(config.parallel, jobs))


def _why_no_base(target: str) -> str:
    t = registry.get(target)
    if t is not None and not t.perf_measurement:
        return f"{t.perf_note}: not regression-gated"
    return "its benchmark is measured once a run"


def _base_notes(origin: str, bases: dict[tuple[str, str], Job], repeats: int) -> list[str]:
    """What the gate compared against, per (target, variant): the base measured in rounds, or why not."""
    measured = [f"{t}/{v}" for (t, v), job in bases.items() if job.failure is None]
    notes = []
    if measured:
        notes.append(f"base {origin} measured next to the head, interleaved, {repeats} round(s) "
                     f"({', '.join(measured)})")
    for (t, v), job in bases.items():
        failure = job.failure
        if failure is not None:
            notes.append(f"{t}/{v}: base unusable ({failure.stage} failed: {failure.message}): "
                         "gated against history")
    return notes
