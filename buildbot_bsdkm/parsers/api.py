"""Public entry points: file, text, lines, or a record stream."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from ..model import Benchmark, KernelEvent, LifecycleEvent, LogFormat, LogResult, Problem, SelfTest
from .detect import DETECT_LINES, detect_format
from .engine import LogParser
from .parse_error import ParseError
from .records import ParseSummary, Record
from .text import MAX_LINE_CHARS, decode_line

_READ_LIMIT = MAX_LINE_CHARS * 4 + 4  # bytes: UTF-8 is at most 4 bytes a character
_BLOCK_BYTES = 1 << 18  # read this much at a time: decoding and splitting a block runs in C
_BATCH_LINES = 4096  # lines given as an iterable are checked and fed this many at a time
_MAX_DIRTY = 256  # a block with more odd lines than this is fed line by line

# Bytes that were not UTF-8, decoded as surrogate escapes: their lines take the careful path.
_SURROGATE = re.compile(r"[\udc80-\udcff]")

# A batch is ("clean", lines) -- str lines without their newline, no NUL/ESC/CR/bad
# bytes, shorter than the cap -- for the engine's fast loop; ("crlf", lines) the same
# but lines may hold "\r"; or ("raw", lines) -- lines exactly as a line-by-line
# reader would have produced them -- for its careful path.
_Batch = tuple[str, list]


def iter_records(lines: Iterable[str | bytes], fmt: LogFormat | str | None = None) -> Iterator[Record]:
    """Yield Benchmark / SelfTest / LifecycleEvent / Problem records, then one ParseSummary.

    Streams: memory stays bounded however long the input is (a binary file is read in
    256 KiB blocks, other iterables are fed in batches). Never raises on bad input; it is
    reported as Problem records and in the summary.
    """
    if isinstance(lines, io.BufferedIOBase | io.RawIOBase):
        batches: Iterator[_Batch] = _file_batches(lines)
    else:  # text files too: their iteration may split lines at "\r" (newline="")
        batches = _iter_batches(lines)
    head: list[_Batch] = []
    if fmt is None:
        texts: list[str] = []
        for batch in batches:
            head.append(batch)
            kind, items = batch
            texts.extend(
                items[: DETECT_LINES - len(texts)]
                if kind != "raw"
                else [_as_text(x) for x in items[: DETECT_LINES - len(texts)]]
            )
            if len(texts) >= DETECT_LINES:
                break
        fmt = detect_format(texts)
    parser = LogParser(LogFormat(fmt))
    feed_clean = parser.feed_clean
    feed_into = parser.feed_into
    out: list[Record] = []
    for batches_part in (head, batches):
        for kind, items in batches_part:
            if kind != "raw":
                feed_clean(items, out, kind == "crlf")
            else:
                for raw in items:
                    feed_into(raw, out)
            if out:
                yield from out
                out.clear()
    yield from parser.finish()


def _iter_batches(lines: Iterable[str | bytes]) -> Iterator[_Batch]:
    """Batches from an iterable of lines (no newline expected at their ends)."""
    it = iter(lines)
    while True:
        batch = list(islice(it, _BATCH_LINES))
        if not batch:
            return
        first = batch[0]
        if first.__class__ is str and all(x.__class__ is str for x in batch):
            text = "\n".join(batch)  # type: ignore[arg-type]
            if text.count("\n") == len(batch) - 1:
                yield from _text_batches(text, batch, "", None, False)  # type: ignore[arg-type]
                continue
        elif first.__class__ is bytes and all(x.__class__ is bytes for x in batch):
            body = b"\n".join(batch)  # type: ignore[arg-type]
            if body.count(b"\n") == len(batch) - 1:
                text, bad = _decode(body)
                yield from _text_batches(text, None, "", b"", bad, probe=body)
                continue
        yield ("raw", batch)


def _file_batches(f) -> Iterator[_Batch]:  # type: ignore[no-untyped-def]
    """Batches from a binary file object, read in blocks; over-long lines are cut."""
    read = f.read
    pending = read(_BLOCK_BYTES)
    if not pending:
        return
    is_bytes = pending.__class__ is bytes
    nl = b"\n" if is_bytes else "\n"
    limit = _READ_LIMIT
    while True:
        cut = pending.rfind(nl)
        if cut >= 0:
            yield from _block_batches(pending[: cut + 1], is_bytes, limit)
            pending = pending[cut + 1 :]
        if len(pending) >= limit:
            # An over-long line: keep its head (the engine reports the cut), skip the rest.
            yield ("raw", [pending[:limit]])
            pending = pending[limit:]
            while True:
                i = pending.find(nl)
                if i >= 0:
                    pending = pending[i + 1 :]
                    break
                pending = read(_BLOCK_BYTES)
                if not pending:
                    return
            if not pending:
                pending = read(_BLOCK_BYTES)
                if not pending:
                    return
            continue
        more = read(_BLOCK_BYTES)
        if not more:
            if pending:
                yield from _block_batches(pending, is_bytes, limit)
            return
        pending += more


def _decode(body: bytes) -> tuple[str, bool]:
    """(text, had invalid UTF-8): bad bytes become surrogate escapes, so they can be given back."""
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return body.decode("utf-8", "surrogateescape"), True


def _block_batches(body: str | bytes, is_bytes: bool, limit: int) -> Iterator[_Batch]:
    """Batches of one block of whole lines (the last one may lack its newline: end of file)."""
    if is_bytes:
        text, bad = _decode(body)  # type: ignore[arg-type]
        raw_empty: bytes | None = b""
    else:
        text, bad = body, False  # type: ignore[assignment]
        raw_empty = None
    lines = text.split("\n")
    last_nl = text.endswith("\n")
    if last_nl:
        lines.pop()
    probe = body if is_bytes else None
    yield from _text_batches(
        text,
        lines,
        "\n",
        raw_empty,
        bad,
        probe=probe,
        limit=limit,
        last_nl=last_nl,  # type: ignore[arg-type]
    )


def _text_batches(
    text: str,
    lines: list[str] | None,
    suffix: str,
    raw_empty: bytes | None,
    bad_utf8: bool,
    *,
    probe: bytes | None = None,
    limit: int = 0,
    last_nl: bool = False,
) -> Iterator[_Batch]:
    """Split the lines of ``text`` into clean runs and raw odd lines.

    ``suffix`` is what a line-by-line reader would have left at each line's end ("\\n"
    for a file; the last line of a file has none unless ``last_nl``); ``raw_empty``
    is b"" when raw lines must be given back as bytes. Every check is a bytes/str
    method over the whole block (C speed; on the undecoded ``probe`` when there is one,
    as bytes searches stay fast when the text is not ASCII); only the odd lines are
    then looked at one by one.
    """
    if lines is None:
        lines = text.split("\n")
    count = len(lines)
    if not count:
        return
    dirty: set[int] = set()
    if max(map(len, lines)) + len(suffix) > MAX_LINE_CHARS:
        dirty.update(i for i, line in enumerate(lines) if len(line) + len(suffix) > MAX_LINE_CHARS)
    p: str | bytes = text if probe is None else probe
    cr, nul, esc = _PROBES[p.__class__]
    kind = "clean"
    if cr in p:
        kind = "crlf"  # the engine looks at the CRs line by line
    if nul in p:
        _mark_lines(p, nul, dirty)
    if esc in p:
        _mark_lines(p, esc, dirty)
    if bad_utf8:
        for m in _SURROGATE.finditer(text):
            if len(dirty) > _MAX_DIRTY:
                break
            dirty.add(text.count("\n", 0, m.start()))
    if len(dirty) > _MAX_DIRTY:
        yield ("raw", [_raw(lines, i, suffix, raw_empty, last_nl, limit) for i in range(count)])
        return
    if not dirty:
        yield (kind, lines)
        return
    start = 0
    for i in sorted(dirty):
        if i >= count:
            continue
        if i > start:
            yield (kind, lines[start:i])
        yield ("raw", [_raw(lines, i, suffix, raw_empty, last_nl, limit)])
        start = i + 1
    if start < count:
        yield (kind, lines[start:])


_PROBES: dict[type, tuple] = {str: ("\r", "\x00", "\x1b"), bytes: (b"\r", b"\x00", b"\x1b")}


def _mark_lines(text: str | bytes, char: str | bytes, dirty: set[int]) -> None:
    """Add the index of every line of ``text`` holding ``char`` (stops past _MAX_DIRTY)."""
    nl = "\n" if char.__class__ is str else b"\n"
    find = text.find
    count = text.count
    i = find(char)  # type: ignore[arg-type]
    pos = 0
    idx = 0
    while i >= 0 and len(dirty) <= _MAX_DIRTY:
        idx += count(nl, pos, i)  # type: ignore[arg-type]
        dirty.add(idx)
        end = find(nl, i)  # type: ignore[arg-type]
        if end < 0:
            return
        idx += 1
        pos = end + 1
        i = find(char, pos)  # type: ignore[arg-type]


def _raw(
    lines: list[str], i: int, suffix: str, raw_empty: bytes | None, last_nl: bool, limit: int
) -> str | bytes:
    """Line ``i`` as a line-by-line reader would have given it."""
    line = lines[i]
    if suffix and (i < len(lines) - 1 or last_nl):
        line += suffix
    if raw_empty is None:
        return line[:limit] if limit and len(line) > limit else line
    raw = line.encode("utf-8", "surrogateescape")
    return raw[:limit] if limit and len(raw) > limit else raw


def parse_lines(lines: Iterable[str | bytes], source: str, fmt: LogFormat | str | None = None) -> LogResult:
    result = LogResult(source=source)
    for record in iter_records(lines, fmt):
        _collect(result, record)
    return result


def parse_text(text: str | bytes, source: str, fmt: LogFormat | str | None = None) -> LogResult:
    if isinstance(text, bytes):
        return parse_lines(text.split(b"\n"), source, fmt)
    return parse_lines(text.split("\n"), source, fmt)


# A real log is at most a few hundred MB (a 100 MB benchmark log parses in ~15 s); a device
# such as /dev/zero or a FIFO that never ends must not keep the CLI or a worker busy forever.
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_SECONDS = 900.0


class InputLimitError(ParseError):
    """The input exceeded the size or time limit it was read under; the message names the limit."""


class _BoundedReader(io.RawIOBase):
    """A binary file that raises InputLimitError past ``max_bytes`` read or ``max_seconds`` spent."""

    def __init__(self, raw: io.BufferedIOBase, source: str, max_bytes: int, max_seconds: float) -> None:
        super().__init__()
        self._raw = raw
        self._source = source
        self._max_bytes = max_bytes
        self._deadline = time.monotonic() + max_seconds
        self._max_seconds = max_seconds
        self._read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if time.monotonic() > self._deadline:
            raise InputLimitError(
                f"{self._source}: still reading after {self._max_seconds:g} s "
                f"(time limit --max-seconds {self._max_seconds:g})"
            )
        room = self._max_bytes - self._read + 1  # one byte more tells "exactly the limit" from "over"
        data = self._raw.read(room if size is None or size < 0 else min(size, room))
        self._read += len(data)
        if self._read > self._max_bytes:
            raise InputLimitError(
                f"{self._source}: larger than the {self._max_bytes}-byte input limit "
                f"(--max-bytes {self._max_bytes})"
            )
        return data


def parse_file(
    path: str | Path,
    fmt: LogFormat | str | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> LogResult:
    """Parse one log file. ParseError if it is missing, unreadable, binary garbage, or over a limit."""
    path = Path(path)
    if not path.exists():
        raise ParseError(f"{path}: no such file")
    if path.is_dir():
        raise ParseError(f"{path}: is a directory, not a log file")
    try:
        with path.open("rb") as f:
            result = parse_lines(_BoundedReader(f, str(path), max_bytes, max_seconds), str(path), fmt)
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror or e}") from None
    summary_binary = result.metadata.pop("_looks_binary", False)
    if summary_binary:
        raise ParseError(
            f"{path}: binary data with nothing recognisable "
            f"({len(result.problems)} problems, no wolfCrypt/openssl output)"
        )
    return result


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
    elif isinstance(record, KernelEvent):
        result.kernel.append(record)
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
