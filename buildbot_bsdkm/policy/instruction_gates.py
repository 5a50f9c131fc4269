"""``metric: instructions``: regression gates on counted instructions, one run a side.

A run counted with the fixed-work driver carries ``metadata["instructions"]``
(``perf/instruction_counts.py``). Its base is the baseline's run of the same (target, variant) (the
base build measured next to it, or a baseline file); without one, the newest history run that
has counts. A count does not scatter (the same binary counts the same instructions every run),
so a fixed limit judges it at 1 vs 1: no repeats, no learned noise.

Each item gets a check (kind ``instructions``) with its count per byte or operation, base and
head, and in ``detail`` the functions whose own counts changed most. An item that could not be
counted on a side is no check, never a pass: a note says which and why. A module's item (counted in
the guest, over the module's code ranges) within its limit whose count dropped sharply, or that
lost a function the base had, is flagged: its check is not judged and not passed (inconclusive),
since code moved where nothing counts it looks like a speed-up. Where the wall-clock
gate judged the same item a regression while the count stayed within its limit, a note says the
two disagree (a memory or microarchitecture effect the count cannot see).

A base counted beside the PR's code (carried in the head's results, or a base run the gate marked
``BESIDE_PR_KEY``) may have been changed by that code: it can fail an item, never clear one. An item
within its limit against it is judged against the newest history run of the same machine instead,
and without one it is not judged (a note says so).
"""

from __future__ import annotations

from ..checks import GEOMEAN_PREFIX, STATUS_INCONCLUSIVE, CheckKind, Verdict
from ..model import RunResult
from ..perf.instruction_counts import (
    BASE_METADATA_KEY,
    BESIDE_PR_KEY,
    InstructionCounts,
    ItemChange,
    compare_item,
    counts_of,
    fmt_change,
    geomean_change,
)
from ..perf.kernel_counts import SCOPE_MODULE, SCOPE_PROXY, scope_words
from ..targets import kernel_names
from .context import Evaluation
from .instruction_settings import INSTRUCTIONS
from .measure import matches
from .rules import RegressionRule

NAME_PREFIX = "instructions:"  # a check's name: "instructions:<item>" / "instructions:geomean:<pattern>"


def instruction_rules(rules: list[RegressionRule]) -> list[RegressionRule]:
    return [r for r in rules if r.metric == INSTRUCTIONS]


def instruction_regressions(ev: Evaluation) -> None:
    rules = instruction_rules(ev.policy.regressions)
    if not rules:
        return
    done: set[tuple[str, str]] = set()
    for run in ev.runs:
        pair = (run.target, run.variant)
        covering = [r for r in rules if r.scope.covers(run)]
        # repeats of one (target, variant) (a release's) count the same binary: judged once
        if covering and pair not in done and (counts_of(run.metadata) is not None or not _counted(ev, pair)):
            done.add(pair)
            _gate_run(ev, run, covering)


def _counted(ev: Evaluation, pair: tuple[str, str]) -> bool:
    """Whether some run of ``pair`` has counts (then a repeat without them is not the one judged)."""
    return any(counts_of(r.metadata) is not None for r in ev.runs if (r.target, r.variant) == pair)


def _machine(run: RunResult) -> str | None:
    fp = run.metadata.get("fingerprint")
    return str(fp.get("id")) if isinstance(fp, dict) and fp.get("id") else None


MEASURED_BESIDE = "measured beside PR code"


def base_counts(ev: Evaluation, run: RunResult) -> tuple[InstructionCounts | None, str]:
    """The counts ``run`` is compared with, and where they came from: "base", "base-other-machine",
    "beside" (a base run counted beside the PR's code), "carried" (the base build's, in the head's
    results) or "history". History only of the same machine fingerprint: the code a CPU dispatch
    picks follows the CPU Valgrind presents, and that follows the host's."""
    same = [r for r in ev.counted_baseline or [] if r.target == run.target and r.variant == run.variant]
    for r in same:
        counts = counts_of(r.metadata)
        if counts is not None:
            if r.metadata.get(BESIDE_PR_KEY) is True:
                return counts, "beside"
            other = _machine(r) is not None and _machine(run) is not None and _machine(r) != _machine(run)
            return counts, "base-other-machine" if other else "base"
    carried = counts_of(run.metadata, BASE_METADATA_KEY)
    if carried is not None:  # measured next to the head by the PR build's load
        return carried, "carried"
    history = history_counts(ev, run)
    return (history, "history") if history is not None else (None, "")


BESIDE_ORIGINS = ("beside", "carried")


