"""JUnit XML for CI front ends (Jenkins, GitLab, Buildbot, GitHub readers), built with junit-xml.

Layout: per run two suites, ``bsdkm.<target>.<variant>.selftest`` (one testcase per
self-test algorithm plus one per log's completeness / failed stage) and
``bsdkm.<target>.<variant>.benchmark`` (one testcase per benchmark item, failing with
the message of every gate that failed on it, plus one per gate not tied to a single
item: required, geomean regression, crossover family). Other modules add suites of their
own through ``register_suite`` (e.g. kernel health), without touching this layout.

The output validates against the Jenkins xunit-plugin ``junit-10.xsd`` (vendored in
``tests/schemas/``), which is stricter than junit-xml's own output:

- no ``disabled`` attribute on ``<testsuites>``/``<testsuite>`` (junit-xml writes it);
- times with at most 3 decimals (junit-xml writes ``%f`` and float sums);
- no ``<properties>`` and no ``file`` attribute inside ``<testcase>``. A benchmark's numbers
  (value, unit, baseline, change, limit) are therefore in the testcase's ``<system-out>``, which
  every reader shows, and in its failure message; the log a suite's cases came from is the
  suite's ``file`` attribute (and ``log:`` in each testcase's system-out).

Classnames are ``<target>/<variant>/<part>``: no dots, so readers that map a Java-style
classname to a source path (mikepenz/action-junit-report) do not land on
``wolfcrypt/benchmark/benchmark.c``, and the target and variant stay visible.
No suite-level properties: the schema allows them, but xunitparser merges every suite's
properties into one dict and rejects a report in which two suites share a property name.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite

from . import kernel_health
from .model import Benchmark, KernelEvent, LogFormat, LogResult, RunResult
from .policy import Check, CheckKind, Verdict, fmt_num

_SELFTEST_KINDS = {CheckKind.SELFTEST, CheckKind.COMPLETE}


@dataclass
class JUnitCase:
    """A testcase being assembled: its checks decide the outcome; ``facts`` are shown with it."""

    name: str
    seconds: float | None = None
    checks: list[Check] = field(default_factory=list)
    log: str | None = None  # the log the case's result came from
    facts: dict[str, str] = field(default_factory=dict)  # label -> text, in system-out order

    def system_out(self) -> str | None:
        lines = [f"log: {self.log}"] if self.log else []
        lines += [f"{label}: {text}" for label, text in self.facts.items()]
        lines += [f"{'PASS' if c.passed else 'FAIL'} {c.kind}: {c.message}" for c in self.checks]
        return "\n".join(lines) if lines else None

    def to_testcase(self, classname: str) -> TestCase:
        tc = TestCase(self.name, classname=classname, elapsed_sec=self.seconds, stdout=self.system_out())
        failed = [c for c in self.checks if not c.passed and c.blocking]
        waived = [c for c in self.checks if not c.passed and not c.blocking]
        errors = [c for c in failed if c.error]
        if waived and not failed:  # known (with its URL), pre-existing, flaky: the policy lets them pass
            tc.add_skipped_info(message="; ".join(_waived_text(c) for c in waived),
                                output="\n".join(c.message for c in waived))
        if errors:
            tc.add_error_info(message=self._message(errors), output="\n".join(c.message for c in errors))
        elif failed:
            tc.add_failure_info(message=self._message(failed), output="\n".join(c.message for c in failed),
                                failure_type=",".join(sorted({c.kind for c in failed})))
        return tc

    def _message(self, checks: list[Check]) -> str:
        """The gates' messages, then the numbers in one fixed form, for readers that show only this."""
        text = "; ".join(c.message for c in checks)
        numbers = ", ".join(f"{k} {v}" for k, v in self.facts.items() if k in _MESSAGE_FACTS)
        return f"{text} [{numbers}]" if numbers else text


def _waived_text(c: Check) -> str:
    """A failure the triage policy does not block on: "known: <reason> (<url>) [signature]"."""
    url = (c.detail or {}).get("known_url")
    note = c.triage_note or ""
    if url and url not in note:
        note = f"{note} ({url})" if note else url
    return f"{c.triage or 'waived'}{': ' + note if note else ''} [{c.signature}]"


# Builds a part's testcases for one run from the checks on that run.
SuiteBuilder = Callable[[RunResult, list[Check]], list[JUnitCase]]


@dataclass(frozen=True)
class _ExtraSuite:
    part: str
    build: SuiteBuilder
    kinds: frozenset[str]


_EXTRA_SUITES: list[_ExtraSuite] = []


