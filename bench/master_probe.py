"""Inside a bench master: how long the reactor goes without a turn, while reports render and worker
files arrive.

``bench/webhook_load.py --busy`` loads this from the master's configuration. It adds one service:

* a 10 ms tick on the reactor; every gap beyond the tick is time the reactor spent on something
  else (a request handler, a report, a transfer) or waited for (the interpreter lock, the CPU):
  its maximum and percentiles are the figures, and beside them the reactor thread's own CPU time
  in each gap (``cpu_*``), which a CPU-starved machine does not inflate (the first 3 s, the
  master still starting, are left out);
* a PR report rendered every ``render_every_s`` exactly as the GitHub reporter renders one
  (``render.Renderer`` in a thread, one at a time): the comment and the status of a build whose
  FreeBSD panic line is 1500 dashes, the input that took the signature's patterns seconds;
* a worker file read every ``read_every_s``: ``read_mib`` MiB of console text in 32 KiB chunks
  through the steps' ``worker_files.BoundedStringWriter``, one chunk per reactor turn as the
  worker's messages would arrive; then a results document of ``results_tests`` self-tests (about
  3 MiB) parsed and its report rendered in the reactor's thread pool, as the Collect and Gate steps
  do with ``results.json``.

Where the reactor thread's own CPU goes in a long gap: every reactor callback (an I/O event, a
timed call, a thread's result) that holds the reactor thread's CPU for more than 50 ms is named in
``slow_calls``, with the garbage collection inside it, and the garbage collector's passes run on
the reactor thread are in ``gc_*``. (A sampler of the reactor's stack would see none of the long
ones: a collection holds the interpreter lock from start to end.)

The figures go to ``out`` (JSON) every second and when the master stops.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from pathlib import Path
from typing import Any

from buildbot.util import service
from twisted.internet import defer, task, threads

TICK_S = 0.01
SLOW_CALL_S = 0.05
WARMUP_S = 3.0  # the bench waits 5 s after the master started before it sends anything


def _name(f: Any) -> str:
    """What a reactor callback is: a Deferred firing is named by its first callback."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, defer.Deferred) and owner.callbacks:
        first = owner.callbacks[0][0][0]
        return f"Deferred -> {getattr(first, '__qualname__', repr(first))}"
    return str(getattr(f, "__qualname__", None) or repr(f))[:200]


def _io_name(selectable: Any) -> str:
    protocol = getattr(selectable, "protocol", None)
    name = type(protocol or selectable).__name__
    requests = getattr(protocol, "requests", None)
    if requests:
        last = requests[-1]
        name += f" {getattr(last, 'method', b'').decode()} {getattr(last, 'uri', b'').decode()[:80]}"
    return name


def _panic_facts() -> Any:
    from buildbot_bsdkm.contract import RESULTS_PROPERTY
    from buildbot_bsdkm.github.aggregate import FAILURE, BuildFacts
    from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure, to_json

    run = RunResult(variant="noasm", target="userspace", failure=StageFailure(
        stage="load", message="panic: " + "-" * 1500, category=FailureCategory.REAL, reason="kernel-panic"))
    props = {RESULTS_PROPERTY: to_json([run]), "github_pr_number": 1}
    return BuildFacts("userspace", "noasm", FAILURE, None, props)


def _results_text(tests: int) -> str:
    from buildbot_bsdkm.model import LogResult, RunResult, SelfTest, to_json

    rows = [SelfTest(f"test {i} passed!", True) for i in range(tests)]
    return to_json([RunResult("noasm", "userspace", logs=[LogResult("x.log", tests=rows, complete=True)])])


