"""Instruction counts of a fixed workload: the records, the parsers and the 1-vs-1 comparison.

The fixed-work driver (``_data/workload/instr_driver.c``) runs every benchmark item the policy
names a fixed number of times; Callgrind counts the instructions inside its ``bsdkm_measure()``
only and writes one profile part per item (``--dump-after``). This module is the pure side:

- ``parse_driver_output``: the driver's own lines (which items ran, how much work, which not);
- ``parse_callgrind``: one profile part -> its total and each function's own (self) count;
- ``InstructionCounts`` / ``ItemCount``: what a run measured, kept in ``RunResult.metadata``
  under ``METADATA_KEY`` so base runs, baselines and history carry it like any other result;
- ``compare_counts``: base against head, per item, with the functions that changed most.

The same binary counts the same instructions every run (bench/instructions.py measured it), so
a change of the count is a change of the code's work: no repeats, no history, one run a side.
Running anything (the build, Valgrind) is ``pipeline/runtime/instruction_counting.py``'s job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

METADATA_KEY = "instructions"  # RunResult.metadata[...]: InstructionCounts.to_dict()
# The base build's counts, carried in the head's results by a PR build's load (``stage load --base-out``),
# so every later reader (the PR comment, the Action's report) can compare without the base's files.
BASE_METADATA_KEY = "instructions_base"
# Set on a base run, in memory, by the gate that read it from beside a PR's head (``stage gate
# --base-out``): that base was counted on the machine where the PR's configure, make and code ran.
BESIDE_PR_KEY = "instructions_beside_pr"
MEASURED = "measured"
UNMEASURABLE = "unmeasurable"  # the driver could not run it (Valgrind: unhandled instruction, ...)
MISSING = "missing"  # the build has no such item, or its set-up failed
OTHER_FUNCTIONS = "(other functions)"
KEEP_FUNCTIONS = 40  # per item: the biggest functions by own count; the rest summed as one
# A count does not scatter (0.002 % at most between boots of one module build, bench/results/
# kernel_counts.md), so a drop is a change of what was counted: more work done elsewhere, or code
# moved where nothing counts it. Beyond these a drop, or a function gone, is flagged, not cleared.
FLAG_DROP_PCT = 5.0
FLAG_FUNCTION_PCT = 1.0  # of the base item's count: a function this big that is gone is flagged


class InstructionsError(ValueError):
    """A driver output or profile that cannot be read; the message names the problem."""


@dataclass
class ItemCount:
    """One item: the instructions its fixed work executed, per function and in total."""

    name: str
    kind: str = "sym"  # sym: per byte; asym: per operation
    amount: int = 0  # bytes or operations processed
    instructions: int | None = None  # in bsdkm_measure() and everything it called
    status: str = MEASURED
    reason: str | None = None  # why not measured
    functions: dict[str, int] = field(default_factory=dict)  # own instructions of each function

    @property
    def unit(self) -> str:
        return "instructions/op" if self.kind == "asym" else "instructions/byte"

    @property
    def per_unit(self) -> float | None:
        if self.status != MEASURED or self.instructions is None or self.amount <= 0:
            return None
        return self.instructions / self.amount

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "amount": self.amount,
                "instructions": self.instructions, "status": self.status, "reason": self.reason,
                "per_unit": self.per_unit, "unit": self.unit, "functions": dict(self.functions)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ItemCount:
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            raise InstructionsError("an instruction-count item needs a 'name' string")
        functions = d.get("functions") or {}
        if not isinstance(functions, Mapping):
            raise InstructionsError(f"{d['name']}: 'functions' is not a mapping")
        count = d.get("instructions")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise InstructionsError(f"{d['name']}: 'instructions' is not an integer: {count!r}")
        return cls(name=d["name"], kind=str(d.get("kind", "sym")), amount=int(d.get("amount") or 0),
                   instructions=count, status=str(d.get("status", MEASURED)),
                   reason=None if d.get("reason") is None else str(d["reason"]),
                   functions={str(k): int(v) for k, v in functions.items()})


@dataclass
class InstructionCounts:
    """What one build's fixed workload counted: every item the policy named, measured or not."""

    items: list[ItemCount] = field(default_factory=list)
    tool: str = "callgrind"
    valgrind: str | None = None  # "valgrind-3.19.0"
    seconds: float = 0.0  # wall-clock of the counting (all Valgrind runs)
    program: str | None = None  # the driver that ran
    notes: list[str] = field(default_factory=list)  # proxy flags not carried, and the like
    # What was counted: "userspace" (a user-space build), "proxy" (a user-space build standing in
    # for a kernel variant) or "module" (the real module inside the guest, perf/kernel_counts.py).
    scope: str = "userspace"

    def item(self, name: str) -> ItemCount | None:
        return next((i for i in self.items if i.name == name), None)

    @property
    def measured(self) -> list[ItemCount]:
        return [i for i in self.items if i.status == MEASURED]

    @property
    def not_measured(self) -> list[ItemCount]:
        return [i for i in self.items if i.status != MEASURED]

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "valgrind": self.valgrind, "seconds": round(self.seconds, 3),
                "program": self.program, "notes": list(self.notes), "scope": self.scope,
                "items": [i.to_dict() for i in self.items]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InstructionCounts:
        if not isinstance(d, Mapping) or not isinstance(d.get("items"), list):
            raise InstructionsError("not an instruction-count record (no 'items' list)")
        return cls(items=[ItemCount.from_dict(i) for i in d["items"]], tool=str(d.get("tool", "callgrind")),
                   valgrind=None if d.get("valgrind") is None else str(d["valgrind"]),
                   seconds=float(d.get("seconds") or 0.0),
                   program=None if d.get("program") is None else str(d["program"]),
                   notes=[str(n) for n in d.get("notes") or []], scope=_scope(d))


