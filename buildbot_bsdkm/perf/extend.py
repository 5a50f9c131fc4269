"""More rounds while the noise is too large to decide (policy ``perf.resolve_pct``, config
``benchmark.max_repeats``).

Five rounds a side resolve a ~5 % drop on a quiet worker, but in a noisy hour of the shared worker
the best of five scattered three to five times as widely, and most items ended ``inconclusive`` or
unable to see a 12 % drop: honest, but no use to a PR (README, "Performance gate"). More rounds
narrow the best-of-N, so a pair that was measured against a built base and still has an item
unable to resolve a drop of ``resolve_pct`` is measured again, as many rounds as it has, until no
such item is left or ``max_repeats`` rounds a side are done.

Only the last look decides: when a pair is extended, its first verdict (a regression included) is
discarded and the gate judges all rounds together. Stopping early on a regression seen at the first
look would test twice and double the false-alarm budget. Whether a pair is extended depends on how
noisy its rounds were, hardly on which way the change went (the bench's mean rounds are the same
for healthy and slowed heads), so the last look keeps the gate's ``alpha`` (bench/perf_gate.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..checks import Verdict
from . import gate as perf_gate

Pair = tuple[str, str]  # (target, variant)


def unresolved(item: Mapping[str, Any], resolve_pct: float) -> bool:
    """An item that more rounds could help: not decided either way, and too noisy for ``resolve_pct``.

    An item missing on one side is not: more rounds of the same builds cannot make it appear.
    """
    if item.get("verdict") in (perf_gate.REGRESSION, perf_gate.IMPROVEMENT):
        return False
    if not item.get("n_base") or not item.get("n_head"):
        return False
    mdc = item.get("min_detectable")
    if mdc is None:  # too few repeats, or no spread known yet
        return item.get("verdict") == perf_gate.INCONCLUSIVE
    return mdc * 100 > resolve_pct


def undecided(verdict: Verdict, settings: perf_gate.Settings) -> list[Pair]:
    """The (target, variant)s gated against a built base that more rounds could decide."""
    out: list[Pair] = []
    for entry in verdict.perf:
        if entry.get("base_from") != "baseline":  # against history there is nothing to measure again
            continue
        items = [*(entry.get("items") or []), *([entry["geomean"]] if entry.get("geomean") else [])]
        if any(unresolved(it, settings.resolve_pct) for it in items):
            out.append((str(entry.get("target")), str(entry.get("variant"))))
    return sorted(set(out))


def next_rounds(done: int, max_repeats: int) -> int:
    """How many rounds a side the next look has: as many again, at most ``max_repeats`` (``done``: stop)."""
    if max_repeats <= done or done < 1:
        return done
    return min(max_repeats, 2 * done)


def note(pairs_rounds: Mapping[Pair, tuple[int, int]]) -> str | None:
    """What the report says about the extended pairs: ``target/variant`` from N to M rounds."""
    if not pairs_rounds:
        return None
    shown = ", ".join(f"{t}/{v} {a} -> {b}" for (t, v), (a, b) in sorted(pairs_rounds.items()))
    return (f"extend: too noisy to resolve a small drop in the first rounds, measured more rounds "
            f"(base and head interleaved) and judged on all of them: {shown}")
