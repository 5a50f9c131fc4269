"""``evaluate``: every gate a policy asks for, over runs (and a baseline, a history), in one verdict."""

from __future__ import annotations

from ..model import RunResult
from .checks import Check, CheckKind, Verdict
from .comparisons import crossover, speedup
from .context import Evaluation
from .paths import evaluate_paths
from .regressions import regressions
from .rules import Policy
from .run_gates import check_run, note_clocks

NO_CHECKS = "the gate evaluated 0 checks (no results, or a policy that checks nothing): not a pass"


def evaluate(runs: list[RunResult], policy: Policy, baseline: list[RunResult] | None = None,
             history: list[RunResult] | None = None) -> Verdict:
    """Every check the policy asks for, over ``runs`` (and ``baseline`` for regression gates).

    Runs (and baseline runs) of one (target, variant) are repeats of one measurement, as is every
    benchmark log within a run. ``history``: healthy past runs of the same machine; learned-limit
    rules learn each item's spread from it, and use it as the base when ``baseline`` has no run.
    """
    ev = Evaluation(runs, policy, baseline, history)
    note_clocks(ev)
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
    return ev.verdict
