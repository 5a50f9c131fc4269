"""Which program printed a log, from its first lines."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import LogFormat
from .afalg import STARTS as AFALG_STARTS
from .text import _KERNEL_TS, strip_escapes
from .wolfcsv import CSV_INTRO

DETECT_LINES = 400

_OPENSSL_STARTS = (
    "Doing ",
    "+H:",
    "+DT:",
    "+F:",
    "+DTP:",
    "Forked child",
    "The 'numbers' are",
    "You have chosen to measure elapsed",
    "Got: +",
)
_FREEBSD_STARTS = ("libwolf", "info: ", "error: ", "module_register_init", "kldload:", "KLD ")
_CSV_STARTS = ("Algorithm,MB/s", "Algorithm,HW/SW", '"sym",Algorithm', CSV_INTRO)
_TEST_MARKS = ("test passed!", "test failed!", "Test complete", "Exiting main with return code")


def detect_format(first_lines: Iterable[str]) -> LogFormat:
    """Best guess from (up to DETECT_LINES of) the first lines; UNKNOWN if nothing fits."""
    seen: set[LogFormat] = set()
    for i, raw in enumerate(first_lines):
        if i >= DETECT_LINES:
            break
        line = strip_escapes(raw).rstrip("\r\n")
        _classify(line, seen)
    for fmt in (
        LogFormat.AFALG_BENCH,
        LogFormat.OPENSSL_SPEED,
        LogFormat.FREEBSD_KERNEL_LOG,
        LogFormat.LINUX_KERNEL_LOG,
        LogFormat.WOLFCRYPT_BENCH_CSV,
        LogFormat.WOLFCRYPT_BENCH,
        LogFormat.WOLFCRYPT_TEST,
    ):
        if fmt in seen:
            if fmt == LogFormat.OPENSSL_SPEED and seen & {
                LogFormat.WOLFCRYPT_BENCH,
                LogFormat.WOLFCRYPT_TEST,
            }:
                continue  # a wolfCrypt log that happens to contain "Doing ..." text
            return fmt
    return LogFormat.UNKNOWN


def _classify(line: str, seen: set[LogFormat]) -> None:
    if line.startswith(AFALG_STARTS):
        seen.add(LogFormat.AFALG_BENCH)
    if line.startswith(_OPENSSL_STARTS) or (line.startswith("version: ") and "." in line):
        seen.add(LogFormat.OPENSSL_SPEED)
    if "### LKM-CI:" in line or _KERNEL_TS.match(line) or "SeaBIOS" in line:
        seen.add(LogFormat.LINUX_KERNEL_LOG)
    if line.startswith(_FREEBSD_STARTS) or "wolfkmod" in line:
        seen.add(LogFormat.FREEBSD_KERNEL_LOG)
    if line.startswith(_CSV_STARTS) or CSV_INTRO in line:
        seen.add(LogFormat.WOLFCRYPT_BENCH_CSV)
    if "wolfCrypt Benchmark (" in line or "Benchmark complete" in line or " Cycles per byte" in line:
        seen.add(LogFormat.WOLFCRYPT_BENCH)
    if any(mark in line for mark in _TEST_MARKS):
        seen.add(LogFormat.WOLFCRYPT_TEST)
