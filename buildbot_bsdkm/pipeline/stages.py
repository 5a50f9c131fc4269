"""The stages of one (target, variant) run, each resumable from ``state.json``.

``bsdkm-ci stage <name>`` runs one of these per Buildbot step; ``run_matrix`` runs
them all. State between stages lives in ``<out>/<target>/<variant>/state.json`` so
a stage can run in a fresh process (or after a worker restart).

userspace: load = run testwolfcrypt + benchmark; unload = nothing to do.
kernel targets: load = the loader's load+unload cycle; unload = judge its unload part.
A target whose benchmark repeats (``registry``) can be measured again in rounds: ``repeat_load``
(kernel: one more load cycle) records each round beside the first, and ``collect`` parses them all.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.bsdkm_yml import Config
from ..contract import RUNS_AFTER_FAILURE, UndeclaredResults, check_declared
from ..model import FailureCategory, LogResult, RunResult, StageFailure, from_json, to_json
from ..perf.fingerprint import machine_fingerprint
from ..retry.classify import Patterns
from . import afalg, base_triage, kernel, registry, userspace
from . import build as buildmod
from .errors import StageError, real_error
from .loading import ModuleLoadOutcome
from .source import SourceTree, cache_root, fetch_source

STAGES = ("fetch", "configure", "build", "load", "collect", "unload", "gate")
# The perf gate's base, built by the same stages beside the head: ``<out>/base/<target>/<variant>``.
BASE_DIR = "base"
Progress = Callable[[str], None]

# Benchmarks measure the machine: never run one while another build or benchmark
# shares the cores. Builds may overlap each other; loads take this lock.
MEASURE_LOCK = threading.Lock()


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class StageSkipped(Exception):
    """An earlier stage failed or has not run; the message says which."""


@dataclass
class Job:
    config: Config
    target: str
    variant: str
    out_root: Path
    jobs: int = 2
    progress: Progress = stderr_progress
    started: float = field(default_factory=time.monotonic)
    state: dict[str, Any] = field(default_factory=dict)
    # The base build's output root (``stage gate --base-out``): its run of this (target, variant)
    # is the gate's base instead of history.
    base_out: Path | None = None
    # ``stage gate``'s re-measurement for ``perf: {confirm: true}`` (a pipeline.confirm.Remeasure), set by
    # run.gate_against_base: base and head were measured on this worker and can be again.
    remeasure: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.state_path.is_file():
            try:
                self.state = json.loads(self.state_path.read_text())
            except ValueError:
                self.state = {}
        self.state.setdefault("target", self.target)
        self.state.setdefault("variant", self.variant)
        self.state.setdefault("stages", {})

    @property
    def dir(self) -> Path:
        return self.out_root / self.target / self.variant

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def label(self) -> str:
        return f"{self.target}/{self.variant}"

    @property
    def patterns(self) -> Patterns:
        r = self.config.retry
        return Patterns.with_extra(r.infra_patterns, r.real_patterns)

    @property
    def build_log(self) -> Path:
        return self.dir / "build.log"

    @property
    def kernel(self) -> bool:
        """A kernel target (a module loaded) rather than userspace programs."""
        return registry.is_kernel(self.target)

    @property
    def failure(self) -> StageFailure | None:
        f = self.state.get("failure")
        if not f:
            return None
        return StageFailure.from_dict(f)

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2, default=str))
        tmp.replace(self.state_path)

    def say(self, message: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:7.1f}s] {self.label}: {message}")

    def need(self, key: str, stage: str) -> Any:
        if key not in self.state:
            raise StageSkipped(f"{self.label}: run stage '{stage}' first (no {key} in {self.state_path})")
        return self.state[key]


def run_stage(job: Job, stage: str) -> StageFailure | None:
    """Run one stage; its failure (if any) is recorded in the state and returned, never raised."""
    if stage not in STAGE_FUNCS:
        raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    if stage == "fetch" and job.state.get("stages"):
        # fetch starts a new attempt (a retry): the last attempt's outcome moves to the history.
        attempts = [
            *job.state.get("attempts", []),
            {"stages": job.state.get("stages", {}), "failure": job.state.get("failure")},
        ]
        job.state = {"target": job.target, "variant": job.variant, "stages": {}, "attempts": attempts}
    earlier = job.failure
    if earlier is not None and stage not in RUNS_AFTER_FAILURE:
        raise StageSkipped(f"{job.label}: skipped, stage '{earlier.stage}' failed: {earlier.message}")
    job.say(f"{stage} ...")
    begun = time.monotonic()
    failure = None
    try:
        STAGE_FUNCS[stage](job)
    except StageError as e:
        failure = e.failure
    except StageSkipped:
        raise
    except Exception as e:  # noqa: BLE001 - any bug of ours must become a named failure, not a traceback
        # Our side broke (disk, a loader's bug): infrastructure, named, never a traceback to the user.
        failure = StageFailure(
            stage,
            f"{stage}: internal error {type(e).__name__}: {e}",
            FailureCategory.INFRASTRUCTURE,
            "ci-exception",
            [str(job.state_path)],
        )
    if failure is not None:
        job.state["failure"] = failure.to_dict()
    took = time.monotonic() - begun
    job.state["stages"][stage] = round(took, 3)
    job.save()
    status = "ok" if failure is None else f"FAILED ({failure.category}): {failure.message}"
    job.say(f"{stage} {status} ({took:.1f} s)")
    return failure


# --------------------------------------------------------------------------- stages


def stage_fetch(job: Job, tree: SourceTree | None = None) -> None:
    if tree is None:
        tree = fetch_source(
            job.config.source,
            cache=cache_root(job.config),
            timeout_s=job.config.timeout("fetch"),
            progress=job.say,
        )
    job.state["source"] = tree.as_dict()


def _source(job: Job) -> tuple[Path, str]:
    src = job.need("source", "fetch")
    return Path(src["path"]), str(src.get("sha256") or src.get("commit") or src["path"])


def _userspace_build(job: Job) -> buildmod.UserspaceBuild:
    path, ident = _source(job)
    return buildmod.userspace_build(job.config, job.variant, path, ident, cache_root(job.config), job.jobs)


def stage_configure(job: Job) -> None:
    if not job.kernel:
        b = _userspace_build(job)
        job.state["build_dir"] = str(b.build_dir)
        job.state["configure_args"] = b.configure_args
        b.configure(job.build_log, job.config.timeout("configure"), job.patterns)
        return
    # The kernel module builders configure and make in one go (and cache the .ko); here
    # only check that the target can run on this worker at all.
    kernel.check_worker(job.config, job.target)
    job.state["configure_args"] = job.config.configure_flags(job.target, job.variant)


def stage_build(job: Job) -> None:
    if not job.kernel:
        b = _userspace_build(job)
        b.make(job.build_log, job.config.timeout("build"), job.patterns)
        job.state["programs"] = {k: str(v) for k, v in b.programs().items()}
        return
    path, _ = _source(job)
    ko = kernel.build_module(
        job.config, job.target, job.variant, path, cache_root(job.config), job.jobs, job.build_log,
        job.patterns,
    )
    job.state["ko"] = str(ko)
    job.state["afalg_program"] = afalg.program_for(
        job.config, job.target, job.variant, path, cache_root(job.config), job.jobs, job.build_log
    )
    _count_proxy(job, path)


def _count_proxy(job: Job, source: Path) -> None:
    """A kernel target's workload counted in a user-space build of its flags (``kernel_proxy``)."""
    from ..perf.instructions import METADATA_KEY
    from .instructions import proxy_counts

    job.state.pop(METADATA_KEY, None)
    counts = proxy_counts(job.config, job.target, job.variant, source, cache_root(job.config), job.jobs,
                          job.dir / "instructions.log", job.say)
    if counts is not None:
        job.state[METADATA_KEY] = counts.to_dict()


