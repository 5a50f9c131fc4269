"""Reading a guest's console without holding it: the module decides how long it gets.

A module printing in a loop writes tens of MiB a minute (the cap, ``console_cap_mib``, stops the
guest); everything that reads a console after the boot reads it here, in pieces, so memory stays
flat in its size. Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (the firmware ends its last
line with one, right before the first marker). Starting a line does not prove a line is the
harness's: the boot's nonce does (``linuxkm``, ``freebsd_qemu``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ...retry.classify_failure import Patterns

CHUNK_CHARS = 1 << 20
MAX_LINE_CHARS = 64 * 1024  # a longer line comes in pieces of this size
MAX_PATTERN_LINES = 200


def console_lines(path: Path) -> Iterator[str]:
    """``path``'s lines with their ``\n``, one at a time; none when it is absent.

    A line longer than ``MAX_LINE_CHARS`` is cut there and the rest of it dropped: nothing past
    the cut starts a line (the harness never prints such lines).
    """
    if not Path(path).is_file():
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        carry, dropping = "", False
        while chunk := fh.read(CHUNK_CHARS):
            parts = (carry + chunk).split("\n")
            carry = parts.pop()
            for part in parts:
                if not dropping:
                    yield part[:MAX_LINE_CHARS] + "\n"
                dropping = False
            if len(carry) > MAX_LINE_CHARS and not dropping:
                yield carry[:MAX_LINE_CHARS] + "\n"
                dropping = True
            if dropping:
                carry = ""
        if carry and not dropping:
            yield carry


def _compiled(patterns: Patterns) -> list[re.Pattern[str]]:
    # One regex each: a union of them scans a console about twice as slowly.
    return [re.compile(p, re.MULTILINE) for p, _ in patterns.real]


def pattern_lines(path: Path, patterns: Patterns) -> str:
    """The lines of a console a real-failure pattern matches (the first ``MAX_PATTERN_LINES``).

    What ``classify`` needs of a console: infrastructure patterns never read one (the module
    writes it). Read a piece at a time; a line is cut to ``MAX_LINE_CHARS``.
    """
    if not Path(path).is_file():
        return ""
    rxs = _compiled(patterns)
    kept: list[str] = []
    carry = ""
    with open(path, encoding="utf-8", errors="replace") as fh:
        while len(kept) < MAX_PATTERN_LINES:
            chunk = fh.read(CHUNK_CHARS)
            if not chunk:
                _matching_lines(carry, rxs, kept)
                break
            text = carry + chunk
            end = text.rfind("\n")
            if end < 0:  # one line longer than a piece so far: keep its end
                carry = text[-MAX_LINE_CHARS:]
                continue
            _matching_lines(text[:end], rxs, kept)
            carry = text[end + 1:][-MAX_LINE_CHARS:]
    return "\n".join(kept[:MAX_PATTERN_LINES])


def _matching_lines(body: str, rxs: list[re.Pattern[str]], kept: list[str]) -> None:
    starts: set[int] = set()
    for rx in rxs:
        for m in rx.finditer(body):
            start = body.rfind("\n", 0, m.start()) + 1
            if start in starts:
                continue
            starts.add(start)
            end = body.find("\n", m.start())
            kept.append(body[start:end if end >= 0 else len(body)].replace("\r", "")[:MAX_LINE_CHARS])
            if len(kept) >= MAX_PATTERN_LINES:
                return
