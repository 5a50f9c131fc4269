"""How the suite spreads over pytest-xdist workers.

Each test file is one unit of work, so its module fixtures (a wolfSSL build, a booted guest) are
made once. Units go out longest first, by the seconds a recorded run took (``durations.json``), so
the last unit to start is a short one. The files that drive Twisted are one unit: trial's cases
must run before the files that start the real reactor in a thread, in the same process.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

HERE = Path(__file__).resolve().parent
DURATIONS = HERE / "durations.json"
REACTOR_UNIT = "twisted-reactor"
# A real reactor left running with connections cached makes trial's cases find it unclean, so the
# files using either go in one unit, trial's first. Found by what they import, so a new file joins.
TRIAL_MARKS = re.compile(r"^from (?:twisted\.trial|buildbot\.test\.reactor|test_bb_steps) import", re.M)
REACTOR_THREAD_MARKS = re.compile(
    r"^from github_fake(?:\.reactor_thread import|\s+import .*\breactor_thread\b)", re.M)


def _files_with(marks: re.Pattern[str]) -> frozenset[str]:
    found = set()
    for here, dirs, files in os.walk(HERE):
        dirs[:] = [d for d in dirs if not d.startswith(("node", ".", "__"))]
        for name in files:
            if name.startswith("test_") and name.endswith(".py") and name != Path(__file__).name:
                text = (Path(here) / name).read_text(encoding="utf-8", errors="replace")
                if marks.search(text):
                    found.add(name)
    return frozenset(found)


TRIAL_FILES = _files_with(TRIAL_MARKS)
REACTOR_THREAD_FILES = _files_with(REACTOR_THREAD_MARKS) - TRIAL_FILES
REACTOR_FILES = TRIAL_FILES | REACTOR_THREAD_FILES
UNKNOWN_FILE_S = 10.0  # a file no recorded run has seen yet


def recorded_seconds() -> dict[str, float]:
    """Seconds per test file (by file name, so moving a file keeps its figure)."""
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def unit_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return REACTOR_UNIT if Path(path).name in REACTOR_FILES else path


def unit_seconds(unit: str, seconds: dict[str, float]) -> float:
    if unit == REACTOR_UNIT:
        return sum(seconds.get(name, UNKNOWN_FILE_S) for name in REACTOR_FILES)
    return seconds.get(Path(unit).name, UNKNOWN_FILE_S)


def longest_first(nodeids: Sequence[str]) -> list[int]:
    """Indexes of ``nodeids`` reordered unit by unit, longest unit first.

    Within a unit the order is kept, except that trial's files go before the reactor-thread ones.
    """
    seconds = recorded_seconds()
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(unit_of(nodeid), i)
    rank = {u: (-unit_seconds(u, seconds), first) for u, first in first_seen.items()}

    def key(i: int) -> tuple[tuple[float, int], bool, int]:
        name = Path(nodeids[i].split("::", 1)[0]).name
        return rank[unit_of(nodeids[i])], name not in TRIAL_FILES, i

    return sorted(range(len(nodeids)), key=key)


class FileUnits(LoadScopeScheduling):
    """xdist's scope scheduling with our units; the workers collect in ``longest_first`` order."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
