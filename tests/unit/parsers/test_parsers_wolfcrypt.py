"""wolfCrypt benchmark (text, CSV, machine-parseable, NO_FLOAT_FMT, Japanese) and self-test
parsing, checked against exact numbers in the real fixtures."""

from __future__ import annotations

import math

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import BenchKind, LogFormat, LogResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.parsers.wolfcrypt import decode_test_error

MiB = 1024.0**2
KiB = 1024.0


def parse(rel: str) -> LogResult:
    return parse_file(FIXTURES / rel)


def by_name(log: LogResult) -> dict:
    return {b.name: b for b in log.benchmarks}


# ---------------------------------------------------------------- text output
def test_accel_default_symmetric_and_asymmetric_items() -> None:
    log = parse("userspace/accel/bench_default.txt")
    items = by_name(log)
    assert log.format == LogFormat.WOLFCRYPT_BENCH
    assert log.complete and log.benchmark_complete and log.incomplete_reason is None
    assert len(log.benchmarks) == 119
    gcm = items["AES-128-GCM-enc"]
    assert (gcm.value, gcm.unit, gcm.cycles, gcm.seconds) == (4092.779, "MiB/s", 0.60, 1.001)
    assert gcm.kind == BenchKind.SYMMETRIC and gcm.amount == 4095 * MiB and gcm.block_size == 1048576
    assert gcm.per_second == pytest.approx(4092.779 * MiB)
    rsa = items["RSA 2048 private"]
    assert (rsa.value, rsa.unit, rsa.kind, rsa.cycles) == (1339.072, "ops/s", BenchKind.ASYMMETRIC, 1938766.6)
    assert (rsa.algorithm, rsa.strength, rsa.operation, rsa.amount, rsa.seconds) == (
        "RSA",
        "2048",
        "private",
        1400,
        1.046,
    )
    pbkdf2 = items["PBKDF2"]
    assert (pbkdf2.value, pbkdf2.unit, pbkdf2.cycles) == (210.060, "KiB/s", 12069.31)
    assert pbkdf2.per_second == pytest.approx(210.060 * KiB)


def test_asymmetric_names_with_spaces_digits_and_empty_operation() -> None:
    items = by_name(parse("userspace/accel/bench_default.txt"))
    assert items["scrypt 17"].operation == "" and items["scrypt 17"].value == 19.329
    mlkem = items["ML-KEM 512 128 key gen"]
    assert (mlkem.algorithm, mlkem.strength, mlkem.operation, mlkem.value) == (
        "ML-KEM 512",
        "128",
        "key gen",
        231307.660,
    )
    assert items["ML-KEM 1024 256 decap"].cycles == 56703.2
    rng = items["RNG 256 SHA256 Init/Free"]
    assert (rng.operation, rng.value, rng.cycles) == ("SHA256 Init/Free", 146681.956, 17699.1)
    assert items["KDF 128 SRTCP"].value == 6124304.970
    assert items["GMAC Table 4-bit"].value == 2047.954


def test_header_banner_and_math_metadata() -> None:
    log = parse("userspace/accel/bench_default.txt")
    assert log.metadata["version"] == "5.9.2"
    assert log.metadata["block_bytes"] == 1048576 and log.metadata["min_seconds"] == 1.0
    assert log.metadata["math"].splitlines() == [
        "Multi-Precision: Wolf(SP) word-size=64 bits=4096 sp_int.c",
        "Single Precision: rsa/dh 2048 3072 4096 asm sp_x86_64.c",
        "Assembly Speedups: INTELASM ALIGN X86_64_BUILD",
    ]


def test_tsc_rate_is_the_median_of_throughput_times_cycles() -> None:
    log = parse("userspace/accel/bench_default.txt")
    # log-formats §9: 2.6 GHz on this machine for every healthy item.
    assert 2.55e9 < log.metadata["tsc_hz"] < 2.65e9
    assert log.clock_resolution is None and not log.clock_quantised


def test_userspace_run_stopping_at_exactly_one_second_is_not_a_quantised_clock() -> None:
    log = parse("userspace/accel/bench_blocksize4096_blocks10.txt")
    assert all(b.seconds == 1.0 for b in log.benchmarks)  # the trap: every item printed 1.000
    assert log.clock_resolution is None


def test_noasm_default() -> None:
    items = by_name(parse("userspace/noasm/bench_default.txt"))
    assert items["AES-128-CBC-enc"].value == 276.613 and items["AES-128-CBC-enc"].cycles == 8.95
    assert items["RSA 2048 private"].value == 325.407


def test_static_build_cpu_line() -> None:
    log = parse("userspace/x_static/bench_subset.txt")
    assert log.metadata["cpu"].startswith("Intel x86_64 - ")
    assert log.complete


