"""The github: section of bsdkm.yml, and what github_services(config) hands master.cfg."""

from __future__ import annotations

from pathlib import Path

import pytest
from github_fake.master import SECRET_ENV, TOKEN_ENV, write_config

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.github import github_services
from buildbot_bsdkm.github.controller import PullRequestBuilds
from buildbot_bsdkm.github.reporters import GitHubPrReporter
from buildbot_bsdkm.github.settings import GitHubConfigError, parse_settings

ENV = {"GITHUB_TOKEN": "t0ken", "BSDKM_WEBHOOK_SECRET": "s3cret"}


def test_minimal_section_uses_defaults() -> None:
    settings = parse_settings({"repo": "wolfSSL/wolfssl"}, env=ENV)
    assert (settings.repo, settings.api_url, settings.clone_url) == (
        "wolfSSL/wolfssl",
        "https://api.github.com",
        "https://github.com/wolfSSL/wolfssl.git",
    )
    assert settings.trust.trusts("anyone", "MEMBER") and not settings.trust.trusts("anyone", "CONTRIBUTOR")
    assert "t0ken" not in repr(settings) and "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("section", "env", "message"),
    [
        (None, ENV, "github.repo: the github section is missing"),
        ({"repo": "wolfssl"}, ENV, "github.repo: must be owner/name"),
        ({"repo": "a/b", "tokn_env": "X"}, ENV, "github.tokn_env: unknown key"),
        (
            {"repo": "a/b"},
            {"BSDKM_WEBHOOK_SECRET": "s"},
            r"github.token_env: environment variable \$GITHUB_TOKEN",
        ),
        (
            {"repo": "a/b", "webhook_secret_env": "NOPE"},
            ENV,
            r"github.webhook_secret_env: .*\$NOPE is not set",
        ),
        (
            {"repo": "a/b", "token_file": "/nonexistent/t"},
            ENV,
            "github.token_file: cannot read /nonexistent/t",
        ),
        (
            {"repo": "a/b", "trusted_associations": ["OWNER", "BOSS"]},
            ENV,
            "unknown author_association 'BOSS'",
        ),
        ({"repo": "a/b", "trusted_users": "x, y"}, ENV, None),
        (
            {"repo": "a/b", "trusted_users": [1]},
            ENV,
            "github.trusted_users: must be a list of non-empty strings",
        ),
        (
            {"repo": "a/b", "max_payload_bytes": -1},
            ENV,
            "github.max_payload_bytes: must be a positive number",
        ),
        ({"repo": "a/b", "retest_phrases": ["  "]}, ENV, "github.retest_phrases"),
        ({"repo": "a/b", "statuses": "yes"}, ENV, "github.statuses: must be true or false"),
        ({"repo": "a/b", "api_url": "ftp://x"}, ENV, "github.api_url: must be an http"),
    ],
)
def test_bad_sections_name_the_key(section: dict | None, env: dict, message: str | None) -> None:
    if message is None:
        parse_settings(section, env=env)
        return
    with pytest.raises(GitHubConfigError, match=message):
        parse_settings(section, env=env)


def test_secret_from_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "token").chmod(0o600)
    settings = parse_settings({"repo": "a/b", "token_file": str(tmp_path / "token")}, env=ENV)
    assert settings.token == "from-file"
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    with pytest.raises(GitHubConfigError, match="is empty"):
        parse_settings({"repo": "a/b", "token_file": str(tmp_path / "empty")}, env=ENV)


def test_github_services_for_master_cfg(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path / "bsdkm.yml", "http://127.0.0.1:9"))
    got = github_services(config, env={TOKEN_ENV: "t", SECRET_ENV: "s"}, basedir=str(tmp_path))
    assert set(got) == {"change_hook_dialects", "services", "secretsProviders"}
    dialect = got["change_hook_dialects"]["github"]
    assert dialect["secret"] == "s" and dialect["strict"] is True
    controller, reporter = got["services"]
    assert isinstance(controller, PullRequestBuilds) and isinstance(reporter, GitHubPrReporter)
    assert [b.context for b in controller.builders] == ["bsdkm/userspace/intelasm", "bsdkm/userspace/noasm"]
    assert [b.name for b in controller.builders] == ["userspace/intelasm", "userspace/noasm"]


def test_no_github_section_adds_nothing() -> None:
    from buildbot_bsdkm.config.bsdkm_yml import Config

    assert github_services(Config()) == {}


def test_errors_about_a_section_read_from_a_file_name_its_line(tmp_path: Path) -> None:
    text = ("targets: {userspace: {}}\nvariants: {noasm: {targets: [userspace]}}\n"
            "github:\n  repo: a/b\n  api_url: ftp://x\n")
    (tmp_path / "bsdkm.yml").write_text(text)
    config = load_config(tmp_path / "bsdkm.yml")
    with pytest.raises(GitHubConfigError) as e:
        parse_settings(config.github, env=ENV)
    assert str(e.value).startswith(f"{tmp_path / 'bsdkm.yml'}:5: github.api_url: must be an http(s) URL")
    assert e.value.line == 5
    # a key that is not there: the line of the section
    (tmp_path / "bsdkm.yml").write_text(text.replace("  api_url: ftp://x\n", ""))
    with pytest.raises(GitHubConfigError, match=r"bsdkm\.yml:4: github\.token_env: environment variable"):
        parse_settings(load_config(tmp_path / "bsdkm.yml").github, env={"BSDKM_WEBHOOK_SECRET": "s"})


def test_token_and_webhook_secret_from_the_masters_secrets_providers(tmp_path: Path) -> None:
    from buildbot.process.properties import Secret

    from buildbot_bsdkm.github.app_auth import SecretToken

    section = {"repo": "a/b", "token": {"secret": "gh-token"}, "webhook_secret": {"secret": "gh-hook"}}
    settings = parse_settings(section, env={})  # nothing from the environment
    assert isinstance(settings.auth(), SecretToken) and settings.auth().name == "gh-token"
    assert settings.token == "" and [(k, r.name) for k, r in settings.secret_refs] == [
        ("token", "gh-token"), ("webhook_secret", "gh-hook")]
    config = load_config(write_config(tmp_path / "bsdkm.yml", "http://127.0.0.1:9"))
    config.github.pop("token_env")
    config.github.pop("webhook_secret_env")
    config.github.update(section)
    dialect = github_services(config, env={}, basedir=str(tmp_path))["change_hook_dialects"]["github"]
    # Buildbot's own Secret, which the hook renders through the providers
    assert isinstance(dialect["secret"], Secret) and dialect["secret"].secret_name == "gh-hook"


@pytest.mark.parametrize(("section", "message"), [
    ({"token": "ghp_pasted_here"}, "github.token: must be {secret: NAME}"),
    ({"token": {"secret": "t", "extra": 1}}, "github.token: must be {secret: NAME}"),
    ({"token": {"secret": "t"}, "token_env": "T"}, "github.token: give one of token_env, token_file, token"),
    ({"webhook_secret": {"secret": ["x"]}}, "github.webhook_secret: must be {secret: NAME}"),
])
def test_a_secret_reference_that_is_not_one_is_named(section: dict, message: str) -> None:
    with pytest.raises(GitHubConfigError) as e:
        parse_settings({"repo": "a/b", **section}, env=ENV)
    assert message in str(e.value) and "ghp_pasted_here" not in str(e.value)
