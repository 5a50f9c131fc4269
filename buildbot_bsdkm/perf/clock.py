"""Clock self-consistency: throughput x cycles-per-unit is the clock the benchmark assumed.

wolfCrypt prints both a rate (from its timer) and cycles per byte/op (from the TSC). Their
product is the cycle counter's rate, the same for every item of one run. An item far from the
run's median was timed wrongly (a coarse timer, a timer read on another CPU, the PR #9714
FreeBSD RNG row: 65 MiB/s at an implied 1.3 GHz while the other rows read 3.4 GHz); such an
item is gated on cycles, which do not depend on the timer. Two sides whose median clocks
differ were measured at different counter rates (frequency scaling between them).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

# A healthy item's implied clock scatters by the rounding of the printed cycles (2 decimals:
# 0.23 cycles/byte is +-2 %) plus timer jitter; a mis-timed one is off by tens of percent.
TOLERANCE = 0.25
CYCLES_PRINT_STEP = 0.01
SIDE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Timed:
    """One item of one log: its rate (bytes/s or ops/s) and cycles per byte/op."""

    name: str
    per_second: float
    cycles: float | None


@dataclass
class ClockReport:
    clock_hz: float | None  # the run's median implied clock
    mis_timed: dict[str, float] = field(default_factory=dict)  # item -> its implied clock

    def deviation(self, name: str) -> float | None:
        if self.clock_hz is None or name not in self.mis_timed:
            return None
        return self.mis_timed[name] / self.clock_hz - 1.0


def implied_clock(t: Timed) -> float | None:
    if t.cycles is None or t.cycles <= 0 or t.per_second <= 0:
        return None
    return t.per_second * t.cycles


def check_log(items: Sequence[Timed], tolerance: float = TOLERANCE) -> ClockReport:
    """The median implied clock of one log and the items whose own clock disagrees with it."""
    clocks = {t.name: c for t in items if (c := implied_clock(t)) is not None}
    if len(clocks) < 3:  # too few items to say which of them is the odd one
        return ClockReport(statistics.median(clocks.values()) if clocks else None)
    mid = statistics.median(clocks.values())
    report = ClockReport(mid)
    cycles = {t.name: t.cycles for t in items}
    for name, c in clocks.items():
        rounding = CYCLES_PRINT_STEP / 2 / (cycles[name] or 1.0)
        if abs(c / mid - 1.0) > tolerance + rounding:
            report.mis_timed[name] = c
    return report


def side_mismatch(base_hz: Sequence[float], head_hz: Sequence[float],
                  tolerance: float = SIDE_TOLERANCE) -> float | None:
    """Relative difference of the two sides' median clocks when above ``tolerance``, else None."""
    if not base_hz or not head_hz:
        return None
    b, h = statistics.median(base_hz), statistics.median(head_hz)
    diff = h / b - 1.0
    return diff if abs(diff) > tolerance else None
