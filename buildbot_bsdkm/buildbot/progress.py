"""Live progress of a running stage step: its progress lines become the step's summary as they come.

``bsdkm-ci stage`` prints a line for each milestone it reaches (``contract.StageProgress``: building,
booting, self-test, benchmark round 2 of 5, ...). Buildbot's own log observer hears the step's log
as the worker sends it; the core reads the line (``contract.read_progress``), so the words the UI
shows are the stage's own and nothing here parses them.
"""

from __future__ import annotations

from collections.abc import Callable

from buildbot.process.logobserver import LogLineObserver

from ..contract import StageProgress, read_progress


class StageProgressObserver(LogLineObserver):
    """Hands each progress line of a stage's log, read by the core, to ``reached``."""

    def __init__(self, reached: Callable[[StageProgress], None]) -> None:
        super().__init__()
        self.reached = reached

    def outLineReceived(self, line: str) -> None:  # noqa: N802 - Buildbot's name
        self._line(line)

    def errLineReceived(self, line: str) -> None:  # noqa: N802 - Buildbot's name
        self._line(line)

    def _line(self, line: str) -> None:
        progress = read_progress(line)
        if progress is not None:
            self.reached(progress)