def _scope(d: Mapping[str, Any]) -> str:
    if d.get("scope"):
        return str(d["scope"])
    # Records made before counts carried their scope: a proxy's said so in its notes.
    return "proxy" if any("user-space proxy" in str(n) for n in d.get("notes") or []) else "userspace"


def counts_of(metadata: Mapping[str, Any] | None, key: str = METADATA_KEY) -> InstructionCounts | None:
    """A run's counts from its metadata (``BASE_METADATA_KEY``: its base's); None when it has none (or an
    unreadable record)."""
    rec = (metadata or {}).get(key)
    if not rec:
        return None
    try:
        return InstructionCounts.from_dict(rec)
    except (InstructionsError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- the driver's lines

# The driver runs the PR's code, which can print lines like these: numbers longer than any real one
# make the line no driver line (Python refuses to convert thousands of digits).
_ITEM = re.compile(r"^bsdkm-instr item (\d{1,9}) (.+?) kind=(sym|asym) amount=(\d{1,18}) block=(\d{1,18})"
                   r" calls=(\d{1,18}) rc=(-?\d{1,9})\s*$")
_SKIP = re.compile(r"^bsdkm-instr skip (\d{1,9}) (.+?) reason=(\S+)\s*$")


@dataclass
class DriverLine:
    index: int  # the item's argument position (1-based)
    name: str
    ran: bool  # an item line (a profile part was dumped for it), not a skip line
    kind: str = "sym"
    amount: int = 0
    rc: int = 0
    reason: str | None = None


@dataclass
class DriverOutput:
    lines: list[DriverLine]
    begun: bool
    ended: bool


def parse_driver_output(text: str) -> DriverOutput:
    """The driver's ``bsdkm-instr`` lines (anything else it or Valgrind printed is ignored)."""
    lines: list[DriverLine] = []
    begun = ended = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("bsdkm-instr begin"):
            begun = True
        elif line == "bsdkm-instr end":
            ended = True
        elif m := _ITEM.match(line):
            lines.append(DriverLine(int(m[1]), m[2], True, m[3], int(m[4]), int(m[7])))
        elif m := _SKIP.match(line):
            lines.append(DriverLine(int(m[1]), m[2], False, reason=m[3].replace("-", " ")))
    return DriverOutput(lines, begun, ended)


# --------------------------------------------------------------------------- Callgrind profiles

_RECURSION = re.compile(r"'\d+$")  # Callgrind's name for the n-th recursion level of a function


@dataclass
class Profile:
    total: int
    functions: dict[str, int]  # own (self) instructions


def parse_callgrind(text: str, source: str = "<callgrind>") -> Profile:
    """One Callgrind profile part: ``summary:`` and each function's own instructions (event ``Ir``).

    Written with ``--compress-strings=no --compress-pos=no`` (names in full, absolute positions);
    the cost line after ``calls=`` is the call's inclusive cost and belongs to the callee, so it
    is not added to the caller's own count.
    """
    events: list[str] | None = None
    positions = 1
    total: int | None = None
    functions: dict[str, int] = {}
    fn: str | None = None
    skip_next = False
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_next:
                skip_next = False
                continue
            if fn is None or events is None:
                raise InstructionsError(f"{source}:{n}: a cost line before 'events:' and 'fn='")
            fields = line.split()
            try:
                cost = int(fields[positions + events.index("Ir")]) if len(fields) > positions else 0
            except (ValueError, IndexError):
                raise InstructionsError(f"{source}:{n}: unreadable cost line {line!r}") from None
            functions[fn] = functions.get(fn, 0) + cost
            continue
        key, _, value = line.partition("=") if "=" in line.split(":", 1)[0] else line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "events":
            events = value.split()
            if "Ir" not in events:
                raise InstructionsError(f"{source}:{n}: no Ir event in {value!r}")
        elif key == "positions":
            positions = len(value.split())
        elif key in ("summary", "totals"):
            # written by Callgrind, or by the PR's code running in the driver: a bad one is "not counted"
            try:
                total = int(value.split()[0]) if value else 0
            except ValueError:
                raise InstructionsError(f"{source}:{n}: unreadable {key} line {line!r}") from None
        elif key == "fn":
            fn = _RECURSION.sub("", value.split(") ", 1)[-1] if value.startswith("(") else value)
        elif key == "calls":
            skip_next = True
    if total is None:
        if events is None:
            raise InstructionsError(f"{source}: not a Callgrind profile (no 'events:' line)")
        total = sum(functions.values())
    return Profile(total, {k: v for k, v in functions.items() if v})


def kept_functions(functions: Mapping[str, int], keep: int = KEEP_FUNCTIONS) -> dict[str, int]:
    """The ``keep`` biggest functions by own count, the rest summed as ``OTHER_FUNCTIONS``."""
    ranked = sorted(functions.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:keep])
    rest = sum(v for _, v in ranked[keep:])
    if rest:
        out[OTHER_FUNCTIONS] = out.get(OTHER_FUNCTIONS, 0) + rest
    return out