def history_counts(ev: Evaluation, run: RunResult) -> InstructionCounts | None:
    """The newest counts of ``run``'s (target, variant) in the history, of the same machine."""
    for r in reversed(ev.counted_history):
        if r.target == run.target and r.variant == run.variant and _machine(r) == _machine(run):
            counts = counts_of(r.metadata)
            if counts is not None:
                return counts
    return None


def _gate_run(ev: Evaluation, run: RunResult, rules: list[RegressionRule]) -> None:
    label = f"{run.target}/{run.variant}"
    head = counts_of(run.metadata)
    base, origin = base_counts(ev, run)
    if head is None:
        if base is not None:
            ev.note(f"{label}: the base has instruction counts, this run none: "
                    "instruction gates not evaluated")
        elif run.target in kernel_names() and ev.policy.instructions.enabled:
            # Said once a target: it holds for each of its variants alike (a PR comment listed them all).
            ev.note(f"{run.target}: instructions not counted (not judged, not passed): a kernel module's "
                    "code runs where Valgrind does not (instructions.kernel_count counts the module in a "
                    "QEMU guest, instructions.kernel_proxy a user-space build of its flags)")
        return
    if base is None:
        ev.note(f"{label}: no base instruction counts (no base run or history with them): "
                "instruction gates not evaluated")
        return
    if base.scope != head.scope:  # the module against its proxy would compare two different programs
        ev.note(f"{label}: the base was counted in {scope_words(base.scope)}, this run in "
                f"{scope_words(head.scope)}: instruction gates not evaluated (not judged, not passed)")
        return
    if head.scope in (SCOPE_MODULE, SCOPE_PROXY):
        ev.note(f"{label}: instruction counts of {scope_words(head.scope)}")
    beside = origin in BESIDE_ORIGINS
    trusted = history_counts(ev, run) if beside else None
    if trusted is not None and trusted.scope != head.scope:
        trusted = None
    if beside:
        # The PR's configure and make ran on that machine before the base was counted: they could
        # have raised the base's count to hide the head's own growth.
        ev.note(f"{label}: instruction counts compared with the base build counted next to it, "
                f"{MEASURED_BESIDE}: it can fail an item, not clear one (an item within its limit is "
                f"judged against {'the newest history run' if trusted else 'nothing else here: not judged'})")
    elif origin == "history":
        ev.note(f"{label}: instruction counts compared with the newest history run that has them")
    elif origin == "base-other-machine":
        ev.note(f"{label}: the base was counted on another machine (fingerprint): code chosen by CPU "
                "dispatch may differ between the two")
    settings = ev.policy.instructions
    top = settings.top_functions
    # Only a count over address ranges can lose code to placement; Callgrind counts every instruction
    # the workload runs, wherever it lies.
    flags: dict[str, float | None] = ({"flag_drop_pct": settings.flag_drop_pct,
                                       "flag_function_pct": settings.flag_function_pct}
                                      if head.scope == SCOPE_MODULE else {})
    item_rules = [r for r in rules if r.aggregate == "item"]
    names = [i.name for i in head.items] + [i.name for i in base.items if head.item(i.name) is None]
    changes: list[ItemChange] = []
    clock = clock_changes(ev.verdict, run)  # the wall-clock gates ran first: their change beside ours
    unjudged: list[str] = []
    only_beside: set[str] = set()  # items whose change is against the base counted beside PR code
    for name in names:
        rule = next((r for r in item_rules if matches(name, r.pattern)), None)
        limit = rule.max_pct if rule is not None else 0.0
        change = compare_item(base.item(name), head.item(name), limit, name=name, top=top, **flags)
        against = "the base"
        if beside and rule is not None and change.compared and not change.regressed:
            again = (compare_item(trusted.item(name), head.item(name), limit, name=name, top=top, **flags)
                     if trusted is not None else None)
            if again is None or not again.compared:
                unjudged.append(f"{name} (within its limit only against a base {MEASURED_BESIDE})")
                continue
            change, against = again, "the newest history run"
        elif beside:
            only_beside.add(name)
        changes.append(change)
        if not change.compared:
            unjudged.append(f"{name} ({change.reason})")
            continue
        if rule is None:
            continue
        if beside and against == "the base":
            against = f"the base {MEASURED_BESIDE}"
        _item_check(ev, run, rule, change, clock.get(name), head.scope, against)
    for rule in rules:
        if rule.aggregate == "geomean":
            matching = [c for c in changes if matches(c.name, rule.pattern)]
            mean = geomean_change(matching)
            if (mean is not None and mean <= rule.max_pct
                    and any(c.name in only_beside and c.compared for c in matching)):
                unjudged.append(f"{GEOMEAN_PREFIX}{rule.pattern} (within its limit only against a base "
                                f"{MEASURED_BESIDE})")
                continue
            _geomean_check(ev, run, rule, matching)
    if unjudged:
        ev.note(f"{label}: {len(unjudged)} item(s) not counted (not judged, not passed): "
                f"{'; '.join(unjudged)}")
    _note_disagreements(ev, run, changes)


