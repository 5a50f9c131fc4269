"""Run Twisted code from synchronous pytest tests: one reactor in a daemon thread per process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet import defer, reactor, threads

T = TypeVar("T")
_started = threading.Lock()
_thread: threading.Thread | None = None


def _ensure_running() -> None:
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(
                target=reactor.run, kwargs={"installSignalHandlers": False}, name="reactor", daemon=True
            )
            _thread.start()


def run(make: Callable[[], Coroutine[Any, Any, T]], timeout: float = 120.0) -> T:
    """Run the coroutine ``make()`` on the reactor thread and return its result."""
    _ensure_running()
    return threads.blockingCallFromThread(reactor, lambda: defer.ensureDeferred(make()))
