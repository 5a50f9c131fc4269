"""`openssl speed` 3.0.19 output: text table, -mr, -multi, stderr progress, killed run."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import BenchKind, LogFormat, LogResult
from buildbot_bsdkm.parsers import parse_file

SIZES = [16, 64, 256, 1024, 8192, 16384]


def parse(name: str) -> LogResult:
    return parse_file(FIXTURES / "openssl" / name)


def by_name(log: LogResult) -> dict:
    return {b.name: b for b in log.benchmarks}


def test_text_table_in_thousands_of_bytes() -> None:
    log = parse("speed_evp_aes128cbc_elapsed.stdout.txt")
    assert log.format == LogFormat.OPENSSL_SPEED and log.complete
    assert [b.block_size for b in log.benchmarks] == SIZES
    first = by_name(log)["openssl:AES-128-CBC@16"]
    assert (first.value, first.unit, first.kind, first.algorithm) == (
        1141873.94,
        "KB/s",
        BenchKind.OPENSSL,
        "AES-128-CBC",
    )
    assert first.per_second == pytest.approx(1141873940.0)
    assert by_name(log)["openssl:AES-128-CBC@16384"].value == 1415905.28
    assert log.metadata["openssl_version"] == "3.0.19"
    assert log.metadata["openssl_cpuinfo"].startswith("OPENSSL_ia32cap=0xfffa3203078bffff")


def test_digest_and_rsa_tables() -> None:
    items = by_name(parse("speed_sha256_rsa2048.stdout.txt"))
    assert items["openssl:sha256@1024"].value == 1498007.55
    sign, verify = items["openssl:RSA 2048 sign"], items["openssl:RSA 2048 verify"]
    assert (sign.value, sign.unit, sign.kind) == (4096.0, "ops/s", BenchKind.ASYMMETRIC)
    assert verify.per_second == 60483.0 and verify.strength == "2048"


def test_machine_readable_mr() -> None:
    log = parse("speed_sha256_rsa2048_mr.stdout.txt")
    items = by_name(log)
    assert log.complete
    assert items["openssl:sha256@16"].per_second == 135490505.05 and items["openssl:sha256@16"].unit == "B/s"
    assert items["openssl:sha256@16384"].value == 1776730112.00
    assert items["openssl:RSA 2048 verify"].value == 61480.0


def test_multi_uses_the_summed_table_not_the_children() -> None:
    log = parse("speed_sha256_rsa2048_multi2.stdout.txt")
    items = by_name(log)
    assert log.complete and len(log.benchmarks) == 8
    assert items["openssl:sha256@16384"].value == 3558391.81
    assert items["openssl:sha256@16"].per_second == pytest.approx(256839620.0)
    assert items["openssl:RSA 2048 sign"].value == 8146.0


def test_merged_stdout_and_stderr_prefers_the_table() -> None:
    log = parse("speed_evp_aes128cbc_elapsed_MERGED.merged.txt")
    assert log.complete and len(log.benchmarks) == 6
    assert by_name(log)["openssl:AES-128-CBC@16"].value == 1127759.82
    multi = parse("speed_sha256_rsa2048_multi2_MERGED.merged.txt")
    assert multi.complete and len(multi.benchmarks) == 8


def test_single_block_size() -> None:
    log = parse("speed_evp_aes256gcm_bytes16.stdout.txt")
    assert [(b.name, b.value) for b in log.benchmarks] == [("openssl:AES-256-GCM@16", 44791.14)]


def test_software_only_run() -> None:
    items = by_name(parse("noaesni_speed_evp_aes256gcm.stdout.txt"))
    assert items["openssl:AES-256-GCM@16384"].value == 271319.04


def test_killed_run_is_incomplete() -> None:
    empty = parse("speed_timeout2_TERM.stdout.txt")
    assert not empty.complete and empty.incomplete_reason == "log is empty"
    err = parse("speed_timeout2_TERM.stderr.txt")
    assert err.format == LogFormat.OPENSSL_SPEED and not err.complete
    assert "cut off" in err.incomplete_reason and "64 size blocks" in err.incomplete_reason
    (done,) = err.benchmarks
    assert done.name == "openssl:AES-128-CBC@16"
    assert done.per_second == pytest.approx(71665113 * 16 / 0.99)


def test_stderr_progress_alone_gives_numbers_but_not_completeness() -> None:
    log = parse("speed_evp_aes128cbc_elapsed.stderr.txt")
    assert not log.complete and "no openssl speed results table" in log.incomplete_reason
    assert by_name(log)["openssl:AES-128-CBC@16"].per_second == pytest.approx(71367121 * 16 / 1.00)
    rsa = by_name(parse("speed_sha256_rsa2048.stderr.txt"))
    assert rsa["openssl:RSA 2048 sign"].value == 4096.0 and rsa["openssl:RSA 2048 verify"].value == 60483.0
