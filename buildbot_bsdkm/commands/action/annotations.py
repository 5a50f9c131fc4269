"""A failed check as a workflow annotation whose title names the algorithm and the numbers.

Its level follows the triage: ``::error`` for a new failure (or any the policy lets fail the
job), ``::warning`` for one that was already on the base, is a known issue, or is flaky by policy;
the title of any but a new one says which (``[pre-existing since 5.9.2]``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...model import RunResult
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


def check_location(c: Check, runs: Sequence[RunResult], out: Path | None = None) -> dict[str, Any]:
    """``file``/``line`` of the log line a check is about (empty when it has none).

    The file is relative to the working directory (the workspace) when the log is under it, so
    GitHub links the annotation to it; a log elsewhere is named as the run recorded it.
    """
    run = next((r for r in runs if (r.target, r.variant) == (c.target, c.variant)), None)
    if run is None:
        return {}
    found: tuple[str, int | None] | None = None
    if c.kind == CheckKind.SELFTEST:
        found = next(((log.source, t.line) for log in run.logs for t in log.tests
                      if t.name == c.name and not t.passed), None)
    elif c.item is not None and 0 <= c.item < len(run.benchmarks):
        wanted = run.benchmarks[c.item]
        found = next(((log.source, b.line) for log in run.logs for b in log.benchmarks if b is wanted), None)
    elif c.log_source is not None:
        found = (c.log_source, None)
    elif c.kind == CheckKind.KERNEL and isinstance(c.detail, dict) and isinstance(c.detail.get("line"), int):
        source = c.detail.get("source")
        found = (source, c.detail["line"]) if isinstance(source, str) else None
    if found is None or not found[0]:
        return {}
    return {"file": _workspace_path(found[0], out), "line": found[1]}


def _workspace_path(source: str, out: Path | None) -> str:
    path = Path(source)
    if not path.is_absolute() and out is not None and not path.exists() and (out / path).exists():
        path = out / path
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return source
