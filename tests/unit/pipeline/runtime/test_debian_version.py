"""Debian's version ordering when choosing a source package from a ``Sources`` index."""

from __future__ import annotations

import pytest

from buildbot_bsdkm.config.bsdkm_yml import DebianSource
from buildbot_bsdkm.pipeline.runtime.source import ArchiveFile, SourcePackage, parse_sources, pick_package
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError


def entry(version: str) -> SourcePackage:
    return SourcePackage("wolfssl", version, "pool/main/w/wolfssl",
                         (ArchiveFile("wolfssl_5.9.2.orig.tar.gz", "0" * 64, 1),))


@pytest.mark.parametrize(("lower", "higher"), [
    ("5.9.2-1~bpo12+1", "5.9.2-1"),   # a backport sorts below the release it was built from
    ("5.9.2~rc1-1", "5.9.2-1"),       # a release candidate below the release
    ("5.9.2-1", "5.9.2-1+deb13u1"),   # a stable update above it
    ("5.9.2-1.2", "5.9.2-2"),         # an NMU below the next maintainer upload
    ("9.9.9-1", "1:5.9.2-1"),         # the epoch wins
])
def test_newest_entry_by_debians_rules(lower: str, higher: str) -> None:
    for order in ([lower, higher], [higher, lower]):
        picked = pick_package([entry(v) for v in order], DebianSource(version=""), "sid")
        assert picked.version == higher


def test_upstream_version_drops_epoch_and_revision_only() -> None:
    assert entry("1:5.9.2-1~bpo12+1").upstream_version == "5.9.2"
    assert entry("5.9.2-rc-1").upstream_version == "5.9.2-rc"  # the revision follows the last hyphen
    assert entry("5.9.2").upstream_version == "5.9.2"          # native package


def test_the_wanted_upstream_version_then_the_newest_revision() -> None:
    entries = [entry(v) for v in ("5.9.2-1", "5.9.2-1~bpo12+1", "5.9.0-3", "5.9.2-1~bpo12+2")]
    assert pick_package(entries, DebianSource(version="5.9.2"), "sid").version == "5.9.2-1"


def test_garbage_versions_are_never_chosen() -> None:
    entries = [entry("not a version!"), entry("5.9.2-1")]
    assert pick_package(entries, DebianSource(version=""), "sid").version == "5.9.2-1"
    with pytest.raises(StageError, match="no valid Debian version of wolfssl"):
        pick_package([entry("")], DebianSource(version=""), "sid")


def test_index_paragraphs_feed_the_same_ordering() -> None:
    index = "".join(
        f"Package: wolfssl\nVersion: {v}\nDirectory: pool/main/w/wolfssl\nChecksums-Sha256:\n"
        f" {'a' * 64} 10 wolfssl_5.9.2.orig.tar.gz\n\n"
        for v in ("5.9.2-1", "5.9.2-1~bpo12+1")
    )
    entries = parse_sources(index.splitlines(keepends=True), "wolfssl")
    assert pick_package(entries, DebianSource(), "backports").version == "5.9.2-1"
