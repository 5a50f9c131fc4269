"""Which baseline runs a head run is compared with: by (target, variant), or an unambiguous pair.

A baseline that matches no head run used to leave every regression gate unevaluated behind one
note, and the verdict said PASS. Now it is either paired (one run a side: the only comparison
the user can have meant, said in a note) or an error naming the runs each side has.
"""

from __future__ import annotations

import dataclasses

from ..model import RunResult


class BaselineMismatch(ValueError):
    """A baseline whose runs match none of the head's; the message names both sides' runs."""


def _labels(runs: list[RunResult]) -> list[str]:
    return sorted({f"{r.target}/{r.variant}" for r in runs})


def pair_baseline(runs: list[RunResult], baseline: list[RunResult] | None
                  ) -> tuple[list[RunResult] | None, list[str]]:
    """``baseline`` as the gates should read it, and the notes saying what was paired.

    Runs match by (target, variant). When nothing matches and each side holds runs of a single
    (target, variant), the baseline's runs are taken as that head run's base (a parsed log's
    ``unknown/unknown`` against a results document's ``freebsd-kmod/asm``). Otherwise
    ``BaselineMismatch``.
    """
    if not baseline or not runs:
        return baseline, []
    base_keys = {(r.target, r.variant) for r in baseline}
    head_keys = {(r.target, r.variant) for r in runs}
    if base_keys & head_keys:
        return baseline, []
    if len(base_keys) == 1 and len(head_keys) == 1:
        (target, variant), = head_keys
        paired = [dataclasses.replace(r, target=target, variant=variant) for r in baseline]
        note = (f"the baseline's {_labels(baseline)[0]} run(s) compared with the head's {target}/{variant}: "
                "the only run on each side, under different names")
        return paired, [note]
    raise BaselineMismatch(f"the baseline matches no run of the head: the baseline has "
                           f"{', '.join(_labels(baseline))}; the head has {', '.join(_labels(runs))} "
                           "(runs are matched by target/variant: give --target/--variant, or a baseline "
                           "of the same runs)")


def baseline_for(measured: list[RunResult] | None, recorded: list[RunResult] | None, *,
                 per_pair: bool) -> list[RunResult] | None:
    """The base runs a head is gated against: the one rule for base runs measured next to the head
    (same machine, interleaved) against a recorded baseline (a file, an artifact). Measured wins.

    ``per_pair=True``: measured runs win for their own (target, variant) and the recorded baseline
    fills in every other pair (the Action's report job: some jobs measured a base, others did not).
    ``per_pair=False``: measured runs, when there are any to give (even none), take the whole place
    of the recorded baseline (one run of the pipeline measured the bases of all its pairs, and a
    pair whose base failed is left without one rather than gated against an older recording).
    """
    if not per_pair:
        return measured if measured is not None else recorded
    if recorded is None:
        return measured or None
    have = {(r.target, r.variant) for r in measured or []}
    return [*(measured or []), *(r for r in recorded if (r.target, r.variant) not in have)]