def _timeouts(job: Job) -> dict[str, float]:
    return {"testwolfcrypt": job.config.timeout("selftest"), "benchmark": job.config.timeout("benchmark")}


def stage_load(job: Job) -> None:
    job.state.pop(EXTENDED_KEY, None)  # a load run again starts its rounds again
    with MEASURE_LOCK:
        if not job.kernel:
            programs = {k: Path(v) for k, v in job.need("programs", "build").items()}
            out = userspace.run_programs(
                programs,
                job.dir,
                bench_args=list(job.config.benchmark.userspace_args),
                timeouts=_timeouts(job),
                run_prefix=job.config.variants[job.variant].run_prefix,
            )
            job.state["programs_run"] = out.record()
            _count_instructions(job)
        else:
            ko = Path(job.need("ko", "build"))
            afalg.stage_overlay(job.state.get("afalg_program"), ko, job.dir / "vm")
            outcome = kernel.load_module(job.config, job.target, ko, job.dir / "vm")
            job.state["outcome"] = kernel.outcome_record(outcome)
            job.state.pop(REPEATS_KEY, None)  # a load run again starts its rounds again
    run, failure = collect(job)
    if failure is not None and failure.stage != "unload":
        raise StageError(failure)


def _count_instructions(job: Job) -> None:
    """The policy's fixed workload counted in this build (Callgrind), once per load, beside the clock's."""
    from ..perf.instructions import BASE_METADATA_KEY, METADATA_KEY
    from .instructions import counts_for

    job.state.pop(METADATA_KEY, None)
    job.state.pop(BASE_METADATA_KEY, None)  # a base measured with this load brings its own again
    if "build_dir" not in job.state:
        return
    counts = counts_for(job.config, Path(job.state["build_dir"]), job.dir / "instructions.log", job.say)
    if counts is not None:
        job.state[METADATA_KEY] = counts.to_dict()


