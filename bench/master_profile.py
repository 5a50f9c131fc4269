"""Inside a bench master: a profile of the reactor thread while the load runs.

``bench/webhook_load.py --profile FILE`` loads this from the master's configuration: cProfile on
the reactor thread from the service's start to its stop, written to ``FILE`` (``pstats`` format),
and beside it ``FILE.db.json``: each database operation's time in Buildbot's database thread, by
the function it ran (that thread's work shows in the reactor's profile only as waiting).
"""

from __future__ import annotations

import cProfile
import json
import threading
import time
from collections import defaultdict
from typing import Any

from buildbot.util import service
from twisted.internet import defer


class ReactorProfile(service.BuildbotService):
    name = "bsdkm-bench-profile"

    def checkConfig(self, out: str) -> None:
        pass

    def reconfigService(self, out: str) -> defer.Deferred[None]:
        self.out = out
        return defer.succeed(None)

    @defer.inlineCallbacks
    def startService(self) -> Any:
        yield super().startService()
        self.db_times: dict[str, list[float]] = defaultdict(list)
        self._time_db()
        self.profile = cProfile.Profile()
        self.profile.enable()

    def _time_db(self) -> None:
        pool = self.master.db.pool
        inner = pool._DBThreadPool__thd  # noqa: SLF001 - the one place every operation passes
        times, lock = self.db_times, threading.Lock()

        def timed(with_engine: bool, fn: Any, *args: Any, **kwargs: Any) -> Any:
            what = args[0] if getattr(fn, "__name__", "") == "_transaction" and args else fn
            name = getattr(what, "__qualname__", repr(what))
            began = time.perf_counter()
            try:
                return inner(with_engine, fn, *args, **kwargs)
            finally:
                with lock:
                    times[name].append(time.perf_counter() - began)

        pool._DBThreadPool__thd = timed  # noqa: SLF001

    @defer.inlineCallbacks
    def stopService(self) -> Any:
        self.profile.disable()
        self.profile.dump_stats(self.out)
        rows = {name: {"calls": len(t), "total_s": round(sum(t), 3), "max_s": round(max(t), 4)}
                for name, t in self.db_times.items()}
        with open(self.out + ".db.json", "w", encoding="utf-8") as f:
            json.dump(dict(sorted(rows.items(), key=lambda kv: -kv[1]["total_s"])), f, indent=2)
        yield super().stopService()
