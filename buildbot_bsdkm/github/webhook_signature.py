"""Strict ``X-Hub-Signature-256`` verification for GitHub webhooks.

Buildbot's stock hook checks only the SHA-1 header and accepts unsigned requests unless
``strict`` is set; we accept nothing but a well-formed, matching HMAC-SHA256.
"""

from __future__ import annotations

import hashlib
import hmac
import re

SIGNATURE_HEADER = "X-Hub-Signature-256"
# GitHub caps webhook payloads at 25 MB; anything bigger is not from GitHub.
DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024

_SIGNATURE_RE = re.compile(r"sha256=([0-9a-f]{64})")


class SignatureError(ValueError):
    """A webhook request refused before its body is trusted; the message never contains the secret."""

    def __init__(self, reason: str, status: int = 401) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def sign(secret: str | bytes, body: bytes) -> str:
    """The header value GitHub would send for ``body``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def check_size(length: int, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    if length > max_bytes:
        raise SignatureError(f"payload of {length} bytes exceeds the {max_bytes}-byte limit", status=413)


def verify_signature(
    secret: str | bytes,
    body: bytes,
    header: str | bytes | None,
    *,
    max_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> None:
    """Raise SignatureError unless ``header`` is the HMAC-SHA256 of ``body`` under ``secret``."""
    if not secret:
        raise SignatureError("no webhook secret configured: refusing every request", status=500)
    check_size(len(body), max_bytes)
    if header is None or header in ("", b""):
        raise SignatureError(f"request is not signed (no {SIGNATURE_HEADER} header)")
    if isinstance(header, bytes):
        try:
            header = header.decode("ascii")
        except UnicodeDecodeError:
            raise SignatureError(f"malformed {SIGNATURE_HEADER} header (not ASCII)") from None
    match = _SIGNATURE_RE.fullmatch(header.strip())
    if match is None:
        raise SignatureError(
            f"malformed {SIGNATURE_HEADER} header (expected sha256=<64 lowercase hex digits>)"
        )
    if not hmac.compare_digest(sign(secret, body), "sha256=" + match.group(1)):
        raise SignatureError(f"{SIGNATURE_HEADER} does not match the payload (wrong secret or altered body)")
