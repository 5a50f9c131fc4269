"""JUnit XML for CI front ends (Jenkins, GitLab, Buildbot, GitHub readers), built with junit-xml.

Layout: per run two suites, ``bsdkm.<target>.<variant>.selftest`` (one testcase per
self-test algorithm plus one per log's completeness / failed stage) and
``bsdkm.<target>.<variant>.benchmark`` (one testcase per benchmark item, failing with
the message of every gate that failed on it, plus one per gate not tied to a single
item: required, geomean regression, crossover family). Other modules add suites of their
own through ``register_suite`` (e.g. kernel health), without touching this layout.

The output validates against the Jenkins xunit-plugin ``junit-10.xsd`` (the suite checks every
report against it; the schema is third-party data, kept outside the repository), which is stricter than
junit-xml's own output:

- no ``disabled`` attribute on ``<testsuites>``/``<testsuite>`` (junit-xml writes it);
- times with at most 3 decimals (junit-xml writes ``%f`` and float sums);
- no ``<properties>`` and no ``file`` attribute inside ``<testcase>`` (``testcase_files=True`` writes
  ``file`` and ``line`` there for EnricoMi/publish-unit-test-result-action, which reads nothing else,
  leaving the schema). A benchmark's numbers
  (value, unit, baseline, change, limit) are therefore in the testcase's ``<system-out>``, which
  every reader shows, and in its failure message; the log a suite's cases came from is the
  suite's ``file`` attribute (and ``log:`` in each testcase's system-out).

Where a failure is: every suite holds the cases of one log (a run/part whose cases come from
several logs is one suite per log) and its ``file`` is that log, relative to the working
directory; each failure's text ends with its log line in two forms readers parse:
``at <file>:<line>`` (mikepenz/action-junit-report takes the suite's ``file`` and the last
``<file>:<line>`` of the text) and, for a log below a directory, ``at <dirs>.Log(<name>:<line>)``
(dorny/test-reporter's stack-trace form: the dirs as a lowercase package, the file name; it
annotates files git tracks). Test names hold no absolute path: a log is named relative to the
directory all of the report's logs share, so the same logs give the same names anywhere.

Classnames are ``<target>/<variant>/<part>``: no dots, so readers that map a Java-style
classname to a source path (mikepenz/action-junit-report) do not land on
``wolfcrypt/benchmark/benchmark.c``, and the target and variant stay visible.
No suite-level properties: the schema allows them, but xunitparser merges every suite's
properties into one dict and rejects a report in which two suites share a property name.
"""

from __future__ import annotations

import dataclasses
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite

from ..model import Benchmark, KernelEvent, LogFormat, LogResult, RunResult
from ..perf.instruction_counts import MEASURED, counts_of
from ..policy import COMPLETE_PREFIX, Check, CheckKind, Verdict, fmt_num, kernel_health
from .instruction_report import GEOMEAN_NAME as INSTRUCTIONS_GEOMEAN
from .instruction_report import flagged, instruction_facts

_SELFTEST_KINDS = {CheckKind.SELFTEST, CheckKind.COMPLETE}


@dataclass
class JUnitCase:
    """A testcase being assembled: its checks decide the outcome; ``facts`` are shown with it."""

    name: str
    seconds: float | None = None
    checks: list[Check] = field(default_factory=list)
    log: str | None = None  # the log the case's result came from
    facts: dict[str, str] = field(default_factory=dict)  # label -> text, in system-out order
    line: int | None = None  # the line of ``log`` the result was read from
    # Set when the report is written (``_place``): the failures' log lines in the readers' forms.
    locations: list[str] = field(default_factory=list)

    def system_out(self) -> str | None:
        lines = [f"log: {self.log}"] if self.log else []
        if self.log and self.line:
            lines.append(f"line: {self.line}")
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
            tc.add_error_info(message=self._message(errors), output=self._output(errors))
        elif failed:
            tc.add_failure_info(message=self._message(failed), output=self._output(failed),
                                failure_type=",".join(sorted({c.kind for c in failed})))
        return tc

    def _output(self, checks: list[Check]) -> str:
        """The gates' messages, then where in the log (the last lines: readers take the last match)."""
        return "\n".join([*(c.message for c in checks), *self.locations])

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