class ReactorProbe(service.BuildbotService):
    name = "bsdkm-bench-probe"

    def checkConfig(self, out: str, render_every_s: float = 2.0, read_every_s: float = 5.0,
                    read_mib: float = 8.0, results_tests: int = 20000) -> None:
        pass

    def reconfigService(self, out: str, render_every_s: float = 2.0, read_every_s: float = 5.0,
                        read_mib: float = 8.0, results_tests: int = 20000) -> defer.Deferred[None]:
        self.out = Path(out)
        self.render_every_s, self.read_every_s, self.read_mib = render_every_s, read_every_s, read_mib
        self.results_tests = results_tests
        return defer.succeed(None)

    @defer.inlineCallbacks
    def startService(self) -> Any:
        yield super().startService()
        from buildbot_bsdkm.github.aggregate import PrReport
        from buildbot_bsdkm.github.render import Renderer
        from buildbot_bsdkm.policy import load_policy
        from buildbot_bsdkm.support.resources import default_policy_path

        reactor = self.master.reactor
        self.gaps: list[float] = []
        self.cpu_gaps: list[float] = []
        self.last = time.monotonic()
        self.last_cpu = time.thread_time()
        self.stats: dict[str, Any] = {"renders": 0, "render_errors": [], "render_s": [], "reads": 0,
                                      "read_bytes": 0, "read_s": []}
        self.renderer = Renderer()
        self.report = PrReport(load_policy(default_policy_path()))
        self.facts = _panic_facts()
        self.payload = (b"test passed!\n" * int(self.read_mib * 1024 * 1024 / 13))
        self.results = _results_text(self.results_tests)
        self.lock = defer.DeferredLock()
        self.reactor_thread = threading.get_ident()
        self.gc_s: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)
        self.slow_calls: list[dict[str, Any]] = []
        self.gc_total = 0.0
        self.started = time.monotonic()
        self._time_callbacks(reactor)
        self.cpu_stalls: list[dict[str, float]] = []
        self.heap_objects = len(gc.get_objects())
        # From here on, not from before the setup above, which is the probe's own work.
        self.last, self.last_cpu = time.monotonic(), time.thread_time()
        self.loops = []
        for fn, every in ((self._tick, TICK_S), (self._render, self.render_every_s),
                          (self._read, self.read_every_s), (self._dump, 1.0)):
            loop = task.LoopingCall(fn)
            loop.clock = reactor
            loop.start(every, now=False)
            self.loops.append(loop)

    def _time_callbacks(self, reactor: Any) -> None:
        """Wrap what the reactor runs so that a callback holding its CPU long is named."""

        def timed(kind: str, name: Any, fn: Any) -> Any:
            def run(*a: Any, **kw: Any) -> Any:
                cpu, wall, collected = time.thread_time(), time.monotonic(), self.gc_total
                try:
                    return fn(*a, **kw)
                finally:
                    took = time.thread_time() - cpu
                    if took > SLOW_CALL_S:
                        self.slow_calls.append({
                            "kind": kind, "name": name(*a) if callable(name) else name,
                            "cpu_s": round(took, 4), "wall_s": round(time.monotonic() - wall, 4),
                            "gc_s": round(self.gc_total - collected, 4),
                            "at_s": round(wall - self.started, 2)})
            return run

        io = reactor._doReadOrWrite
        reactor._doReadOrWrite = timed("io", lambda sel, fd, event: _io_name(sel), io)
        call_later, from_thread = reactor.callLater, reactor.callFromThread
        reactor.callLater = lambda delay, f, *a, **kw: call_later(delay, timed("timed", _name(f), f),
                                                                  *a, **kw)
        reactor.callFromThread = lambda f, *a, **kw: from_thread(timed("thread", _name(f), f), *a, **kw)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self.reactor_thread:
            return
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            took = time.thread_time() - self._gc_started
            self.gc_s[int(info["generation"])].append(took)
            self.gc_total += took

    def _tick(self) -> None:
        now, cpu = time.monotonic(), time.thread_time()
        if now - self.started < WARMUP_S:  # the master still starting, before any load
            self.last, self.last_cpu = now, cpu
            return
        self.gaps.append(now - self.last - TICK_S)
        self.cpu_gaps.append(cpu - self.last_cpu)
        if cpu - self.last_cpu > 0.1:
            self.cpu_stalls.append({"at_s": round(now - self.started, 2), "wall_s": round(now - self.last, 4),
                                    "cpu_s": round(cpu - self.last_cpu, 4)})
        self.last, self.last_cpu = now, cpu

    @defer.inlineCallbacks
    def _render(self) -> Any:
        if self.lock.locked:
            return  # the previous one is still rendering: one at a time, as the reporter does
        started = time.monotonic()
        got = yield self.lock.run(threads.deferToThread, self.renderer.report, self.report, [self.facts])
        self.stats["renders"] += 1
        self.stats["render_s"].append(time.monotonic() - started)
        if got.error:
            self.stats["render_errors"].append(got.error)

    def _read(self) -> defer.Deferred[None]:
        from twisted.internet import reactor as default_reactor

        from buildbot_bsdkm.buildbot.steps import _reports
        from buildbot_bsdkm.buildbot.worker_files import BLOCK, BoundedStringWriter

        reactor = self.master.reactor or default_reactor
        writer = BoundedStringWriter(64 * 1024 * 1024)
        data, chunk = self.payload, BLOCK
        done: defer.Deferred[None] = defer.Deferred()
        started = time.monotonic()

        def step(at: int) -> None:
            if at < len(data):
                writer.remote_write(data[at:at + chunk])
                reactor.callLater(0, step, at + chunk)
                return
            writer.remote_close()
            text = writer.buffer
            # the Gate step's next move: the results parsed and the report rendered, off the reactor
            parsed = threads.deferToThreadPool(reactor, reactor.getThreadPool(), _reports,
                                               self.results, "results.json", {"passed": True, "checks": []})

            def finished(_: Any) -> None:
                self.stats["reads"] += 1
                self.stats["read_bytes"] += len(text)
                self.stats["read_s"].append(time.monotonic() - started)
                done.callback(None)

            parsed.addBoth(finished)

        step(0)
        return done

    def figures(self) -> dict[str, Any]:
        gaps = sorted(self.gaps)
        n = len(gaps)

        def pct(p: float) -> float:
            return gaps[min(n - 1, int(p * (n - 1)))] if n else 0.0

        over = [g for g in gaps if g > 0.1]
        cpu = sorted(self.cpu_gaps)
        return {"ticks": n, "lag_max_s": gaps[-1] if n else 0.0, "lag_p99_s": pct(0.99),
                "lag_p999_s": pct(0.999), "lag_over_100ms": len(over),
                "cpu_max_s": cpu[-1] if cpu else 0.0,
                "cpu_p99_s": cpu[min(len(cpu) - 1, int(0.99 * len(cpu)))] if cpu else 0.0,
                "cpu_over_100ms": sum(1 for c in cpu if c > 0.1),
                **{k: v for k, v in self.stats.items() if not k.endswith("_s")},
                "render_max_s": max(self.stats["render_s"], default=0.0),
                "read_max_s": max(self.stats["read_s"], default=0.0),
                "render_errors": sorted(set(self.stats["render_errors"])),
                **{f"gc{g}_{k}": v for g, times in self.gc_s.items() for k, v in (
                    ("count", len(times)), ("max_s", max(times, default=0.0)),
                    ("over_100ms", sum(1 for t in times if t > 0.1)))},
                "heap_objects_at_start": self.heap_objects, "frozen_objects": gc.get_freeze_count(),
                "cpu_stalls": self.cpu_stalls,
                "slow_calls": sorted(self.slow_calls, key=lambda c: -c["cpu_s"])[:30]}

    def _dump(self) -> None:
        self.out.write_text(json.dumps(self.figures(), indent=2) + "\n", encoding="utf-8")

    @defer.inlineCallbacks
    def stopService(self) -> Any:
        for loop in self.loops:
            if loop.running:
                loop.stop()
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        self._dump()
        yield threads.deferToThread(self.renderer.close)
        yield super().stopService()
