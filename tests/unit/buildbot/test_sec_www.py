"""The web UI/REST API of a master that receives webhooks is closed by default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from buildbot_bsdkm.buildbot import www_security
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.config.bsdkm_yml import parse_config

BASE = """
targets:
  userspace: {}
variants:
  noasm: {flags: [--disable-asm], targets: [userspace]}
"""


@pytest.fixture(autouse=True)
def _github_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    monkeypatch.setenv("BSDKM_WEBHOOK_SECRET", "s")
    monkeypatch.chdir(tmp_path)  # the GitHub outbox file would land here


def _master(extra: str = "") -> dict:
    config = parse_config(BASE + extra, "bsdkm.yml")
    settings = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"})
    return buildmaster_config(config, settings)


def _allowed(c: dict, endpoint: tuple[str, ...], action: str, user: dict) -> bool:
    from buildbot.www.authz.authz import Forbidden
    from twisted.internet import defer

    authz = c["www"]["authz"]

    class _Master:
        pass

    authz.setMaster(_Master())
    d = defer.ensureDeferred(_call(authz, endpoint, action, user))
    result: list = []
    d.addBoth(result.append)
    assert result, "authz did not answer synchronously"
    if isinstance(result[0], Exception) or hasattr(result[0], "value"):
        error = getattr(result[0], "value", result[0])
        assert isinstance(error, Forbidden), error
        return False
    return True


async def _call(authz, endpoint, action, user):  # type: ignore[no-untyped-def]
    await authz.assertUserAllowed(endpoint, action, {}, user)


def test_a_master_that_takes_webhooks_needs_a_login_to_force_stop_or_cancel(tmp_path: Path) -> None:
    htpasswd = tmp_path / "www.htpasswd"
    htpasswd.write_text("alice:secret\nbob:secret\n")
    auth = f"{{type: htpasswd, file: {htpasswd}}}"
    c = _master(f"github: {{repo: a/b}}\nwww:\n  admins: [alice]\n  auth: {auth}\n")
    assert type(c["www"]["auth"]).__name__ == "HTPasswdAuth"
    anonymous = {"anonymous": True}
    for endpoint, action in [(("forceschedulers", "force"), "force"), (("builds", "1"), "stop"),
                             (("buildrequests", "1"), "cancel"), (("builds", "1"), "rebuild")]:
        assert not _allowed(c, endpoint, action, anonymous)
        assert not _allowed(c, endpoint, action, {"username": "bob"})  # logged in, not an admin
        assert _allowed(c, endpoint, action, {"username": "alice"})
    assert _allowed(c, ("builds",), "get", anonymous)  # reading stays open


def test_anonymous_none_closes_reading_too() -> None:
    c = _master("github: {repo: a/b}\nwww: {anonymous: none}\n")
    assert not _allowed(c, ("builds",), "get", {"anonymous": True})
    assert _allowed(c, ("builds",), "get", {"username": "carol"})
    assert _allowed(c, ("forceschedulers", "force"), "force", {"username": "carol"})  # any logged-in user


def test_github_oauth_and_public_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAUTH_ID", "id")
    monkeypatch.setenv("OAUTH_SECRET", "secret")
    c = _master("www:\n  url: https://ci.example.org/x\n  admins: [alice]\n"
                "  auth: {type: github, client_id_env: OAUTH_ID, client_secret_env: OAUTH_SECRET}\n")
    assert type(c["www"]["auth"]).__name__ == "GitHubAuth"
    assert c["buildbotURL"] == "https://ci.example.org/x/"


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ("www: {anonymous: write}", "www.anonymous: must be read or none"),
        ("www: {auth: {type: ldap}}", "www.auth.type: must be one of htpasswd, github"),
        ("www: {auth: {type: htpasswd, file: /nonexistent}}", "www.auth.file"),
        ("www: {auth: {type: github, client_id: x}}", "www.auth.client_id_env: give client_id_env"),
        ("www: {url: ftp://x}", "www.url: must be an http(s) URL"),
        ("www: {colour: red}", "www.colour: unknown key"),
    ],
)
def test_bad_www_sections_name_the_key(section: str, problem: str) -> None:
    with pytest.raises(www_security.WwwConfigError, match=re.escape(problem)):
        _master(section + "\n")


def test_a_local_only_master_keeps_its_loopback_defaults() -> None:
    c = _master()
    assert "authz" not in c["www"] and c["buildbotURL"] == "http://127.0.0.1:8010/"
    assert c["www"]["port"].endswith("interface=127.0.0.1")
