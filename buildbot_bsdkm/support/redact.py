"""Credentials out of URLs before a URL is written or shown.

A source URL may carry a token (``https://bot:TOKEN@host/x.git``, ``https://TOKEN@host/...``). git
and urllib need it as given; every record, log line and report gets the URL with its userinfo
replaced by ``***`` instead. ``redact_text`` does the same for URLs inside free text (a tool's
error message that quotes the URL it was given).
"""

from __future__ import annotations

import re

MASK = "***"
# scheme://userinfo@ — up to the last "@" before the authority ends at "/", "?" or "#", as URL
# parsers split it (a password may hold a raw "@").
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"]*)@")


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` (or ``token@``) replaced by ``***@``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", url)


def redact_text(text: str) -> str:
    """Every URL in ``text`` redacted as ``redact_url`` does."""
    return redact_url(text)


def has_credentials(url: str) -> bool:
    return bool(_USERINFO.search(url))