_SUMMARY_PREFIX = "summary:"  # a log's self-test summary line (policy/run_gates.py)
_LOG_NAMED = (COMPLETE_PREFIX, _SUMMARY_PREFIX)  # test names that end in a log's path


def _log_of_check(run: RunResult, c: Check) -> str | None:
    if c.log_source is not None:
        return c.log_source
    if c.kind == CheckKind.SELFTEST and c.name.startswith(_SUMMARY_PREFIX):
        source = c.name.removeprefix(_SUMMARY_PREFIX)
        if any(log.source == source for log in run.logs):
            return source
    if c.kind == CheckKind.SELFTEST:
        return next((log.source for log in run.logs if any(t.name == c.name for t in log.tests)), None)
    return None


def last_line(log: LogResult) -> int | None:
    """The last line anything was read from: where a cut-off log ends, where a missing item was due."""
    lines = [x.line for x in [*log.benchmarks, *log.tests, *log.lifecycle, *log.problems] if x.line]
    lines += [ev.end_line or ev.line for ev in log.kernel if ev.end_line or ev.line]
    return max(lines) if lines else None


def _line_of_check(run: RunResult, c: Check, source: str | None) -> int | None:
    log = next((lg for lg in run.logs if lg.source == source), None)
    if log is None:
        return None
    if c.kind == CheckKind.SELFTEST:
        test = next((t for t in log.tests if t.name == c.name), None)
        if test is not None and test.line:
            return test.line
    return last_line(log)


def _selftest_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    cases = []
    for c in checks:
        if c.kind in _SELFTEST_KINDS:
            source = _log_of_check(run, c)
            cases.append(JUnitCase(c.name, checks=[c], log=source, line=_line_of_check(run, c, source)))
    return cases


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
    elif c.kind == CheckKind.REQUIRED:  # its value is how many items matched: 0 is "missing", not a number
        case.facts["required"] = f"present ({c.value or 0:.0f} item(s))" if c.passed else "missing"
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
            case = JUnitCase(name, seconds=b.seconds, log=log.source, facts=_benchmark_facts(b), line=b.line)
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


@dataclass(frozen=True)
class LogPaths:
    """How the report names the logs of its runs.

    ``file``: the path readers annotate, relative to the working directory (a CI job's workspace).
    ``name``: the path relative to the directory all the report's logs share, for test names: the
    same logs give the same names on any machine, from any directory.
    """

    root: str | None
    cwd: str

    @classmethod
    def of(cls, runs: Iterable[RunResult]) -> LogPaths:
        dirs = [os.path.dirname(os.path.abspath(log.source)) for run in runs for log in run.logs]
        return cls(os.path.commonpath(dirs) if dirs else None, os.getcwd())

    def name(self, source: str) -> str:
        if self.root is None:
            return source
        return Path(os.path.relpath(os.path.abspath(source), self.root)).as_posix()

    def file(self, source: str) -> str:
        path = Path(source)
        if path.is_absolute() and not path.exists():  # recorded on another machine: no local path to give
            return self.name(source)
        return Path(os.path.relpath(os.path.abspath(source), self.cwd)).as_posix()


def _stable_name(name: str, sources: set[str], paths: LogPaths) -> str:
    for prefix in _LOG_NAMED:
        if name.startswith(prefix) and name.removeprefix(prefix) in sources:
            return prefix + paths.name(name.removeprefix(prefix))
    return name


def _primary_log(run: RunResult) -> LogResult | None:
    """Where a run-wide result (required items, geometric mean, a lost stage) is shown."""
    return next((log for log in run.logs if log.benchmarks), run.logs[0] if run.logs else None)


def _dorny_frame(file: str, line: int) -> str | None:
    """``at <dirs>.Log(<name>:<line>)``, dorny/test-reporter's Java stack-trace form: it takes the
    dirs before the first capitalised part as the package and finds the tracked file below them."""
    parts = Path(file).parts
    dirs = parts[:-1]
    if not dirs or any(not d[:1] > "Z" or "." in d or " " in d for d in dirs):
        return None  # no directory, or one its package form cannot carry
    return f"    at {'.'.join(dirs)}.Log({parts[-1]}:{line})"


