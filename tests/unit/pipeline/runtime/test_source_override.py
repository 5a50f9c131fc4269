"""``--source-git/--source-ref/--source-dir``: a PR build fetches the PR's head, not the config's source.

The repository is a real (tiny) git repository served over file://, with the PR head only
under ``refs/pull/1/head`` as on GitHub. The tree is not buildable, so only fetch is run; it
carries a stub ``configure`` so fetch does not need autotools.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.cli import main as cli_main

CONFIG = """\
source: {local: /nonexistent/wolfssl}
targets:
  userspace: {flags: [--enable-cryptonly]}
variants:
  noasm: {flags: [--disable-asm], targets: [userspace]}
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_tree(work: Path, version: str) -> str:
    (work / "configure.ac").write_text(f"AC_INIT([wolfssl],[{version}])\n")
    (work / "configure").write_text("#!/bin/sh\nexit 0\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", f"wolfSSL {version}")
    return git(work, "rev-parse", "HEAD")


@pytest.fixture
def pr_repo(tmp_path: Path) -> tuple[str, str, str]:
    """(file:// URL, main's commit, PR #1's head commit) of a bare repo laid out like GitHub's."""
    bare, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    work.mkdir()
    git(work, "init", "-q")
    main_sha = commit_tree(work, "5.0.0")
    git(work, "push", "-q", str(bare), "HEAD:refs/heads/main")
    pr_sha = commit_tree(work, "5.0.1-pr")
    git(work, "push", "-q", str(bare), "HEAD:refs/pull/1/head")  # only reachable through the PR ref
    return f"file://{bare}", main_sha, pr_sha


@pytest.fixture
def common(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("BSDKM_CACHE", str(tmp_path / "cache"))
    cfg = tmp_path / "c.yml"
    cfg.write_text(CONFIG)
    return ["--variant", "noasm", "--target", "userspace", "--out", str(tmp_path / "o"), "--config", str(cfg)]


def state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "o" / "userspace" / "noasm" / "state.json").read_text())


def test_fetch_builds_the_pr_head_not_the_config_source(
    tmp_path: Path, pr_repo: tuple[str, str, str], common: list[str]
) -> None:
    url, main_sha, pr_sha = pr_repo
    assert cli_main(["stage", "fetch", *common, "--source-git", url, "--source-ref", "refs/pull/1/head"]) == 0
    src = state(tmp_path)["source"]
    assert (src["kind"], src["url"], src["ref"]) == ("git", url, "refs/pull/1/head")
    assert src["commit"] == pr_sha != main_sha
    assert src["version"] == "5.0.1-pr"
    assert (Path(src["path"]) / "configure.ac").read_text() == "AC_INIT([wolfssl],[5.0.1-pr])\n"
    # collect writes the run's metadata: the report can say which commit it measured.
    cli_main(["stage", "collect", *common])
    results = json.loads((tmp_path / "o" / "userspace" / "noasm" / "results.json").read_text())
    meta = results["runs"][0]["metadata"]
    assert (meta["source_kind"], meta["source_url"], meta["source_ref"]) == ("git", url, "refs/pull/1/head")
    assert meta["source_commit"] == pr_sha


def test_without_an_override_the_config_source_is_used(tmp_path: Path, common: list[str]) -> None:
    assert cli_main(["stage", "fetch", *common]) == 1  # the config's /nonexistent/wolfssl
    assert state(tmp_path)["failure"]["message"].endswith("/nonexistent/wolfssl does not exist")


def test_a_ref_the_repository_lacks_fails_the_fetch_naming_it(
    tmp_path: Path, pr_repo: tuple[str, str, str], common: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, _ = pr_repo
    assert cli_main(["stage", "fetch", *common, "--source-git", url, "--source-ref", "refs/pull/2/head"]) == 1
    out = capsys.readouterr().out
    assert "FAILED fetch category=real reason=fetch" in out and "refs/pull/2/head" in out


def test_a_pr_head_that_moved_since_the_build_was_queued_is_not_built(
    tmp_path: Path, pr_repo: tuple[str, str, str], common: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, main_sha, pr_sha = pr_repo
    pr = ["--source-git", url, "--source-ref", "refs/pull/1/head"]
    assert cli_main(["stage", "fetch", *common, *pr, "--source-commit", main_sha]) == 1
    out = capsys.readouterr().out
    assert "FAILED fetch category=real" in out and f"is now {pr_sha[:12]}, not {main_sha[:12]}" in out
    assert cli_main(["stage", "fetch", *common, *pr, "--source-commit", pr_sha.upper()]) == 0
    assert state(tmp_path)["source"]["commit"] == pr_sha


def test_source_dir_records_the_checkout_head(
    tmp_path: Path, pr_repo: tuple[str, str, str], common: list[str]
) -> None:
    _, _, pr_sha = pr_repo
    assert cli_main(["stage", "fetch", *common, "--source-dir", str(tmp_path / "work")]) == 0
    src = state(tmp_path)["source"]
    assert (src["kind"], src["commit"], src["path"]) == ("local", pr_sha, str(tmp_path / "work"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--source-ref", "refs/pull/1/head"], "--source-ref 'refs/pull/1/head' needs --source-git"),
        (["--source-git", "file:///x", "--source-dir", "/tmp"], "give one"),
        (["--source-git", "file:///x", "--source-ref=--upload-pack=evil"], "not a usable git ref"),
        (["--source-git", "file:///x", "--source-ref", "main..evil"], "'main..evil': not a usable git ref"),
        (["--source-git=--upload-pack=evil"], "not a usable repository URL"),
        (["--source-dir", "/nonexistent/dir"], "--source-dir /nonexistent/dir: not a directory"),
        (["--source-commit", "a" * 40], "needs --source-git"),
        (["--source-git", "file:///x", "--source-commit", "HEAD~1"], "not a commit sha"),
    ],
)
def test_bad_source_combinations_are_usage_errors(
    common: list[str], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    for command in (["stage", "fetch", *common], ["run", *common]):
        assert cli_main([*command, *extra]) == 2
        assert message in capsys.readouterr().err


def test_an_override_on_a_later_stage_is_refused(
    common: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["stage", "build", *common, "--source-git", "file:///x"]) == 2
    assert "apply to 'stage fetch', not 'build'" in capsys.readouterr().err
