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