def stage_unload(job: Job) -> None:
    if not job.kernel:
        return
    _, failure = collect(job)
    if failure is not None and failure.stage == "unload":
        raise StageError(failure)


def stage_collect(job: Job) -> None:
    collect(job)


# A kernel target's rounds after the first: ``state["repeats"]``, one load cycle each, in ``vm.<i>``.
REPEATS_KEY = "repeats"
# [rounds first measured, rounds in the end] when benchmark.max_repeats grew them (run.extend_while_undecided)
EXTENDED_KEY = "extended_rounds"


def load_cycle(job: Job, work: Path) -> ModuleLoadOutcome:
    """One more load cycle of the job's built module into ``work`` (measured alone: the lock)."""
    ko = Path(job.need("ko", "build"))
    with MEASURE_LOCK:
        return kernel.target(job.target, "load").repeat_load(job.config, ko, work)


def repeat_load(job: Job, index: int) -> None:
    """Round ``index`` of a kernel target whose benchmark repeats: recorded beside the first load."""
    outcome = load_cycle(job, job.dir / f"vm.{index}")
    job.state.setdefault(REPEATS_KEY, []).append({"index": index, "outcome": kernel.outcome_record(outcome)})
    job.save()


def judged_cycle(job: Job, outcome: ModuleLoadOutcome, kept: Path) -> tuple[LogResult, StageFailure | None]:
    """A load cycle's kernel log (copied to ``kept``, parsed) and its failure, as the first one's."""
    if outcome.kernel_log.is_file() and outcome.kernel_log.resolve() != kept.resolve():
        kept.write_bytes(outcome.kernel_log.read_bytes())
    log = kernel.parse_kernel_log(job.target, kept if kept.is_file() else outcome.kernel_log)
    return log, kernel.judge_outcome(outcome, log, job.config.timeout("load"), job.patterns)


def repeat_log_path(job: Job, index: int | str) -> Path:
    """``kernel.log`` -> ``kernel.<index>.log``: round ``index``'s kernel log in the run directory."""
    name = Path(kernel.target(job.target, "load").log_name)
    return job.dir / f"{name.stem}.{index}{name.suffix}"


def _repeat_logs(job: Job) -> tuple[list[LogResult], StageFailure | None]:
    logs: list[LogResult] = []
    first: StageFailure | None = None
    for rec in job.state.get(REPEATS_KEY, []):
        outcome = kernel.outcome_from_record(rec["outcome"])
        log, failure = judged_cycle(job, outcome, repeat_log_path(job, rec["index"]))
        logs.append(log)
        first = first or failure
    return logs, first


