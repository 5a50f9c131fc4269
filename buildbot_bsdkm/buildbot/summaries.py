"""One-line step summaries and test-result rows from the core's documents.

The steps show these in the UI instead of the command line: what happened,
with the numbers (``self-test: 41/42 passed (ECC failed -216)``,
``AES-128-GCM-enc −31 %``). Pure functions over ``model`` records and the
verdict dictionary ``policy.Verdict.to_dict()`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import RunResult, SelfTest
from ..policy import CheckKind, Verdict, kernel_health
from ..report.html_page import html_report
from ..report.markdown import markdown_report
from ..report.triage_summary import failed_checks, triage_property, triage_words

MINUS = "\u2212"  # a real minus sign reads better than a hyphen next to a percentage
MAX_NAMED = 3  # items named in a one-line summary before "and N more"


@dataclass(frozen=True)
class ResultRow:
    """One row for Buildbot's test-result API (values are strings there)."""

    name: str
    value: str
    line: int | None = None


def _failure_label(t: SelfTest) -> str:
    return f"{t.name} failed {t.code}" if t.code is not None else f"{t.name} failed"


def selftest_summary(run: RunResult) -> str | None:
    """``self-test: 41/42 passed (ECC failed -216)``; None when the run printed no self-test."""
    tests = run.tests
    if tests:
        failed = [t for t in tests if not t.passed]
        text = f"self-test: {len(tests) - len(failed)}/{len(tests)} passed"
        if failed:
            named = ", ".join(_failure_label(t) for t in failed[:MAX_NAMED])
            more = f" and {len(failed) - MAX_NAMED} more" if len(failed) > MAX_NAMED else ""
            text += f" ({named}{more})"
        return text
    # Kernel builds without verbose debug print only the overall line.
    overall = [log.selftest_summary for log in run.logs if log.selftest_summary is not None]
    if overall:
        return "self-test: passed" if all(overall) else "self-test: FAILED"
    return None


def benchmark_summary(run: RunResult) -> str | None:
    benches = run.benchmarks
    if not benches:
        return None
    failed = [b for b in benches if b.failed]
    text = f"{len(benches)} benchmarks"
    if failed:
        text += f" ({len(failed)} failed: {', '.join(b.name for b in failed[:MAX_NAMED])})"
    if run.clock_quantised:
        text += ", clock quantised"
    return text


def results_summary(runs: Sequence[RunResult]) -> str:
    parts: list[str] = []
    for run in runs:
        for piece in (selftest_summary(run), benchmark_summary(run), kernel_health.summary_line(run)):
            if piece:
                parts.append(piece)
        if not run.complete:
            parts.append("log incomplete")
        if run.failure is not None:
            parts.append(f"{run.failure.stage} failed: {run.failure.message}")
    return "; ".join(parts) if parts else "no results"


def selftest_rows(run: RunResult) -> list[ResultRow]:
    """``pass_fail``/``boolean`` rows: "1" passed, "0" failed."""
    return [ResultRow(t.name, "1" if t.passed else "0", t.line) for t in run.tests]


def benchmark_rows_by_unit(run: RunResult) -> dict[str, list[ResultRow]]:
    """``performance`` rows grouped by unit, because a result set has one ``value_unit``."""
    out: dict[str, list[ResultRow]] = {}
    for b in run.benchmarks:
        if b.failed:
            continue  # a failed item's 0.000 is not a measurement
        out.setdefault(b.unit, []).append(ResultRow(b.name, f"{b.value:g}", b.line))
    return out


def _pct(value: float) -> str:
    sign = MINUS if value < 0 else "+"
    return f"{sign}{abs(value):.0f} %"


def regression_labels(verdict: Mapping[str, Any]) -> list[str]:
    """``AES-128-GCM-enc −31 %`` for every failed regression check."""
    labels = []
    for c in verdict.get("checks", []) or []:
        if not isinstance(c, Mapping) or c.get("passed", True) or c.get("kind") != CheckKind.REGRESSION:
            continue
        delta = c.get("delta_pct")
        name = str(c.get("name", "?"))
        labels.append(f"{name} {_pct(float(delta))}" if isinstance(delta, int | float) else name)
    return labels


def verdict_summary(verdict: Mapping[str, Any]) -> str:
    """The gate's line: the regressions by name when there are any, else the policy's own summary;
    with the triage of the failures (new, pre-existing since ..., known, flaky, fixed)."""
    line = _verdict_line(verdict)
    said = triage_words(triage_property(verdict)) if failed_checks(verdict) else ""
    return f"{line} — {said}" if said else line


def _verdict_line(verdict: Mapping[str, Any]) -> str:
    regressions = regression_labels(verdict)
    if regressions:
        shown = ", ".join(regressions[:MAX_NAMED])
        more = f" and {len(regressions) - MAX_NAMED} more" if len(regressions) > MAX_NAMED else ""
        return f"gate FAILED: {shown}{more}"
    if verdict.get("passed") and verdict.get("verdict") == "inconclusive":  # Verdict.status
        return f"gate INCONCLUSIVE ({verdict.get('summary', '')})".replace(" ()", "")
    if verdict.get("passed"):
        return f"gate passed ({verdict.get('summary', '')})".replace(" ()", "")
    failures = [c for c in failed_checks(verdict) if c.get("blocking", True)] or failed_checks(verdict)
    if failures:
        first = failures[0]
        more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
        return f"gate FAILED: {first.get('message') or first.get('name')}{more}"
    return f"gate FAILED: {verdict.get('summary', 'no checks passed')}"


def markdown_from(runs: Sequence[RunResult], verdict: Mapping[str, Any]) -> str:
    """The core's Markdown report of a ``policy.Verdict.to_dict()`` document (ValueError if it is none)."""
    return markdown_report(list(runs), Verdict.from_dict(verdict))


def html_from(runs: Sequence[RunResult], verdict: Mapping[str, Any]) -> str:
    """The core's HTML report (tables and the speedup chart), for the build's HTML log."""
    return html_report(list(runs), Verdict.from_dict(verdict))
