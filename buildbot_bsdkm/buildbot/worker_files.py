"""Files the master reads back from a worker, bounded per kind of file.

Buildbot's own ``getFileContentFromWorker`` takes a file of any size and appends each 32 KiB piece
to one string, which is quadratic in the file's size, on the reactor thread. A worker's files are
written next to the PR's code (a module that prints in a loop makes ``results.json`` grow with
it), so each kind of file has a size limit here: the worker stops sending past it, the pieces are
kept in a list (linear time), and a file over its limit is a ``real`` integrity failure that names
the file and the limit, never retried as infrastructure.
"""

from __future__ import annotations

from typing import Any

from buildbot.process import remotetransfer

from ..contract import BASE_OUTCOMES_USED_FILE, RELEASE_OUTCOMES_FILE
from ..model import FailureCategory, StageFailure

MIB = 1024 * 1024
# Far above what a real run writes (a results document of a full matrix is a few MiB), far below
# what would stall the master.
LIMITS: dict[str, int] = {
    "results.json": 64 * MIB,
    "junit.xml": 64 * MIB,
    "state.json": 4 * MIB,
    BASE_OUTCOMES_USED_FILE: 16 * MIB,
    "bisect.json": 16 * MIB,
    "bisect.md": 16 * MIB,
    "release.json": 64 * MIB,
    "release.md": 16 * MIB,
    RELEASE_OUTCOMES_FILE: 16 * MIB,
}
DEFAULT_LIMIT = 64 * MIB  # any other file (a release's baseline-<line>.json)
BLOCK = 32 * 1024


def limit_for(path: str) -> int:
    """The size limit of the worker file at ``path`` (by its name)."""
    return LIMITS.get(path.rsplit("/", 1)[-1], DEFAULT_LIMIT)


class WorkerFileTooLarge(Exception):
    """A worker file over its kind's limit."""

    def __init__(self, path: str, limit: int) -> None:
        self.path, self.limit = path, limit
        super().__init__(f"{path} on the worker is larger than its limit of {limit // MIB} MiB")

    def failure(self, stage: str) -> StageFailure:
        return StageFailure(stage=stage, category=FailureCategory.REAL, reason="integrity",
                            message=str(self), evidence=[self.path])


class BoundedStringWriter(remotetransfer.StringFileWriter):
    """Keeps the pieces of an upload in a list, and notes when more than ``limit`` bytes arrived."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.pieces: list[bytes] = []
        self.size = 0
        self.over = False

    def remote_write(self, data: Any) -> None:
        piece = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        self.size += len(piece)
        if self.size > self.limit:
            self.over = True
            self.pieces = []  # nothing past the limit is kept, nor what came before it
            return
        self.pieces.append(piece)

    @property  # type: ignore[override]  # Buildbot's writer keeps a plain attribute
    def buffer(self) -> str:
        return b"".join(self.pieces).decode("utf-8", "replace")

    @buffer.setter
    def buffer(self, _value: str) -> None:  # StringFileWriter.__init__ sets it
        pass


async def read_text(step: Any, path: str, limit: int | None = None) -> str | None:
    """The worker file ``path`` (relative to the step's workdir) as text; None when it is not there.

    ``WorkerFileTooLarge`` past ``limit`` (default: ``limit_for(path)``).
    """
    limit = limit_for(path) if limit is None else limit
    step.checkWorkerHasCommand("uploadFile")
    writer = BoundedStringWriter(limit)
    # one byte past the limit: enough to know the file is over it, without the rest of it
    args: dict[str, Any] = {"workdir": step.workdir, "writer": writer, "maxsize": limit + 1,
                            "blocksize": BLOCK}
    if step.workerVersionIsOlderThan("uploadFile", "3.0"):
        args["slavesrc"] = path
    else:
        args["workersrc"] = path

    def complete(cmd: Any) -> str | None:
        if writer.over:
            raise WorkerFileTooLarge(path, limit)
        return None if cmd.didFail() else writer.buffer

    return await step.runRemoteCommand("uploadFile", args, abandonOnFailure=False, evaluateCommand=complete)