def stage_gate(job: Job) -> None:
    """Per-run gate (policy on this run alone + baseline); run_matrix gates all runs together instead."""
    from .confirm import confirm
    from .report_out import GateInputs, gate_runs, write_run_outputs

    run = read_run(job)
    base, note = _base_run(job)
    if not registry.measures_base(job.target):
        note = None  # a base built for correctness only: not the perf gate's; base_triage says what it is
    history = _history(job)
    gate = GateInputs.load(job.config, read_baseline=base is None)
    # Triage: the base's recorded outcomes (the master's) and the base built here, whatever it did.
    outcomes, triage_notes = base_triage.gather(job.dir, _base_any(job), gate.policy)
    verdict = gate_runs(gate, [run], [base] if base is not None else None, history, base_outcomes=outcomes)
    verdict.notes += [n for n in triage_notes if n not in verdict.notes]
    base_triage.keep_used(job.dir, outcomes)
    # confirm: true re-measures a regression when the base was measured here (run.gate_against_base);
    # against history, or without a way to measure again, the regressions stand, with a note.
    confirm(verdict, gate.policy, job.remeasure if base is not None else None, history)
    if note:
        verdict.notes.insert(0, note)
    write_run_outputs(job.dir, run, verdict)
    job.state["verdict"] = verdict.to_dict()  # passed, summary and every check (Buildbot shows regressions)
    if not verdict.accepted:  # a failure, or unjudged items under perf.inconclusive: fail
        job.state["gate_failed"] = verdict.summary()


def _base_any(job: Job) -> RunResult | None:
    """The base's run of this (target, variant) from ``--base-out``, passed or failed; None if none ran."""
    if job.base_out is None or not (job.base_out / job.target / job.variant / "state.json").is_file():
        return None
    return read_run(Job(job.config, job.target, job.variant, job.base_out, progress=job.progress))


def _base_run(job: Job) -> tuple[RunResult | None, str | None]:
    """The base build's run (``--base-out``) and a note saying what the gate compares against."""
    if job.base_out is None:
        return None, None
    state = job.base_out / job.target / job.variant / "state.json"
    if not state.is_file():
        return None, f"no base build in {job.base_out}: gated against history"
    base = read_run(Job(job.config, job.target, job.variant, job.base_out, progress=job.progress))
    if base.failure is not None or not base.benchmarks:
        why = base.failure.message if base.failure is not None else "no benchmark results"
        return None, f"base build unusable ({why}): gated against history"
    rounds = sum(1 for log in base.logs if log.benchmarks)
    grown = job.state.get(EXTENDED_KEY)
    more = (f" (the first {grown[0]}, then more while too noisy to decide)"
            if isinstance(grown, list) and len(grown) == 2 else "")
    return base, f"base measured next to the head, interleaved, {rounds} round(s){more}"


# Perf history the Buildbot master puts next to the run before the gate (buildbot/perf_history.py).
HISTORY_FILE = "history.json"


def _history(job: Job) -> list[RunResult] | None:
    path = job.dir / HISTORY_FILE
    if not path.is_file():
        return None
    try:
        return from_json(path.read_text(), str(path))
    except ValueError as e:  # the gate then notes it has no history; the run is still judged
        job.say(f"perf history {path} unusable, ignored: {e}")
        return None


STAGE_FUNCS: dict[str, Callable[[Job], None]] = {
    "fetch": stage_fetch,
    "configure": stage_configure,
    "build": stage_build,
    "load": stage_load,
    "collect": stage_collect,
    "unload": stage_unload,
    "gate": stage_gate,
}


# --------------------------------------------------------------------------- results


