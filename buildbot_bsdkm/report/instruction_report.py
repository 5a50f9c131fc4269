"""Instruction counts in the report, the PR comment and JUnit (``perf/instruction_counts.py``'s records).

- ``instruction_summary``: the one-line summary the PR comment opens with
  (``instructions: userspace/intelasm +1.03 % (SHA-256), −0.00 % (AES-128-GCM-enc) …``);
  A kernel target's run says whose counts they are: ``[module]`` (the real module, counted in
  the guest) or ``[proxy]`` (a user-space build of its flags);
- ``instruction_blocks``: per run a table: item, count per byte/op of base and head, change,
  the wall-clock change of the same item beside it, status; for a regressed item the functions
  whose counts changed most. A run with nothing to compare shows its counts and biggest functions.
The JUnit suite (``report/junit.py``) takes its facts from ``instruction_facts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import RunResult
from ..perf.instruction_counts import MEASURED, InstructionCounts, ItemCount, counts_of, fmt_change
from ..perf.kernel_counts import SCOPE_TAGS, scope_words
from ..policy import Check, CheckKind, Verdict
from ..policy.instruction_gates import clock_changes
from .blocks import BENCHMARK_ROW, KEEP, Block, Row, Table

HEADING = "Instruction counts: "
GEOMEAN_NAME = "instructions:geomean:"


def flagged(c: Check) -> str | None:
    """Why an item within its limit is not cleared (a sharp drop, functions gone), or None."""
    why = c.detail.get("flagged") if c.passed else None
    return str(why) if why else None


def _status(c: Check) -> str:
    return "FAIL" if not c.passed else "flagged" if flagged(c) else "pass"


def _checks(verdict: Verdict, run: RunResult) -> dict[str, Check]:
    return {str(c.detail.get("item", c.name)): c for c in verdict.checks
            if c.kind == CheckKind.INSTRUCTIONS and c.target == run.target and c.variant == run.variant}


def _fmt_count(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def _top(item: ItemCount, n: int = 3) -> str:
    if not item.instructions:
        return ""
    ranked = sorted(item.functions.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {share / item.instructions * 100:.0f} %" for name, share in ranked)


def summary_line(runs: Sequence[RunResult], verdict: Verdict, shown: int = 4) -> str | None:
    """``instructions: +1.03 % (SHA-256), −0.00 % (AES-128-GCM-enc) …`` per compared run."""
    parts = []
    for run in runs:
        checks = [c for c in _checks(verdict, run).values() if not c.name.startswith(GEOMEAN_NAME)]
        if not checks:
            continue
        checks.sort(key=lambda c: (c.passed, -abs(c.delta_pct or 0.0)))
        text = ", ".join(f"{fmt_change(c.delta_pct)} ({c.detail.get('item', c.name)})"
                         for c in checks[:shown])
        more = " …" if len(checks) > shown else ""
        failed = sum(1 for c in checks if not c.passed)
        marked = sum(1 for c in checks if flagged(c))
        word = (f"{failed} over the limit" if failed else
                f"{marked} flagged, not cleared" if marked else "within the limit")
        counts = counts_of(run.metadata)
        tag = SCOPE_TAGS.get(counts.scope, counts.scope) if counts is not None else ""
        parts.append(f"{run.target}/{run.variant}{f' [{tag}]' if tag else ''} {text}{more} ({word})")
    return "instructions: " + "; ".join(parts) if parts else None


def instruction_summary(runs: Sequence[RunResult], verdict: Verdict) -> list[Block]:
    """The summary line, for the top of the report (the PR comment opens with it)."""
    line = summary_line(runs, verdict)
    return [Block("p", line)] if line else []


def instruction_blocks(runs: Sequence[RunResult], verdict: Verdict) -> list[Block]:
    """Per counted run: the table of items and, for a regressed item, its functions."""
    blocks: list[Block] = []
    for run in runs:
        counts = counts_of(run.metadata)
        if counts is None:
            continue
        blocks += _run_blocks(run, counts, verdict)
    return blocks


def _run_blocks(run: RunResult, counts: InstructionCounts, verdict: Verdict) -> list[Block]:
    checks = _checks(verdict, run)
    clock = clock_changes(verdict, run)
    compared = any(not n.startswith(GEOMEAN_NAME) for n in checks)
    table = Table(["benchmark", "unit", "base", "head", "change", "limit", "wall-clock speed", "status",
                   "biggest functions"])
    for item in counts.items:
        c = checks.get(item.name)
        wall = f"{clock[item.name]:+.1f}%" if item.name in clock else ""
        if item.status != MEASURED:
            table.rows.append(Row([item.name, item.unit, "", "", "", "", wall,
                                   f"not counted: {item.reason or item.status}", ""], KEEP))
            continue
        if c is None:
            table.rows.append(Row([item.name, item.unit, "", _fmt_count(item.per_unit), "", "", wall,
                                   "not compared" if compared else "", _top(item)], BENCHMARK_ROW))
            continue
        limit = f"+{c.threshold:g}%" if c.threshold is not None else ""
        table.rows.append(Row([item.name, item.unit, _fmt_count(c.baseline), _fmt_count(c.value),
                               fmt_change(c.delta_pct), limit, wall, _status(c), _top(item)],
                              KEEP if not c.passed or flagged(c) else BENCHMARK_ROW, abs(c.delta_pct or 0.0)))
    for name, c in checks.items():
        if name.startswith(GEOMEAN_NAME):
            table.rows.append(Row(["geomean", "", "", "", fmt_change(c.value), f"+{c.threshold:g}%",
                                   "", _status(c), ""], KEEP))
    tool = f"{counts.tool} ({counts.valgrind})" if counts.valgrind else counts.tool
    head = f"{HEADING}{run.target}/{run.variant} ({tool}, {counts.seconds:.1f} s)"
    blocks = [Block("h3", head)]
    if SCOPE_TAGS.get(counts.scope, counts.scope):
        blocks.append(Block("p", f"Counted: {scope_words(counts.scope)}."))
    blocks.append(Block("table", table=table))
    for c in sorted(checks.values(), key=lambda c: -(c.delta_pct or 0.0)):
        if flagged(c):
            name = c.detail.get("item", c.name)
            blocks.append(Block("note", f"{name}: flagged, not cleared: {flagged(c)}"))
        if (c.passed and not flagged(c)) or not c.detail.get("functions"):
            continue
        ftable = Table(["function", "base", "head", "change"])
        for f in c.detail["functions"]:
            ftable.rows.append(Row([str(f["name"]), _fmt_count(f["base"]), _fmt_count(f["head"]),
                                    fmt_change(f["change_pct"]) if f["change_pct"] is not None else "new"],
                                   KEEP))
        blocks += [Block("p", f"{c.detail.get('item', c.name)}: the functions whose instruction counts "
                              f"changed most ({c.unit} of the item)"),
                   Block("table", table=ftable)]
    for note in counts.notes:
        blocks.append(Block("note", note))
    return blocks


def instruction_facts(item: ItemCount, check: Check | None, clock: float | None) -> dict[str, str]:
    facts: dict[str, str] = {}
    if item.status != MEASURED:
        facts["instructions"] = f"not counted: {item.reason or item.status}"
        return facts
    facts["value"] = f"{_fmt_count(item.per_unit)} {item.unit}"
    scope = str(check.detail.get("scope") or "") if check is not None else ""
    if SCOPE_TAGS.get(scope):
        facts["counted"] = scope_words(scope)
    facts["amount"] = f"{item.amount} {'operations' if item.kind == 'asym' else 'bytes'}"
    if check is not None:
        facts["baseline"] = f"{_fmt_count(check.baseline)} {item.unit}"
        facts["change"] = fmt_change(check.delta_pct)
        facts["limit"] = f"+{check.threshold:g}% instructions" if check.threshold is not None else "none"
    else:
        facts.setdefault("baseline", "none")
        facts.setdefault("change", "n/a")
    facts["wall-clock change"] = f"{clock:+.1f}%" if clock is not None else "n/a"
    facts["functions"] = _top(item, 5)
    if check is not None and check.detail.get("functions"):
        facts["changed most"] = "; ".join(_function_change(f) for f in check.detail["functions"])
    if check is not None and flagged(check):
        facts["flagged"] = f"not cleared: {flagged(check)}"
    return facts


def _function_change(f: dict[str, Any]) -> str:
    change = fmt_change(f["change_pct"]) if f["change_pct"] is not None else "new"
    return f"{f['name']} {_fmt_count(f['base'])} -> {_fmt_count(f['head'])} ({change})"
