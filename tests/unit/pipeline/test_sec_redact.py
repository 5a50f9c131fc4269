"""Credentials in a source URL (``--source-git http://bot:TOKEN@host/x.git``) are used for the fetch
and written or shown nowhere: not in state.json, the git cache's bookkeeping, the stage's output
(the Buildbot step log), error messages, nor the report's "Source:" line."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_http import serving
from test_sec_sources import commit_tree, git

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.policy import Verdict
from buildbot_bsdkm.report.markdown import markdown_report
from buildbot_bsdkm.support.redact import redact_url

ROOT = Path(__file__).resolve().parents[3]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
TOKEN = "ghp_s3cr3tT0kenValue"


class GitHttp(http.server.BaseHTTPRequestHandler):
    """Smart HTTP through ``git http-backend`` (shallow fetches need it), recording Authorization."""

    root = ""
    authorized: list[str] = []

    def _serve(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Authorization") is None:  # ask, as a private repository's server does
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.authorized.append(self.headers["Authorization"])
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": self.root, "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(length),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "REMOTE_ADDR": "127.0.0.1"}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                             check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def private_repo(tmp_path: Path) -> Iterator[tuple[str, type[GitHttp]]]:
    root = tmp_path / "srv"
    root.mkdir()
    git(root, "init", "-q", "--bare", "x.git")
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    commit_tree(work, "5.0.0")
    git(work, "push", "-q", str(root / "x.git"), "HEAD:refs/heads/main")
    handler = type("Handler", (GitHttp,), {"root": str(root), "authorized": []})
    with serving(handler) as url:
        yield f"{url.replace('http://', f'http://bot:{TOKEN}@')}/x.git", handler


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def stage_fetch(tmp_path: Path, url: str, ref: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(f"source: {{local: /nonexistent}}\ncache_dir: {tmp_path / 'cache'}\n"
                   "targets: {userspace: null}\nvariants: {noasm: {targets: [userspace]}}\n")
    return subprocess.run([str(BSDKM_CI), "stage", "fetch", "--variant", "noasm", "--target", "userspace",
                           "--out", str(tmp_path / "out"), "--config", str(cfg), "--source-git", url,
                           "--source-ref", ref], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})


def test_a_token_in_the_source_url_reaches_no_file_log_or_report(
        private_repo: tuple[str, type[GitHttp]], tmp_path: Path) -> None:
    url, server = private_repo
    p = stage_fetch(tmp_path, url, "refs/heads/main")
    assert p.returncode == 0, p.stdout + p.stderr
    assert TOKEN not in p.stdout + p.stderr  # the stage's output: the Buildbot step log
    assert "http://***@127.0.0.1" in p.stdout + p.stderr
    # The fetch did authenticate with it: redaction is in what is written, not what git is given.
    assert server.authorized and all(a.startswith("Basic ") for a in server.authorized)
    state = json.loads((tmp_path / "out" / "userspace" / "noasm" / "state.json").read_text())
    assert state["source"]["origin"].startswith("git:http://***@127.0.0.1:")
    assert files_holding(tmp_path / "out", TOKEN) == []  # state.json
    assert files_holding(tmp_path / "cache", TOKEN) == []  # cache/git/*.json and the git directory
    assert list((tmp_path / "cache" / "git").glob("*.json"))
    # The PR comment's "Source:" line, from the run's metadata (stages copy state's origin there) ...
    run = RunResult("noasm", "userspace", metadata={"source": state["source"]["origin"]})
    assert TOKEN not in markdown_report([run], Verdict())
    # ... and from a results document written before redaction existed.
    old = RunResult("noasm", "userspace", metadata={"source": f"git:{url}@main"})
    text = markdown_report([old], Verdict())
    assert TOKEN not in text and "Source: `git:http://***@127.0.0.1" in text


def test_a_failed_fetch_names_the_url_without_its_token(
        private_repo: tuple[str, type[GitHttp]], tmp_path: Path) -> None:
    p = stage_fetch(tmp_path, private_repo[0], "refs/heads/no-such-branch")
    assert p.returncode == 1
    assert TOKEN not in p.stdout + p.stderr
    assert files_holding(tmp_path / "out", TOKEN) == [] and files_holding(tmp_path / "cache", TOKEN) == []


@pytest.mark.parametrize("url, shown", [
    ("https://bot:TOKEN@host/x.git", "https://***@host/x.git"),
    ("https://TOKEN@github.com/o/r", "https://***@github.com/o/r"),
    ("https://u:p@ss@host/x", "https://***@host/x"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("https://host/path@v1", "https://host/path@v1"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_clone_url_with_credentials_is_refused_naming_the_line(tmp_path: Path) -> None:
    from buildbot_bsdkm.config.bsdkm_yml import load_config
    from buildbot_bsdkm.github.settings import GitHubConfigError, parse_settings

    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text("targets: {userspace: null}\nvariants: {noasm: {targets: [userspace]}}\n"
                   f"github:\n  repo: a/b\n  clone_url: https://bot:{TOKEN}@github.com/a/b.git\n")
    env = {"GITHUB_TOKEN": "t", "BSDKM_WEBHOOK_SECRET": "s"}
    with pytest.raises(GitHubConfigError, match=rf"^{re.escape(str(cfg))}:5: github.clone_url: carries") as e:
        parse_settings(load_config(cfg).github, env=env)
    assert TOKEN not in str(e.value)
