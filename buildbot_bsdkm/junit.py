"""JUnit XML for CI front ends (Buildbot, GitHub), built with the junit-xml library.

Layout: per run two suites, ``bsdkm.<target>.<variant>.selftest`` (one testcase per
self-test algorithm plus one per log's completeness / failed stage) and
``bsdkm.<target>.<variant>.benchmark`` (one testcase per benchmark item, failing with
the message of every gate that failed on it, plus one per gate not tied to a single
item: required, geomean regression, crossover family).

junit-xml 1.9 cannot attach properties to a testcase, so each suite's element is built by
junit-xml (``TestSuite.build_xml_doc``) and each benchmark testcase then gets a
``<properties>`` child (value, unit, baseline, delta_pct, threshold, metric, and per gate
kind e.g. speedup / speedup_threshold) before the one serialisation; the JUnit schema used
by Jenkins/GitLab/junitparser allows ``<properties>`` inside ``<testcase>``. No suite-level
properties: xunitparser merges all suites' properties and rejects repeated names.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite

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
    """A case per benchmark item (repeated names get " #2", " #3"), then one per run-wide gate."""
    by_item: list[_Case] = []
    by_name: dict[str, _Case] = {}
    seen: dict[str, int] = {}
    for b in run.benchmarks:
        seen[b.name] = seen.get(b.name, 0) + 1
        name = b.name if seen[b.name] == 1 else f"{b.name} #{seen[b.name]}"
        case = _Case(name, seconds=b.seconds, properties=_benchmark_properties(b))
        by_item.append(case)
        by_name.setdefault(name, case)
    extra: list[_Case] = []
    for c in checks:
        if c.kind in _SELFTEST_KINDS:
            continue
        if c.item is not None and c.item < len(by_item):
            case = by_item[c.item]
        elif c.name in by_name:
            case = by_name[c.name]
        else:
            case = by_name[c.name] = _Case(c.name)
            extra.append(case)
        case.checks.append(c)
        case.properties.update(_check_properties(c))
    return by_item + extra


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


# Characters XML 1.0 cannot carry at all (a log may contain any byte); removed, as junit-xml does.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _with_properties(suite: TestSuite, props: dict[tuple[str, str], dict[str, str]]) -> ET.Element:
    """The suite's element as junit-xml builds it, each testcase given its <properties> first."""
    element = suite.build_xml_doc()
    for tc in element.iter("testcase"):
        values = props.get((tc.get("classname", ""), tc.get("name", "")))
        if not values:
            continue
        holder = ET.Element("properties")
        for key, value in values.items():
            ET.SubElement(holder, "property", name=key, value=value)
        tc.insert(0, holder)
    return element


def _report(suites: list[TestSuite], props: dict[tuple[str, str], dict[str, str]]) -> str:
    # the <testsuites> totals junit-xml's to_xml_report_string writes, built from the same elements
    root = ET.Element("testsuites")
    totals = {"disabled": 0, "errors": 0, "failures": 0, "tests": 0}
    seconds = 0.0
    for suite in suites:
        element = _with_properties(suite, props)
        for key in totals:
            totals[key] += int(element.get(key, 0))
        seconds += float(element.get("time", 0))
        root.append(element)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", str(seconds))
    text = _ILLEGAL_XML.sub("", ET.tostring(root, encoding="unicode"))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n"


def junit_xml(runs: list[RunResult], verdict: Verdict) -> str:
    """The JUnit report of ``runs`` as gated by ``verdict``."""
    suites, props = _suites(runs, verdict)
    return _report(suites, props)


def write_junit(runs: list[RunResult], verdict: Verdict, path: str | Path) -> None:
    Path(path).write_text(junit_xml(runs, verdict), encoding="utf-8")
