"""Line hygiene shared by every parser: decoding, escape sequences, prefixes, names."""

from __future__ import annotations

import re

# Longer lines are cut: no real benchmark/kernel line comes near this, and a cap
# keeps memory and regex time bounded on garbage.
MAX_LINE_CHARS = 4096

_ANSI = re.compile(
    r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()][0-9A-Za-z]|[@-Z\\-_]|c)"
)
_SPACES = re.compile(r"\s+")
# "[    9.431805] " (Linux printk) or "[12345] " (FreeBSD msgbuf timestamps), maybe after "<6>".
_KERNEL_TS = re.compile(r"^(?:<\d>)?\[\s*\d+(?:\.\d+)?\] ?")
# Linux module lines: "wolfssl: bench_stats_sym_finish(): ".
_LINUX_FUNC = re.compile(r"^wolfssl: [A-Za-z_][A-Za-z0-9_]*\(\): ")
# FreeBSD device_printf: "libwolf0: ".
_BSD_DEVICE = re.compile(r"^libwolf\d+: ")


def decode_line(raw: bytes) -> tuple[str, bool]:
    """(text, was_valid_utf8)."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), False


def strip_escapes(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line


def strip_kernel_prefix(line: str) -> tuple[str, bool]:
    """Remove a printk timestamp and the module's function/device prefix.

    Returns (rest, had_timestamp): the timestamp tells a Linux kernel log apart.
    """
    had_ts = False
    if line.startswith(("[", "<")):
        m = _KERNEL_TS.match(line)
        if m:
            line = line[m.end() :]
            had_ts = True
    if line.startswith("wolfssl: "):
        m = _LINUX_FUNC.match(line)
        if m:
            line = line[m.end() :]
    elif line.startswith("libwolf"):
        m = _BSD_DEVICE.match(line)
        if m:
            line = line[m.end() :]
    return line, had_ts


def fold_spaces(text: str) -> str:
    """'ECDSA [      SECP256R1]   256' -> 'ECDSA [SECP256R1] 256' (identity used by baselines)."""
    text = " ".join(text.split())  # the same as _SPACES.sub(" ", text.strip()), in C
    if "[" in text:
        text = text.replace("[ ", "[").replace(" ]", "]")
    return text
