"""The whole matrix: fetch once, build (target, variant) pairs in parallel, measure one at a time.

With a base source (``bsdkm-ci run --base-git/--base-dir``) the base is built next to the head on
the same worker and both are measured in alternating rounds (base, head, base, head, ...:
``repeats`` rounds), so drift of the machine hits both sides alike; the gate then judges the
head's repeats against the base's (issue 9). Which targets do so is their own property
(their row in ``targets.py``, ``Target.measures_base``): ``userspace`` re-runs its benchmark program,
``freebsd-kmod`` kldloads and kldunloads base and head in turn. The QEMU targets' numbers are
emulator speeds: they build no base and are not regression-gated (the policy's ``perf_inputs``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config.bsdkm_yml import Config, SourceSpec
from ..contract import BASE_DIR, TARGET_UNAVAILABLE
from ..model import FailureCategory, LogResult, RunResult, StageFailure, to_json
from ..perf.gate import Settings
from ..policy import Verdict
from . import base_triage
from . import extend as perf_extend
from . import targets as registry
from .confirm import Remeasure, confirm, to_confirm
from .job import EXTENDED_KEY, Job, Progress, stderr_progress
from .phases import build_phase, concurrency, finish, measure_phase, record_failure, timed
from .report_out import BASE_RUNS_JSON, GateInputs, gate_runs, write_combined, write_run_outputs
from .rounds import describe, round_plan
from .runtime.errors import StageError
from .runtime.source import SourceTree, cache_root, fetch_source
from .stages import measure_again, read_run, repeat, run_stage, stage_fetch


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


def measured_interleaved(target: str) -> bool:
    """Whether a base build of ``target`` is measured in rounds with the head: the target says so."""
    return registry.measures_base(target)


def _remeasurer(heads: list[Job], bases: dict[tuple[str, str], Job], runs: list[RunResult],
                base_runs: list[RunResult], repeats: int, say: Progress) -> Remeasure:
    """``confirm: true``'s re-measurement: the named pairs' base and head again, A B A B, as new runs.

    The confirmation logs (``bench.confirm.<i>.log``) are kept beside the others but are not part
    of the run's results: the first measurement is reported as it was, the re-run next to it.
    """
    first = {(r.target, r.variant, side): r for side, group in (("head", runs), ("base", base_runs))
             for r in group}

    def remeasure(pairs: list[tuple[str, str]]) -> tuple[list[RunResult], list[RunResult]]:
        heads_again: list[RunResult] = []
        bases_again: list[RunResult] = []
        for head in heads:
            pair = (head.target, head.variant)
            base = bases.get(pair)
            if pair not in pairs or base is None or not measured_interleaved(head.target):
                continue
            logs: dict[str, list[LogResult]] = {"base": [], "head": []}
            jobs = {"base": base, "head": head}
            plan = _plan(head, repeats, "confirm_round_order")
            for index, sides in enumerate(plan, start=1):
                say(f"{head.label}: confirm round {index} of {repeats} ({', '.join(sides)})")
                for side in sides:
                    log = measure_again(jobs[side], f"confirm.{index}")
                    if log is not None:
                        logs[side].append(log)
            for side, out in (("base", bases_again), ("head", heads_again)):
                was = first.get((head.target, head.variant, side))
                out.append(RunResult(head.variant, head.target, logs=logs[side],
                                     metadata=dict(was.metadata) if was else {}))
        return heads_again, bases_again

    return remeasure


def measure_pairs(heads: list[Job], bases: dict[tuple[str, str], Job], repeats: int,
                   say: Progress) -> tuple[list[RunResult], list[RunResult]]:
    """Base and head of each (target, variant) in alternating rounds: A B A B ..."""
    head_runs, base_runs = [], []
    for head in heads:
        base = bases.get((head.target, head.variant))
        order = [head]
        if base is not None:
            plan = _plan(head, repeats)
            order = [base, head] if plan[0][0] == "base" else [head, base]
        for job in order:
            measure_phase(job)
        if base is not None:
            _more_rounds(head, base, plan, say)
        for job in order:
            run = finish(job)
            (base_runs if job is base else head_runs).append(run)
    return head_runs, base_runs


def _plan(head: Job, rounds: int, key: str = "round_order") -> list[tuple[str, str]]:
    """This pair's round orders (``benchmark.round_order``), kept in the head's state.json."""
    plan = round_plan(rounds, head.config.benchmark.round_order)
    head.state[key] = describe(plan)
    head.save()
    return plan


def _more_rounds(head: Job, base: Job, plan: list[tuple[str, str]], say: Progress) -> None:
    """Rounds 2..N after the first measurement of each side, each in its planned order (kernel:
    kldload one side, kldunload, kldload the other, kldunload, ...). A side that has failed sits
    its rounds out."""
    if measured_interleaved(head.target):
        _measure_rounds(head, base, plan[1:], 2, len(plan), say)


def _measure_rounds(head: Job, base: Job, plan: list[tuple[str, str]], first: int, total: int,
                    say: Progress, why: str = "") -> None:
    """Rounds ``first``.. of ``total``, one per entry of ``plan``, each side in the entry's order."""
    jobs = {"base": base, "head": head}
    for index, sides in enumerate(plan, start=first):
        say(f"{head.label}: round {index} of {total} ({', '.join(sides)}){why}")
        for side in sides:
            try:
                repeat(jobs[side], index)
            except StageError as e:  # e.g. the module still loaded after a hung round: this side stops
                record_failure(jobs[side], e)


