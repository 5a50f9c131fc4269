"""What a log format's parser is, and the one table that says which parser reads which format.

``engine.LogParser`` does what every log needs (decoding, escape sequences and NUL bytes, the
printk stamp and the module's prefix, the console's repeated lines, harness markers, kernel trouble
in a kernel log) and hands each clean line to the parser registered for the log's format. A parser
is anything with ``LineParser``'s shape; it is registered once, against its format
(``parsers/formats.py`` registers the built-in ones), with the lines that show the format for
``detect_format``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..model import LogFormat
from .records import Record


@dataclass
class Ending:
    """How a log ended, as its parser saw it (``ParseSummary`` carries it on)."""

    incomplete: str | None = None  # why the log is not complete; None: it is
    selftest: bool | None = None  # the self-test verdict the program printed, when it printed one
    benchmark_complete: bool = False  # a benchmark ran to its end marker
    clock_resolution: float | None = None  # the benchmark clock's resolution, when it is coarse


class LineParser(Protocol):
    """Reads the clean lines of one log, in order, then says how the log ended.

    ``feed`` appends the records a line gives (``model`` records; a ``Problem`` for input it cannot
    use) to ``out`` and counts the lines that meant something in ``recognised``. ``finish`` appends
    what only the end tells and returns the ``Ending``; ``lines`` is how many lines the log had.
    ``metadata`` is the log's (``LogResult.metadata``), the engine's markers included.
    """

    recognised: int
    metadata: dict[str, Any]

    def feed(self, line: str, n: int, out: list[Record]) -> None: ...

    def finish(self, out: list[Record], lines: int) -> Ending: ...


class ReadsEachLine:
    """``feed`` for a parser whose ``read(line, n)`` gives a line's records and whether it meant anything."""

    recognised: int

    def read(self, line: str, lineno: int) -> tuple[list[Any], bool]:
        raise NotImplementedError

    def feed(self, line: str, n: int, out: list[Record]) -> None:
        records, meaningful = self.read(line, n)
        if meaningful:
            self.recognised += 1
        out.extend(records)


@dataclass(frozen=True)
class Registration:
    """One format's parser and how to recognise the format."""

    format: LogFormat
    parser: Callable[[], LineParser]
    # A line that shows the format (the first lines of a log are tried); None: never guessed.
    shows: Callable[[str], bool] | None = None
    # Formats are tried lowest rank first, so a new one (rank 0) before the built-in ones (10 to 70).
    rank: int = 0
    # Formats whose lines, seen in the same log, make it theirs instead (a wolfCrypt log that
    # happens to print "Doing ..." is no ``openssl speed`` log).
    yields_to: frozenset[LogFormat] = frozenset()
    # wolfCrypt's benchmark prints in such a log: the policy's ``required`` items apply to its run.
    wolfcrypt_benchmark: bool = False


_REGISTERED: dict[LogFormat, Registration] = {}


def register(fmt: LogFormat, parser: Callable[[], LineParser], *, shows: Callable[[str], bool] | None = None,
             rank: int = 0, yields_to: Iterable[LogFormat] = (), wolfcrypt_benchmark: bool = False
             ) -> Registration:
    """Register ``parser`` (a class or a function making one) for ``fmt``; ValueError if it has one."""
    if fmt in _REGISTERED:
        raise ValueError(f"log format {fmt} already has a parser")
    entry = Registration(LogFormat(fmt), parser, shows, rank, frozenset(yields_to), wolfcrypt_benchmark)
    _REGISTERED[entry.format] = entry
    return entry


def unregister(fmt: LogFormat) -> None:
    """Forget ``fmt``'s parser (a test's own format, once the test is done)."""
    _REGISTERED.pop(fmt, None)


def registration(fmt: LogFormat | str) -> Registration:
    """``fmt``'s registration; ValueError naming the format when none has a parser for it."""
    entry = _REGISTERED.get(LogFormat(fmt))
    if entry is None:
        known = ", ".join(_REGISTERED)
        raise ValueError(f"no parser is registered for log format {fmt} (formats: {known})")
    return entry


def registrations() -> list[Registration]:
    """Every registration, in the order formats are tried (rank, then registration order)."""
    return sorted(_REGISTERED.values(), key=lambda e: e.rank)


def carries_wolfcrypt_benchmark(fmt: LogFormat | str) -> bool:
    """Whether wolfCrypt's benchmark prints in logs of ``fmt`` (False for a format with no parser)."""
    entry = _REGISTERED.get(LogFormat(fmt))
    return entry is not None and entry.wolfcrypt_benchmark