def _place(run: RunResult, case: JUnitCase, paths: LogPaths, sources: set[str]) -> None:
    """The case's log as a relative path, its line, its failures' locations, a name without abs paths."""
    primary = _primary_log(run)
    source = case.log or (primary.source if primary is not None else None)
    case.name = _stable_name(case.name, sources, paths)
    if source is None:
        return
    if case.line is None and case.log is None and primary is not None:
        case.line = last_line(primary)
    case.log = paths.file(source)
    failed = [c for c in case.checks if not c.passed]
    lines = []
    for c in failed:
        kernel_lines = c.detail.get("lines") if isinstance(c.detail, dict) else None
        line = kernel_lines[0] if isinstance(kernel_lines, list) and kernel_lines and \
            isinstance(kernel_lines[0], int) else case.line
        if line:
            lines.append(line)
    for line in dict.fromkeys(lines):
        case.locations.append(f"at {case.log}:{line}")
        frame = _dorny_frame(case.log, line)
        if frame:
            case.locations.append(frame)


def _suites(runs: Iterable[RunResult], verdict: Verdict, testcase_files: bool = False) -> list[TestSuite]:
    runs = list(runs)
    paths = LogPaths.of(runs)
    sources = {log.source for run in runs for log in run.logs}
    suites: list[TestSuite] = []
    for run in runs:
        if run.not_run:  # one skipped testcase saying why, so no reader counts the run as passed
            case = _SkippedCase("run", reason=f"not run: {run.not_run}")
            suites.append(TestSuite(suite_name(run, "run"), [case.to_testcase(class_name(run, "run"))]))
            continue
        for part, cases in _parts(run, _checks_for(verdict, run)):
            classname = class_name(run, part)
            for case in cases:
                _place(run, case, paths, sources)
                timing = verdict.mis_timed_row(run.target, run.variant, case.name)
                if timing is not None and part == "benchmark":  # the table's own clock check
                    case.facts["clock"] = (f"mis-timed: rate x cycles implies {timing['clock_hz'] / 1e9:.2f} "
                                           f"GHz, the log's other rows {timing['log_hz'] / 1e9:.2f} GHz")
            groups: dict[str | None, list[JUnitCase]] = {}
            for case in cases:
                groups.setdefault(case.log, []).append(case)
            # One suite per log, so a reader that takes the suite's file lands in the right one; the
            # biggest keeps the part's plain name.
            main = max(groups, key=lambda f: len(groups[f]), default=None)
            source_of = {paths.file(log.source): log.source for log in run.logs}
            for file, members in groups.items():
                name = suite_name(run, part)
                if file != main and file is not None:
                    name += f" ({paths.name(source_of.get(file, file))})"
                testcases = [c.to_testcase(classname) for c in members]
                if testcase_files:  # EnricoMi's publisher reads only these (outside junit-10.xsd)
                    for tc, c in zip(testcases, members, strict=True):
                        tc.file, tc.line = c.log, c.line
                suites.append(TestSuite(name, testcases, file=file))
        if run.not_run_parts:  # a part the run could not do (a kernel): skipped with why, never passed
            skipped = [_SkippedCase(part, reason=f"not run: {why}")
                       for part, why in run.not_run_parts.items()]
            suites.append(TestSuite(suite_name(run, "not-run"),
                                    [c.to_testcase(class_name(run, "not-run")) for c in skipped]))
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


@dataclass
class _KernelCase(JUnitCase):
    """A policy key's testcase (``kernel:oops``): its failures are named as the report names them
    (``kernel:panic@159``, the record's check), so one record has one name everywhere."""

    def _message(self, checks: list[Check]) -> str:
        return super()._message([dataclasses.replace(c, message=f"{c.name}: {c.message}") for c in checks])

    def _output(self, checks: list[Check]) -> str:
        return super()._output([dataclasses.replace(c, message=f"{c.name}: {c.message}") for c in checks])


