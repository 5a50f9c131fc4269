"""What the master writes into twistd.log when it starts: sentences a newcomer can read, and no figures
only whoever measures the master needs."""

from __future__ import annotations

import gc
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import ROOT
from twisted.python import log

from buildbot_bsdkm.buildbot.heap import FrozenStartupHeap
from buildbot_bsdkm.buildbot.trust_levels import warn_without_levels


def twisted_messages(action: Any) -> list[str]:
    """What ``action`` logs through Twisted, which twistd.log writes at every level."""
    seen: list[str] = []

    def observer(event: dict[str, Any]) -> None:
        seen.append(" ".join(str(m) for m in event.get("message", ())))

    log.addObserver(observer)
    try:
        action()
    finally:
        log.removeObserver(observer)
    return seen


def test_workers_without_a_trust_level_are_named_in_a_sentence() -> None:
    one = warn_without_levels([("linux", ("linux-userspace",)), ("bsd1", ("freebsd-14.3-amd64", "trusted"))])
    assert one == ("bsdkm: worker linux has no trust level (trusted, untrusted or vm-reset) in its tags, so "
                   "it runs every build: base-branch builds and pull requests of untrusted authors alike. "
                   "Name one in bsdkm.yml's workers.linux.tags (docs: security model, trust levels).")
    two = warn_without_levels([("linux", ()), ("qemu1", ("linux-qemu",))])
    assert two is not None
    assert two.startswith("bsdkm: workers linux, qemu1 have no trust level (trusted, untrusted or vm-reset) "
                          "in their tags, so they run every build")
    assert "workers.<name>.tags" in two


def test_the_quick_start_says_where_a_worker_gets_its_trust_level() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start: Buildbot", 1)[1].split("\n## ", 1)[0]
    assert "trust level" in quick_start and "workers:" in quick_start


def test_the_frozen_heap_figure_is_below_the_default_log_level(caplog: pytest.LogCaptureFixture) -> None:
    heap = FrozenStartupHeap()
    reactor = SimpleNamespace(when_running=[])
    reactor.callWhenRunning = reactor.when_running.append
    heap.parent = SimpleNamespace(master=SimpleNamespace(reactor=reactor))  # type: ignore[assignment]
    gc.unfreeze()
    try:
        heap.startService()
        (freeze,) = reactor.when_running
        with caplog.at_level(logging.INFO):
            assert not any("heap" in m for m in twisted_messages(freeze))
        assert not any("heap" in r.getMessage() for r in caplog.records)
        gc.unfreeze()
        with caplog.at_level(logging.DEBUG, logger="buildbot_bsdkm.buildbot.heap"):
            freeze()
        assert any(r.getMessage().endswith("objects of the startup heap frozen") for r in caplog.records)
    finally:
        gc.unfreeze()
