"""When and how long to wait before asking GitHub again.

GitHub signals overload three ways: 5xx, secondary rate limits (403/429 with
``Retry-After``) and primary rate limits (403/429 with ``X-RateLimit-Remaining: 0`` and
``X-RateLimit-Reset``). Anything else 4xx is our mistake and is never retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    # A wait longer than this is not slept through inline: the delivery is kept in the outbox.
    max_inline_wait: float = 120.0

    def backoff(self, attempt: int) -> float:
        return min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))


@dataclass(frozen=True)
class Advice:
    retry: bool
    delay: float = 0.0
    reason: str = ""
    transient: bool = False  # worth keeping for a later re-send when retries run out


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def rate_limit_wait(status: int, headers: Mapping[str, str], now: float) -> float | None:
    """Seconds GitHub asks us to wait, or None when the response is not a rate limit."""
    if status not in (403, 429):
        return None
    retry_after = _number(_header(headers, "Retry-After"))
    if retry_after is not None:
        return max(0.0, retry_after)
    remaining = _number(_header(headers, "X-RateLimit-Remaining"))
    reset = _number(_header(headers, "X-RateLimit-Reset"))
    if remaining == 0 and reset is not None:
        return max(0.0, reset - now) + 1.0  # reset is whole seconds; don't arrive early
    if status == 429:
        return 60.0  # GitHub's documented default for secondary limits without headers
    return None


def advise(
    policy: RetryPolicy,
    attempt: int,
    status: int | None,
    headers: Mapping[str, str],
    now: float,
    error: str = "",
) -> Advice:
    """What to do after ``attempt`` (1-based) got ``status`` (None: no response, ``error`` says why)."""
    last = attempt >= policy.max_attempts
    if status is None:
        reason = f"no response ({error or 'connection failed'})"
        return Advice(not last, policy.backoff(attempt), reason, transient=True)
    if 200 <= status < 300:
        return Advice(False, reason="ok")
    wait = rate_limit_wait(status, headers, now)
    if wait is not None:
        reason = f"rate limited ({status}), GitHub asks to wait {wait:.0f} s"
        inline = wait <= policy.max_inline_wait
        return Advice(not last and inline, wait, reason, transient=True)
    if status >= 500:
        return Advice(not last, policy.backoff(attempt), f"GitHub server error {status}", transient=True)
    return Advice(False, reason=f"GitHub refused the request ({status})", transient=False)