_WHERE = {SCOPE_MODULE: "counted in the module", SCOPE_PROXY: "counted in the user-space proxy"}


def _item_check(ev: Evaluation, run: RunResult, rule: RegressionRule, change: ItemChange,
                clock_pct: float | None, scope: str = "userspace", against: str = "the base") -> None:
    assert change.change_pct is not None and change.base is not None and change.head is not None
    ok = not change.regressed
    msg = (f"{change.name}: {change.head:.4g} {change.unit}, {fmt_change(change.change_pct)} against "
           f"{against} {change.base:.4g} (limit +{rule.max_pct:g} %, {_WHERE.get(scope, 'counted')}, 1 vs 1)")
    if not ok and change.functions:
        msg += "; most changed: " + ", ".join(
            f"{f.name} {fmt_change(f.change_pct) if f.change_pct is not None else 'new'}"
            for f in change.functions[:3])
    detail = {"item": change.name, "scope": scope, "functions": [f.to_dict() for f in change.functions],
              "clock_change_pct": None if clock_pct is None else round(clock_pct, 2)}
    if ok and change.flagged:
        # Code can leave the counted ranges or the count (moved, done elsewhere): a sharp drop is a
        # finding for a person, not a clearance. Not judged, not passed (the verdict's inconclusive).
        msg += f"; flagged, not cleared: {change.flagged}"
        detail.update(verdict=STATUS_INCONCLUSIVE, flagged=change.flagged)
    ev.add(run, NAME_PREFIX + change.name, CheckKind.INSTRUCTIONS, ok, msg, value=change.head,
           unit=change.unit, baseline=change.base, delta_pct=round(change.change_pct, 4),
           threshold=rule.max_pct, metric=INSTRUCTIONS, detail=detail)


def _geomean_check(ev: Evaluation, run: RunResult, rule: RegressionRule, changes: list[ItemChange]) -> None:
    change = geomean_change(changes)
    if change is None:
        return
    n = sum(1 for c in changes if c.compared)
    ok = change <= rule.max_pct
    msg = (f"geometric mean instruction count of {n} item(s) matching {rule.pattern!r}: {fmt_change(change)} "
           f"against the base (limit +{rule.max_pct:g} %)")
    detail: dict[str, object] = {"items": n}
    flagged = [c.name for c in changes if c.compared and c.flagged]
    if ok and flagged:  # a mean over items that are not cleared clears nothing either
        msg += f"; flagged, not cleared: {len(flagged)} of its items are ({', '.join(flagged[:3])})"
        detail.update(verdict=STATUS_INCONCLUSIVE, flagged=", ".join(flagged))
    ev.add(run, f"{NAME_PREFIX}{GEOMEAN_PREFIX}{rule.pattern}", CheckKind.INSTRUCTIONS, ok, msg,
           value=round(change, 4), unit="%", delta_pct=round(change, 4), threshold=rule.max_pct,
           metric=INSTRUCTIONS, detail=detail)


def _note_disagreements(ev: Evaluation, run: RunResult, changes: list[ItemChange]) -> None:
    """Wall-clock slower where the count is flat: said, since only the clock can see it."""
    slower = {c.name for c in ev.verdict.checks
              if c.kind == CheckKind.REGRESSION and not c.passed and not c.error
              and c.variant == run.variant and c.target == run.target}
    for change in changes:
        if change.name in slower and change.compared and not change.regressed:
            ev.note(f"{run.target}/{run.variant}: {change.name} is slower by the clock but its instruction "
                    f"count is flat ({fmt_change(change.change_pct)}): a memory or microarchitecture "
                    "effect the count cannot see (or the worker's noise)")


def clock_changes(verdict: Verdict, run: RunResult) -> dict[str, float]:
    """The wall-clock change of each item (learned gate's, in %; negative = slower), where judged."""
    out: dict[str, float] = {}
    for entry in verdict.perf:
        if entry.get("target") != run.target or entry.get("variant") != run.variant:
            continue
        for item in entry.get("items") or []:
            if isinstance(item.get("change"), int | float):
                out[str(item["name"])] = float(item["change"]) * 100.0
    for c in verdict.checks:  # fixed-limit wall-clock gates
        if c.kind == CheckKind.REGRESSION and c.target == run.target and c.variant == run.variant \
                and c.delta_pct is not None and not c.is_geomean and c.metric == "per_second":
            out.setdefault(c.name, c.delta_pct)
    return out
