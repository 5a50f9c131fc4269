"""Confirm before failing (``perf: {confirm: true}``).

A learned-limit regression is a statistical claim at the run's false-alarm budget; one disturbed
stretch of the machine can still make it. With ``confirm: true`` and a way to measure again (the
``run`` command's interleaved measurement), only the (target, variant)s with a regressed item are
measured again, base and head in alternating rounds, and judged on their own. A regressed item
still fails only when the re-run calls it a regression too; otherwise its check passes with both
results in its message and detail. When the re-run has no result for an item (the re-measurement
failed, or the pair cannot be re-measured here) its first verdict stands: confirming may withdraw
a failure, never invent a pass from missing data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..checks import KIND_REGRESSION, Check, Verdict
from ..model import RunResult

Pair = tuple[str, str]  # (target, variant)
# Measures the named pairs again, base and head interleaved: (head runs, base runs). Pairs it cannot
# measure again are left out of both.
Remeasure = Callable[[list[Pair]], tuple[list[RunResult], list[RunResult]]]


def to_confirm(verdict: Verdict) -> list[Check]:
    """The learned-limit regressions a re-measurement may confirm or withdraw."""
    return [c for c in verdict.regressions if not c.error and c.detail.get("learned")]


def settle(verdict: Verdict, regressed: list[Check], rerun: Verdict, pairs: list[Pair],
           measured: set[Pair]) -> Verdict:
    """``verdict`` with each of ``regressed`` confirmed or withdrawn by ``rerun``, the re-measurement
    of ``measured`` (of the ``pairs`` asked for) judged alone; a note says what was done."""
    again = {(c.target, c.variant, c.name): c for c in rerun.checks
             if c.kind == KIND_REGRESSION and not c.error}
    confirmed = withdrawn = 0
    for c in regressed:
        second = again.get((c.target, c.variant, c.name))
        if second is None:
            c.detail["confirm"] = {"verdict": None, "why": "not re-measured"}
            c.message += "; not re-measured: the regression stands unconfirmed"
            continue
        c.detail["confirm"] = _summary(second)
        if not second.passed:
            confirmed += 1
            c.message += f"; confirmed by a re-measurement: {second.message}"
        else:
            withdrawn += 1
            c.passed = True
            c.message += f"; NOT confirmed by a re-measurement, so not failed: {second.message}"
    for entry in verdict.perf:
        pair = (entry.get("target"), entry.get("variant"))
        again_perf = next((p for p in rerun.perf if (p.get("target"), p.get("variant")) == pair), None)
        if again_perf is not None:
            entry["confirm"] = {"verdict": again_perf.get("verdict"), "items": again_perf.get("items"),
                                "geomean": again_perf.get("geomean")}
    missing = sorted(set(pairs) - measured)
    done = ", ".join(f"{t}/{v}" for t, v in sorted(measured)) or "nothing"
    verdict.notes.append(
        f"confirm: re-measured {done} base and head interleaved again: {confirmed} regression(s) "
        f"confirmed, {withdrawn} withdrawn"
        + (f"; not re-measured: {', '.join(f'{t}/{v}' for t, v in missing)}" if missing else ""))
    return verdict


def _summary(c: Check) -> dict[str, Any]:
    d = c.detail
    return {"verdict": d.get("verdict"), "change": d.get("change"), "ci_low": d.get("ci_low"),
            "ci_high": d.get("ci_high"), "limit": d.get("limit"), "n_base": d.get("n_base"),
            "n_head": d.get("n_head")}
