"""One pair measured with its base, a stage at a time: ``bsdkm-ci stage load --base-out`` and
``bsdkm-ci stage gate --base-out``, the same rounds and confirmation as ``run --base-*``."""

from __future__ import annotations

from ...model import RunResult, StageFailure
from ..gating import GateInputs, gate_runs
from ..job import Job
from ..phases import finish, measure_phase
from ..rounds import extend_while_undecided, first_round, more_rounds, plan_rounds, remeasurer
from ..stages import read_run, run_stage


def load_interleaved(head: Job, base: Job, repeats: int) -> StageFailure | None:
    """``bsdkm-ci stage load --base-out``: the same rounds as ``run --base-*``, for one pair.

    The base (built by the same stages into a sibling output directory) and the head's load stage
    are round 1, in the order the plan drew; then rounds 2..N of both. Returns the head's failure.
    A base that failed to build leaves the head measured once, as without a base; the gate then
    uses history and says why.
    """
    if base.failure is not None:
        return run_stage(head, "load")
    plan = plan_rounds(head, repeats)
    first_round(head, base, repeats)
    if plan[0][0] == "base":
        measure_phase(base)
        failure = run_stage(head, "load")
    else:
        failure = run_stage(head, "load")
        measure_phase(base)
    if failure is None and base.failure is None:
        more_rounds(head, base, plan, head.say)
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
    regression is measured again as ``run`` does it (``remeasurer``): the pair's already built base
    and head, A B A B, as many rounds as the load measured. Only asked for when there is a
    regression to confirm; a side that cannot run again leaves the regression standing.
    """
    def remeasure(pairs: list[tuple[str, str]]) -> tuple[list[RunResult], list[RunResult]]:
        head_run, base_run = read_run(head), read_run(base)
        rounds = max(1, sum(1 for log in base_run.logs if log.benchmarks))
        head.say(f"confirm: measuring {head.label} base and head again, {rounds} round(s)")
        again = remeasurer([head], {(head.target, head.variant): base}, [head_run], [base_run], rounds,
                            head.say)
        return again(pairs)

    return run_stage(head, "gate", remeasure)
