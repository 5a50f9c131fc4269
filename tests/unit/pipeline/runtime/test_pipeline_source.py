"""Fetching wolfSSL: Debian's real index and tarball, checksums, the cache, git PR refs, DNS failures."""

from __future__ import annotations

import functools
import hashlib
import http.server
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_http import serving

from buildbot_bsdkm.config.bsdkm_yml import DebianSource, GitSource, LocalSource, TarballSource
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.source import (
    cache_root,
    download,
    fetch_source,
    pick_package,
    read_index,
    sources_index,
    wolfssl_source,
)
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError

ORIG_SHA256 = "2f4ef3d4fd387a9b3191d36a6316d69116c46ff69bb9583b6c82b36d7b8ca114"


@pytest.fixture(scope="module")
def sid_index() -> Path:
    """Debian sid's real Sources.xz (~12 MB), downloaded once into the shared cache."""
    return sources_index(DebianSource(), cache_root())


@pytest.fixture(scope="module")
def sid_wolfssl(sid_index: Path) -> list:
    return read_index(sid_index, "wolfssl")


@pytest.fixture(scope="module")
def wolfssl_tree() -> Path:
    return wolfssl_source()


def test_real_sid_index_lists_wolfssl_592_with_its_checksum(sid_wolfssl: list) -> None:
    assert [e.package for e in sid_wolfssl] == ["wolfssl"]
    pkg = pick_package(sid_wolfssl, DebianSource(), "sid")
    assert pkg.version == "5.9.2-1.2"
    assert pkg.directory == "pool/main/w/wolfssl"
    orig = pkg.orig_tarball()
    assert orig is not None
    assert (orig.name, orig.sha256, orig.size) == ("wolfssl_5.9.2.orig.tar.gz", ORIG_SHA256, 28078586)


def test_asking_for_a_version_the_suite_lacks_is_a_named_error(sid_wolfssl: list) -> None:
    with pytest.raises(StageError, match=r"has wolfssl 5\.9\.2-1\.2, not 4\.0\.0"):
        pick_package(sid_wolfssl, DebianSource(version="4.0.0"), "sid")
    with pytest.raises(StageError, match="not-a-package is not in sid"):
        pick_package([], DebianSource(package="not-a-package"), "sid")


def test_a_corrupt_index_is_a_named_error_and_removed(tmp_path: Path) -> None:
    bad = tmp_path / "Sources.xz"
    bad.write_bytes(b"\xfd7zXZ\x00 truncated")
    with pytest.raises(StageError, match="not a valid xz index"):
        read_index(bad, "wolfssl")
    assert not bad.exists()


def test_wolfssl_source_is_autogend_592(wolfssl_tree: Path) -> None:
    assert (wolfssl_tree / "configure").is_file()
    assert (wolfssl_tree / "bsdkm" / "wolfkmod.c").is_file()
    assert wolfssl_tree.name == "wolfssl-5.9.2-stable"


