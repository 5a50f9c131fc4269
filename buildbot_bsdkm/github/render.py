"""The PR's report (its verdict, statuses and comment), made in a child process with a time limit.

Making it reads PR-controlled text (results, console lines, signatures) and runs the whole judging
over it. On the master's reactor thread, one slow input would stop every webhook, worker and UI
request for as long as it takes; in a thread of the master's process it would still hold the
interpreter (a regular expression never lets go of it). So it runs in one child process of the
master, which is killed past the limit and started again for the next report: the build's status
then says its result without the details, and the comment says it was not rendered.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..checks import Verdict
from ..report.commit_status import CommitStatus
from ..report.pull_request import REPORT_MARKER, PullRequestReport
from .aggregate import FAILURE, SUCCESS, WARNINGS, BuildFacts, PrReport

BODY_LIMIT_S = 60.0
STATUS_LIMIT_S = 20.0  # the start of a build: its status only, with nothing judged
START_LIMIT_S = 60.0  # the child's start: Python and the core imported, on a busy master


class RenderError(RuntimeError):
    """The child did not answer in time, or failed; the message says which."""


@dataclass(frozen=True)
class Rendered:
    """A rendering, or the fallback when it did not finish (``error`` says why)."""

    value: Any
    error: str | None = None
    seconds: float = 0.0


def _serve(fd: int) -> None:
    """The child's loop: one request at a time, answered on the same socket."""
    conn = Connection(fd)
    conn.send(("ready", None))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        kind, args = request
        try:
            if kind == "report":
                report, builds, links = args
                answer: Any = report.report(builds, links)
            elif kind == "where":  # which code the child runs
                answer = __file__
            elif kind == "sleep":  # the tests' slow report
                time.sleep(float(args))
                answer = "slept"
            else:
                raise ValueError(f"unknown request {kind!r}")
            conn.send(("ok", answer))
        except Exception as e:  # noqa: BLE001 - any failure is the parent's fallback, never the child's end
            conn.send(("error", f"{type(e).__name__}: {e}"))


class _Child:
    def __init__(self) -> None:
        parent, child = socket.socketpair()
        # The child must run this very code, whatever the interpreter would find first on its own.
        root = str(Path(__file__).resolve().parents[2])
        paths = (root, os.environ.get("PYTHONPATH"))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", f"from {__name__} import _serve; _serve({child.fileno()})"],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, close_fds=True, env=env,
            )
        finally:
            child.close()
        self.conn = Connection(parent.detach())
        if not self.conn.poll(START_LIMIT_S):
            self.kill()
            raise RenderError(f"the report renderer did not start within {START_LIMIT_S:g} s")
        self.conn.recv()

    def ask(self, kind: str, args: Any, limit_s: float) -> Any:
        self.conn.send((kind, args))
        if not self.conn.poll(limit_s):
            raise TimeoutError
        status, value = self.conn.recv()
        if status != "ok":
            raise RenderError(str(value))
        return value

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.conn.close()


class Renderer:
    """One child process, one request at a time; blocking calls (run them in a thread)."""

    def __init__(self, body_limit_s: float = BODY_LIMIT_S, status_limit_s: float = STATUS_LIMIT_S) -> None:
        self.body_limit_s = body_limit_s
        self.status_limit_s = status_limit_s
        self._child: _Child | None = None
        self._lock = threading.Lock()

    def _ask(self, kind: str, args: Any, limit_s: float) -> Rendered:
        started = time.monotonic()
        with self._lock:
            try:
                if self._child is None or self._child.process.poll() is not None:
                    self._child = _Child()
                value = self._child.ask(kind, args, limit_s)
                return Rendered(value, None, time.monotonic() - started)
            except TimeoutError:
                self._stop_child()
                return Rendered(None, f"not rendered within {limit_s:g} s", time.monotonic() - started)
            except (RenderError, OSError, EOFError, pickle.PicklingError) as e:
                self._stop_child()
                return Rendered(None, f"not rendered: {e}", time.monotonic() - started)

    def start(self) -> None:
        """Start the child ahead of the first report (its start is most of a first rendering)."""
        with self._lock:
            if self._child is None:
                self._child = _Child()

    def _stop_child(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None

    def report(self, report: PrReport, builds: Sequence[BuildFacts],
               links: Mapping[str, str] | None = None) -> Rendered:
        """The PR's ``PullRequestReport``; past the limit, ``fallback_report``."""
        got = self._ask("report", (report, list(builds), dict(links or {})), self.body_limit_s)
        if got.error is None:
            return got
        return Rendered(fallback_report(builds, got.error), got.error, got.seconds)

    def where(self) -> Rendered:
        return self._ask("where", None, self.status_limit_s)

    def sleep(self, seconds: float, limit_s: float) -> Rendered:
        return self._ask("sleep", seconds, limit_s)

    def close(self) -> None:
        with self._lock:
            self._stop_child()

    @property
    def child_pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None


def fallback_status(facts: BuildFacts, why: str) -> tuple[str, str]:
    """The build's result alone: never ``pending`` for a finished build, never a pass it did not have."""
    if facts.results is None:
        return "pending", "building"
    state = {SUCCESS: "success", WARNINGS: "success", FAILURE: "failure"}.get(facts.results, "error")
    return state, f"finished ({state}); the details were {why}: see the build"


def fallback_body(builds: Sequence[BuildFacts], why: str) -> str:
    """The comment when the report could not be rendered: which builds, where, and why not."""
    lines = [REPORT_MARKER, "", f"**The report of these builds was {why}.** Each build's commit status "
             "still says its result; the builds:", ""]
    for b in sorted(builds, key=lambda b: b.context):
        state = fallback_status(b, why)[0] if b.results is not None else "pending"
        where = f" ({b.url})" if b.url else ""
        lines.append(f"- `{b.context}`: {state}{where}")
    return "\n".join(lines) + "\n"


def fallback_report(builds: Sequence[BuildFacts], why: str) -> PullRequestReport:
    """The report when it could not be made: each build's result alone, and a comment saying why."""
    statuses = [CommitStatus(b.target, b.variant, *fallback_status(b, why), b.url) for b in builds]
    running = [b.context for b in builds if b.results is None]
    markdown = fallback_body(builds, why).removeprefix(REPORT_MARKER + "\n")
    return PullRequestReport(Verdict(), statuses, markdown, running)
