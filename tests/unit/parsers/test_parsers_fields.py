"""What a failure is made of is in the records' fields, read once from the log by the parser: the
line it comes from, wolfcrypt_test's return code, a benchmark item's error code."""

from __future__ import annotations

import json

from conftest import SHARED

from buildbot_bsdkm.model import RunResult, from_json, to_json
from buildbot_bsdkm.parsers import parse_text

PLANTED = SHARED / "freebsd" / "logs" / "planted_debug-kernel_noasm_sha256-kat-selftest-fail.log"


def test_a_failure_only_the_return_code_tells_of_keeps_the_code_and_its_line() -> None:
    log = parse_text(PLANTED.read_text(errors="replace"), "console-debug.log")
    (test,) = log.failed_tests
    assert test.name == "wolfcrypt_test"
    assert test.return_code == -1610718631
    assert test.console == "error: wolfcrypt test failed: -1610718631"


def test_a_named_failure_keeps_its_line_and_a_failed_item_its_code() -> None:
    log = parse_text("AES-GCM  test failed!\n error L=7420 code=-216\nTest complete\n", "test.log")
    (test,) = log.failed_tests
    assert (test.console, test.code, test.return_code) == ("AES-GCM  test failed!", -216, None)
    bench = parse_text("wolfCrypt Benchmark (block bytes 1048576, min 1.0 sec each)\n"
                       "RSA     2048  sign       100 ops took 1.000 sec, avg 10.000 ms, 100.000 ops/sec\n"
                       "Benchmark RSA 2048 sign failed: -180\n"
                       "Benchmark ECDHE 256 agree failed: -125\nBenchmark complete\n", "bench.log")
    assert [(b.name, b.code) for b in bench.benchmarks] == [("RSA 2048 sign", -180),
                                                            ("ECDHE 256 agree", -125)]


def test_documents_carry_the_fields_only_where_they_are_set() -> None:
    log = parse_text("SHA-256 test passed!\nAES-GCM  test failed!\n error L=7420 code=-216\n"
                     "Exiting main with return code: -558510206\n", "test.log")
    text = to_json([RunResult("asm", "userspace", logs=[log])])
    passed, failed = json.loads(text)["runs"][0]["logs"][0]["tests"]
    assert not {"console", "return_code", "decoded"} & set(passed)  # as in documents before the fields
    assert failed["console"] == "AES-GCM  test failed!" and "decoded" not in failed
    assert from_json(text)[0].logs[0].tests == log.tests