def _kernel_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    """The ``kernel`` suite of a run with a kernel log: a testcase per policy key, failed when a
    record of it failed the gate, the records' evidence (description, lines) in system-out."""
    logs = [log for log in run.logs
            if LogFormat(log.format).kernel or log.kernel]
    if not logs:
        return []
    found: dict[str, list[tuple[LogResult, KernelEvent]]] = {key: [] for key in kernel_health.POLICY_KEYS}
    for log, ev in kernel_health.records(run):
        found[kernel_health.GROUPS.get(ev.kind, "warning")].append((log, ev))
    cases = []
    for key in kernel_health.POLICY_KEYS:
        case: JUnitCase = _KernelCase(f"kernel:{key}", log=logs[0].source if len(logs) == 1 else None)
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


register_suite("kernel", _kernel_cases, kinds=[CheckKind.KERNEL])
@dataclass
class _SkippedCase(JUnitCase):
    """A testcase that could not run: skipped with the reason, never a pass."""

    reason: str = ""

    def to_testcase(self, classname: str) -> TestCase:
        tc = super().to_testcase(classname)
        tc.add_skipped_info(message=self.reason)
        return tc


def _instruction_cases(run: RunResult, checks: list[Check]) -> list[JUnitCase]:
    """The ``instructions`` suite: a testcase per counted item (report/instruction_report.py facts in
    system-out); an item that could not be counted is skipped with the reason."""
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
        elif check is not None and flagged(check):  # within the limit but not cleared: never a pass
            cases.append(_SkippedCase(name, facts=facts, reason=f"flagged, not cleared: {flagged(check)}"))
        else:
            cases.append(JUnitCase(name, checks=[check] if check else [], facts=facts))
    for c in checks:
        if c.name.startswith(INSTRUCTIONS_GEOMEAN):
            facts = {"change": f"{c.value:+.2f}%", "limit": f"+{c.threshold:g}%"}
            if flagged(c):
                cases.append(_SkippedCase(c.name, facts=facts, reason=f"flagged, not cleared: {flagged(c)}"))
            else:
                cases.append(JUnitCase(c.name, checks=[c], facts=facts))
    return cases


register_suite("instructions", _instruction_cases, kinds=[CheckKind.INSTRUCTIONS])


def junit_xml(runs: list[RunResult], verdict: Verdict, *, testcase_files: bool = False) -> str:
    """The JUnit report of ``runs`` as gated by ``verdict``."""
    return _report(_suites(runs, verdict, testcase_files))


def write_junit(runs: list[RunResult], verdict: Verdict, path: str | Path) -> None:
    Path(path).write_text(junit_xml(runs, verdict), encoding="utf-8")


# --------------------------------------------------------------------------- what the file counts

_PART_WORDS = {"kernel": "kernel health", "instructions": "instruction counts"}


def junit_tally(runs: list[RunResult], verdict: Verdict) -> str:
    """What the JUnit file of ``runs`` counts, in words: ``120 tests (1 log completeness, 119 benchmark
    items); 4 of them hold the 4 checks``. The verdict counts checks (gates applied); the file
    has a test per self-test, benchmark item and log whether a gate applied to it or not."""
    counts: dict[str, int] = {}
    with_checks = checks = 0

    def add(word: str, n: int) -> None:
        if n:
            counts[word] = counts.get(word, 0) + n

    for run in runs:
        if run.not_run:
            add("runs not run", 1)
            continue
        for part, cases in _parts(run, _checks_for(verdict, run)):
            with_checks += sum(1 for c in cases if c.checks)
            checks += sum(len(c.checks) for c in cases)
            if part == "selftest":
                logs = sum(1 for c in cases if c.checks and c.checks[0].kind == CheckKind.COMPLETE)
                add("log completeness", logs)
                add("self-tests", len(cases) - logs)
            elif part == "benchmark":
                items = sum(len(log.benchmarks) for log in run.logs)
                add("benchmark items", items)
                add("run-wide gates", len(cases) - items)
            else:
                add(_PART_WORDS.get(part, part), len(cases))
    total = sum(counts.values())
    parts = ", ".join(f"{n} {word}" for word, n in counts.items())
    return (f"{total} test{'' if total == 1 else 's'} ({parts or 'none'}); {with_checks} of them hold the "
            f"{checks} check{'' if checks == 1 else 's'}")