def test_base10_units() -> None:
    items = by_name(parse("userspace/accel/bench_base10.txt"))
    units = {b.unit for b in items.values() if b.kind == BenchKind.SYMMETRIC}
    assert units <= {"MB/s", "KB/s", "bytes/s"} and "MB/s" in units
    b = next(x for x in items.values() if x.unit == "MB/s")
    assert b.per_second == pytest.approx(b.value * 1e6)


def test_failed_items_keep_their_error_and_the_run_is_complete() -> None:
    log = parse("userspace/accel/bench_aad_size64.txt")
    failed = [b for b in log.benchmarks if b.failed]
    assert [b.name for b in failed] == [
        f"AES-{k}-GCM-{s}dec-custom" for s in ("", "STREAM-") for k in (128, 192, 256)
    ]
    assert all(b.value == 0.0 and b.unit == "bytes/s" for b in failed)
    assert failed[0].error == "Benchmark AES-128-GCM-dec-custom failed: -180"
    assert log.complete and log.benchmark_complete
    assert by_name(log)["AES-192-GCM-enc-custom"].value == 4864.209
    # "bench_aesgcm failed: -180" is kept as a warning, not lost.
    assert sum("bench_aesgcm failed: -180" in p.message for p in log.problems) == 6


def test_machine_parseable_prefixes_and_cycle_totals() -> None:
    log = parse("userspace/x_machineparse/bench_subset.txt")
    items = by_name(log)
    assert log.complete and log.metadata["version"] == "5.9.2" and log.metadata["block_bytes"] == 1048576
    assert (items["AES-128-CBC-enc"].value, items["AES-128-CBC-enc"].cycles) == (1323.657, 1.87)
    fail = parse("userspace/x_machineparse/bench_aad_size64_fail.txt")
    assert sum(b.failed for b in fail.benchmarks) == 6 and fail.complete


def test_nofloatfmt_amounts_with_a_decimal() -> None:
    items = by_name(parse("userspace/x_nofloatfmt/bench_subset.txt"))
    cbc = items["AES-128-CBC-enc"]
    assert (cbc.value, cbc.amount, cbc.cycles) == (1326.936, 1330.0 * MiB, 1.87)
    rsa = items["RSA 2048 private"]
    assert (rsa.value, rsa.cycles) == (1999.691, 1298271.1)
    assert items["PBKDF2"].unit == "KiB/s" and items["PBKDF2"].value == 215.170


def test_japanese_labels_give_the_english_identity() -> None:
    log = parse("userspace/accel/bench_lng1_japanese.txt")
    items = by_name(log)
    assert len(log.benchmarks) == 16 and log.complete
    assert (items["AES-128-CBC-enc"].value, items["AES-128-CBC-enc"].cycles) == (1323.021, 1.87)
    assert items["RSA 2048 private"].value == 2043.472
    assert items["RSA 2048 public"].value == 66412.691
    assert items["DH 2048 agree"].value == 3992.641 and items["DH 2048 key gen"].value == 3994.858
    assert items["RNG 256 SHA256 Init/Free"].cycles == 11472.1


@pytest.mark.parametrize("variant", ["accel", "noasm", "aesniavx"])
@pytest.mark.parametrize(
    "name", ["bench_timeout3_TERM.txt", "bench_timeout3_KILL.txt", "bench_timeout3_TERM_csv.txt"]
)
def test_killed_benchmarks_are_incomplete(variant: str, name: str) -> None:
    log = parse(f"userspace/{variant}/{name}")
    assert not log.complete and not log.benchmark_complete
    assert "no 'Benchmark complete'" in log.incomplete_reason
    assert [b.name for b in log.benchmarks] == ["RNG SHA-256 DRBG", "RNG SHA-512 DRBG"]


@pytest.mark.parametrize(
    "name", ["bench_help_h.txt", "bench_help_q.txt", "bench_ffhdhe2048_helpspelling.txt"]
)
def test_usage_text_is_not_a_result(name: str) -> None:
    log = parse(f"userspace/accel/{name}")
    assert not log.complete and not log.benchmarks
    assert "no wolfCrypt benchmark" in log.incomplete_reason


# ---------------------------------------------------------------------- CSV
def test_csv_unit_trap_is_resolved_per_row_from_the_cycle_counter() -> None:
    log = parse("userspace/accel/bench_csv.txt")
    items = by_name(log)
    assert log.format == LogFormat.WOLFCRYPT_BENCH_CSV and log.complete and len(log.benchmarks) == 119
    gcm = items["AES-128-GCM-enc"]
    assert (gcm.value, gcm.cycles, gcm.unit) == (4910.974557, 0.504147, "MiB/s")
    assert gcm.per_second == pytest.approx(4910.974557 * MiB)
    pbkdf2 = items["PBKDF2"]  # the row the header lies about
    assert (pbkdf2.value, pbkdf2.unit) == (214.627850, "KiB/s")
    assert pbkdf2.per_second == pytest.approx(214.627850 * KiB)
    assert any("CSV rows carry no unit" in p.message and p.severity == "warning" for p in log.problems)


