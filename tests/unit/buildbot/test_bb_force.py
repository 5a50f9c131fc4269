"""`bsdkm-ci force`: the quick start's first build, from the master's machine, without GitHub. Here
against a stand-in for Buildbot's REST API (the README's quick start runs it on a real master:
tests/integration/test_wheel_buildbot_quickstart.py)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from loopback_http import serving

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.commands.force_cmd import htpasswd_login


class FakeApi(BaseHTTPRequestHandler):
    """Builders 1 (userspace/noasm); a force makes buildset 7, whose one build ends with ``result``."""

    force_status = 200
    result = 0
    forced: list[dict[str, Any]] = []
    login = "Basic " + base64.b64encode(b"alice:alice-pw").decode()  # www.auth: alice may force

    def _send(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/auth/login":
            if self.headers.get("Authorization") != self.login:
                self._send(401, {"error": "unauthorized"})
                return
            self.send_response(200)
            self.send_header("Set-Cookie", "TWISTED_SESSION=alice-session; Path=/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = self.path.split("?", 1)[0].removeprefix("/api/v2/")
        verdict = "passed" if self.result == 0 else "failed"
        props = {"bsdkm_verdict": [verdict, "gate"], "bsdkm_selftest": ["self-test: 89/89 passed", "collect"]}
        docs = {
            "builders": {"builders": [{"builderid": 1, "name": "userspace/noasm"}]},
            "buildsets/7": {"buildsets": [{"bsid": 7, "complete": True}]},
            "buildrequests": {"buildrequests": [{"buildrequestid": 3, "builderid": 1}]},
            "buildrequests/3/builds": {"builds": [{"buildid": 5, "builderid": 1, "results": self.result}]},
            "builds/5/properties": {"properties": [props]},
        }
        self._send(200, docs[path]) if path in docs else self._send(404, {"error": path})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeApi.forced.append(body)
        logged_in = "TWISTED_SESSION=alice-session" in (self.headers.get("Cookie") or "")
        if self.force_status != 200 and not logged_in:
            self._send(self.force_status, {"error": "you need to have role 'bsdkm-admins'"})
        else:
            self._send(200, {"jsonrpc": "2.0", "id": 1, "result": [7, {"1": 3}]})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def api() -> Iterator[str]:
    FakeApi.force_status, FakeApi.result, FakeApi.forced = 200, 0, []
    with serving(FakeApi) as url:
        yield f"{url}/"


def test_a_forced_build_prints_its_verdict(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["force", "M", "userspace/noasm", "--url", api]) == 0
    out = capsys.readouterr().out
    assert f"bsdkm-ci: forced userspace/noasm; waiting for the build(s): {api}#/builders/1" in out
    assert "userspace/noasm: SUCCESS (verdict passed, 1 attempt) self-test: 89/89 passed" in out
    assert FakeApi.forced[0]["params"]["builderNames"] == ["userspace/noasm"]
    FakeApi.result = 2
    assert main(["force", "M", "userspace/noasm", "--url", api]) == 1
    assert "userspace/noasm: FAILURE (verdict failed" in capsys.readouterr().out


def test_an_unknown_builder_is_named_with_those_there_are(api: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["force", "M", "userspace/nosuch", "--url", api]) == 2
    assert ("no builder userspace/nosuch on this master (it has: userspace/noasm)"
            in capsys.readouterr().err)
    assert FakeApi.forced == []


def test_a_master_that_wants_a_login_says_how(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    FakeApi.force_status = 403
    assert main(["force", "M", "userspace/noasm", "--url", api]) == 2
    assert "give --user NAME --password-file FILE" in capsys.readouterr().err


def test_a_logged_in_admin_forces(api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    FakeApi.force_status = 403
    password = tmp_path / "pw"
    password.write_text("alice-pw\n")
    assert main(["force", "M", "userspace/noasm", "--url", api, "--user", "alice", "--password-file",
                 str(password)]) == 0
    assert "userspace/noasm: SUCCESS" in capsys.readouterr().out
    password.write_text("wrong\n")
    assert main(["force", "M", "userspace/noasm", "--url", api, "--user", "alice", "--password-file",
                 str(password)]) == 2
    assert "the login of alice was refused (HTTP 401)" in capsys.readouterr().err


def test_a_directory_that_is_no_master(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["force", str(tmp_path), "userspace/noasm"]) == 2
    assert f"{tmp_path}: no Buildbot master here (no buildbot.tac)" in capsys.readouterr().err


def test_the_master_s_own_htpasswd_file_logs_in(tmp_path: Path) -> None:
    """``init master`` writes a login for its web UI: on the master's machine force uses it."""
    (tmp_path / "www.htpasswd").write_text("admin:s3cret\nbob:other\n")
    www = {"auth": {"type": "htpasswd", "file": "www.htpasswd"}}
    assert htpasswd_login(www, tmp_path) == ("admin", "s3cret")
    assert htpasswd_login({**www, "admins": ["bob"]}, tmp_path) == ("bob", "other")
    assert htpasswd_login({"auth": {"type": "github"}}, tmp_path) is None
    (tmp_path / "www.htpasswd").chmod(0)
    if os.geteuid() != 0:  # root reads any file
        assert htpasswd_login(www, tmp_path) is None
