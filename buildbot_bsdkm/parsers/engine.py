"""The streaming engine: one line in, records out, bounded memory, whatever the format.

It does what every log needs: decoding (a bad byte is a ``Problem``, never an exception), escape
sequences, NUL bytes and carriage returns, the printk stamp and the module's prefix, the console's
repeated lines (printed live, then again in the dmesg dump), harness markers, and kernel trouble in
a kernel's log. Each clean line then goes to the parser registered for the log's format
(``formats.py``), which makes the records.
"""

from __future__ import annotations

import re
from typing import Any

from ..model import LogFormat, Problem
from .formats import registration
from .kernel_trouble import KernelTroubleScanner
from .records import ParseSummary, Record
from .text import MAX_LINE_CHARS, strip_escapes, strip_kernel_prefix

MAX_PROBLEMS = 200  # beyond this, garbage is counted, not itemised
MAX_MARKERS = 200
# A console log repeats error lines: printed live, then again in the dmesg dump.
DEDUPE_WINDOW = 256
# "[    9.431805] " / "<6>[12345] " then "wolfssl: func(): " or "libwolf0: " (text.strip_kernel_prefix).
_KERNEL_PREFIX = re.compile(
    r"(?:((?:<\d>)?\[\s*\d+(?:\.\d+)?\] ?))?(?:wolfssl: [A-Za-z_][A-Za-z0-9_]*\(\): |libwolf\d+: )?"
)
_KERNEL_FIRST = frozenset("[<wl")
# First characters of a line that may be all white space (str.isspace).
_SPACE_FIRST = frozenset(chr(c) for c in range(0x110000) if chr(c).isspace())


