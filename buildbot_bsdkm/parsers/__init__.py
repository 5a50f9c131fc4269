"""Logs in, typed records (``buildbot_bsdkm.model``) out.

Formats: wolfCrypt benchmark (text, CSV, machine-parseable, NO_FLOAT_FMT, Japanese),
wolfCrypt self-test, Linux and FreeBSD kernel logs of the module, ``openssl speed``, the AF_ALG
benchmark; each registered once against its parser in ``formats.py``.
Everything streams line by line; bad input becomes ``Problem`` records, and only an
unusable file raises ``ParseError``.
"""

from __future__ import annotations

from ..model import LogFormat
from .api import iter_records, parse_file, parse_lines, parse_text
from .detect import detect_format
from .lifecycle import FAILURE_KINDS
from .parse_error import ParseError
from .records import ParseSummary, Record

__all__ = [
    "FAILURE_KINDS",
    "LogFormat",
    "ParseError",
    "ParseSummary",
    "Record",
    "detect_format",
    "iter_records",
    "parse_file",
    "parse_lines",
    "parse_text",
]
