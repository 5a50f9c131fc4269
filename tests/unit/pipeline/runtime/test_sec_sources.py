"""A PR build cannot poison the git source cache, and a tarball that is not
what was promised (checksum, unsafe members) is a real failure, never retried."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import GitSource, TarballSource
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.source import fetch_source, git_tree
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.retry.classify_failure import classify


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout.strip()


def commit_tree(work: Path, version: str) -> str:
    (work / "configure.ac").write_text(f"AC_INIT([wolfssl],[{version}])\n")
    (work / "configure").write_text("#!/bin/sh\nexit 0\n")
    (work / ".gitignore").write_text("*.o\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", version)
    return git(work, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[str, str, str]:
    bare, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    work.mkdir()
    git(work, "init", "-q")
    main = commit_tree(work, "5.0.0")
    git(work, "push", "-q", str(bare), "HEAD:refs/heads/main")
    pr = commit_tree(work, "5.0.1-pr")
    git(work, "push", "-q", str(bare), "HEAD:refs/pull/1/head")
    return f"file://{bare}", main, pr


def test_a_pr_build_cannot_poison_the_next_fetch(repo: tuple[str, str, str], tmp_path: Path) -> None:
    url, main, pr = repo
    cache = tmp_path / "cache"
    tree, commit = git_tree(GitSource(url, "refs/pull/1/head", pr), cache, 60)
    assert commit == pr
    # What the PR's build scripts could do to the tree they run in:
    (tree / "configure.ac").write_text("AC_INIT([wolfssl],[backdoored])\n")
    (tree / "configure").write_text("#!/bin/sh\necho backdoor\n")
    (tree / "evil.c").write_text("int backdoor;\n")
    (tree / "evil.o").write_text("ignored, still poison\n")
    if (tree / ".git").is_dir():  # the old layout: its stamp and hooks were in the tree
        (tree / ".git" / "bsdkm-ready").write_text(main)
        hook = tree / ".git" / "hooks" / "post-checkout"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/hook-ran\n")
        hook.chmod(0o755)
    else:
        (tree / ".git").mkdir()  # a fake git dir planted in the tree changes nothing either
        (tree / ".git" / "bsdkm-ready").write_text(main)

    tree, commit = git_tree(GitSource(url, "refs/heads/main"), cache, 60)
    assert commit == main
    assert (tree / "configure.ac").read_text() == "AC_INIT([wolfssl],[5.0.0])\n"
    assert (tree / "configure").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (tree / "evil.c").exists() and not (tree / "evil.o").exists()
    assert not (tmp_path / "hook-ran").exists()
    # The bookkeeping is beside the tree, out of the build's reach by path.
    assert not any(p.name == "bsdkm-ready" for p in tree.rglob("*"))


def _tarball(path: Path, members: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_wrong_checksum_is_a_real_integrity_failure(tmp_path: Path) -> None:
    tarball = tmp_path / "w.tar.gz"
    _tarball(tarball, {"wolfssl/configure": b"#!/bin/sh\n"})
    with pytest.raises(StageError) as info:
        fetch_source(TarballSource(str(tarball), "0" * 64), cache=tmp_path / "cache")
    failure = info.value.failure
    assert failure.category == FailureCategory.REAL and failure.reason == "integrity"
    assert "checksum mismatch" in failure.message


@pytest.mark.parametrize("member", ["../outside", "/etc/evil", "wolfssl/../../outside"])
def test_unsafe_tarball_member_is_a_real_integrity_failure(tmp_path: Path, member: str) -> None:
    tarball = tmp_path / "w.tar.gz"
    sha = _tarball(tarball, {"wolfssl/configure": b"#!/bin/sh\n", member: b"pwned"})
    with pytest.raises(StageError) as info:
        fetch_source(TarballSource(str(tarball), sha), cache=tmp_path / "cache")
    failure = info.value.failure
    assert failure.category == FailureCategory.REAL and failure.reason == "integrity", failure
    assert not (tmp_path / "outside").exists()


def test_a_stage_printing_a_checksum_mismatch_is_classified_real() -> None:
    out = "fetch failed: checksum mismatch for https://deb.debian.org/x.tar.gz: expected sha256 aa, got bb"
    failure = classify("fetch", exit_code=1, output=out)
    assert failure.category == FailureCategory.REAL and failure.reason == "integrity"
