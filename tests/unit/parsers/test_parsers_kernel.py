"""Linux (real QEMU console logs) and FreeBSD (constructed, tests/data/freebsd) kernel logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import BenchKind, LogFormat, LogResult
from buildbot_bsdkm.parsers import parse_file, parse_text

FREEBSD = Path(__file__).parents[2] / "data" / "freebsd"


def linux(name: str) -> LogResult:
    return parse_file(FIXTURES / "linuxkm" / f"{name}.console.log")


def freebsd(name: str) -> LogResult:
    return parse_file(FREEBSD / name)


def kinds(log: LogResult) -> list[str]:
    return [e.kind for e in log.lifecycle]


def event(log: LogResult, kind: str):  # noqa: ANN201 - a LifecycleEvent
    return next(e for e in log.lifecycle if e.kind == kind)


# -------------------------------------------------------------------- Linux
@pytest.mark.parametrize("name", ["asm-full-bench", "noasm-full-bench"])
def test_linux_full_benchmark(name: str) -> None:
    log = linux(name)
    assert log.format == LogFormat.LINUX_KERNEL_LOG
    assert log.complete and log.benchmark_complete and log.selftest_summary is True
    assert len(log.benchmarks) == 94 and not log.tests
    assert kinds(log) == ["taint", "signature_warning", "selftest_passed", "loaded", "cleanup_complete"]
    assert log.metadata["version"] == "5.9.2" and log.metadata["block_bytes"] == 1048576
    assert log.metadata["markers"][0] == "LKM-CI: uname: 6.1.0-57-amd64"
    assert 2.5e9 < log.metadata["tsc_hz"] < 2.7e9


def test_linux_benchmark_values_and_ecc_names() -> None:
    items = {b.name: b for b in linux("asm-full-bench").benchmarks}
    gcm = items["AES-128-GCM-enc"]
    assert (gcm.value, gcm.unit, gcm.cycles, gcm.seconds) == (43.930, "MiB/s", 56.36, 1.024)
    ecdsa = items["ECDSA [SECP256R1] 256 sign"]
    assert (ecdsa.value, ecdsa.cycles, ecdsa.kind) == (3958.239, 655847.10, BenchKind.ASYMMETRIC)
    assert ecdsa.algorithm == "ECDSA [SECP256R1]"
    assert "ECDHE [SECP256R1] 256 agree" in items


def test_linux_ecc_selftest_failure_is_found_once() -> None:
    log = linux("asm-verbose-short-eccfail")
    (failed,) = log.failed_tests
    assert (failed.name, failed.error, failed.code) == ("ECC", "error L=39795", None)
    assert log.complete and log.selftest_summary is False and not log.benchmarks
    assert event(log, "selftest_failed").detail == {"return_code": -39795, "source_line": 39795}
    assert event(log, "load_failed").detail == {"errno": 125}
    # The live console copy of the ERROR line and the dmesg copy give one event, not two.
    assert kinds(log).count("selftest_failed") == 1
    assert len(log.tests) == 45 and all(t.passed for t in log.tests[:-1])


def test_linux_hidden_retry_failure_is_visible_with_code_216() -> None:
    log = linux("asm-busybox-insmod-hidden-retry")
    (failed,) = log.failed_tests
    assert (failed.name, failed.code) == ("ECC", -216)
    assert failed.error == "error L=39294 code=-216 (ECC private key is not valid error)"
    assert event(log, "selftest_failed").detail["code"] == -216
    assert log.selftest_summary is False  # the second init passed, but the first one failed
    assert "selftest_passed" in kinds(log) and "loaded" in kinds(log)
    assert log.complete and log.benchmark_complete and len(log.benchmarks) == 94


def test_linux_verbose_pass() -> None:
    log = linux("asm-verbose-short-pass")
    assert log.complete and log.selftest_summary is True and len(log.tests) == 53
    assert log.metadata["block_bytes"] == 1024
    assert {t.name for t in log.tests} >= {"AES-GCM", "ECC", "RSA", "SHA-512/224"}


def test_linux_cut_off_mid_benchmark_is_incomplete() -> None:
    text = (FIXTURES / "linuxkm" / "asm-full-bench.console.log").read_text(errors="replace")
    cut = text[: text.index("RSA     2048  key gen")]
    log = parse_text(cut, "cut")
    assert not log.complete and "no 'Benchmark complete'" in log.incomplete_reason


def test_linux_panic_and_oops_lines() -> None:
    text = (
        "[    1.0] wolfCrypt self-test passed.\n"
        "[    2.0] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
        "[    2.1] Oops: 0000 [#1] PREEMPT SMP NOPTI\n"
        "[    2.2] Kernel panic - not syncing: Fatal exception\n"
    )
    log = parse_text(text, "panic")
    # BUG:/Oops: are kernel-trouble records now (one splat: the Oops continues the BUG)
    assert kinds(log) == ["selftest_passed", "panic"]
    assert [e.line for e in log.lifecycle] == [1, 4]
    assert [(k.kind, k.line, k.end_line) for k in log.kernel] == [("bug", 2, 3), ("panic", 4, 4)]


# ------------------------------------------------------------------ FreeBSD
def test_freebsd_load_benchmark_unload_with_whole_second_clock() -> None:
    log = freebsd("load-bench-unload.log")
    assert log.format == LogFormat.FREEBSD_KERNEL_LOG
    assert log.complete and log.benchmark_complete and log.selftest_summary is True
    assert log.clock_resolution == 1.0 and log.clock_quantised
    assert all(b.seconds == round(b.seconds) for b in log.benchmarks)
    first = log.benchmarks[0]
    assert (first.name, first.seconds, first.value, first.cycles) == ("AES-128-CBC-enc", 2.0, 665.0, 1.87)
    assert 2.5e9 < log.metadata["tsc_hz"] < 2.7e9  # cycles stay right when the clock is coarse
    fpu = [e.detail for e in log.lifecycle if e.kind == "fpu_state"]
    assert fpu == [{"cpu": 0, "nest": 0, "tid": 0}, {"cpu": 1, "nest": 0, "tid": 0}]
    assert kinds(log)[-1] == "unloaded" and "benchmark_passed" in kinds(log) and "loaded" in kinds(log)


def test_freebsd_selftest_failure_decodes_the_encoded_value() -> None:
    log = freebsd("selftest-failure.log")
    (failed,) = log.failed_tests
    assert (failed.name, failed.code) == ("ECC", -216)
    assert event(log, "selftest_failed").detail == {
        "return_code": -558510206,
        "source_line": 39294,
        "code": -216,
    }
    assert event(log, "module_register_error").detail == {"error": 85}
    assert "kldload_error" in kinds(log) and "cleanup_failed" in kinds(log)
    assert log.complete and log.selftest_summary is False


def test_freebsd_fips_hash_mismatch_gives_the_hash() -> None:
    log = freebsd("fips-hash-mismatch.log")
    assert event(log, "fips_hash_mismatch").detail == {
        "hash": "3B144A08F291DBA536324646BBD127447B8F222D29A135780E330351E0DF9F0F"
    }
    assert kinds(log).count("fips_error") == 3
    assert event(log, "module_register_error").detail == {"error": 85}


def test_freebsd_crypto_register_mode() -> None:
    log = freebsd("crypto-register.log")
    assert event(log, "crid_registered").detail == {"crid": 3}
    assert event(log, "crid_unregistered").detail == {"crid": 3}
    assert "detached" in kinds(log) and log.complete


def test_freebsd_panic_mid_benchmark() -> None:
    log = freebsd("panic-mid-benchmark.log")
    assert not log.complete and "no 'Benchmark complete'" in log.incomplete_reason
    assert "panic" in kinds(log)
    fpu_errors = [e for e in log.lifecycle if e.kind == "fpu_error"]
    assert fpu_errors[0].message.startswith("ERROR: SAVE_VECTOR_REGISTERS failed")
    assert fpu_errors[1].detail == {"cpu": 1, "nest": 2, "tid": 100123}  # glued onto the same line


def test_freebsd_other_catalogue_lines() -> None:
    text = "\n".join(
        [
            "error: wolfkmod_vecreg_init: mp_ncpus = 0",
            "error: wc_SetSeed_Cb failed: -199",
            "error: wolfCrypt_Init failed: Bad function argument",
            "libwolf0: error: attach_out: 6",
            "libwolf0: error: attach: got crid 4, expected 3",
            "error: wolfcrypt benchmark failed: -173",
            "error: test_aes: enc vectors diff: 16",
            "info: libwolfssl 5.9.2 cleanup complete.",
        ]
    )
    log = parse_text(text, "catalogue")
    assert kinds(log) == [
        "fpu_error",
        "rng_error",
        "init_error",
        "load_failed",
        "init_error",
        "benchmark_failed",
        "module_error",
        "cleanup_complete",
    ]
    assert log.lifecycle[1].detail == {"error": -199}
    assert log.lifecycle[4].detail == {"crid": 4, "expected": 3}
    assert log.lifecycle[7].detail == {"module": "libwolfssl", "version": "5.9.2"}


def test_kernel_log_without_a_selftest_verdict_is_incomplete() -> None:
    """The module loaded (taint line) but init never printed its verdict: a hang, not a pass."""
    text = (FIXTURES / "linuxkm" / "asm-full-bench.console.log").read_text(errors="replace")
    hung = text[: text.index("wolfCrypt self-test passed.")]
    log = parse_text(hung, "hung")
    assert not log.complete and "no self-test verdict" in log.incomplete_reason
    bsd = parse_text("info: wolfkmod_event: MOD_LOAD\n", "bsd-hung", LogFormat.FREEBSD_KERNEL_LOG)
    assert not bsd.complete