class LogParser:
    """Feed lines one by one (``feed``), then call ``finish`` once."""

    def __init__(self, fmt: LogFormat) -> None:
        self.format = LogFormat(fmt)
        self.parser = registration(self.format).parser()
        self.lineno = 0
        self.recognised = 0
        self.binary_lines = 0
        self.problem_count = 0
        # One dict for the log: the harness markers go in beside what the parser keeps.
        self.metadata: dict[str, Any] = self.parser.metadata
        self.recent_kernel_lines: dict[str, None] = {}
        # A kernel's log, or one whose program nothing showed, may hold a splat (kernel_trouble.py).
        scanned = self.format.kernel or self.format == LogFormat.UNKNOWN
        self.kernel = KernelTroubleScanner() if scanned else None

    # ------------------------------------------------------------------ input
    def feed(self, raw: str | bytes) -> list[Record]:
        out: list[Record] = []
        self.feed_into(raw, out)
        return out

    def feed_into(self, raw: str | bytes, out: list[Record]) -> list[Record]:
        """Append the records of one line to ``out`` (saves a list per line when streaming)."""
        # Hot path: a clean text line costs a handful of C-level checks before dispatch.
        self.lineno += 1
        n = self.lineno
        if raw.__class__ is bytes:
            try:
                line = raw.decode("utf-8")  # type: ignore[union-attr]
            except UnicodeDecodeError:
                line = raw.decode("utf-8", errors="replace")  # type: ignore[union-attr]
                self.binary_lines += 1
                self._problem(out, f"line {n}: invalid UTF-8 (bad bytes replaced)", n, "warning")
        else:
            line = raw  # type: ignore[assignment]
        if len(line) > MAX_LINE_CHARS:
            self._problem(
                out,
                f"line {n}: {len(line)}+ characters long; only the first {MAX_LINE_CHARS} were read",
                n,
                "warning",
            )
            line = line[:MAX_LINE_CHARS]
        line = line.rstrip("\r\n")
        if "\x00" in line or "\x1b" in line or "\r" in line:
            line = self._sanitise(line, n, out)
        if not line or line.isspace():
            return out
        if self.kernel is not None:
            self.kernel.feed(line, n, out)
        first = line[0]
        if first in "[<wl":
            stamped = line
            line, had_ts = strip_kernel_prefix(line)
            if not line:
                return out
            if had_ts and self._seen_recently(stamped):
                # Same line again (live console, then the dmesg dump): keep its effect on
                # sections, drop the records it would repeat.
                replay: list[Record] = []
                self.parser.feed(line.removeprefix("###, ").removeprefix("!!!, "), n, replay)
                out.extend(r for r in replay if getattr(r, "line", None) != n)
                return out
            first = line[0]
        if "### LKM-CI:" in line:
            self._marker(line)
            return out
        if first in "#!" and line.startswith(("###, ", "!!!, ")):
            line = line[5:]
        self.parser.feed(line, n, out)
        return out

    def feed_clean(self, lines: list[str], out: list[Record], crlf: bool = False) -> list[Record]:
        """``feed_into`` for many clean lines at once: str without their line end, no NUL
        or ESC (nor CR unless ``crlf``), shorter than the cap by more than one character
        (the reader checks that per block, in C).
        """
        n = self.lineno
        dispatch = self.parser.feed
        recent = self.recent_kernel_lines
        kprefix = _KERNEL_PREFIX.match
        kernel = self.kernel.feed if self.kernel is not None else None
        try:
            for line in lines:
                n += 1
                if crlf and "\r" in line:
                    if line[-1] == "\r" and line.count("\r") == 1:
                        line = line[:-1]
                    else:  # console output overwritten in place, or "\r\r\n"
                        self.lineno = n - 1
                        self.feed_into(line, out)
                        continue
                if not line:
                    continue
                first = line[0]
                if first in _SPACE_FIRST and line.isspace():
                    continue
                if kernel is not None:
                    kernel(line, n, out)
                if first in _KERNEL_FIRST:
                    m = kprefix(line)
                    if m is not None:
                        if m.lastindex is not None:  # a timestamp: maybe a repeated line
                            stamped = line
                            line = line[m.end() :]
                            if not line:
                                continue
                            if stamped in recent:
                                replay: list[Record] = []
                                dispatch(line.removeprefix("###, ").removeprefix("!!!, "), n, replay)
                                out.extend(r for r in replay if getattr(r, "line", None) != n)
                                continue
                            recent[stamped] = None
                            if len(recent) > DEDUPE_WINDOW:
                                del recent[next(iter(recent))]
                        else:
                            line = line[m.end() :]
                            if not line:
                                continue
                        first = line[0]
                if "### LKM-CI:" in line:
                    self._marker(line)
                    continue
                if first in "#!" and line.startswith(("###, ", "!!!, ")):
                    line = line[5:]
                dispatch(line, n, out)
        finally:
            self.lineno = n
        return out

    def _sanitise(self, line: str, n: int, out: list[Record]) -> str:
        if "\x00" in line:
            self.binary_lines += 1
            self._problem(out, f"line {n}: NUL bytes (binary data?) removed", n, "warning")
            line = line.replace("\x00", "")
        if "\x1b" in line:
            line = strip_escapes(line)
        if "\r" in line:  # console output overwritten in place: keep what was printed last
            line = line.rsplit("\r", 1)[-1] or line.replace("\r", "")
        return line

    def _seen_recently(self, stamped: str) -> bool:
        recent = self.recent_kernel_lines
        if stamped in recent:
            return True
        recent[stamped] = None
        if len(recent) > DEDUPE_WINDOW:
            del recent[next(iter(recent))]
        return False

    def _marker(self, line: str) -> None:
        """Harness markers ('### LKM-CI: ...'): kept as metadata, never relied upon."""
        self.recognised += 1
        markers = self.metadata.setdefault("markers", [])
        if len(markers) < MAX_MARKERS:
            markers.append(line[line.index("### LKM-CI:") + 4 :].strip())

    # -------------------------------------------------------------- records
    def _problem(self, out: list[Record], message: str, n: int, severity: str = "error") -> None:
        self.problem_count += 1
        if self.problem_count <= MAX_PROBLEMS:
            out.append(Problem(message, n, severity))

    # ---------------------------------------------------------------- finish
    # ---------------------------------------------------------------- finish
    def finish(self) -> list[Record]:
        out: list[Record] = []
        ending = self.parser.finish(out, self.lineno)
        if self.problem_count > MAX_PROBLEMS:
            out.append(
                Problem(
                    f"{self.problem_count - MAX_PROBLEMS} more problems not listed", self.lineno, "warning"
                )
            )
        if self.kernel is not None:
            self.kernel.finish(out)
        out.append(
            ParseSummary(
                format=self.format,
                complete=ending.incomplete is None,
                incomplete_reason=ending.incomplete,
                selftest_summary=ending.selftest,
                benchmark_complete=ending.benchmark_complete,
                clock_resolution=ending.clock_resolution,
                metadata=self.metadata,
                lines=self.lineno,
                recognised=self.recognised + self.parser.recognised,
                binary_lines=self.binary_lines,
            )
        )
        return out