def register_suite(part: str, build: SuiteBuilder, *, kinds: Iterable[str] = ()) -> None:
    """Add a suite ``bsdkm.<target>.<variant>.<part>`` per run (after selftest and benchmark).

    Checks of ``kinds`` are handed to ``build`` only; the benchmark suite no longer shows them.
    A suite with no testcases for a run is left out. Registering a part again replaces it.
    """
    _EXTRA_SUITES[:] = [s for s in _EXTRA_SUITES if s.part != part]
    _EXTRA_SUITES.append(_ExtraSuite(part, build, frozenset(kinds)))


def suite_name(run: RunResult, part: str) -> str:
    return f"bsdkm.{run.target}.{run.variant}.{part}"


def class_name(run: RunResult, part: str) -> str:
    return f"{run.target}/{run.variant}/{part}"


def _checks_for(verdict: Verdict, run: RunResult) -> list[Check]:
    return [c for c in verdict.checks if c.variant == run.variant and c.target == run.target]


def _log_of_check(run: RunResult, c: Check) -> str | None:
    if c.log_source is not None:
        return c.log_source
    if c.kind == CheckKind.SELFTEST:
        return next((log.source for log in run.logs if any(t.name == c.name for t in log.tests)), None)
    return None


def _selftest_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    return [JUnitCase(c.name, checks=[c], log=_log_of_check(run, c))
            for c in checks if c.kind in _SELFTEST_KINDS]


# What a failure message repeats from system-out: the numbers a reviewer needs at a glance.
_MESSAGE_FACTS = ("value", "baseline", "change", "limit")


def _benchmark_facts(b: Benchmark) -> dict[str, str]:
    facts = {"value": f"{fmt_num(b.value)} {b.unit}"}
    if b.cycles is not None:
        facts["cycles"] = f"{b.cycles:g} {b.cycles_unit or ''}".rstrip()
    if b.block_size is not None:
        facts["block"] = f"{b.block_size} bytes"
    return facts


def _limit_text(c: Check) -> str | None:
    if c.kind == CheckKind.REGRESSION:
        if c.threshold is not None:
            return f"{c.threshold:g}% regression"
        learned = c.detail.get("limit") if isinstance(c.detail, dict) else None
        return f"{learned * 100:.1f}% regression (learned)" if isinstance(learned, int | float) else None
    if c.threshold is None:
        return None
    suffix = "x" if c.unit == "x" else (f" {c.unit}" if c.unit else "")
    return f"{c.kind} {c.threshold:g}{suffix}"


def _add_check_facts(case: JUnitCase, c: Check) -> None:
    """A regression gate's baseline and change; every gate's limit, joined when several apply."""
    if c.kind == CheckKind.REGRESSION and not c.is_geomean:
        if c.baseline is not None:
            case.facts["baseline"] = f"{fmt_num(c.baseline)} {c.unit or ''}".rstrip()
        if c.delta_pct is not None:
            case.facts["change"] = f"{c.delta_pct:+.2f}%"
    elif c.is_geomean and c.value is not None:  # the value is the change in %
        case.facts["change"] = f"{c.value:+.2f}%"
    elif c.value is not None and c.kind not in case.facts:
        case.facts[c.kind] = f"{fmt_num(c.value)} {c.unit or ''}".rstrip()
    limit = _limit_text(c)
    if limit:
        have = case.facts.get("limit")
        case.facts["limit"] = f"{have}; {limit}" if have else limit


def _benchmark_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    """A case per benchmark item (repeated names get " #2", " #3"), then one per run-wide gate."""
    by_item: list[JUnitCase] = []
    by_name: dict[str, JUnitCase] = {}
    seen: dict[str, int] = {}
    for log in run.logs:
        for b in log.benchmarks:
            seen[b.name] = seen.get(b.name, 0) + 1
            name = b.name if seen[b.name] == 1 else f"{b.name} #{seen[b.name]}"
            case = JUnitCase(name, seconds=b.seconds, log=log.source, facts=_benchmark_facts(b))
            by_item.append(case)
            by_name.setdefault(name, case)
    extra: list[JUnitCase] = []
    for c in checks:
        if c.kind in _SELFTEST_KINDS:
            continue
        if c.item is not None and c.item < len(by_item):
            case = by_item[c.item]
        elif c.name in by_name:
            case = by_name[c.name]
        else:
            case = by_name[c.name] = JUnitCase(c.name)
            extra.append(case)
        case.checks.append(c)
        _add_check_facts(case, c)
    for case in by_item:  # readers should see that no baseline was compared, not a blank
        if "value" in case.facts:
            case.facts.setdefault("baseline", "none")
            case.facts.setdefault("change", "n/a")
            case.facts.setdefault("limit", "none")
    return by_item + extra


