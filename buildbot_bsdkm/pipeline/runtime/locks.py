"""Cross-process exclusion for what runs and test sessions share: cache items, build dirs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_file`` (created, with its folder, if missing)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def private_part(dest: Path) -> Path:
    """A new, empty file beside ``dest`` that no other run writes: what becomes ``dest`` once whole.

    A fixed name (``dest.part``) is shared by every run that makes ``dest`` at once: one truncates
    what the other is writing, and the second rename finds nothing to move.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    os.close(fd)
    return Path(name)


def write_atomic(dest: Path, text: str) -> None:
    """``dest`` holds either its old text or ``text``, never a half-written file, for any reader."""
    part = private_part(dest)
    try:
        part.write_text(text)
        part.replace(dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