def test_second_fetch_does_no_network_io(wolfssl_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def no_network(*args: object, **kwargs: object) -> None:
        calls.append(args)
        raise AssertionError(f"network I/O attempted: {args!r}")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    tree = fetch_source(DebianSource(), cache=cache_root())
    assert tree.path == wolfssl_tree
    assert tree.fetched == [] and calls == []
    assert tree.sha256 == ORIG_SHA256 and tree.version == "5.9.2"


@pytest.fixture()
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on loopback serving ``tmp_path/www``."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    with serving(handler) as url:
        yield url, www


def test_checksum_mismatch_is_detected_and_nothing_is_kept(http_dir: tuple[str, Path],
                                                           tmp_path: Path) -> None:
    url, www = http_dir
    (www / "w.tar.gz").write_bytes(b"not the tarball you are looking for\n")
    real = hashlib.sha256(b"not the tarball you are looking for\n").hexdigest()
    dest = tmp_path / "dl" / "w.tar.gz"
    with pytest.raises(StageError) as info:
        download(f"{url}/w.tar.gz", dest, expect_sha256=ORIG_SHA256)
    f = info.value.failure
    # Not what was promised: real (integrity), never retried.
    assert f.category == FailureCategory.REAL and f.reason == "integrity"
    assert f"expected sha256 {ORIG_SHA256}, got {real}" in f.message
    assert not dest.exists() and not list(dest.parent.glob("*.part"))
    assert download(f"{url}/w.tar.gz", dest, expect_sha256=real) == real and dest.is_file()


def test_http_404_is_a_fetch_failure(http_dir: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = http_dir
    with pytest.raises(StageError) as info:
        download(f"{url}/missing.tar.gz", tmp_path / "x")
    assert info.value.failure.reason == "fetch"
    assert "HTTP 404" in info.value.failure.message


def test_tarball_path_with_wrong_checksum_is_refused(tmp_path: Path) -> None:
    tarball = tmp_path / "w.tar.gz"
    tarball.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(StageError, match="checksum mismatch"):
        fetch_source(TarballSource(str(tarball), "0" * 64), cache=tmp_path / "cache")
    with pytest.raises(StageError, match="cannot unpack"):
        fetch_source(TarballSource(str(tarball)), cache=tmp_path / "cache")


@pytest.mark.parametrize(
    "spec",
    [
        TarballSource("http://nonexistent.invalid/wolfssl-5.9.2.tar.gz"),
        DebianSource(mirror="http://nonexistent.invalid/debian"),
        GitSource("http://nonexistent.invalid/wolfssl.git", "refs/pull/1/merge"),
    ],
    ids=["tarball-url", "debian-mirror", "git"],
)
def test_unresolvable_host_is_an_infrastructure_network_failure(spec: object, tmp_path: Path) -> None:
    with pytest.raises(StageError) as info:
        fetch_source(spec, cache=tmp_path / "cache", timeout_s=60)  # type: ignore[arg-type]
    f = info.value.failure
    assert f.stage == "fetch"
    assert f.category == FailureCategory.INFRASTRUCTURE and f.reason == "network"
    assert "nonexistent.invalid" in f.message
    assert "resolve host" in f.message


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture()
def pr_repo(tmp_path: Path) -> tuple[Path, str]:
    """A bare repo laid out like GitHub's: main, plus refs/pull/1/head and refs/pull/1/merge."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    (work / "configure.ac").write_text("AC_INIT([wolfssl],[5.9.3],[https://www.wolfssl.com])\n")
    (work / "configure").write_text("#!/bin/sh\necho configured\n")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "base")
    _git(work, "checkout", "-qb", "pr")
    (work / "pr-change.c").write_text("int pr_change;\n")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "the PR")
    _git(work, "checkout", "-q", "main")
    (work / "main-change.c").write_text("int main_change;\n")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "main moved on")
    _git(work, "merge", "-q", "--no-ff", "-m", "Merge PR 1", "pr")
    merge = _git(work, "rev-parse", "HEAD")
    bare = tmp_path / "wolfssl.git"
    _git(tmp_path, "init", "-q", "--bare", str(bare))
    _git(work, "push", "-q", str(bare), "main:refs/heads/main", "pr:refs/pull/1/head",
         f"{merge}:refs/pull/1/merge")
    return bare, merge


def test_git_source_checks_out_a_pull_request_merge_ref(pr_repo: tuple[Path, str], tmp_path: Path) -> None:
    bare, merge = pr_repo
    tree = fetch_source(GitSource(str(bare), "refs/pull/1/merge"), cache=tmp_path / "cache")
    assert tree.commit == merge
    assert tree.version == "5.9.3"
    assert (tree.path / "pr-change.c").is_file() and (tree.path / "main-change.c").is_file()
    head = fetch_source(GitSource(str(bare), "refs/pull/1/head"), cache=tmp_path / "cache")
    assert head.path == tree.path and head.commit != merge
    assert (head.path / "pr-change.c").is_file() and not (head.path / "main-change.c").exists()


def test_git_ref_that_does_not_exist_is_a_real_fetch_failure(pr_repo: tuple[Path, str],
                                                             tmp_path: Path) -> None:
    bare, _ = pr_repo
    with pytest.raises(StageError) as info:
        fetch_source(GitSource(str(bare), "refs/pull/99/merge"), cache=tmp_path / "cache")
    f = info.value.failure
    assert f.category == FailureCategory.REAL and f.reason == "fetch"
    assert "refs/pull/99/merge" in f.message


def test_local_directory_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="source directory .*nowhere does not exist"):
        fetch_source(LocalSource(tmp_path / "nowhere"), cache=tmp_path / "cache")
