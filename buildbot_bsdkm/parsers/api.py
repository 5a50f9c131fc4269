"""Public entry points: file, text, lines, or a record stream."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

from ..model import Benchmark, LifecycleEvent, LogFormat, LogResult, Problem, SelfTest
from .detect import DETECT_LINES, detect_format
from .engine import LogParser
from .errors import ParseError
from .records import ParseSummary, Record
from .text import MAX_LINE_CHARS, decode_line

_READ_LIMIT = MAX_LINE_CHARS * 4 + 4  # bytes: UTF-8 is at most 4 bytes a character


def iter_records(lines: Iterable[str | bytes], fmt: LogFormat | str | None = None) -> Iterator[Record]:
    """Yield Benchmark / SelfTest / LifecycleEvent / Problem records, then one ParseSummary.

    Streams: memory stays bounded however long the input is. Never raises on bad
    input; it is reported as Problem records and in the summary.
    """
    it = iter(lines)
    head: list[str | bytes] = []
    if fmt is None:
        for raw in it:
            head.append(raw)
            if len(head) >= DETECT_LINES:
                break
        fmt = detect_format(_as_text(x) for x in head)
    parser = LogParser(LogFormat(fmt))
    feed_into = parser.feed_into
    buffer: list[Record] = []
    for raw in chain(head, it):
        feed_into(raw, buffer)
        if buffer:
            yield from buffer
            buffer.clear()
    yield from parser.finish()


def parse_lines(lines: Iterable[str | bytes], source: str, fmt: LogFormat | str | None = None) -> LogResult:
    result = LogResult(source=source)
    for record in iter_records(lines, fmt):
        _collect(result, record)
    return result


def parse_text(text: str | bytes, source: str, fmt: LogFormat | str | None = None) -> LogResult:
    if isinstance(text, bytes):
        return parse_lines(text.split(b"\n"), source, fmt)
    return parse_lines(text.split("\n"), source, fmt)


def parse_file(path: str | Path, fmt: LogFormat | str | None = None) -> LogResult:
    """Parse one log file. ParseError if it is missing, unreadable, or binary garbage."""
    path = Path(path)
    if not path.exists():
        raise ParseError(f"{path}: no such file")
    if path.is_dir():
        raise ParseError(f"{path}: is a directory, not a log file")
    try:
        with path.open("rb") as f:
            result = parse_lines(_read_capped_lines(f), str(path), fmt)
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror or e}") from None
    summary_binary = result.metadata.pop("_looks_binary", False)
    if summary_binary:
        raise ParseError(
            f"{path}: binary data with nothing recognisable "
            f"({len(result.problems)} problems, no wolfCrypt/openssl output)"
        )
    return result


def _read_capped_lines(f) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
    """Lines of a binary file; an over-long line is cut, the rest of it skipped, never held whole."""
    while True:
        chunk = f.readline(_READ_LIMIT)
        if not chunk:
            return
        if len(chunk) == _READ_LIMIT and not chunk.endswith(b"\n"):
            while True:
                rest = f.readline(_READ_LIMIT)
                if not rest or rest.endswith(b"\n"):
                    break
            # Keep it longer than the cap so the engine reports the cut.
        yield chunk


def _as_text(raw: str | bytes) -> str:
    return decode_line(raw)[0] if isinstance(raw, bytes) else raw


def _collect(result: LogResult, record: Record) -> None:
    if isinstance(record, Benchmark):
        result.benchmarks.append(record)
    elif isinstance(record, SelfTest):
        result.tests.append(record)
    elif isinstance(record, LifecycleEvent):
        result.lifecycle.append(record)
    elif isinstance(record, Problem):
        result.problems.append(record)
    elif isinstance(record, ParseSummary):
        _apply_summary(result, record)


def _apply_summary(result: LogResult, summary: ParseSummary) -> None:
    result.format = summary.format
    result.complete = summary.complete
    result.incomplete_reason = summary.incomplete_reason
    result.selftest_summary = summary.selftest_summary
    result.benchmark_complete = summary.benchmark_complete
    result.clock_resolution = summary.clock_resolution
    result.metadata.update(summary.metadata)
    if summary.looks_binary:
        result.metadata["_looks_binary"] = True
        result.problems.append(Problem("input looks binary: nothing recognisable", None, "error"))
