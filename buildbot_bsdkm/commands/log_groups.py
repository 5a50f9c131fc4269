"""Each stage of ``bsdkm-ci run`` in a log group of its own on a GitHub Actions run.

The runner folds the lines between ``::group::TITLE`` and ``::endgroup::``. The stage's progress
lines (``contract.StageProgress``, read by the core's ``read_progress``) say when a stage begins;
its lines and those after it, up to the next stage, are its group. The lines themselves are printed
as they are, so the log says what the Buildbot step summary says.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..contract import BASE_SIDE, StageProgress, read_progress
from .action.workflow import escape_data

END_GROUP = "::endgroup::"
# Stages a side runs on its own: the base's builds are groups of their own. Its measurement is not:
# base and head are measured in rounds, one after the other, in the one load, and each side's
# unload and collect come between its rounds, so they stay in the load's group.
ONE_SIDE_STAGES = frozenset({"fetch", "configure", "build"})
IN_GROUP_OF = {"unload": "load", "collect": "load"}


def group_title(progress: StageProgress) -> str:
    """``build userspace/intelasm (base)``: the stage, the run and, for a build, whose."""
    stage = IN_GROUP_OF.get(progress.stage, progress.stage)
    title = " ".join(p for p in (stage, progress.label) if p)
    if progress.side == BASE_SIDE and stage in ONE_SIDE_STAGES:
        title += f" ({BASE_SIDE})"
    return title


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # where the pipeline's own progress goes


class StageLogGroups:
    """A progress sink for the pipeline writing each stage's lines in a group of its own.

    ``close()`` ends the last group; call it before printing anything that belongs to no stage.
    """

    def __init__(self, write: Callable[[str], None] = to_stderr) -> None:
        self.write = write
        self.open: str | None = None

    def __call__(self, line: str) -> None:
        progress = read_progress(line)
        if progress is not None:
            title = group_title(progress)
            if title != self.open:
                self.close()
                self.write(f"::group::{escape_data(title)}")
                self.open = title
        self.write(line)

    def close(self) -> None:
        if self.open is not None:
            self.write(END_GROUP)
            self.open = None
