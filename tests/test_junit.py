"""JUnit XML from real parsed logs, read back by two independent JUnit readers."""

from __future__ import annotations

import io
from pathlib import Path

import junitparser
import pytest
import xunitparser
from conftest import FIXTURES

from buildbot_bsdkm.junit import junit_xml, write_junit
from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, load_policy, parse_policy


def parsed(variant: str, target: str, *rel: str) -> RunResult:
    return RunResult(variant, target, logs=[parse_file(FIXTURES / r) for r in rel])


def read_junitparser(text: str) -> dict[str, junitparser.TestSuite]:
    xml = junitparser.JUnitXml.fromstring(text)
    return {s.name: s for s in xml}


def read_xunitparser(text: str):
    suite, result = xunitparser.parse(io.StringIO(text))
    return list(suite), result


def case_properties(case: junitparser.TestCase) -> dict[str, str]:
    return {p.name: p.value for props in case.iterchildren(junitparser.Properties) for p in props}


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
    assert sorted(suites) == ["bsdkm.userspace.aesni-avx.benchmark", "bsdkm.userspace.aesni-avx.selftest",
                              "bsdkm.userspace.noasm.benchmark", "bsdkm.userspace.noasm.selftest"]
    selftest = suites["bsdkm.userspace.aesni-avx.selftest"]
    n_tests = len(runs[0].tests)
    assert n_tests == 89
    # one case per self-test algorithm plus one "complete:<log>" case per log
    assert selftest.tests == n_tests + 2 and selftest.failures == 0 and selftest.errors == 0
    bench = suites["bsdkm.userspace.aesni-avx.benchmark"]
    # 27 items, the run-wide geomean gate, 3 required patterns
    assert bench.tests == 27 + 1 + 3
    assert [c.name for c in bench][:2] == ["AES-128-CBC-enc", "AES-128-CBC-dec"]


def test_benchmark_case_carries_value_baseline_delta_threshold(gated) -> None:
    _, text = gated
    bench = read_junitparser(text)["bsdkm.userspace.aesni-avx.benchmark"]
    case = next(c for c in bench if c.name == "AES-128-GCM-enc")
    props = case_properties(case)
    # accel_r03 vs accel_r01 (4937.746 MiB/s), default 15 % item limit, 10x speedup over noasm
    assert props["baseline"] == "4937.75" and props["threshold"] == "15" and props["unit"] == "MiB/s"
    assert props["metric"] == "per_second" and props["cycles_unit"] == "cycles/byte"
    assert float(props["delta_pct"]) == pytest.approx((float(props["value"]) / 4937.746 - 1) * 100, abs=0.01)
    assert props["speedup_threshold"] == "10" and float(props["speedup"]) > 25
    assert case.is_passed


def test_same_report_loads_in_xunitparser(gated) -> None:
    _, text = gated
    cases, result = read_xunitparser(text)
    assert len(cases) == 2 * 31 + 89 + 2 + 1
    assert result.wasSuccessful() and not result.failures and not result.errors
    assert {c.classname for c in cases} == {f"bsdkm.userspace.{v}.{part}" for v in ("aesni-avx", "noasm")
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
