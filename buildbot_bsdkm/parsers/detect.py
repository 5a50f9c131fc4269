"""Which program printed a log, from its first lines."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import LogFormat
from .formats import registrations
from .text import strip_escapes

DETECT_LINES = 400


def detect_format(first_lines: Iterable[str]) -> LogFormat:
    """Best guess from (up to DETECT_LINES of) the first lines; UNKNOWN if nothing fits.

    Each registered format says which lines show it; the first format, in the registry's order,
    that some line showed wins, unless a line also showed a format it yields to.
    """
    candidates = [e for e in registrations() if e.shows is not None]
    seen: set[LogFormat] = set()
    for i, raw in enumerate(first_lines):
        if i >= DETECT_LINES:
            break
        line = strip_escapes(raw).rstrip("\r\n")
        seen.update(e.format for e in candidates if e.format not in seen and e.shows(line))  # type: ignore[misc]
    for entry in candidates:
        if entry.format in seen and not entry.yields_to & seen:
            return entry.format
    return LogFormat.UNKNOWN
