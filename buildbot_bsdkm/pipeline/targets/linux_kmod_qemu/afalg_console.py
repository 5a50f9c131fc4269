"""The AF_ALG benchmark's lines on a Linux guest's console (``afalg.py`` builds and stages the program).

Kept apart from ``afalg.py`` so the Linux target can read them without importing what builds
the program (which needs the Linux target's kernel helpers).
"""

from __future__ import annotations

from pathlib import Path

from ....model import LogFormat, LogResult, Problem
from ....parsers import parse_file

LOG_NAME = "afalg.log"
LINE_PREFIXES = ("afalg-bench:", "afalg-proc:", "afalg-bound:", "afalg-result:", "afalg-error:",
                 "afalg-kmod:")


def extract_log(console: Path, out: Path) -> Path | None:
    """The ``afalg-*`` lines of a console log in ``out``; None when the console has none."""
    if not console.is_file():
        return None
    kept = []
    with open(console, encoding="utf-8", errors="replace", newline="") as fh:
        for raw in fh:
            line = raw.replace("\r", "").rstrip("\n")
            at = min((i for p in LINE_PREFIXES if (i := line.find(p)) >= 0), default=-1)
            if at >= 0:
                kept.append(line[at:] + "\n")
    if not kept:
        return None
    out.write_text("".join(kept))
    return out


def console_logs(console: Path, run_dir: Path, expected: bool) -> list[LogResult]:
    """The parsed AF_ALG log of a finished boot; an expected one that is missing is incomplete."""
    path = extract_log(console, run_dir / LOG_NAME)
    if path is not None:
        return [parse_file(path, LogFormat.AFALG_BENCH)]
    if not expected:
        return []
    reason = "the lkcapi variant's AF_ALG benchmark printed nothing (did the module load?)"
    return [LogResult(source=str(run_dir / LOG_NAME), format=LogFormat.AFALG_BENCH, complete=False,
                      incomplete_reason=reason, problems=[Problem(reason)])]
