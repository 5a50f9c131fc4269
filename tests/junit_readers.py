"""What JUnit readers accept: the Jenkins xunit-plugin schema and EnricoMi's junitparser path.

``validate(text)`` checks a report against the Jenkins xUnit plugin's ``junit-10.xsd`` (lxml; third-party
data read from the shared folder, ``$BSDKM_SHARED/schemas/``, as the fixtures are) plus the
"at most 3 decimals" rule for times; ``enricomi_counts(path)`` reads a file the way
EnricoMi/publish-unit-test-result-action's ``publish/junit.py`` does (lxml tree →
``junitparser.JUnitXml.fromroot``, suite totals from the suite attributes, one result per
testcase: the most severe of its children) and returns the counts it would publish.
``conftest.py`` runs ``validate`` on every JUnit report the suite produces.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import junitparser
from conftest import JUNIT_SCHEMA
from lxml import etree

SCHEMA_PATH = JUNIT_SCHEMA
_TIME = re.compile(r"\d+(\.\d{1,3})?")


class JUnitInvalid(AssertionError):
    pass


@functools.cache
def _schema() -> etree.XMLSchema:
    if not SCHEMA_PATH.is_file():
        raise FileNotFoundError(f"the JUnit schema is not at {SCHEMA_PATH} "
                                "(set BSDKM_SHARED to the shared folder)")
    return etree.XMLSchema(etree.parse(str(SCHEMA_PATH)))


def validate(text: str | bytes, where: str = "<junit>") -> None:
    """Raise JUnitInvalid naming the first problems if ``text`` is not a junit-10.xsd report."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        doc = etree.fromstring(data, parser=etree.XMLParser(huge_tree=True))
    except etree.XMLSyntaxError as e:
        raise JUnitInvalid(f"{where}: not XML: {e}") from None
    schema = _schema()
    if not schema.validate(doc):
        problems = "; ".join(f"line {e.line}: {e.message}" for e in list(schema.error_log)[:5])
        raise JUnitInvalid(f"{where}: not valid against junit-10.xsd: {problems}")
    for el in doc.iter("testsuites", "testsuite", "testcase"):
        t = el.get("time")
        if t is not None and not _TIME.fullmatch(t):
            raise JUnitInvalid(f"{where}: line {el.sourceline}: time={t!r} has more than 3 decimals")


def is_junit_report(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return b"<testsuites" in head or b"<testsuite " in head


@dataclass(frozen=True)
class PublishedCounts:
    suites: int
    tests: int  # from the suites' `tests` attributes
    failures: int
    errors: int
    skipped: int
    cases: dict[str, int]  # result ("success", "failure", "error", "skipped") -> testcases
    with_output: int  # testcases whose system-out EnricoMi shows


def enricomi_counts(path: str | Path) -> PublishedCounts:
    tree = etree.parse(str(path), parser=etree.XMLParser(huge_tree=True))
    xml = junitparser.JUnitXml.fromroot(tree.getroot())
    suites = list(xml) if xml._tag == "testsuites" else [xml]
    by_result: Counter[str] = Counter()
    with_output = 0
    for suite in suites:
        for case in suite.iterchildren(junitparser.TestCase):
            results = [r for r in case.result if r is not None]
            tags = {r._tag for r in results}
            state = next((s for s in ("error", "failure", "skipped") if s in tags), "success")
            by_result[state] += 1
            with_output += bool(case.system_out)
    return PublishedCounts(
        suites=len(suites),
        tests=sum(s.tests or 0 for s in suites),
        failures=sum(s.failures or 0 for s in suites),
        errors=sum(s.errors or 0 for s in suites),
        skipped=sum(s.skipped or 0 for s in suites),
        cases=dict(by_result),
        with_output=with_output,
    )


# --------------------------------------------------------------------------- where readers annotate

@dataclass(frozen=True)
class Annotation:
    """Where a reader puts a failure's annotation: a path and a line (0 or 1: nowhere in particular)."""

    suite: str
    test: str
    path: str
    line: int


def _failures(path: str | Path):
    tree = etree.parse(str(path), parser=etree.XMLParser(huge_tree=True))
    for suite in tree.getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            for issue in [*case.findall("failure"), *case.findall("error")]:
                yield suite, case, issue


def mikepenz_annotations(path: str | Path) -> list[Annotation]:
    """mikepenz/action-junit-report's rule (src/testParser.ts, resolveFileAndLine): the file is the
    testcase's ``file``, else the failure's, else the suite's, else the classname's last dotted part;
    the line is a ``line`` attribute, else the last `` <...file...>:<n>`` in the failure's text, else 1."""
    out = []
    for suite, case, issue in _failures(path):
        file = case.get("file") or issue.get("file") or suite.get("file") or \
            (case.get("classname") or case.get("name", "")).split(".")[-1]
        line = case.get("line") or issue.get("line") or suite.get("line")
        if not line:
            found = re.findall(" [^ ]*" + re.escape(file) + r".*?:\d+", (issue.text or "").strip())
            line = found[-1].split(":")[-1] if found else "1"
        out.append(Annotation(suite.get("name", ""), case.get("name", ""), file, int(line)))
    return out


_DORNY_FRAME = re.compile(r"^\s*at (\S+/\S*/)?(.*)\((.*):(\d+)\)$")


def dorny_annotations(path: str | Path, tracked: list[str]) -> list[Annotation]:
    """dorny/test-reporter's java-junit rule (parsers/java-junit): the first stack-trace line
    ``at <package>.<Class...>(<file name>:<n>)`` of the failure's text whose file name is a tracked file
    whose parent directories end in the package (the parts before the first capitalised one);
    otherwise the annotation goes to the report itself at line 0."""
    by_name: dict[str, list[str]] = {}
    for f in tracked:
        by_name.setdefault(Path(f).name, []).append(Path(f).as_posix())
    out = []
    for suite, case, issue in _failures(path):
        where = (str(path), 0)
        for text in (issue.text or "").splitlines():
            m = _DORNY_FRAME.match(text)
            if not m:
                continue
            trace, name, line = m.group(2), m.group(3), int(m.group(4))
            package = []
            for part in trace.split("."):
                if part[:1] <= "Z":
                    break
                package.append(part)
            hit = next((f for f in by_name.get(name, []) if package and
                        Path(f).parent.parts[-len(package):] == tuple(package)), None)
            if hit:
                where = (hit, line)
                break
        out.append(Annotation(suite.get("name", ""), case.get("name", ""), *where))
    return out