# --------------------------------------------------------------------------- comparison, 1 vs 1


@dataclass
class FunctionChange:
    name: str
    base: float  # own instructions per byte/op of the item (so differently sized runs compare)
    head: float
    change_pct: float | None  # None: the function is new (no base count)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "base": self.base, "head": self.head, "change_pct": self.change_pct}


@dataclass
class ItemChange:
    """One item of base against head: per-unit counts, their change, and why not when not."""

    name: str
    unit: str
    base: float | None
    head: float | None
    change_pct: float | None
    regressed: bool = False
    reason: str | None = None  # when not compared: which side could not be counted, and why
    functions: list[FunctionChange] = field(default_factory=list)  # the biggest changes first
    # Within the limit, but not cleared: the count dropped sharply, or functions it had are gone.
    flagged: str | None = None

    @property
    def compared(self) -> bool:
        return self.change_pct is not None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "base": self.base, "head": self.head,
                "change_pct": self.change_pct, "regressed": self.regressed, "reason": self.reason,
                "functions": [f.to_dict() for f in self.functions], "flagged": self.flagged}


def function_changes(base: ItemCount, head: ItemCount, top: int = 5) -> list[FunctionChange]:
    """The ``top`` functions whose own count per byte/op moved most (by absolute change)."""
    if not base.amount or not head.amount:
        return []
    names = set(base.functions) | set(head.functions)
    rows = []
    for name in names:
        b = base.functions.get(name, 0) / base.amount
        h = head.functions.get(name, 0) / head.amount
        if b == h:
            continue
        pct = (h - b) / b * 100.0 if b else None
        rows.append(FunctionChange(name, b, h, pct))
    rows.sort(key=lambda r: (-abs(r.head - r.base), r.name))
    return rows[:top]


