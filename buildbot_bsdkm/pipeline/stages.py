"""The stages of one (target, variant) run, each resumable from ``state.json``.

``bsdkm-ci stage <name>`` runs one of these per Buildbot step; the job drivers (``jobs/``) run
them all. State between stages lives in ``<out>/<target>/<variant>/state.json`` so a stage can
run in a fresh process (or after a worker restart). Each stage calls the job's target
(``targets.base.Target``); which target that is, the stages never ask.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contract import (
    HISTORY_FILE,
    RUNS_AFTER_FAILURE,
    STAGE_MILESTONES,
    TARGET_UNAVAILABLE,
    UndeclaredResults,
    check_declared,
)
from ..model import FailureCategory, RunResult, StageFailure, from_json, to_json
from ..perf.confirm import Remeasure
from ..perf.fingerprint import machine_fingerprint
from ..perf.instruction_counts import BASE_METADATA_KEY, BESIDE_PR_KEY, METADATA_KEY
from ..triage.selftest_source import name_failures
from . import targets as registry
from .gating import (
    GateInputs,
    confirm,
    gate_runs,
    gather_base_outcomes,
    keep_used_base_outcomes,
    write_run_outputs,
)
from .job import (
    ATTEMPTS,
    CONFIGURE_ARGS,
    EXTENDED,
    FAILURE,
    GATE_FAILED,
    MEASURE_LOCK,
    SOURCE,
    STAGE_TIMES,
    VERDICT,
    Job,
    StageSkipped,
)
from .runtime.source import SourceTree, cache_root, fetch_source
from .runtime.stage_error import StageError, infra_error, real_error
from .targets.base import Target

STAGES = ("fetch", "configure", "build", "load", "collect", "unload", "gate")
# The stage entry point the shells use: one stage of one job, and what it raises or records.
__all__ = ["STAGES", "Job", "StageError", "StageSkipped", "collect", "read_run", "run_stage"]


def target_of(job: Job, stage: str = "build") -> Target:
    """The job's target; an unknown name is a named infrastructure failure of ``stage``."""
    target = registry.get(job.target)
    if target is None:
        known = ", ".join(registry.all_targets())
        raise infra_error(stage, TARGET_UNAVAILABLE, f"target not available: {job.target} (targets: {known})")
    return target


def run_stage(job: Job, stage: str, remeasure: Remeasure | None = None) -> StageFailure | None:
    """Run one stage; its failure (if any) is recorded in the state and returned, never raised.

    ``remeasure``: the gate's way to measure a regressed pair again (``perf: {confirm: true}``),
    given where base and head were measured and can be again.
    """
    if stage not in STAGE_FUNCS:
        raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    if remeasure is not None and stage != "gate":
        raise ValueError(f"stage {stage!r} measures nothing again; only the gate does")
    if stage == "fetch" and job.get(STAGE_TIMES):
        # fetch starts a new attempt (a retry): the last attempt's outcome moves to the history.
        attempts = [
            *job.get(ATTEMPTS, []),
            {"stages": job.get(STAGE_TIMES, {}), "failure": job.get(FAILURE)},
        ]
        job.state = {"target": job.target, "variant": job.variant, STAGE_TIMES.name: {},
                     ATTEMPTS.name: attempts}
    earlier = job.failure
    if earlier is not None and stage not in RUNS_AFTER_FAILURE:
        raise StageSkipped(f"{job.label}: skipped, stage '{earlier.stage}' failed: {earlier.message}")
    job.reached(STAGE_MILESTONES[stage])
    begun = time.monotonic()
    failure = None
    try:
        if remeasure is None:
            STAGE_FUNCS[stage](job)
        else:
            stage_gate(job, remeasure)
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
        job.put(FAILURE, failure.to_dict())
    took = time.monotonic() - begun
    job.need(STAGE_TIMES, stage)[stage] = round(took, 3)
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
    job.put(SOURCE, tree.as_dict())


def stage_configure(job: Job) -> None:
    target_of(job, "configure").configure(job)


def stage_build(job: Job) -> None:
    target_of(job).make(job)


def stage_load(job: Job) -> None:
    job.drop(EXTENDED)  # a load run again starts its rounds again
    target = target_of(job, "load")
    with MEASURE_LOCK:
        target.measure(job)
    run, failure = collect(job)
    if failure is not None and failure.stage != "unload":
        raise StageError(failure)


def stage_unload(job: Job) -> None:
    _, failure = collect(job)
    if failure is not None and failure.stage == "unload":
        raise StageError(failure)


def stage_collect(job: Job) -> None:
    collect(job)


def repeat(job: Job, index: int) -> None:
    """Round ``index`` of an unchanged build, recorded beside the first (a failed job: nothing)."""
    if job.failure is not None or not registry.bench_repeats(job.target):
        return
    target_of(job, "load").repeat(job, index)


