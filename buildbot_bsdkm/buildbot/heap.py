"""The master's startup heap, frozen once it has started, so that garbage collection on the reactor
thread stays short.

A full collection walks every tracked object, and it runs in whichever thread allocates when the
threshold is reached: under webhook load that is the reactor thread, which then answers nothing
for the collection's length. Most of the heap is what Buildbot, SQLAlchemy and Twisted built at
start and keep for the master's life; frozen, it is never walked again, and a full collection
walks only what came after.
"""

from __future__ import annotations

import gc
import logging
from typing import Any

from buildbot.util import service

# Python's logging, not twistd.log: how many objects were frozen is a figure for whoever measures the
# master (it is in docs/measured.md), noise to everyone else. It shows with logging's DEBUG level on.
_debug = logging.getLogger(__name__).debug


class FrozenStartupHeap(service.BuildbotService):
    name = "bsdkm-frozen-startup-heap"

    def startService(self) -> Any:
        started = super().startService()
        # Once the reactor runs every service has started; what is garbage by then is collected
        # first, so nothing unreachable is frozen with the rest.
        self.master.reactor.callWhenRunning(self.freeze)
        return started

    def freeze(self) -> None:
        gc.collect()
        gc.freeze()
        _debug("bsdkm: %d objects of the startup heap frozen", gc.get_freeze_count())
