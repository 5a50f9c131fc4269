"""Mis-timed rows of every benchmark table, with or without a baseline (``perf/clock.py``).

A row whose rate x cycles implies another clock than the rest of its log was timed wrongly (the
PR #9714 FreeBSD RNG row: 1.3 GHz where every other row reads 3.4 GHz). That is a fact about the
table itself, so it is found for every run, not only when a learned gate compares two sides; the
learned gate then gates those rows on cycles.
"""

from __future__ import annotations

from ..perf import clock as perf_clock
from .context import Evaluation
from .measure import rate_of


def _ghz(hz: float | None) -> str:
    return "?" if hz is None else f"{hz / 1e9:.2f} GHz"


def mark_mis_timed(ev: Evaluation) -> None:
    """A ``Verdict.mis_timed`` entry and a note per mis-timed row of each run's logs."""
    for run in ev.runs:
        for log in run.logs:
            rows = [b for b in log.benchmarks if not b.failed]
            timed = [perf_clock.Timed(b.name, rate_of(b) or 0.0, b.cycles) for b in rows]
            report = perf_clock.check_log(timed, ev.policy.clock_tolerance)
            for name, hz in sorted(report.mis_timed.items()):
                bench = next(b for b in rows if b.name == name)
                ev.verdict.mis_timed.append({
                    "target": run.target, "variant": run.variant, "source": log.source, "name": name,
                    "line": bench.line, "clock_hz": round(hz), "log_hz": round(report.clock_hz or 0)})
                where = f"{log.source}:{bench.line}" if bench.line else log.source
                ev.note(f"{run.target}/{run.variant}: {name} is mis-timed ({where}): its rate x cycles "
                        f"implies {_ghz(hz)} where the log's other rows imply {_ghz(report.clock_hz)}; its "
                        "throughput is not trustworthy (gated on cycles)")

