"""The one way the pipeline runs a program under a time limit.

Every program runs in its own process group, so a limit (or our own interruption)
stops it and everything it started: a configure's compilers, a script's kldload,
QEMU. Callers get what happened (exit status, seconds, whether the limit hit) and
classify it themselves through ``classify``; nothing here decides whose fault it was.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CommandResult:
    exit_code: int | None  # None: killed at the time limit
    seconds: float
    timed_out: bool


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of ``proc`` (it may be gone already) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _start(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, start_new_session=True, **kwargs)  # type: ignore[call-overload,no-any-return]


def run_logged(
    cmd: list[str],
    *,
    cwd: Path,
    log: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    shell_prefix: str | None = None,
    header: bool = True,
) -> CommandResult:
    """Run ``cmd`` appending stdout+stderr to ``log``; on timeout the whole process group is killed.

    ``header`` writes the command line first and a note when the limit hit; program logs
    the parsers read are written without it, exactly as the program printed them.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = cmd
    if shell_prefix:
        quoted = " ".join(shlex.quote(a) for a in cmd)
        argv = ["/bin/sh", "-c", f"{shell_prefix} exec {quoted}"]
    started = time.monotonic()
    with open(log, "ab") as out:
        if header:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
        try:
            proc = _start(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        except OSError as e:
            out.write(f"cannot start: {e}\n".encode())
            return CommandResult(127, time.monotonic() - started, False)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(proc)
            rc, timed_out = None, True
            if header:
                out.write(f"\n*** killed after {timeout_s:g} s time limit\n".encode())
        except BaseException:
            kill_group(proc)
            raise
    return CommandResult(rc, time.monotonic() - started, timed_out)


@dataclass
class Captured:
    exit_code: int | None  # None: killed at the time limit
    stdout: bytes
    stderr: bytes
    seconds: float


def run_captured(cmd: list[str], *, timeout_s: float, env: dict[str, str] | None = None) -> Captured:
    """Run ``cmd`` with stdout/stderr captured; at the limit its group is killed and what it said is kept."""
    started = time.monotonic()
    proc = _start(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return Captured(proc.returncode, out, err, time.monotonic() - started)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return Captured(None, out, err, time.monotonic() - started)
    except BaseException:
        kill_group(proc)
        raise


@dataclass
class Watched:
    exit_code: int | None  # None: stopped by us (limit or stop condition)
    seconds: float
    timed_out: bool
    stopped: str | None  # why ``stop`` ended the run early; CONSOLE_FLOOD past ``max_bytes``
    log_bytes: int = 0  # what the program wrote to ``log`` (before a flood's cut)


CONSOLE_FLOOD = "console-flood"
READ_CHUNK = 1 << 20  # what one look at the log reads at most: memory stays flat in the log's size


def run_watched(
    cmd: list[str],
    *,
    log: Path,
    timeout_s: float,
    stop: Callable[[str], str | None] | None = None,
    env: dict[str, str] | None = None,
    poll_s: float = 0.5,
    max_bytes: int | None = None,
    stderr: Path | None = None,
) -> Watched:
    """Run ``cmd`` with its output going to ``log`` while ``stop`` watches the text as it comes.

    ``stop(new_text)`` sees each piece of output once, in order (at most ``READ_CHUNK`` bytes at a
    time, so a line may come in two pieces), and returns a reason to end the run now (a console
    reached its verdict and the guest will print nothing more that matters), or None to keep
    going. Past ``max_bytes`` of output the run is stopped (``stopped == CONSOLE_FLOOD``) and the
    log is cut to ``max_bytes``. A VM that never reaches a verdict is killed at ``timeout_s``.
    ``stderr``: where the program's error output goes (None: into ``log`` with the rest).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "wb") as out, contextlib.ExitStack() as files:
        err = files.enter_context(open(stderr, "wb")) if stderr is not None else subprocess.STDOUT
        proc = _start(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    read = 0

    def ended(rc: int | None, timed_out: bool, reason: str | None) -> Watched:
        size = log.stat().st_size if log.exists() else 0
        if reason == CONSOLE_FLOOD and max_bytes is not None:
            os.truncate(log, max_bytes)
        return Watched(rc, time.monotonic() - started, timed_out, reason, size)

    try:
        with open(log, "rb") as watch:
            while True:
                try:
                    rc = proc.wait(timeout=poll_s)
                    return ended(rc, False, None)
                except subprocess.TimeoutExpired:
                    pass
                size = os.fstat(watch.fileno()).st_size
                if max_bytes is not None and size > max_bytes:
                    kill_group(proc)
                    return ended(None, False, CONSOLE_FLOOD)
                while stop is not None and read < size:
                    chunk = watch.read(min(READ_CHUNK, size - read))
                    if not chunk:
                        break
                    read += len(chunk)
                    reason = stop(decoder.decode(chunk))
                    if reason:
                        kill_group(proc)
                        return ended(None, False, reason)
                if time.monotonic() - started >= timeout_s:
                    kill_group(proc)
                    return ended(None, True, None)
    except BaseException:
        kill_group(proc)
        raise


def run_streamed(
    cmd: list[str],
    *,
    timeout_s: float | None,
    on_line: Callable[[str], None],
    env: dict[str, str] | None = None,
) -> CommandResult:
    """Run ``cmd`` handing each line of its stdout+stderr to ``on_line`` as it is printed.

    For a step whose output a person watches live (the Action's wrapped commands). At
    ``timeout_s`` (None: no limit) the whole group is killed; the output read so far is kept.
    OSError when the program cannot start: the caller words that for its own users.
    """
    started = time.monotonic()
    proc = _start(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  env=env)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        with contextlib.suppress(ProcessLookupError):  # it finished just before the limit
            os.killpg(proc.pid, signal.SIGKILL)

    # A timer, not wait(timeout=): the reading loop blocks on the pipe, not on the process.
    timer = threading.Timer(timeout_s, expire) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            on_line(raw.decode("utf-8", errors="replace"))
        rc = proc.wait()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
    timed_out = expired.is_set()
    return CommandResult(None if timed_out else rc, time.monotonic() - started, timed_out)
