"""A loopback HTTP mirror that holds each answer until a second request for the same file arrives.

Two runs that download one file at once overlap for certain here, whatever the machine's speed: the
first request waits (at most ``hold_s``) for the second, then both are answered, slowly, in chunks.
A run that waits for another's download instead sends its request after the hold, and the mirror
counts every request per path, so a test sees how many downloads there were.
"""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loopback_http import serving


class _Held(http.server.SimpleHTTPRequestHandler):
    mirror: HeldMirror

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.mirror.arrived(self.path)
        super().do_GET()

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        # Slowly, so the two answers are written at the same time.
        while chunk := source.read(self.mirror.chunk):
            outputfile.write(chunk)
            time.sleep(self.mirror.pause_s)


class HeldMirror:
    def __init__(self, root: Path, *, hold_s: float = 3.0, chunk: int = 1 << 20,
                 pause_s: float = 0.02) -> None:
        self.root, self.hold_s, self.chunk, self.pause_s = root, hold_s, chunk, pause_s
        self.requests: Counter[str] = Counter()
        self._cond = threading.Condition()

    def arrived(self, path: str) -> None:
        with self._cond:
            self.requests[path] += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.requests[path] >= 2, timeout=self.hold_s)

    @contextmanager
    def serving(self) -> Iterator[str]:
        handler = functools.partial(type("Handler", (_Held,), {"mirror": self}), directory=str(self.root))
        with serving(handler) as url:
            yield url
