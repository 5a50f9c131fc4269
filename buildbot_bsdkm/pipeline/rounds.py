"""In which order each round of an interleaved measurement runs its base and its head.

Strict alternation (base, head, base, head, ...) can line up with a periodic disturbance of the
machine: on the recorded runs most stalls fall in one slice of the wall-clock second (the RT
bandwidth limit throttling a SCHED_FIFO benchmark, bench/perf_phase.py), and when one side's runs
start a whole number of seconds apart that side is hit in every round and the other never -- a
consistent "regression" no statistic can tell from a real one. Flipping a coin for each round's
order gives neither side a fixed phase (benchmark ``round_order: shuffled``, the default);
``alternate`` keeps the fixed order for whoever needs it reproducible.
"""

from __future__ import annotations

import random

from ..config.bsdkm_yml import ROUND_ORDERS

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