def _logs(job: Job) -> tuple[list[LogResult], StageFailure | None]:
    if not job.kernel:
        runs = [userspace.ProgramRun.from_record(r) for r in job.state.get("programs_run", [])]
        ran = [r for r in runs if not r.skipped]
        logs = [userspace.parse_program_log(r) for r in ran]
        outcome = userspace.UserspaceOutcome(ran)
        return logs, userspace.judge(outcome, logs, _timeouts(job), job.patterns) if ran else None
    if "outcome" not in job.state:
        return [], None
    own = kernel.target_logs(job.target, job.state, job.dir, job.config.timeout("load"), job.patterns)
    if own is not None:  # a target with one log per kernel judges its run itself
        return own
    outcome = kernel.outcome_from_record(job.state["outcome"])
    kept = job.dir / kernel.target(job.target, "collect").log_name
    log, failure = judged_cycle(job, outcome, kept)
    measured = kernel.target(job.target, "collect").measured_logs(job.state, job.dir, outcome, kept)
    again, again_failure = _repeat_logs(job)  # a failed round fails the run like the first would
    return [log, *measured, *again], failure or again_failure


def collect(job: Job) -> tuple[RunResult, StageFailure | None]:
    """Parse what the run left, write ``results.json``; returns the run and its load/unload failure."""
    logs, failure = _logs(job)
    run = RunResult(
        variant=job.variant,
        target=job.target,
        logs=logs,
        failure=job.failure or failure,
        stages=dict(job.state.get("stages", {})),
        attempts=list(job.state.get("attempts", [])),
        metadata=_metadata(job),
    )
    (job.dir / "results.json").write_text(to_json([run]))
    return run, failure


def _metadata(job: Job) -> dict[str, Any]:
    src = job.state.get("source") or {}
    return {
        "source": src.get("origin"),
        # kind/url/ref: what was asked for (the config's source, or a PR head from the command line).
        "source_kind": src.get("kind"),
        "source_url": src.get("url"),
        "source_ref": src.get("ref"),
        "wolfssl_version": src.get("version"),
        "source_sha256": src.get("sha256"),
        "source_commit": src.get("commit"),
        "configure_args": job.state.get("configure_args"),
        "cflags": job.config.cflags(job.target, job.variant),
        "bench_args": None if job.kernel else list(job.config.benchmark.userspace_args),
        # Which runs may be compared with which (perf gate history and baselines, issue 9).
        "fingerprint": machine_fingerprint(job.target, job.variant, job.state.get("configure_args"),
                                           os.environ.get("CC", "cc")),
        **_skipped(job),
        **_counted(job),
    }


def _counted(job: Job) -> dict[str, Any]:
    """The instruction counts of the load (``perf/instructions.py``), when it counted any."""
    from ..perf.instructions import BASE_METADATA_KEY, METADATA_KEY

    rec = job.state.get(METADATA_KEY)
    if job.base_out is not None:  # stage load --base-out: the base's counts go with the head's results
        base = _base_counts_record(job.base_out / job.target / job.variant / "state.json")
        if base:
            job.state[BASE_METADATA_KEY] = base
            job.save()
    carried = job.state.get(BASE_METADATA_KEY) if rec else None
    return {**({METADATA_KEY: rec} if rec else {}), **({BASE_METADATA_KEY: carried} if carried else {})}


def _base_counts_record(state: Path) -> dict[str, Any] | None:
    """The counts a base build's load recorded in its ``state.json`` (None: none, or unreadable)."""
    from ..perf.instructions import METADATA_KEY

    try:
        rec = json.loads(state.read_text()).get(METADATA_KEY) if state.is_file() else None
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _skipped(job: Job) -> dict[str, Any]:
    """What the target's benchmark leaves out on purpose (targets.<t>.bench_skipped): said in reports."""
    target = job.config.targets.get(job.target)
    note = target.options.get("bench_skipped") if target is not None else None
    return {"benchmark_skipped": str(note)} if note else {}


def read_run(job: Job) -> RunResult:
    path = job.dir / "results.json"
    if path.is_file():
        runs = from_json(path.read_text(), str(path))
        try:  # the file sat on a worker that ran the PR's module: it may name any pair
            check_declared(runs, {(job.target, job.variant)}, str(path))
        except UndeclaredResults as e:
            raise real_error("gate", "integrity", str(e)) from None
        if runs:
            run = runs[0]
            run.failure = job.failure or run.failure
            run.stages = dict(job.state.get("stages", {}))
            return run
    return collect(job)[0]
