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

from ..model import RunResult
from ..policy import Verdict, kernel_health
from ..report.commit_status import MAX_NAMED, regression_labels, selftest_summary
from ..report.html_page import html_report
from ..report.markdown import markdown_report
from ..report.triage_summary import failed_checks, triage_property, triage_words


@dataclass(frozen=True)
class ResultRow:
    """One row for Buildbot's test-result API (values are strings there)."""

    name: str
    value: str
    line: int | None = None


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
