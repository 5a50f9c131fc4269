"""Every log format bsdkm-ci reads, each registered once with its parser and the lines that show it.

Another format is one module (its ``LogFormat.define`` and a ``registry.LineParser``) and one
``register`` line; the engine, ``detect_format``, the gates and the reports then know it.
"""

from __future__ import annotations

from functools import partial

from ..model import LogFormat
from . import afalg_bench
from .openssl import OpenSSLParser
from .registry import (
    Ending,
    LineParser,
    Registration,
    carries_wolfcrypt_benchmark,
    register,
    registration,
    registrations,
    unregister,
)
from .text import _KERNEL_TS
from .wolfcrypt_reader import WolfCryptReader
from .wolfcsv import CSV_INTRO

__all__ = ["Ending", "LineParser", "Registration", "carries_wolfcrypt_benchmark", "register", "registration",
           "registrations", "unregister"]

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


def _openssl(line: str) -> bool:
    return line.startswith(_OPENSSL_STARTS) or (line.startswith("version: ") and "." in line)


def _linux(line: str) -> bool:
    return "### LKM-CI:" in line or _KERNEL_TS.match(line) is not None or "SeaBIOS" in line


def _freebsd(line: str) -> bool:
    return line.startswith(_FREEBSD_STARTS) or "wolfkmod" in line


def _csv(line: str) -> bool:
    return line.startswith(_CSV_STARTS) or CSV_INTRO in line


def _bench(line: str) -> bool:
    return "wolfCrypt Benchmark (" in line or "Benchmark complete" in line or " Cycles per byte" in line


def _test(line: str) -> bool:
    return any(mark in line for mark in _TEST_MARKS)


def _wolfcrypt(fmt: LogFormat, **options: bool) -> partial[WolfCryptReader]:
    return partial(WolfCryptReader, fmt, **options)


register(LogFormat.AFALG_BENCH, afalg_bench.AfalgParser,
         shows=lambda line: line.startswith(afalg_bench.STARTS), rank=10)
register(LogFormat.OPENSSL_SPEED, OpenSSLParser, shows=_openssl, rank=20,
         yields_to=(LogFormat.WOLFCRYPT_BENCH, LogFormat.WOLFCRYPT_TEST))
register(LogFormat.FREEBSD_KERNEL_LOG, _wolfcrypt(LogFormat.FREEBSD_KERNEL_LOG, whole_second_clock=True),
         shows=_freebsd, rank=30, wolfcrypt_benchmark=True)
register(LogFormat.LINUX_KERNEL_LOG, _wolfcrypt(LogFormat.LINUX_KERNEL_LOG), shows=_linux, rank=40,
         wolfcrypt_benchmark=True)
register(LogFormat.WOLFCRYPT_BENCH_CSV, _wolfcrypt(LogFormat.WOLFCRYPT_BENCH_CSV), shows=_csv, rank=50,
         wolfcrypt_benchmark=True)
register(LogFormat.WOLFCRYPT_BENCH, _wolfcrypt(LogFormat.WOLFCRYPT_BENCH), shows=_bench, rank=60,
         wolfcrypt_benchmark=True)
register(LogFormat.WOLFCRYPT_TEST, _wolfcrypt(LogFormat.WOLFCRYPT_TEST), shows=_test, rank=70)
# What nothing showed: read for wolfCrypt's lines and, as a kernel's log may be, for kernel trouble.
register(LogFormat.UNKNOWN, _wolfcrypt(LogFormat.UNKNOWN))
