"""GitHub login alone makes nobody an admin: a master with ``auth: {type: github}`` names its admins
(``www.admins``) or organizations/teams (``www.auth.orgs``), or refuses to start naming file:line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_sec_www import _allowed, _github_secrets, _master  # noqa: F401 (an autouse fixture)

from buildbot_bsdkm.buildbot import www_security
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.config.bsdkm_yml import load_config

GITHUB = "{type: github, client_id_env: OAUTH_ID, client_secret_env: OAUTH_SECRET"
CONTROL = [(("forceschedulers", "force"), "force"), (("builds", "1"), "stop"),
           (("buildrequests", "1"), "cancel"), (("builds", "1"), "rebuild")]


@pytest.fixture(autouse=True)
def _oauth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAUTH_ID", "id")
    monkeypatch.setenv("OAUTH_SECRET", "secret")


def test_github_login_without_admins_or_orgs_is_refused_naming_the_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text("targets:\n  userspace: {}\nvariants:\n  noasm: {targets: [userspace]}\n"
                   f"www:\n  anonymous: none\n  auth: {GITHUB}}}\n")
    settings = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"})
    with pytest.raises(www_security.WwwConfigError,
                       match=re.escape(f"{cfg}:7: www.auth: with GitHub login anyone with a GitHub account")):
        buildmaster_config(load_config(cfg), settings)


def test_a_new_github_account_may_neither_control_nor_read() -> None:
    c = _master(f"github: {{repo: a/b}}\nwww:\n  anonymous: none\n  admins: [alice]\n  auth: {GITHUB}}}\n")
    stranger = {"username": "made-today", "groups": []}
    for endpoint, action in CONTROL:
        assert not _allowed(c, endpoint, action, stranger)
        assert _allowed(c, endpoint, action, {"username": "alice", "groups": []})
    assert not _allowed(c, ("builds",), "get", stranger)  # nor the builders and the perf page


def test_members_of_the_named_org_or_team_are_admins() -> None:
    c = _master(f"www:\n  anonymous: none\n  auth: {GITHUB}, orgs: [wolfSSL/ci-admins, acme]}}\n")
    auth = c["www"]["auth"]
    assert type(auth).__name__ == "GitHubAuth" and auth.getTeamsMembership  # teams need the GraphQL API
    team = {"username": "t", "groups": ["wolfSSL", "wolfSSL/ci-admins"]}
    org = {"username": "o", "groups": ["acme"]}
    other = {"username": "x", "groups": ["wolfSSL", "wolfSSL/docs"]}  # in the org, not the team
    for endpoint, action in CONTROL:
        assert _allowed(c, endpoint, action, team) and _allowed(c, endpoint, action, org)
        assert not _allowed(c, endpoint, action, other)
    assert not _allowed(c, ("builds",), "get", other)


@pytest.mark.parametrize(("section", "problem"), [
    (f"www: {{auth: {GITHUB}, orgs: []}}}}", "www.auth.orgs: must be a list of GitHub organizations"),
    (f"www: {{auth: {GITHUB}, orgs: ['../x']}}}}", "www.auth.orgs: must be a list"),
    ("www: {auth: {type: htpasswd, file: /etc/hostname, orgs: [acme]}}", "www.auth.orgs: names GitHub"),
])
def test_bad_orgs_are_refused(section: str, problem: str) -> None:
    with pytest.raises(www_security.WwwConfigError, match=re.escape(problem)):
        _master(section + "\n")
