"""The one exception the parsers raise."""

from __future__ import annotations


class ParseError(Exception):
    """Input that cannot be parsed at all: a missing/unreadable file or binary garbage.

    The message always names the source and why it is unusable. Anything less bad
    (cut-off logs, junk lines) is reported as ``Problem`` records instead.
    """
