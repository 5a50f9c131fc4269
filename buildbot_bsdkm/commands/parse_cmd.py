"""``bsdkm-ci parse LOG...``: what the parsers make of logs, as JSON or a short summary.

Exit 0 when every log is complete with no failed self-test, no failed benchmark
item and no module failure event (load error, panic, ...), 1 otherwise, 2 when a
log cannot be read at all.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from ..model import LogFormat, LogResult, RunResult, to_json
from ..parsers import FAILURE_KINDS, ParseError, parse_file
from ..parsers.api import DEFAULT_MAX_BYTES, DEFAULT_MAX_SECONDS
from ..policy import kernel_health
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError

_FORMATS = [f.value for f in LogFormat if f != LogFormat.UNKNOWN]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse", help="parse wolfCrypt/kernel/openssl logs into results")
    p.add_argument("logs", nargs="+", metavar="LOG", help="log file(s) to parse")
    p.add_argument("--json", action="store_true", help="print the results document (model.to_json)")
    p.add_argument("--format", choices=_FORMATS, default=None, help="skip format detection")
    p.add_argument("--variant", default="unknown", help="variant name recorded in the JSON")
    p.add_argument("--target", default="unknown", help="target name recorded in the JSON")
    p.add_argument("--max-bytes", type=_positive(int), default=DEFAULT_MAX_BYTES,
                   help=f"refuse a log larger than this (default {DEFAULT_MAX_BYTES})")
    p.add_argument("--max-seconds", type=_positive(float), default=DEFAULT_MAX_SECONDS,
                   help=f"give up reading a log after this long (default {DEFAULT_MAX_SECONDS:g} s)")
    p.set_defaults(func=run)


def _positive(kind: type) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive finite number, not {text!r}")
        return value

    return convert


def run(args: argparse.Namespace) -> int:
    logs = parse_all(args.logs, args.format, max_bytes=args.max_bytes, max_seconds=args.max_seconds)
    run_result = RunResult(variant=args.variant, target=args.target, logs=logs)
    if args.json:
        print(to_json([run_result]))
    else:
        for log in logs:
            print(summarise(log))
    return exit_status(logs)


def parse_all(
    paths: Sequence[str],
    fmt: str | None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> list[LogResult]:
    try:
        return [parse_file(p, fmt, max_bytes=max_bytes, max_seconds=max_seconds) for p in paths]
    except ParseError as e:
        raise UsageError(str(e)) from None


def log_failed(log: LogResult) -> bool:
    return (
        not log.complete
        or bool(log.failed_tests)
        or log.selftest_summary is False
        or any(b.failed for b in log.benchmarks)
        or any(e.kind in FAILURE_KINDS for e in log.lifecycle)
        or kernel_health.log_fails(log)
    )


def exit_status(logs: Sequence[LogResult]) -> int:
    return EXIT_FAILED if any(log_failed(log) for log in logs) else EXIT_OK


def summarise(log: LogResult) -> str:
    """A few lines a human reads in a CI step log."""
    state = "complete" if log.complete else f"INCOMPLETE ({log.incomplete_reason})"
    lines = [f"{log.source}: {log.format.value}, {state}"]
    if log.benchmarks:
        failed = [b for b in log.benchmarks if b.failed]
        lines.append(
            f"  benchmarks: {len(log.benchmarks)} items, {len(failed)} failed"
            + (f" ({', '.join(b.name for b in failed[:5])})" if failed else "")
        )
    if log.tests or log.selftest_summary is not None:
        bad = log.failed_tests
        verdict = {True: "passed", False: "FAILED", None: "no summary"}[log.selftest_summary]
        lines.append(
            f"  self-test: {len(log.tests)} tests, {len(bad)} failed, {verdict}"
            + "".join(f"\n    {t.name}: {t.error or 'failed'}" for t in bad[:5])
        )
    if log.clock_quantised:
        lines.append(f"  clock: whole-second ({log.clock_resolution} s) benchmark clock; rates under-report")
    if "tsc_hz" in log.metadata:
        lines.append(f"  tsc: {log.metadata['tsc_hz'] / 1e9:.3f} GHz (median throughput x cycles/byte)")
    kinds = sorted({e.kind for e in log.lifecycle})
    if kinds:
        lines.append(f"  module: {', '.join(kinds)}")
    lines += [f"  kernel: {kernel_health.describe(k)} (lines {k.line}-{k.end_line})" for k in log.kernel[:5]]
    errors = [p for p in log.problems if p.severity == "error"]
    if log.problems:
        lines.append(
            f"  problems: {len(log.problems)} ({len(errors)} errors)"
            + (f"; first: {log.problems[0].message}" if log.problems else "")
        )
    return "\n".join(lines)
