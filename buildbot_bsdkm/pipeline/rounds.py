"""Base and head measured in interleaved rounds: the rounds' order, more rounds while the noise is too
large to decide, and measuring a regressed pair again to confirm it.

With a base built next to the head on the same worker, both are measured in rounds (``repeats`` of
them, each one base and one head), so drift of the machine hits both sides alike. Strict alternation
(base, head, base, head, ...) can line up with a periodic disturbance of the machine: on the
recorded runs most stalls fall in one slice of the wall-clock second (the RT bandwidth limit
throttling a SCHED_FIFO benchmark, bench/perf_phase.py), and when one side's runs start a whole
number of seconds apart that side is hit in every round and the other never -- a consistent
"regression" no statistic can tell from a real one. Flipping a coin for each round's order gives
neither side a fixed phase (benchmark ``round_order: shuffled``, the default); ``alternate`` keeps
the fixed order for whoever needs it reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config.bsdkm_yml import ROUND_ORDERS
from ..contract import Milestone
from ..model import LogResult, RunResult
from ..perf import extend as perf_extend
from ..perf.confirm import Remeasure
from ..perf.gate import Settings
from ..policy import Verdict
from . import targets as registry
from .job import CONFIRM_ROUND_ORDER, EXTENDED_KEY, ROUND_ORDER, Job, Progress, StateKey
from .phases import finish, measure_phase, record_failure
from .runtime.stage_error import StageError
from .stages import measure_again, repeat

BASE_FIRST = ("base", "head")
HEAD_FIRST = ("head", "base")

_RNG = random.SystemRandom()  # not seeded: no run may share another's phase pattern


def round_plan(rounds: int, order: str, rng: random.Random | None = None) -> list[tuple[str, str]]:
    """The sides of rounds 1..``rounds`` in measuring order, each round one base and one head."""
    if order not in ROUND_ORDERS:
        raise ValueError(f"unknown round order {order!r} (known: {', '.join(ROUND_ORDERS)})")
    if order == "alternate":
        return [BASE_FIRST] * rounds
    pick = rng or _RNG
    return [BASE_FIRST if pick.random() < 0.5 else HEAD_FIRST for _ in range(rounds)]


def describe(plan: list[tuple[str, str]]) -> str:
    """``B H, H B, ...``: the plan as the progress lines and state.json show it."""
    return ", ".join(" ".join(side[0].upper() for side in sides) for sides in plan)


def measured_interleaved(target: str) -> bool:
    """Whether a base build of ``target`` is measured in rounds with the head: the target says so."""
    return registry.measures_base(target)


def remeasurer(heads: list[Job], bases: dict[tuple[str, str], Job], runs: list[RunResult],
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
            plan = plan_rounds(head, repeats, CONFIRM_ROUND_ORDER)
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
            plan = plan_rounds(head, repeats)
            order = [base, head] if plan[0][0] == "base" else [head, base]
            first_round(head, base, repeats)
        for job in order:
            measure_phase(job)
        if base is not None:
            more_rounds(head, base, plan, say)
        for job in order:
            run = finish(job)
            (base_runs if job is base else head_runs).append(run)
    return head_runs, base_runs


def first_round(head: Job, base: Job, rounds: int) -> None:
    """Base and head are about to be measured the first time: round 1 of ``rounds``."""
    head.round = base.round = (1, rounds)


def plan_rounds(head: Job, rounds: int, key: StateKey[str] = ROUND_ORDER) -> list[tuple[str, str]]:
    """This pair's round orders (``benchmark.round_order``), kept in the head's state.json."""
    plan = round_plan(rounds, head.config.benchmark.round_order)
    head.put(key, describe(plan))
    head.save()
    return plan


def more_rounds(head: Job, base: Job, plan: list[tuple[str, str]], say: Progress) -> None:
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
            if jobs[side].failure is None:
                jobs[side].reached(Milestone.BENCHMARK, (index, total))
            try:
                repeat(jobs[side], index)
            except StageError as e:  # e.g. the module still loaded after a hung round: this side stops
                record_failure(jobs[side], e)


def _extra_rounds(head: Job, base: Job, done: int, more: int, say: Progress) -> None:
    """Rounds ``done+1``..``more`` of a pair (perf/extend.py), each round's order drawn like the first
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