def _extra_rounds(head: Job, base: Job, done: int, more: int, say: Progress) -> None:
    """Rounds ``done+1``..``more`` of a pair (pipeline/extend.py), each round's order drawn like the first
    ones'; the plan and the growth (``EXTENDED_KEY``: first and last round count) go in the head's
    state.json."""
    plan = round_plan(more - done, head.config.benchmark.round_order)
    head.state["round_order"] = ", ".join(p for p in (head.state.get("round_order"), describe(plan)) if p)
    head.state[EXTENDED_KEY] = [head.state.get(EXTENDED_KEY, [done])[0], more]
    head.save()
    _measure_rounds(head, base, plan, done + 1, more, say, ": too noisy to decide yet")


Judge = Callable[[list[RunResult], list[RunResult]], Verdict]  # (head runs, base runs) -> verdict


@dataclass
class Extended:
    """The last look of ``extend_while_undecided``: its verdict, the runs it judged, what grew."""

    verdict: Verdict
    runs: list[RunResult]
    base_runs: list[RunResult]
    rounds: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # pair: (before, after)


def extend_while_undecided(heads: list[Job], bases: dict[tuple[str, str], Job], runs: list[RunResult],
                           base_runs: list[RunResult], repeats: int, settings: Settings, judge: Judge,
                           say: Progress) -> Extended:
    """While a pair measured against its base has an item too noisy to resolve the policy's
    ``perf.resolve_pct``, measure as many rounds again (up to ``benchmark.max_repeats`` a side) and
    judge all of them.

    ``runs`` are the heads' runs (in ``heads`` order), ``base_runs`` the bases'; an extended pair's
    runs are collected again with every round. A note in the last verdict says what grew.
    """
    last = Extended(judge(runs, base_runs), list(runs), list(base_runs))
    done = repeats
    max_repeats = heads[0].config.benchmark.max_repeats if heads else done
    while (more := perf_extend.next_rounds(done, max_repeats)) > done:
        wanted = set(perf_extend.undecided(last.verdict, settings))
        live = [h for h in heads if (h.target, h.variant) in wanted and _can_repeat(h, bases)]
        if not live:
            break
        for head in live:
            pair = (head.target, head.variant)
            _extra_rounds(head, bases[pair], done, more, say)
            first, _ = head.state[EXTENDED_KEY]
            last.rounds[pair] = (first, more)
        grown = {(h.target, h.variant) for h in live}
        last.runs = [finish(job) if (job.target, job.variant) in grown else run
                     for job, run in zip(heads, last.runs, strict=True)]
        last.base_runs = [finish(bases[(r.target, r.variant)]) if (r.target, r.variant) in grown else r
                          for r in last.base_runs]
        done = more
        last.verdict = judge(last.runs, last.base_runs)
    text = perf_extend.note(last.rounds)
    if text:
        last.verdict.notes.insert(0, text)
    return last


def _can_repeat(head: Job, bases: dict[tuple[str, str], Job]) -> bool:
    base = bases.get((head.target, head.variant))
    return (base is not None and head.failure is None and base.failure is None
            and measured_interleaved(head.target))


