"""JUnit XML from real parsed logs, read back by two independent JUnit readers."""

from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
import xunitparser
from conftest import FIXTURES
from junit_readers import JUnitInvalid, enricomi_counts, validate

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, fmt_num, load_policy, parse_policy
from buildbot_bsdkm.report.junit import junit_xml, write_junit


def parsed(variant: str, target: str, *rel: str) -> RunResult:
    return RunResult(variant, target, logs=[parse_file(FIXTURES / r) for r in rel])


def read_junitparser(text: str) -> dict[str, junitparser.TestSuite]:
    xml = junitparser.JUnitXml.fromstring(text.encode("utf-8"))  # lxml refuses str with a declaration
    return {s.name: s for s in xml}


def read_xunitparser(text: str):
    suite, result = xunitparser.parse(io.StringIO(text))
    return list(suite), result


def case_output(case: junitparser.TestCase) -> dict[str, str]:
    """``label: text`` lines of a testcase's system-out."""
    out = case.system_out or ""
    lines = [line for line in out.splitlines() if not line.startswith(("PASS ", "FAIL "))]
    return dict(line.split(": ", 1) for line in lines if ": " in line)


@pytest.fixture(scope="module")
def gated() -> tuple[list[RunResult], str]:
    runs = [parsed("aesni-avx", "userspace", "noise/accel_r03.txt", "userspace/accel/testwolfcrypt.txt"),
            parsed("noasm", "userspace", "noise/noasm_r03.txt")]
    baseline = [parsed("aesni-avx", "userspace", "noise/accel_r01.txt"),
                parsed("noasm", "userspace", "noise/noasm_r01.txt")]
    verdict = evaluate(runs, load_policy(), baseline)
    assert verdict.passed
    return runs, junit_xml(runs, verdict)


def test_suites_and_counts_load_in_junitparser(gated) -> None:
    runs, text = gated
    suites = read_junitparser(text)
    # one suite per log: the self-test part of aesni-avx holds two logs (its benchmark log's
    # completeness in a suite of its own, named after that log)
    assert sorted(suites) == ["bsdkm.userspace.aesni-avx.benchmark", "bsdkm.userspace.aesni-avx.selftest",
                              "bsdkm.userspace.aesni-avx.selftest (noise/accel_r03.txt)",
                              "bsdkm.userspace.noasm.benchmark", "bsdkm.userspace.noasm.selftest"]
    selftest = suites["bsdkm.userspace.aesni-avx.selftest"]
    n_tests = len(runs[0].tests)
    assert n_tests == 89
    # one case per self-test algorithm plus the "complete:<log>" case of its log
    assert selftest.tests == n_tests + 1 and selftest.failures == 0 and selftest.errors == 0
    assert [c.name for c in suites["bsdkm.userspace.aesni-avx.selftest (noise/accel_r03.txt)"]] == [
        "complete:noise/accel_r03.txt"]
    bench = suites["bsdkm.userspace.aesni-avx.benchmark"]
    # 27 items, the run-wide geomean gate, 3 required patterns
    assert bench.tests == 27 + 1 + 3
    assert [c.name for c in bench][:2] == ["AES-128-CBC-enc", "AES-128-CBC-dec"]


def test_benchmark_case_shows_value_baseline_change_limit_in_system_out(gated) -> None:
    runs, text = gated
    bench = read_junitparser(text)["bsdkm.userspace.aesni-avx.benchmark"]
    case = next(c for c in bench if c.name == "AES-128-GCM-enc")
    facts = case_output(case)
    gcm = next(b for b in runs[0].benchmarks if b.name == "AES-128-GCM-enc")
    # the benchmark log, not the self-test log, relative to the working directory; and its line
    assert facts["log"] == Path(os.path.relpath(runs[0].logs[0].source)).as_posix()
    assert facts["line"] == str(gcm.line)
    assert facts["value"] == f"{fmt_num(gcm.value)} MiB/s" and facts["cycles"].endswith("cycles/byte")
    assert facts["baseline"].endswith(" MiB/s") and facts["change"].endswith("%")
    assert "speedup 10x" in facts["limit"]
    assert "PASS speedup: AES-128-GCM-enc aesni-avx is " in case.system_out
    assert case.is_passed
    assert {c.classname for c in bench} == {"userspace/aesni-avx/benchmark"}


def test_schema_rules_the_old_output_broke(gated) -> None:
    _, text = gated
    validate(text)
    assert "disabled=" not in text and "<properties" not in text
    assert re.findall(r'time="([^"]*)"', text) and all(
        re.fullmatch(r"\d+\.\d{3}", t) for t in re.findall(r'time="([^"]*)"', text))
    root = ET.fromstring(text.encode())
    assert all(tc.get("file") is None for tc in root.iter("testcase"))  # not allowed there by the schema
    bench = next(s for s in root.iter("testsuite") if s.get("name") == "bsdkm.userspace.aesni-avx.benchmark")
    assert bench.get("file", "").endswith("noise/accel_r03.txt")


