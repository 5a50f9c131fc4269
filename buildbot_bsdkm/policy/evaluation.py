"""``evaluate``: every gate a policy asks for, over runs (and a baseline, a history), in one verdict."""

from __future__ import annotations

from ..checks import Check, CheckKind, Verdict
from ..model import RunResult
from ..targets import facts as target_rows
from ..targets import perf_ungated
from ..triage.classify_checks import TriageInputs, classify
from .comparisons import crossover, speedup
from .context import Evaluation
from .pairing import pair_baseline
from .paths import evaluate_paths
from .regressions import regressions
from .rules import Policy
from .run_gates import check_run, note_clocks
from .timing import mark_mis_timed

NO_CHECKS = "the gate evaluated 0 checks (no results, or a policy that checks nothing): not a pass"


def evaluate(runs: list[RunResult], policy: Policy, baseline: list[RunResult] | None = None,
             history: list[RunResult] | None = None, *, triage: TriageInputs | None = None) -> Verdict:
    """Every check the policy asks for, over ``runs`` (and ``baseline`` for regression gates).

    Runs (and baseline runs) of one (target, variant) are repeats of one measurement, as is every
    benchmark log within a run. ``history``: healthy past runs of the same machine; learned-limit
    rules learn each item's spread from it, and use it as the base when ``baseline`` has no run.
    A target whose benchmark is no performance measurement is never regression-gated
    (``perf_inputs``), whichever shell asks. Every failed check is then triaged (``triage/``):
    its signature, new / pre-existing / known / flaky against ``triage`` (known issues, base
    outcomes), and whether the policy's ``triage:`` lets it fail the verdict.
    """
    skipped = [r for r in runs if r.not_run]
    runs = [r for r in runs if not r.not_run]  # a run this machine could not do is judged by nothing
    counted = (baseline, history)  # a count is no emulator speed: the instructions gate reads these
    baseline, history, ungated = perf_inputs(runs, baseline, history)
    paired: list[str] = []
    if policy.regressions:  # a baseline matching no run: paired when unambiguous, else BaselineMismatch
        baseline, paired = pair_baseline([r for r in runs if not perf_ungated(r.target)], baseline)
    ev = Evaluation(runs, policy, baseline, history)
    ev.counted_baseline, ev.counted_history = counted[0], counted[1] or []
    for text in [*ungated, *paired]:
        ev.note(text)
    note_clocks(ev)
    mark_mis_timed(ev)  # with or without a baseline: a fact about each table
    for run in runs:
        check_run(ev, run)
    if policy.regressions:
        regressions(ev)
    for rule in policy.speedups:
        speedup(ev, rule)
    for rule in policy.crossovers:
        if rule.paths:  # paths of one run (the AF_ALG benchmark)
            evaluate_paths(ev, rule)
        else:
            crossover(ev, rule)
    if not ev.verdict.checks:  # judging nothing is no evidence of health (an emptied policy)
        ev.verdict.checks.append(Check("*", "*", "checks", CheckKind.REQUIRED, False, NO_CHECKS, error=True))
    classify(ev.verdict, runs, policy.triage, triage)
    ev.verdict.not_run = [{"target": r.target, "variant": r.variant, "reason": str(r.not_run)}
                          for r in skipped]
    ev.verdict.not_run += [{"target": r.target, "variant": r.variant, "part": part, "reason": why}
                           for r in runs for part, why in r.not_run_parts.items()]
    return ev.verdict


def perf_inputs(runs: list[RunResult], baseline: list[RunResult] | None, history: list[RunResult] | None
                ) -> tuple[list[RunResult] | None, list[RunResult] | None, list[str]]:
    """Baseline and history without the targets whose benchmark is no performance measurement.

    A QEMU TCG target's numbers are the emulator's speed on a shared host (its row in ``targets.py``
    says ``perf_measurement: False``): a regression gate on them would fail healthy PRs for a busy
    neighbour. Their runs keep every other check (self-tests, completeness, required items) and
    their tables; the notes say why no regression check ran.
    """
    # Only targets known to be unmeasured: a name the table does not know is left to the policy.
    unmeasured = {r.target for r in runs if perf_ungated(r.target)}
    if not unmeasured:
        return baseline, history, []
    rows = target_rows()
    notes = [f"{name}: {rows[name].perf_note}: not regression-gated" for name in sorted(unmeasured)]

    def keep(group: list[RunResult] | None) -> list[RunResult] | None:
        return None if group is None else [r for r in group if r.target not in unmeasured]

    return keep(baseline), keep(history), notes