def measure_again(job: Job, tag: str) -> Any:
    """A measurement kept apart from the run (confirm): its log when it ran clean, else None."""
    if job.failure is not None or not registry.bench_repeats(job.target):
        return None
    return target_of(job, "load").measure_again(job, tag)


def stage_gate(job: Job, remeasure: Remeasure | None = None) -> None:
    """Per-run gate (policy on this run alone + baseline); run_matrix gates all runs together instead."""
    run = read_run(job)
    base, note = _base_run(job)
    if not registry.measures_base(job.target):
        note = None  # a base built for correctness only: not the perf gate's; the triage says what it is
    history = _history(job)
    gate = GateInputs.load(job.config, read_baseline=base is None)
    # Triage: the base's recorded outcomes (the master's) only; the base built here is a note.
    outcomes, triage_notes = gather_base_outcomes(job.dir, _base_any(job), gate.policy)
    verdict = gate_runs(gate, [run], [base] if base is not None else None, history, base_outcomes=outcomes)
    verdict.notes += [n for n in triage_notes if n not in verdict.notes]
    keep_used_base_outcomes(job.dir, outcomes)
    # confirm: true re-measures a regression when the base was measured here (run.gate_against_base);
    # against history, or without a way to measure again, the regressions stand, with a note.
    confirm(verdict, gate.policy, remeasure if base is not None else None, history)
    if note:
        verdict.notes.insert(0, note)
    write_run_outputs(job.dir, run, verdict)
    job.put(VERDICT, verdict.to_dict())  # passed, summary and every check (Buildbot shows regressions)
    if not verdict.accepted:  # a failure, or unjudged items under perf.inconclusive: fail
        job.put(GATE_FAILED, verdict.summary())


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
    grown = job.get(EXTENDED)
    more = (f" (the first {grown[0]}, then more while too noisy to decide)"
            if isinstance(grown, list) and len(grown) == 2 else "")
    # Its instruction counts were taken on the machine where the head's build ran first: they may
    # fail the head's items, never clear them (policy/instruction_gates.py).
    base.metadata[BESIDE_PR_KEY] = True
    return base, f"base measured next to the head, interleaved, {rounds} round(s){more}"


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


def collect(job: Job) -> tuple[RunResult, StageFailure | None]:
    """Parse what the run left, write ``results.json``; returns the run and its load/unload failure."""
    target = target_of(job, "collect")
    logs, failure = target.collect(job)
    # A self-test that printed only wolfcrypt_test's return code (the FreeBSD module) is named here,
    # from the build's own test.c, so every reader of results.json sees one name for one cause.
    failure = name_failures(logs, failure, job.get(SOURCE))
    run = RunResult(
        variant=job.variant,
        target=job.target,
        logs=logs,
        failure=job.failure or failure,
        stages=dict(job.get(STAGE_TIMES, {})),
        attempts=list(job.get(ATTEMPTS, [])),
        metadata=_metadata(job),
        not_run_parts=target.parts_not_run(job),
    )
    (job.dir / "results.json").write_text(to_json([run]))
    return run, failure


def _metadata(job: Job) -> dict[str, Any]:
    src = job.get(SOURCE) or {}
    return {
        "source": src.get("origin"),
        # kind/url/ref: what was asked for (the config's source, or a PR head from the command line).
        "source_kind": src.get("kind"),
        "source_url": src.get("url"),
        "source_ref": src.get("ref"),
        "wolfssl_version": src.get("version"),
        "source_sha256": src.get("sha256"),
        "source_commit": src.get("commit"),
        "configure_args": job.get(CONFIGURE_ARGS),
        "cflags": job.config.cflags(job.target, job.variant),
        **target_of(job, "collect").metadata(job),
        # Which runs may be compared with which (perf gate history and baselines).
        "fingerprint": machine_fingerprint(job.target, job.variant, job.get(CONFIGURE_ARGS),
                                           os.environ.get("CC", "cc")),
        **_skipped(job),
        **_counted(job),
    }


def _counted(job: Job) -> dict[str, Any]:
    """The instruction counts of the load (``perf/instruction_counts.py``), when it counted any."""
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
    try:
        rec = json.loads(state.read_text()).get(METADATA_KEY) if state.is_file() else None
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _skipped(job: Job) -> dict[str, Any]:
    """What the target's benchmark leaves out on purpose (targets.<t>.bench_skipped): said in reports."""
    target = job.config.targets.get(job.target)
    note = target.bench_skipped if target is not None else None
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
            run.stages = dict(job.get(STAGE_TIMES, {}))
            return run
    return collect(job)[0]