def vanished_functions(base: ItemCount, head: ItemCount, share_pct: float) -> list[str]:
    """The base's functions of at least ``share_pct`` % of its count that the head has none of, the
    biggest first (one the head may hold among its summed ``(other functions)`` is not taken as gone)."""
    if not base.instructions or not base.amount or not head.amount:
        return []
    others = head.functions.get(OTHER_FUNCTIONS, 0) / head.amount
    gone = [name for name, n in base.functions.items()
            if not name.startswith("(") and name not in head.functions
            and n * 100.0 >= share_pct * base.instructions and n / base.amount > others]
    return sorted(gone, key=lambda name: (-base.functions[name], name))


def drop_flags(base: ItemCount, head: ItemCount, change_pct: float, *, drop_pct: float | None,
               function_pct: float | None) -> str | None:
    """Why a count within its limit is not cleared: it dropped by more than ``drop_pct`` %, or
    functions of at least ``function_pct`` % of the base's count are gone from it (code counted
    nowhere now, or a change big enough to need a person's eye); None when neither."""
    why = []
    if drop_pct is not None and change_pct < -drop_pct:
        why.append(f"the count dropped {fmt_change(change_pct)} (more than {drop_pct:g} %)")
    gone = vanished_functions(base, head, function_pct) if function_pct is not None else []
    if gone:
        shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        why.append(f"{shown} gone from the counts (each at least {function_pct:g} % of the base's)")
    return "; ".join(why) or None


def compare_item(base: ItemCount | None, head: ItemCount | None, limit_pct: float, *, name: str = "",
                 top: int = 5, flag_drop_pct: float | None = None,
                 flag_function_pct: float | None = None) -> ItemChange:
    """One item, base against head: a regression when the head's count per unit grew beyond the
    limit; within it, ``flagged`` when it dropped sharply or lost functions (``drop_flags``)."""
    label = (head or base).name if (head or base) else name
    unit = (head or base).unit if (head or base) else "instructions/byte"
    for side, count in (("base", base), ("head", head)):
        if count is None:
            return ItemChange(label, unit, None, None, None, reason=f"not counted in the {side}")
        if count.per_unit is None:
            why = count.reason or count.status
            return ItemChange(label, unit, base.per_unit if base else None, head.per_unit if head else None,
                              None, reason=f"{side}: {why}")
    assert base is not None and head is not None and base.per_unit and head.per_unit is not None
    change = (head.per_unit - base.per_unit) / base.per_unit * 100.0
    regressed = change > limit_pct
    flagged = None if regressed else drop_flags(base, head, change, drop_pct=flag_drop_pct,
                                                function_pct=flag_function_pct)
    return ItemChange(label, unit, base.per_unit, head.per_unit, change, regressed=regressed,
                      functions=function_changes(base, head, top), flagged=flagged)


def compare_counts(base: InstructionCounts, head: InstructionCounts, limit_pct: float = 0.5,
                   *, top: int = 5) -> list[ItemChange]:
    """Every item of either side, base against head (the head's order, then the base's extra items)."""
    names = [i.name for i in head.items] + [i.name for i in base.items if head.item(i.name) is None]
    return [compare_item(base.item(n), head.item(n), limit_pct, name=n, top=top) for n in names]


def geomean_change(changes: list[ItemChange]) -> float | None:
    """The geometric mean of the compared items' count ratios, as a change in percent."""
    logs = [math.log(c.head / c.base) for c in changes if c.compared and c.base and c.head]
    if not logs:
        return None
    return (math.exp(sum(logs) / len(logs)) - 1.0) * 100.0


def regressed(changes: list[ItemChange]) -> list[ItemChange]:
    return [c for c in changes if c.regressed]


def fmt_change(pct: float | None) -> str:
    """``+1.03 %`` / ``−0.00 %`` (a true minus sign, as the PR comment shows it)."""
    if pct is None:
        return "n/a"
    sign = "+" if pct > 0 else "\u2212"
    return f"{sign}{abs(pct):.2f} %"