def load_interleaved(head: Job, base: Job, repeats: int) -> StageFailure | None:
    """``bsdkm-ci stage load --base-out``: the same rounds as ``run --base-*``, for one pair.

    The base (built by the same stages into a sibling output directory) and the head's load stage
    are round 1, in the order the plan drew; then rounds 2..N of both. Returns the head's failure.
    A base that failed to build leaves the head measured once, as without a base; the gate then
    uses history and says why.
    """
    if base.failure is not None:
        return run_stage(head, "load")
    plan = _plan(head, repeats)
    if plan[0][0] == "base":
        measure_phase(base)
        failure = run_stage(head, "load")
    else:
        failure = run_stage(head, "load")
        measure_phase(base)
    if failure is None and base.failure is None:
        _more_rounds(head, base, plan, head.say)
        _extend_at_load(head, base, repeats)
    finish(base)
    if failure is None:
        finish(head)  # every round's log in results.json; a failed repeat fails the run
    return head.failure


def _extend_at_load(head: Job, base: Job, repeats: int) -> None:
    """More rounds while too noisy (``benchmark.max_repeats``), decided where the rounds are measured.

    The load stage has no history yet (the master hands it to the gate), so the noise is learned
    from the rounds alone; the gate stage then judges every round once, with history.
    """
    if head.config.benchmark.max_repeats <= repeats:
        return
    gate = GateInputs.load(head.config, read_baseline=False)
    extend_while_undecided([head], {(head.target, head.variant): base}, [finish(head)], [finish(base)],
                           repeats, gate.policy.perf, lambda heads, bases: gate_runs(gate, heads, bases),
                           head.say)


def gate_against_base(head: Job, base: Job) -> StageFailure | None:
    """``bsdkm-ci stage gate --base-out``: the gate, able to confirm (``perf: {confirm: true}``).

    The gate runs where ``stage load --base-out`` measured (the Buildbot build's worker), so a learned
    regression is measured again as ``run`` does it (``_remeasurer``): the pair's already built base
    and head, A B A B, as many rounds as the load measured. Only asked for when there is a
    regression to confirm; a side that cannot run again leaves the regression standing.
    """
    def remeasure(pairs: list[tuple[str, str]]) -> tuple[list[RunResult], list[RunResult]]:
        head_run, base_run = read_run(head), read_run(base)
        rounds = max(1, sum(1 for log in base_run.logs if log.benchmarks))
        head.say(f"confirm: measuring {head.label} base and head again, {rounds} round(s)")
        again = _remeasurer([head], {(head.target, head.variant): base}, [head_run], [base_run], rounds,
                            head.say)
        return again(pairs)

    head.remeasure = remeasure
    return run_stage(head, "gate")


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
        try:
            base_tree = fetch_source(base_source, cache=cache_root(config), timeout_s=config.timeout("fetch"),
                                     progress=say)
            say(f"base source: {base_tree.origin} wolfSSL {base_tree.version} at {base_tree.path}")
        except StageError as e:
            base_failure = e
            say(f"base fetch FAILED ({e.failure.category}): {e.failure.message}")
        base_jobs = _jobs(base_config, base_pairs, out_dir / BASE_DIR, base_tree, base_failure, per_build,
                          progress, started)

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
                             base_outcomes=base_triage.of_runs(bases_now, gate.policy))

        last = extend_while_undecided(jobs_list, bases, runs, base_runs, max(1, repeats), gate.policy.perf,
                                      judge, say)
        verdict, runs, base_runs = last.verdict, last.runs, last.base_runs
        policy = gate.policy
        if policy.perf.confirm and to_confirm(verdict):
            say(f"confirm: {len(to_confirm(verdict))} regression(s) found: measuring their pairs again")
            # as many rounds as the first measurement ended with (more when it was extended)
            rounds = max([max(1, repeats), *(after for _, after in last.rounds.values())])
            again = _remeasurer(jobs_list, bases, runs, base_runs, rounds, say)
            confirm(verdict, policy, again, history)
        verdict.notes[:0] = _base_notes(base_tree.origin if base_tree else str(base_source), bases,
                                        max(1, repeats))
    else:
        runs = [measure_phase(job) for job in jobs_list]
        if not_run_ok:
            runs = [as_not_run(r) for r in runs]
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
    """A run failed only because this machine cannot do its target, as a run not run (with why)."""
    f = run.failure
    if f is None or f.reason != TARGET_UNAVAILABLE or f.category is not FailureCategory.INFRASTRUCTURE:
        return run
    run.not_run = f.message.removeprefix("target not available: ")
    run.failure = None
    return run


def _jobs(config: Config, pairs: list[tuple[str, str]], out_dir: Path, tree: SourceTree | None,
          failure: StageError | None, per_build: int, progress: Progress, started: float) -> list[Job]:
    out = [Job(config, t, v, out_dir, jobs=per_build, progress=progress, started=started, state={})
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