def test_the_schema_is_the_shared_copy_not_one_in_the_repository() -> None:
    """The xUnit plugin's schema is third-party data: read from the shared folder, never kept here."""
    import conftest
    import junit_readers

    assert junit_readers.SCHEMA_PATH == conftest.SHARED / "schemas" / "junit-10.xsd"
    assert junit_readers.SCHEMA_PATH.is_file()
    assert not (conftest.ROOT / "tests" / "schemas").exists()
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.xsd"], cwd=conftest.ROOT, capture_output=True, text=True,
                             check=True, timeout=60).stdout.split()
    assert tracked == []


def test_the_shared_schema_rejects_what_junit_xml_writes_by_itself() -> None:
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    plain = to_xml_report_string([TestSuite("s", [TestCase("c", elapsed_sec=119.72600000000007)])])
    with pytest.raises(JUnitInvalid, match="disabled"):
        validate(plain)


def test_enricomi_reads_the_counts_and_the_numbers(gated, tmp_path: Path) -> None:
    runs, text = gated
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    counts = enricomi_counts(path)
    n_bench = len(runs[0].benchmarks) + len(runs[1].benchmarks)
    assert counts.suites == 5 and counts.failures == 0 and counts.errors == 0
    assert counts.tests == sum(counts.cases.values()) == counts.cases["success"]
    assert counts.with_output >= n_bench  # every benchmark's numbers reach the reader


def test_same_report_loads_in_xunitparser(gated) -> None:
    _, text = gated
    cases, result = read_xunitparser(text)
    assert len(cases) == 2 * 31 + 89 + 2 + 1
    assert result.wasSuccessful() and not result.failures and not result.errors
    assert {c.classname for c in cases} == {f"userspace/{v}/{part}" for v in ("aesni-avx", "noasm")
                                            for part in ("benchmark", "selftest")}


def test_failed_selftest_regression_and_cut_off_log(tmp_path: Path) -> None:
    runs = [parsed("aesni-avx", "userspace", "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt",
                   "noise/accel_r01.txt"),
            parsed("noasm", "userspace", "userspace/noasm/bench_timeout3_KILL.txt")]
    # every AES-GCM item of accel_r01 is 0.9-4.7 % slower than in accel_r03
    baseline = [parsed("aesni-avx", "userspace", "noise/accel_r03.txt")]
    strict = parse_policy("regressions:\n  - {pattern: 'AES-*-GCM-*', max_pct: 0.5}\n", "strict.yml")
    verdict = evaluate(runs, strict, baseline)
    out = tmp_path / "junit.xml"
    write_junit(runs, verdict, out)
    text = out.read_text(encoding="utf-8")

    suites = read_junitparser(text)
    st = suites["bsdkm.userspace.aesni-avx.selftest"]
    assert st.failures == 1 and st.errors == 0
    (failed,) = [c for c in st if not c.is_passed]
    assert failed.name == "PWDBASED"
    assert failed.result[0].message == (
        "PWDBASED self-test failed: error L=34448 code=-125 (out of memory error)")
    cut = suites["bsdkm.userspace.noasm.selftest"]
    assert cut.errors == 1 and cut.tests == 1
    (err,) = list(cut)
    assert isinstance(err.result[0], junitparser.Error)
    assert err.result[0].message.endswith(
        "bench_timeout3_KILL.txt is incomplete: benchmark started at line 5 has no 'Benchmark complete' line "
        "(cut off?)")

    regressions = [c.name for c in verdict.regressions]
    bench = suites["bsdkm.userspace.aesni-avx.benchmark"]
    assert bench.failures == len(regressions) == 12
    failing = {c.name: c.result[0].message for c in bench if not c.is_passed}
    assert sorted(failing) == sorted(regressions)
    assert all("(limit 0.5%)" in m for m in failing.values())
    # the numbers in one fixed form at the end of every failure message
    numbers = re.compile(r"\[value [\d.]+ MiB/s, baseline [\d.]+ MiB/s, change -[\d.]+%, "
                         r"limit 0\.5% regression")
    assert all(numbers.search(m) for m in failing.values()), failing
    counts = enricomi_counts(out)
    assert (counts.failures, counts.errors) == (len(regressions) + 1, 1)
    assert counts.cases["failure"] == len(regressions) + 1 and counts.cases["error"] == 1

    cases, result = read_xunitparser(text)
    assert len(result.failures) == len(regressions) + 1 and len(result.errors) == 1


def test_xml_escapes_hostile_names() -> None:
    from buildbot_bsdkm.model import Benchmark, LogFormat, LogResult

    log = LogResult('<evil> & "quoted"', LogFormat.WOLFCRYPT_BENCH, complete=False,
                    incomplete_reason="ends in ]]> and <tags>",
                    benchmarks=[Benchmark("AES<&>", 1.0, "MiB/s", per_second=1048576.0)])
    runs = [RunResult("v&<", "t", logs=[log])]
    text = junit_xml(runs, evaluate(runs, parse_policy("")))
    suites = read_junitparser(text)
    (case,) = list(suites["bsdkm.t.v&<.selftest"])
    assert "ends in ]]> and <tags>" in case.result[0].message
    assert [c.name for c in suites["bsdkm.t.v&<.benchmark"]] == ["AES<&>"]
