"""JUnit XML for CI front ends (Buildbot, GitHub), built with the junit-xml library.

Layout: per run two suites, ``bsdkm.<target>.<variant>.selftest`` (one testcase per
self-test algorithm plus one per log's completeness / failed stage) and
``bsdkm.<target>.<variant>.benchmark`` (one testcase per benchmark item, failing with
the message of every gate that failed on it, plus one per gate not tied to a single
item: required, geomean regression, crossover family).

junit-xml 1.9 cannot attach properties to a testcase, so the report is built with it and
then each benchmark testcase gets a ``<properties>`` child (value, unit, baseline,
delta_pct, threshold, metric) by editing the tree with ElementTree; JUnit's schema used by
Jenkins/GitLab/junitparser allows ``<properties>`` inside ``<testcase>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from .model import Benchmark, RunResult
from .policy import KIND_COMPLETE, KIND_SELFTEST, Check, Verdict, fmt_num

_SELFTEST_KINDS = {KIND_SELFTEST, KIND_COMPLETE}
_PROPERTY_FIELDS = ("value", "unit", "baseline", "delta_pct", "threshold", "metric")


@dataclass
class _Case:
    """A testcase being assembled: its checks decide the outcome, properties ride along."""

    name: str
    seconds: float | None = None
    checks: list[Check] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)

    def to_testcase(self, classname: str) -> TestCase:
        tc = TestCase(self.name, classname=classname, elapsed_sec=self.seconds)
        failed = [c for c in self.checks if not c.passed]
        errors = [c for c in failed if c.error]
        if errors:
            tc.add_error_info(message=_one_line(errors), output="\n".join(c.message for c in errors))
        elif failed:
            tc.add_failure_info(message=_one_line(failed), output="\n".join(c.message for c in failed),
                                failure_type=",".join(sorted({c.kind for c in failed})))
        return tc


def _one_line(checks: list[Check]) -> str:
    return "; ".join(c.message for c in checks)


def suite_name(run: RunResult, part: str) -> str:
    return f"bsdkm.{run.target}.{run.variant}.{part}"


def _checks_for(verdict: Verdict, run: RunResult) -> list[Check]:
    return [c for c in verdict.checks if c.variant == run.variant and c.target == run.target]


def _selftest_cases(checks: list[Check]) -> list[_Case]:
    return [_Case(c.name, checks=[c]) for c in checks if c.kind in _SELFTEST_KINDS]


def _benchmark_properties(b: Benchmark) -> dict[str, str]:
    props = {"value": fmt_num(b.value), "unit": b.unit}
    if b.cycles is not None:
        props["cycles"] = f"{b.cycles:g}"
        props["cycles_unit"] = b.cycles_unit or ""
    if b.block_size is not None:
        props["block_size"] = str(b.block_size)
    return props


def _check_properties(c: Check) -> dict[str, str]:
    """A regression gate's numbers as value/baseline/delta; other gates under their kind's name."""
    if c.kind == "regression" and not c.name.startswith("geomean:"):
        fields = {name: getattr(c, name) for name in _PROPERTY_FIELDS}
    else:
        fields = {c.kind: c.value, f"{c.kind}_unit": c.unit, f"{c.kind}_threshold": c.threshold}
    return {k: _prop_text(v) for k, v in fields.items() if v is not None}


def _prop_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _benchmark_cases(run: RunResult, checks: list[Check]) -> list[_Case]:
    gates = [c for c in checks if c.kind not in _SELFTEST_KINDS]
    cases: dict[str, _Case] = {}
    for b in run.benchmarks:
        name = b.name if b.name not in cases else _unique(b.name, cases)
        cases[name] = _Case(name, seconds=b.seconds, properties=_benchmark_properties(b))
    for c in gates:
        case = cases.setdefault(c.name, _Case(c.name))
        case.checks.append(c)
    for case in cases.values():
        for c in case.checks:
            case.properties.update(_check_properties(c))
    return list(cases.values())


def _unique(name: str, taken: dict[str, _Case]) -> str:
    n = 2
    while f"{name} #{n}" in taken:
        n += 1
    return f"{name} #{n}"


def _suites(runs: Iterable[RunResult], verdict: Verdict) -> tuple[list[TestSuite], dict[tuple[str, str],
                                                                                         dict[str, str]]]:
    suites: list[TestSuite] = []
    props: dict[tuple[str, str], dict[str, str]] = {}
    for run in runs:
        checks = _checks_for(verdict, run)
        parts = (("selftest", _selftest_cases(checks)), ("benchmark", _benchmark_cases(run, checks)))
        for part, cases in parts:
            name = suite_name(run, part)
            # no suite-level properties: xunitparser merges every suite's properties into one
            # dict and rejects the report when two suites share a property name
            suites.append(TestSuite(name, [c.to_testcase(name) for c in cases]))
            for case in cases:
                if case.properties:
                    props[(name, case.name)] = case.properties
    return suites, props


def _add_testcase_properties(xml_text: str, props: dict[tuple[str, str], dict[str, str]]) -> str:
    root = ET.fromstring(xml_text)
    for tc in root.iter("testcase"):
        values = props.get((tc.get("classname", ""), tc.get("name", "")))
        if not values:
            continue
        holder = ET.Element("properties")
        for key, value in values.items():
            ET.SubElement(holder, "property", name=key, value=value)
        tc.insert(0, holder)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def junit_xml(runs: list[RunResult], verdict: Verdict) -> str:
    """The JUnit report of ``runs`` as gated by ``verdict``."""
    suites, props = _suites(runs, verdict)
    return _add_testcase_properties(to_xml_report_string(suites, prettyprint=False), props)


def write_junit(runs: list[RunResult], verdict: Verdict, path: str | Path) -> None:
    Path(path).write_text(junit_xml(runs, verdict), encoding="utf-8")
