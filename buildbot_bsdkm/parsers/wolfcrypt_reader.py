"""The wolfCrypt reader: the benchmark, self-test and module-lifecycle lines of a log, as records.

The parser of the wolfCrypt formats (benchmark text and CSV, the self-test, the module's Linux and
FreeBSD kernel logs; ``formats.py``). It tracks what needs more than one line: which benchmark item
a later "Benchmark X failed" belongs to, which failed test an " error L=" line explains, the Math
banner's continuation lines, CSV tables, and the sections that make a log complete (every started
benchmark printed "Benchmark complete", every started self-test reached its end marker).
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from ..model import BenchKind, Benchmark, LifecycleEvent, LogFormat, Problem, SelfTest
from .lifecycle import SAVE_VECTOR_FAILED, match_lifecycle, unmatched_bsd_error
from .records import Record
from .registry import Ending
from .text import fold_spaces
from .wolfcrypt import (
    BENCH_HEADER,
    BENCH_ITEM_FAILED,
    RETURN_CODE,
    TEST_ERROR,
    VERSION,
    EncodedError,
    apply_test_error,
    decode_test_error,
    is_free_form_error,
    may_be_free_form_error,
    parse_asymmetric,
    parse_symmetric,
    parse_test_result,
    unnamed_note,
)
from .wolfcsv import CSV_INTRO, CsvTable

MAX_PROBLEMS = 200  # beyond this, the reader's complaints are counted, not itemised
MAX_TSC_SAMPLES = 4096
MAX_UNCLOSED = 5  # reasons kept for a log that is cut off again and again
MIN_ITEMS_FOR_CLOCK = 5
TSC_TOLERANCE = 0.10  # log-formats §9: healthy items sit within 10 % of the run's median
_MAX_BENCH_LINE = 1024  # real result lines are < 250 chars; longer ones skip the regexes

# A line may be a lifecycle fact only if it holds one of these words or starts with
# "error: "/"info: " (kept out of the regex: an anchored branch stops it skipping ahead in C).
_LIFECYCLE_WORDS = re.compile(
    r"wolf|kldload|module|panic|Oops|BUG|lockup|fault|Fatal trap|fpu_states|FIPS|WARNING|In-core|detached"
    r"|insmod"
).search
_LIFECYCLE_STARTS = ("error: ", "info: ")
_SELFTEST_PASSED = re.compile(r"^(?:info: )?wolfCrypt self-test passed")
_SELFTEST_FAILED = re.compile(
    r"^(?:ERROR|error): wolfcrypt (?:self-)?test failed(?: with return code|:) (?P<value>-?\d+)"
)
_SYMMETRIC = BenchKind.SYMMETRIC
# Lifecycle events that show the module's init ran to an end (or that the log is an unload log).
_LOAD_OUTCOMES = frozenset(
    {
        "loaded",
        "load_failed",
        "module_register_error",
        "kldload_error",
        "crid_registered",
        "fips_hash_mismatch",
        "init_error",
        "unloaded",
        "cleanup_complete",
        "crid_unregistered",
        "panic",
    }
)
_CSV_HEADER_START = ("Algorithm,", '"sym",', '"asym",')
_CSV_STARTS = (CSV_INTRO, *_CSV_HEADER_START)
# Every line _marker_line acts on holds one of these (one C-level search skips the rest).
_MARKER_HINT = re.compile(
    r"Benchmark |error L=|Math:|Test complete|Exiting main with return code|wolfSSL version|CPU:"
    r"|\[fiducial line numbers:|self-test passed|test failed"
).search


class WolfCryptReader:
    """``registry.LineParser`` for the wolfCrypt formats; ``whole_second_clock``: the benchmark's
    clock ticks in whole seconds wherever it prints (the FreeBSD module, log-formats §5/§9)."""

    def __init__(self, fmt: LogFormat, *, whole_second_clock: bool = False) -> None:
        self.format = fmt
        self.whole_second_clock = whole_second_clock
        self.recognised = 0
        self.problem_count = 0
        self.metadata: dict[str, Any] = {}
        self.block_size: int | None = None
        self.csv = CsvTable()
        self.csv_active = False
        self.math_open = False
        self.pending_bench: Benchmark | None = None
        self.pending_test: SelfTest | None = None
        self.bench_open: int | None = None
        self.test_open: int | None = None
        self.test_failed_in_section = False
        self.sections_started = 0
        self.benchmarks_completed = 0
        self.unclosed: list[str] = []
        self.unclosed_count = 0
        self.selftest_ok = False
        self.selftest_failed = False
        self.lifecycle_events = 0
        self.load_outcome = False
        self.integral_durations = 0
        self.fractional_durations = 0
        self.tsc_samples: list[float] = []
        self.failed_tests_emitted = 0
        self.unnamed_failure: SelfTest | None = None

    def feed(self, line: str, n: int, out: list[Record]) -> None:
        self._dispatch(line, n, out)

    def _dispatch(self, line: str, n: int, out: list[Record]) -> None:
        if self.math_open:
            if line.startswith("\t"):
                self._math(line.strip())
                return
            self.math_open = False
        if (self.csv_active or line.startswith(_CSV_STARTS)) and self._csv(line, n, out):
            return
        if len(line) <= _MAX_BENCH_LINE:  # inlined _bench_line: most lines of a benchmark log
            if "ops/sec" in line or "処理/秒" in line:
                bench = parse_asymmetric(line, n)
            elif "B/s" in line or "bytes/s" in line:
                bench = parse_symmetric(line, n, self.block_size)
            else:
                bench = None
            if bench is not None:
                self._bench(bench, n, out)
                return
        if "ed!" in line:
            stripped = line.rstrip()
            if stripped.endswith(("passed!", "failed!")):
                test = parse_test_result(stripped, n)
                if test is not None:
                    if not test.passed:
                        test.console = stripped
                    self._test(test, out)
                    return
        if _MARKER_HINT(line) and self._marker_line(line, n, out):
            return
        if SAVE_VECTOR_FAILED in line:
            self._lifecycle(LifecycleEvent("fpu_error", SAVE_VECTOR_FAILED, {}, n), out)
            rest = line.split(SAVE_VECTOR_FAILED, 1)[1]
            if rest.strip():
                self._dispatch(rest, n, out)
            return
        if line.startswith(_LIFECYCLE_STARTS) or _LIFECYCLE_WORDS(line):
            event = match_lifecycle(line, n) or unmatched_bsd_error(line, n)
            if event is not None:
                self._lifecycle(event, out)
                return
        if (
            (self.bench_open or self.test_open)
            and may_be_free_form_error(line)
            and is_free_form_error(line)
        ):
            self.recognised += 1
            self._problem(out, f"wolfCrypt reported: {line.strip()}", n, "warning")

    # ------------------------------------------------------------ line kinds
    def _marker_line(self, line: str, n: int, out: list[Record]) -> bool:
        """Banner, header, end markers and summaries; True if the line was one."""
        head = line.lstrip()[:24]
        if head.startswith("Benchmark "):
            return self._benchmark_marker(line.strip(), n, out)
        if "error L=" in head:
            m = TEST_ERROR.match(line)
            if m:
                self._test_error(m, line, n, out)
                return True
        if "wolfCrypt Benchmark (" in line:
            self._bench_header(line, n, out)
            return True
        if line.startswith("Math:"):
            self.metadata.pop("math", None)
            self._math(line[5:].strip())
            self.math_open = True
            return True
        if line.startswith("Test complete"):
            self.recognised += 1
            self.selftest_ok = True
            self._close_test(out)
            return True
        if line.startswith("Exiting main with return code"):
            return self._return_code(line, n, out)
        if "wolfSSL version" in head:
            m = VERSION.match(line)
            if m:
                self.recognised += 1
                self.metadata["version"] = m["version"]
                return True
        if line.startswith("CPU:"):
            self.recognised += 1
            self.metadata["cpu"] = line[4:].strip()
            return True
        if "[fiducial line numbers:" in line:
            self.recognised += 1
            return True
        return self._selftest_summary(line, n, out)

    def _benchmark_marker(self, line: str, n: int, out: list[Record]) -> bool:
        if line.startswith("Benchmark complete"):
            self.recognised += 1
            self._flush_bench(out)
            self.benchmarks_completed += 1
            self.bench_open = None
            self.csv_active = False
            return True
        m = BENCH_ITEM_FAILED.match(line)
        if m is None:
            return False
        self.recognised += 1
        desc = fold_spaces(m["desc"])
        pending = self.pending_bench
        if pending is not None and pending.error is None and desc in _failure_names(pending):
            pending.error = line
            pending.code = int(m["code"])
            return True
        self._flush_bench(out)
        kind = BenchKind.ASYMMETRIC if desc.split()[-1].isdigit() else BenchKind.SYMMETRIC
        self._bench(
            Benchmark(
                name=desc,
                value=0.0,
                unit="ops/s" if kind == BenchKind.ASYMMETRIC else "bytes/s",
                kind=kind,
                error=line,
                line=n,
                code=int(m["code"]),
            ),
            n,
            out,
        )
        return True

    def _bench_header(self, line: str, n: int, out: list[Record]) -> None:
        self.recognised += 1
        m = BENCH_HEADER.search(line)
        if m:
            self.block_size = int(m["block"])
            self.metadata["block_bytes"] = self.block_size
            self.metadata["min_seconds"] = float(m["min"])
        self._flush_bench(out)
        self._open_bench(n, out)

    def _return_code(self, line: str, n: int, out: list[Record]) -> bool:
        m = RETURN_CODE.match(line)
        if m is None:
            return False
        self.recognised += 1
        rc = int(m["rc"])
        self.metadata["return_code"] = rc
        if rc != 0:
            self.selftest_failed = True
            if not self.test_failed_in_section and self.test_open is not None:
                self._emit_unnamed_failure(line, decode_test_error(rc), n, out)
        else:
            self.selftest_ok = True
        self._close_test(out)
        return True

    def _selftest_summary(self, line: str, n: int, out: list[Record]) -> bool:
        if "self-test passed" in line:
            m = _SELFTEST_PASSED.match(line)
            if m:
                self.recognised += 1
                self.selftest_ok = True
                self._lifecycle(LifecycleEvent("selftest_passed", line.strip(), {}, n), out)
                if self.test_open is None:
                    self.sections_started += 1
                self._close_test(out)
                return True
        if "test failed" in line:
            m = _SELFTEST_FAILED.match(line)
            if m:
                self.recognised += 1
                decoded = decode_test_error(int(m["value"]))
                self.selftest_failed = True
                if self.pending_test is not None and self.pending_test.code is None:
                    self.pending_test.code = decoded.code
                if not self.test_failed_in_section:
                    self._emit_unnamed_failure(line.strip(), decoded, n, out)
                if self.test_open is None:
                    self.sections_started += 1
                self._close_test(out)
                self._lifecycle(LifecycleEvent("selftest_failed", line.strip(), decoded.as_detail(), n), out)
                return True
        return False

    def _emit_unnamed_failure(self, line: str, decoded: EncodedError, n: int, out: list[Record]) -> None:
        """A failure summary with no named failed test: reported at the end if none ever shows up.

        Deferred because a console log may print the summary live before the dmesg
        dump that holds the named failure.
        """
        if self.unnamed_failure is None:
            self.unnamed_failure = SelfTest(
                name="wolfcrypt_test", passed=False, error=f"{line} ({unnamed_note(decoded)})",
                code=decoded.code, line=n, console=line.strip(), return_code=decoded.value
            )

    def _test_error(self, m: re.Match[str], line: str, n: int, out: list[Record]) -> None:
        self.recognised += 1
        if self.pending_test is not None and self.pending_test.error is None:
            apply_test_error(self.pending_test, m)
        else:
            self._problem(
                out, f"line {n}: error line without a failed test before it: {line.strip()}", n, "warning"
            )

    def _csv(self, line: str, n: int, out: list[Record]) -> bool:
        if line.startswith(CSV_INTRO):
            self.recognised += 1
            self.csv_active = True
            self.metadata["csv"] = True
            line = line[len(CSV_INTRO) :]
            if not line.strip():
                return True
        if self.csv.header(line):
            self.recognised += 1
            self.csv_active = True
            self.metadata["csv"] = True
            if self.bench_open is None:
                self._open_bench(n, out)
            return True
        if "Ciphers:" in line and line.rstrip().endswith("Ciphers:"):
            self.recognised += 1
            return True
        if "," not in line or line.startswith("Benchmark "):
            return False
        bench = self.csv.row(line, n, self.block_size)
        if bench is None:
            return False
        self._bench(bench, n, out)
        out.extend(self.csv.take_problems())
        return True

    def _math(self, text: str) -> None:
        self.recognised += 1
        math = self.metadata.get("math")
        if math is None:
            self.metadata["math"] = text
        elif len(math) < 2048:
            self.metadata["math"] = f"{math}\n{text}"

    # -------------------------------------------------------------- records
    def _bench(self, bench: Benchmark, n: int, out: list[Record]) -> None:
        self.recognised += 1
        if self.test_open is not None:
            self._unclosed_test(out)
        if self.bench_open is None:
            self._open_bench(n, out)
        pending = self.pending_bench
        if pending is not None:
            self._measure(pending)
            out.append(pending)
        self.pending_bench = bench

    def _flush_bench(self, out: list[Record]) -> None:
        bench = self.pending_bench
        if bench is None:
            return
        self.pending_bench = None
        self._measure(bench)
        out.append(bench)

    def _measure(self, bench: Benchmark) -> None:
        if bench.error is not None:
            return
        seconds = bench.seconds
        if seconds:
            if abs(seconds - round(seconds)) < 0.0005:
                self.integral_durations += 1
            else:
                self.fractional_durations += 1
        if (
            bench.kind == _SYMMETRIC
            and bench.cycles
            and bench.per_second > 0
            and len(self.tsc_samples) < MAX_TSC_SAMPLES
        ):
            self.tsc_samples.append(bench.per_second * bench.cycles)

    def _open_bench(self, n: int, out: list[Record]) -> None:
        if self.bench_open is not None:
            self._note_unclosed(
                f"benchmark started at line {self.bench_open} has no 'Benchmark complete' "
                f"line (another began at line {n})"
            )
        if self.test_open is not None:
            self._unclosed_test(out)
        self.bench_open = n
        self.sections_started += 1

    def _test(self, test: SelfTest, out: list[Record]) -> None:
        self.recognised += 1
        if self.bench_open is not None:
            self._flush_bench(out)
            self._note_unclosed(
                f"benchmark started at line {self.bench_open} has no 'Benchmark complete' "
                f"line (self-test output followed at line {test.line})"
            )
            self.bench_open = None
        if self.test_open is None:
            self.test_open = test.line
            self.test_failed_in_section = False
            self.sections_started += 1
        self._flush_test(out)
        if test.passed:
            out.append(test)
        else:
            self.selftest_failed = True
            self.test_failed_in_section = True
            self.failed_tests_emitted += 1
            self.pending_test = test

    def _flush_test(self, out: list[Record]) -> None:
        if self.pending_test is not None:
            out.append(self.pending_test)
            self.pending_test = None

    def _close_test(self, out: list[Record]) -> None:
        self._flush_test(out)
        self.test_open = None
        self.test_failed_in_section = False

    def _unclosed_test(self, out: list[Record]) -> None:
        self._flush_test(out)
        self._note_unclosed(
            f"self-test started at line {self.test_open} has no end marker "
            "('Test complete', 'Exiting main with return code', or a self-test summary)"
        )
        self.test_open = None

    def _note_unclosed(self, reason: str) -> None:
        self.unclosed_count += 1
        if len(self.unclosed) < MAX_UNCLOSED:
            self.unclosed.append(reason)

    def _lifecycle(self, event: LifecycleEvent, out: list[Record]) -> None:
        self.recognised += 1
        self.lifecycle_events += 1
        if event.kind in _LOAD_OUTCOMES:
            self.load_outcome = True
        if event.kind == "benchmark_failed" and self.bench_open is not None:
            self._flush_bench(out)
            self.bench_open = None
        out.append(event)

    def _problem(self, out: list[Record], message: str, n: int, severity: str = "error") -> None:
        self.problem_count += 1
        if self.problem_count <= MAX_PROBLEMS:
            out.append(Problem(message, n, severity))

    # ---------------------------------------------------------------- finish
    def finish(self, out: list[Record], lines: int) -> Ending:
        self._flush_bench(out)
        self._flush_test(out)
        if self.unnamed_failure is not None and self.failed_tests_emitted == 0:
            out.append(self.unnamed_failure)
        reasons = list(self.unclosed)
        if self.bench_open is not None:
            reasons.append(
                f"benchmark started at line {self.bench_open} has no 'Benchmark complete' line (cut off?)"
            )
        if self.test_open is not None:
            reasons.append(
                f"self-test started at line {self.test_open} has no end marker ('Test complete', "
                "'Exiting main with return code', or a self-test summary) (cut off?)"
            )
        if lines == 0:
            reasons.append("log is empty")
        elif self.sections_started == 0 and self.lifecycle_events == 0:
            reasons.append("no wolfCrypt benchmark, self-test or module messages found")
        elif self.format.kernel and not (self.selftest_ok or self.selftest_failed or self.load_outcome):
            # The module's init prints its self-test verdict (or fails the load): without
            # either, init never finished (hang, or the log was cut before it).
            reasons.append(
                "kernel log has no self-test verdict ('wolfCrypt self-test passed.' or a failure) "
                "and no load outcome"
            )
        if self.problem_count > MAX_PROBLEMS:
            more = self.problem_count - MAX_PROBLEMS
            out.append(Problem(f"{more} more problems not listed", lines, "warning"))
        if self.tsc_samples:
            self.metadata["tsc_hz"] = round(statistics.median(self.tsc_samples))
        selftest: bool | None = None
        if self.selftest_failed:
            selftest = False
        elif self.selftest_ok:
            selftest = True
        return Ending(
            incomplete=self._reason_text(reasons),
            selftest=selftest,
            benchmark_complete=self.benchmarks_completed > 0
            and self.bench_open is None
            and not any(r.startswith("benchmark") for r in reasons),
            clock_resolution=1.0 if self._clock_quantised() else None,
        )

    def _reason_text(self, reasons: list[str]) -> str | None:
        if not reasons:
            return None
        more = self.unclosed_count - len(self.unclosed)
        return "; ".join(reasons[:MAX_UNCLOSED]) + (f"; and {more} more sections cut off" if more > 0 else "")

    def _clock_quantised(self) -> bool:
        """Whole-second benchmark clock (FreeBSD module, log-formats §5/§9).

        Integral durations alone are not enough: a userspace run with small blocks can
        stop at exactly 1.000 s. So also require the FreeBSD module (where the bug is
        known) or an item whose throughput x cycles is off the run's TSC rate.
        """
        if self.integral_durations < MIN_ITEMS_FOR_CLOCK or self.fractional_durations:
            return False
        if self.whole_second_clock:
            return True
        if not self.tsc_samples:
            return False
        median = statistics.median(self.tsc_samples)
        return any(abs(s - median) > TSC_TOLERANCE * median for s in self.tsc_samples)


def _failure_names(bench: Benchmark) -> tuple[str, ...]:
    """Names a 'Benchmark X failed' line may use for this item (asym prints algo op strength)."""
    if bench.kind == BenchKind.ASYMMETRIC and bench.algorithm:
        alt = " ".join(p for p in (bench.algorithm, bench.operation, bench.strength) if p)
        return (bench.name, alt)
    return (bench.name,)
