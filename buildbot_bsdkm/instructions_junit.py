"""The JUnit suite ``bsdkm.<target>.<variant>.instructions``: one testcase per counted item.

Registered with ``junit.register_suite`` (imported at the end of ``junit.py``). An item that
could not be counted is a *skipped* testcase with the reason, never a passing one; the numbers
(count per byte/op, base, change, limit, the wall-clock change, the biggest functions and, for a
compared item, the functions that changed most) are in ``system-out``.
"""

from __future__ import annotations

from dataclasses import dataclass

from junit_xml import TestCase

from .instructions_report import GEOMEAN_NAME, instruction_facts
from .junit import JUnitCase, register_suite
from .model import RunResult
from .perf.instructions import MEASURED, counts_of
from .policy import Check, CheckKind


@dataclass
class _SkippedCase(JUnitCase):
    reason: str = ""

    def to_testcase(self, classname: str) -> TestCase:
        tc = super().to_testcase(classname)
        tc.add_skipped_info(message=self.reason)
        return tc


def instruction_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    counts = counts_of(run.metadata)
    if counts is None:
        return [JUnitCase(c.name, checks=[c]) for c in checks]
    by_item = {str(c.detail.get("item")): c for c in checks if "item" in c.detail}
    cases: list[JUnitCase] = []
    for item in counts.items:
        check = by_item.get(item.name)
        clock = check.detail.get("clock_change_pct") if check is not None else None
        facts = instruction_facts(item, check, clock if isinstance(clock, int | float) else None)
        name = f"instructions:{item.name}"
        if item.status != MEASURED:
            cases.append(_SkippedCase(name, facts=facts, reason=f"not counted: {item.reason or item.status}"))
        else:
            cases.append(JUnitCase(name, checks=[check] if check else [], facts=facts))
    for c in checks:
        if c.name.startswith(GEOMEAN_NAME):
            cases.append(JUnitCase(c.name, checks=[c], facts={"change": f"{c.value:+.2f}%",
                                                              "limit": f"+{c.threshold:g}%"}))
    return cases


register_suite("instructions", instruction_cases, kinds=[CheckKind.INSTRUCTIONS])
