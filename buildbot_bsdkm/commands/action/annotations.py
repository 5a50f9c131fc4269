"""A failed check as a workflow annotation whose title names the algorithm and the numbers.

Its level follows the triage: ``::error`` for a new failure (or any the policy lets fail the
job), ``::warning`` for one that was already on the base, is a known issue, or is flaky by policy;
the title of any but a new one says which (``[pre-existing since 5.9.2]``).
"""

from __future__ import annotations

import re

from ...policy import (
    Check,
    CheckKind,
    fmt_num,
    kernel_health,
)
from .workflow import Annotation, Level


def check_annotation(c: Check) -> Annotation:
    """A failed check as an annotation whose title names the algorithm and the numbers."""
    new = c.triage in (None, "new")
    level = Level.ERROR if new or c.blocking else Level.WARNING
    message = f"{c.run_label}: {c.message}"
    if c.triage_note:
        message += f" ({c.triage}: {c.triage_note})"
    return Annotation(level, message, title=_triage_prefix(c) + check_title(c))


def _triage_prefix(c: Check) -> str:
    if c.triage in (None, "new"):
        return ""  # the error level says it; a new failure's title stays the check's own
    since = _SINCE.search(c.triage_note or "") if c.triage == "pre-existing" else None
    return f"[{c.triage}{' since ' + since.group(1) if since else ''}] "


_SINCE = re.compile(r"\bsince ([^,;()\s]+)")


def check_title(c: Check) -> str:
    where = f"[{c.run_label}]"
    if c.kind == CheckKind.SELFTEST:
        code = f" (code {int(c.value)})" if c.value is not None else ""
        return f"Self-test failed: {c.name}{code} {where}"
    if c.kind == CheckKind.BENCHMARK:
        return f"Benchmark failed: {c.name} {where}"
    if c.kind == CheckKind.REGRESSION and c.delta_pct is not None:
        numbers = _numbers(c.value, c.baseline, c.unit, "vs baseline")
        limit = f", limit {fmt_num(c.threshold)}%" if c.threshold is not None else ""
        return f"Regression: {c.name} {c.delta_pct:+.1f}%{limit}{numbers} {where}"
    if c.kind == CheckKind.FLOOR:
        if c.metric == "cycles":
            return f"Too slow: {c.name}{_numbers(c.value, c.threshold, c.unit, '> limit')} {where}"
        return f"Below floor: {c.name}{_numbers(c.value, c.threshold, c.unit, '< floor')} {where}"
    if c.kind == CheckKind.SPEEDUP and c.value is not None:
        limit = f" < {fmt_num(c.threshold)}x" if c.threshold is not None else ""
        return f"Speedup too low: {c.name} {fmt_num(c.value)}x{limit} {where}"
    if c.kind == CheckKind.CROSSOVER:
        return f"Crossover: {c.name} {where}"
    if c.kind == CheckKind.COMPLETE:
        return f"Incomplete run: {c.name} {where}"
    if c.kind == CheckKind.KERNEL:
        return kernel_health.title(c)
    return f"{c.kind} failed: {c.name} {where}"


def _numbers(value: float | None, other: float | None, unit: str | None, word: str) -> str:
    if value is None or other is None:
        return ""
    u = f" {unit}" if unit else ""
    return f" ({fmt_num(value)}{u} {word} {fmt_num(other)}{u})"