def test_csv_asymmetric_rows_trailing_space_and_empty_operation() -> None:
    items = by_name(parse("userspace/accel/bench_csv.txt"))
    mlkem = items["ML-KEM 512 128 key gen"]
    assert (mlkem.value, mlkem.algorithm, mlkem.cycles) == (278388.318, "ML-KEM 512", None)
    assert items["scrypt 17"].value == 20.490 and items["scrypt 17"].operation == ""
    assert items["RSA 2048 private"].value == 1952.548
    assert items["RNG 512 SHA512 Init/Free"].value == 156635.656


def test_csv_row_glued_to_the_intro_line() -> None:
    log = parse("userspace/accel/bench_csv_rng_init_only.txt")
    assert [(b.name, b.value) for b in log.benchmarks] == [("RNG 256 SHA256 Init/Free", 229472.179)]
    assert log.complete


def test_csv_nofloatfmt_comma_decimal_is_rejoined() -> None:
    log = parse("userspace/x_nofloatfmt/bench_subset_csv.txt")
    items = by_name(log)
    cbc = items["AES-128-CBC-enc"]
    assert math.isclose(cbc.value, 1320.000788563) and cbc.cycles == 1.875642 and cbc.unit == "MiB/s"
    assert items["PBKDF2"].unit == "KiB/s" and math.isclose(items["PBKDF2"].value, 212.846125258)
    assert items["RSA 2048 private"].value == 2028.760
    assert log.complete and len(log.benchmarks) == 33


def test_machine_parseable_csv_has_exact_rates() -> None:
    items = by_name(parse("userspace/x_machineparse/bench_subset_csv.txt"))
    cbc = items["AES-128-CBC-enc"]
    assert (cbc.amount, cbc.seconds, cbc.value, cbc.unit) == (1389363200, 1.003639, 1320.195830, "MiB/s")
    assert cbc.per_second == pytest.approx(1389363200 / 1.003639)
    pbkdf2 = items["PBKDF2"]
    assert pbkdf2.unit == "KiB/s" and pbkdf2.per_second == pytest.approx(219040 / 1.000021)
    rsa = items["RSA 2048 private"]
    assert (rsa.value, rsa.amount, rsa.seconds, rsa.cycles) == (2031.207, 2100, 1.033868, 1278124.800952)
    assert items["RNG 256 SHA256 Init/Free"].value == 223525.360


# ---------------------------------------------------------------- self-test
@pytest.mark.parametrize("variant", ["accel", "noasm", "aesniavx", "x_static"])
def test_selftest_pass(variant: str) -> None:
    log = parse(f"userspace/{variant}/testwolfcrypt.txt")
    assert log.format == LogFormat.WOLFCRYPT_TEST
    assert log.complete and log.selftest_summary is True and log.metadata["return_code"] == 0
    assert len(log.tests) >= 89 and not log.failed_tests
    names = [t.name for t in log.tests]
    assert "SHA-512/224" in names and "crypto callback" in names and "ChaCha20-Poly1305 AEAD" in names


def test_selftest_failure_pwdbased() -> None:
    log = parse("userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    assert log.complete and log.selftest_summary is False and log.metadata["return_code"] == -1
    (failed,) = log.failed_tests
    assert (failed.name, failed.code) == ("PWDBASED", -125)
    assert failed.error == "error L=34448 code=-125 (out of memory error)"
    assert len(log.tests) == 71


def test_killed_selftest_is_incomplete_not_a_pass() -> None:
    log = parse("userspace/accel/testwolfcrypt_timeout0.2_TERM.txt")
    assert not log.complete and log.selftest_summary is None
    assert "no end marker" in log.incomplete_reason
    assert len(log.tests) == 67 and log.tests[-1].name == "RSA"


def test_encoded_error_value_decodes() -> None:
    pwd = decode_test_error(-549405360)  # log-formats §4's worked example
    assert (pwd.source_line, pwd.code) == (34448, -125)
    ecc = decode_test_error(-558510206)
    assert (ecc.source_line, ecc.code, ecc.errno) == (39294, -216, None)
    bare = decode_test_error(-39795)
    assert (bare.source_line, bare.code) == (39795, None)
    errno = decode_test_error(-(12 + 5 * 100000 + (2 << 29)))
    assert (errno.source_line, errno.errno, errno.code) == (12, 5, None)
