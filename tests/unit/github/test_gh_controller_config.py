"""The GitHub controller takes its configuration as Buildbot's services do: ``checkConfig`` refuses a
bad one when ``master.cfg`` is read, ``reconfigService`` applies a new one on a reconfig, and what is
on its way to GitHub (publisher, inbox, store) stays with the running service."""

from __future__ import annotations

from typing import Any

import pytest
from buildbot import config
from buildbot.util import ComparableMixin

from buildbot_bsdkm.github.buildsets import PrBuilder
from buildbot_bsdkm.github.controller import PullRequestBuilds
from buildbot_bsdkm.github.settings import parse_settings
from buildbot_bsdkm.github.state_store import MemoryStore

ENV = {"GITHUB_TOKEN": "t0ken", "BSDKM_WEBHOOK_SECRET": "s3cret"}
NOASM = PrBuilder("userspace", "noasm", "userspace/noasm")
INTELASM = PrBuilder("userspace", "intelasm", "userspace/intelasm")


def _done(d: Any) -> Any:
    got: list[Any] = []
    d.addBoth(got.append)
    assert got, "did not finish at once"
    if hasattr(got[0], "raiseException"):
        got[0].raiseException()
    return got[0]


def test_a_reconfig_applies_the_new_github_section_and_builders() -> None:
    """Fails on the old code: checkConfig and reconfigService were no-ops, so a reconfig kept the
    old repositories, settings and builders until the master restarted."""
    store, publisher = MemoryStore(), object()
    running = PullRequestBuilds(parse_settings({"repo": "wolfSSL/wolfssl"}, env=ENV), [NOASM],
                                publisher=publisher, store=store)  # type: ignore[arg-type]
    newer = parse_settings({"repo": "wolfSSL/wolfssl-fork", "statuses": False}, env=ENV)
    sibling = PullRequestBuilds(newer, [NOASM, INTELASM], publisher=object())  # type: ignore[arg-type]
    _done(running.reconfigServiceWithSibling(sibling))
    assert running.settings is newer and running.builders == [NOASM, INTELASM]
    assert running.accepts_repo("wolfSSL/wolfssl-fork") and not running.accepts_repo("wolfSSL/wolfssl")
    assert running.publisher is publisher and running.store is store  # what is on its way stays
    # Buildbot compares configurations: the same one again is no reconfig, another builder list is.
    same = PullRequestBuilds(newer, [NOASM, INTELASM], publisher=publisher)  # type: ignore[arg-type]
    other = PullRequestBuilds(newer, [NOASM], publisher=publisher)  # type: ignore[arg-type]
    assert ComparableMixin.isEquivalent(same, PullRequestBuilds(newer, [NOASM, INTELASM],
                                                                publisher=publisher))  # type: ignore[arg-type]
    assert not ComparableMixin.isEquivalent(same, other)


def test_a_bad_configuration_is_refused_when_master_cfg_is_read() -> None:
    settings = parse_settings({"repo": "wolfSSL/wolfssl"}, env=ENV)
    with pytest.raises(config.ConfigErrors, match="PR builders named twice: userspace/noasm"):
        PullRequestBuilds(settings, [NOASM, NOASM], publisher=None)  # type: ignore[arg-type]
    with pytest.raises(config.ConfigErrors, match="settings must be the github: section"):
        PullRequestBuilds({"repo": "wolfSSL/wolfssl"}, [NOASM], publisher=None)  # type: ignore[arg-type]