def _parts(run: RunResult, checks: list[Check]) -> list[tuple[str, list[JUnitCase]]]:
    claimed = {k for s in _EXTRA_SUITES for k in s.kinds}
    own = [c for c in checks if c.kind not in claimed]
    parts = [("selftest", _selftest_cases(run, own)), ("benchmark", _benchmark_cases(run, own))]
    for extra in _EXTRA_SUITES:
        cases = extra.build(run, [c for c in checks if c.kind in extra.kinds])
        if cases:
            parts.append((extra.part, cases))
    return parts


def _suites(runs: Iterable[RunResult], verdict: Verdict) -> list[TestSuite]:
    suites: list[TestSuite] = []
    for run in runs:
        for part, cases in _parts(run, _checks_for(verdict, run)):
            files = {c.log for c in cases if c.log}
            classname = class_name(run, part)
            suites.append(TestSuite(suite_name(run, part), [c.to_testcase(classname) for c in cases],
                                    file=files.pop() if len(files) == 1 else None))
    return suites


# Characters XML 1.0 cannot carry at all (a log may contain any byte); removed, as junit-xml does.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# junit-10.xsd: no `disabled`; junit-xml writes it on every suite.
_NOT_IN_SCHEMA = ("disabled",)


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _schema_suite(suite: TestSuite) -> ET.Element:
    """junit-xml's element for the suite, made to fit junit-10.xsd."""
    element = suite.build_xml_doc()
    for name in _NOT_IN_SCHEMA:
        element.attrib.pop(name, None)
    for tc in element.iter("testcase"):
        if tc.get("time") is not None:
            tc.set("time", _seconds(float(tc.get("time", "0"))))
    element.set("time", _seconds(float(element.get("time", "0") or 0)))
    return element


def _report(suites: list[TestSuite]) -> str:
    root = ET.Element("testsuites")
    totals = {"errors": 0, "failures": 0, "tests": 0}
    seconds = 0.0
    for suite in suites:
        element = _schema_suite(suite)
        for key in totals:
            totals[key] += int(element.get(key, 0))
        seconds += float(element.get("time", 0))
        root.append(element)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(seconds))
    text = _ILLEGAL_XML.sub("", ET.tostring(root, encoding="unicode"))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n"


# --------------------------------------------------------------------------- kernel health's suite

_JUNIT_EVIDENCE_RECORDS = 3
_JUNIT_EVIDENCE_LINES = 30


def _kernel_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    """The ``kernel`` suite of a run with a kernel log: a testcase per policy key, failed when a
    record of it failed the gate, the records' evidence (description, lines) in system-out."""
    logs = [log for log in run.logs
            if log.format in (LogFormat.LINUX_KERNEL_LOG, LogFormat.FREEBSD_KERNEL_LOG) or log.kernel]
    if not logs:
        return []
    found: dict[str, list[tuple[LogResult, KernelEvent]]] = {key: [] for key in kernel_health.POLICY_KEYS}
    for log, ev in kernel_health.records(run):
        found[kernel_health.GROUPS.get(ev.kind, "warning")].append((log, ev))
    cases = []
    for key in kernel_health.POLICY_KEYS:
        case = JUnitCase(f"kernel:{key}", log=logs[0].source if len(logs) == 1 else None)
        case.checks = [c for c in checks if (c.detail or {}).get("group") == key]
        recs = found[key]
        case.facts["records"] = str(len(recs))
        if not recs:
            case.facts["result"] = f"no {key.replace('_', ' ')} records in {len(logs)} kernel log(s)"
        for log, ev in recs[:_JUNIT_EVIDENCE_RECORDS]:
            j = kernel_health.judge(ev, run.target, kernel_health.KernelRules())
            where = f"{log.source} {kernel_health.line_range(ev)}"
            head = f"{kernel_health.describe(ev)} ({where}; {j.classification})"
            body = "\n".join(ev.evidence[:_JUNIT_EVIDENCE_LINES])
            case.facts[f"{ev.kind} at line {ev.line}"] = f"{head}\n{body}"
        if len(recs) > _JUNIT_EVIDENCE_RECORDS:
            case.facts["more"] = f"{len(recs) - _JUNIT_EVIDENCE_RECORDS} more record(s), see the report"
        cases.append(case)
    return cases


register_suite("kernel", _kernel_cases, kinds=[CheckKind.KERNEL])  # issue 12
# The instruction counts' suite registers itself; imported here, after register_suite exists.
from . import instructions_junit  # noqa: E402, F401


def junit_xml(runs: list[RunResult], verdict: Verdict) -> str:
    """The JUnit report of ``runs`` as gated by ``verdict``."""
    return _report(_suites(runs, verdict))


def write_junit(runs: list[RunResult], verdict: Verdict, path: str | Path) -> None:
    Path(path).write_text(junit_xml(runs, verdict), encoding="utf-8")
