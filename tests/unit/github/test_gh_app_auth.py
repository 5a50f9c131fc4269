"""GitHub App auth for the master: installation tokens from the App's key, refreshed before they
expire, the bot's login from the App; a personal token still works. Against the loopback GitHub."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github_fake import reactor_thread
from github_fake.server import FakeApp, FakeGitHub, served
from twisted.python import log

from buildbot_bsdkm.github.app_auth import AppTokens, StaticToken
from buildbot_bsdkm.github.backoff import RetryPolicy
from buildbot_bsdkm.github.client import GitHubClient, GitHubError
from buildbot_bsdkm.github.outbox import Outbox
from buildbot_bsdkm.github.publisher import REPORT_MARKER, Publisher
from buildbot_bsdkm.github.settings import GitHubConfigError, parse_settings

REPO = "Codertocat/Hello-World"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
FAST = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2, max_inline_wait=5.0)
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                        serialization.NoEncryption())


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with served() as fake:
        yield fake


@pytest.fixture
def logged() -> Iterator[list[str]]:
    lines: list[str] = []

    def observer(event: dict) -> None:
        lines.append(" ".join(str(m) for m in event.get("message", ())) + str(event.get("why") or ""))

    log.addObserver(observer)
    yield lines
    log.removeObserver(observer)


def _app(github: FakeGitHub, ttl: float = 3600.0, slug: str = "bsdkm-ci") -> FakeApp:
    return github.install_app(FakeApp(KEY.public_key(), slug=slug, token_ttl_s=ttl))


def _status(client: GitHubClient, n: int) -> None:
    reactor_thread.run(lambda: client.create_status(REPO, SHA, "pending", "bsdkm/x", f"try {n}", None))


def test_installation_tokens_are_refreshed_before_they_expire(github: FakeGitHub, logged: list[str]) -> None:
    _app(github, ttl=4.0)
    tokens = AppTokens("4242", KEY, REPO)  # no installation id: found from the repository
    client = GitHubClient(github.url, tokens, policy=FAST)
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 9.0:  # two token lifetimes and more
        _status(client, n)
        n += 1
        time.sleep(0.25)
    assert tokens.installation_id == 31337
    assert tokens.tokens_issued >= 3  # 4 s tokens over 9 s of requests
    assert github.expired_uses == []  # never one sent after its expiry
    assert github.auth_refusals == []
    posted = github.calls("POST", "/statuses/")
    assert len(posted) == n and all(r.status == 201 for r in posted)
    assert {r.headers["Authorization"] for r in posted} >= {f"Bearer {t}" for t in
                                                           list(github.installation_tokens)[:2]}
    jwt_calls = github.calls("POST", "/access_tokens")
    assert len(jwt_calls) == tokens.tokens_issued
    text = "\n".join(logged)
    assert not any(t in text for t in github.installation_tokens)


def test_a_refused_installation_token_is_replaced_once(github: FakeGitHub) -> None:
    _app(github)
    tokens = AppTokens("4242", KEY, REPO, installation_id=31337)
    client = GitHubClient(github.url, tokens, policy=FAST)
    _status(client, 0)
    with github.lock:
        github.installation_tokens.clear()  # revoked on GitHub's side
    _status(client, 1)
    assert tokens.tokens_issued == 2
    assert [r.status for r in github.calls("POST", "/statuses/")] == [201, 401, 201]
    assert github.calls("GET", "/installation") == []  # the configured installation id is used


def test_a_wrong_key_is_refused_and_named(github: FakeGitHub) -> None:
    _app(github)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    client = GitHubClient(github.url, AppTokens("4242", other, REPO, installation_id=31337), policy=FAST)
    with pytest.raises(GitHubError) as e:
        _status(client, 0)
    assert e.value.status == 401 and "access_tokens" in str(e.value)
    assert github.statuses == []


def test_the_bot_login_comes_from_the_app_and_finds_our_comment_after_a_restart(
    github: FakeGitHub, tmp_path: Path
) -> None:
    _app(github, slug="wolfssl-bsdkm")
    github.token_login = "nobody"
    planted = github.plant_comment(REPO, 7, f"{REPORT_MARKER}\ncopied marker", "someone-else")
    tokens = AppTokens("4242", KEY, REPO, installation_id=31337)
    # Comments made with the App's tokens are its bot's.
    original = github._comment

    def as_bot(*args: object, **kw: object) -> dict:
        comment = original(*args, **kw)  # type: ignore[arg-type]
        comment["user"]["login"] = "wolfssl-bsdkm[bot]"
        return comment

    github._comment = as_bot  # type: ignore[method-assign]
    first = Publisher(GitHubClient(github.url, tokens, policy=FAST), Outbox(tmp_path / "a.json"))
    assert reactor_thread.run(lambda: first.upsert_report(REPO, 7, "one"))
    # A new master with no outbox and no github.bot_login: it asks the App who it is.
    second = Publisher(GitHubClient(github.url, tokens, policy=FAST), Outbox(tmp_path / "b.json"))
    assert reactor_thread.run(lambda: second.upsert_report(REPO, 7, "two"))
    assert second.bot_login == "wolfssl-bsdkm[bot]"
    ours = [c for c in github.comments_on(7) if c["id"] != planted]
    assert len(ours) == 1 and ours[0]["body"].endswith("two")
    assert github.comments[planted]["body"].endswith("copied marker")
    assert len(github.calls("POST", "/issues/7/comments")) == 1
    assert len(github.calls("GET", "/app")) == 1


def test_a_personal_token_still_works_and_names_its_user(github: FakeGitHub, tmp_path: Path) -> None:
    github.token_login = "bsdkm-ci[bot]"
    source = StaticToken(github.token)
    client = GitHubClient(github.url, source, policy=FAST)
    assert reactor_thread.run(client.own_login) == "bsdkm-ci[bot]"
    _status(client, 0)
    assert github.calls("POST", "/statuses/")[0].headers["Authorization"] == f"Bearer {github.token}"
    assert github.calls("POST", "/access_tokens") == []


# --- auth failures keep the reports ---------------------------------------------------------


def _statuses(pub: Publisher, n: int = 3) -> list[bool]:
    return [reactor_thread.run(lambda i=i: pub.post_status(REPO, SHA, f"bsdkm/u/v{i}", "pending", "queued"))
            for i in range(n)]


def _auth_lines(logged: list[str]) -> tuple[list[str], list[str]]:
    return ([line for line in logged if "GitHub auth is failing" in line],
            [line for line in logged if "GitHub auth works again" in line])


def test_a_reinstalled_app_is_looked_up_again_and_no_report_is_dropped(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """Fails on the old code: the installation id was cached for ever, the token endpoint's 404 was a
    refusal, and the publisher dropped all three statuses, keeping none in the outbox."""
    app = _app(github)
    tokens = AppTokens("4242", KEY, REPO)
    pub = Publisher(GitHubClient(github.url, tokens, policy=FAST), Outbox(tmp_path / "o.json"))
    assert _statuses(pub, 1) == [True]
    with github.lock:  # uninstalled and installed again: a new installation, the old tokens revoked
        app.installation_id = 4711
        github.installation_tokens.clear()
    assert _statuses(pub) == [True, True, True]
    assert pub.dropped == [] and pub.outbox.pending() == []
    assert tokens.installation_id == 4711
    assert len(github.calls("GET", "/installation")) == 2  # looked up again once, not per status


def test_a_refused_jwt_keeps_every_report_and_says_so_once(
    github: FakeGitHub, tmp_path: Path, logged: list[str]
) -> None:
    """Fails on the old code: a JWT refused for clock skew (401 on the token endpoint) dropped every
    status. Now they wait in the outbox, the log says once that GitHub auth is failing, and they go
    out once the clock is right."""
    _app(github)
    skew, cooldown = [3600.0], [0.0]  # this machine's clock an hour fast; a controlled cooldown clock
    tokens = AppTokens("4242", KEY, REPO, installation_id=31337, clock=lambda: time.time() + skew[0],
                       monotonic=lambda: cooldown[0])
    pub = Publisher(GitHubClient(github.url, tokens, policy=FAST), Outbox(tmp_path / "o.json"))
    assert _statuses(pub) == [False, False, False]
    assert pub.dropped == [] and len(pub.outbox.pending()) == 3
    assert len(github.calls("POST", "/access_tokens")) == 1  # the others waited out the cooldown
    cooldown[0] += 60.0
    assert reactor_thread.run(pub.resend_pending) == 0  # still failing: still kept, not said again
    failing, again = _auth_lines(logged)
    assert len(failing) == 1 and "JWT was refused" in failing[0] and again == []
    assert tokens.health.failing and tokens.installation_id is None  # a 401 forgets the installation
    skew[0], cooldown[0] = 0.0, cooldown[0] + 60.0  # the clock is put right
    assert reactor_thread.run(pub.resend_pending) == 3
    assert pub.outbox.pending() == [] and len(github.latest_statuses(SHA)) == 3
    failing, again = _auth_lines(logged)
    assert len(failing) == 1 and len(again) == 1 and not tokens.health.failing
    assert not any(t in "\n".join(logged) for t in github.installation_tokens)


def test_a_refused_personal_token_keeps_the_reports(github: FakeGitHub, tmp_path: Path,
                                                    logged: list[str]) -> None:
    """Fails on the old code: a 401 for the token was GitHub refusing the report: dropped."""
    pub = Publisher(GitHubClient(github.url, "ghp_revoked", policy=FAST), Outbox(tmp_path / "o.json"))
    assert _statuses(pub) == [False, False, False]
    assert pub.dropped == [] and len(pub.outbox.pending()) == 3
    failing, _ = _auth_lines(logged)
    assert len(failing) == 1 and "ghp_revoked" not in "\n".join(logged)


# --- settings -------------------------------------------------------------------------------


def _section(**extra: object) -> dict:
    return {"repo": REPO, "webhook_secret_env": "HOOK", **extra}


ENV = {"HOOK": "s", "GITHUB_TOKEN": "ghp_x"}


class Secrets:
    """The master's secretsProviders as the settings see them (``app_auth.SecretSource``)."""

    def __init__(self, **values: str) -> None:
        self.values = values
        self.asked: list[str] = []

    async def get(self, name: str) -> str:
        from buildbot_bsdkm.github.request_errors import CredentialsError

        self.asked.append(name)
        if name not in self.values:
            raise CredentialsError(f"secret {name!r} is given by none of the master's secretsProviders")
        return self.values[name]


def test_settings_read_an_app_key_file_or_a_secret_of_the_master(github: FakeGitHub, tmp_path: Path) -> None:
    key = _key_file(tmp_path, PEM)
    got = parse_settings(_section(app_id=4242, app_key_file=str(key)), env=ENV)
    assert isinstance(got.auth(), AppTokens) and got.token == ""
    assert got.auth() is got.auth()  # one cache of installation tokens per master
    got = parse_settings(_section(app_id="4242", app_key={"secret": "gh-app"}, installation_id=31337),
                         env=ENV)
    tokens = got.auth()
    assert isinstance(tokens, AppTokens) and tokens.installation_id == 31337
    assert got.secret_refs[0][0] == "app_key" and got.secret_refs[0][1].name == "gh-app"
    # Read through the master's providers when first needed, not when the configuration loads.
    source = Secrets(**{"gh-app": PEM.decode()})
    got.secrets.get = source.get  # type: ignore[method-assign]  # stands in for the running master
    _app(github)
    _status(GitHubClient(github.url, tokens, policy=FAST), 0)
    assert source.asked == ["gh-app"] and github.latest_statuses(SHA)
    plain = parse_settings(_section(), env=ENV)
    assert isinstance(plain.auth(), StaticToken) and plain.token == "ghp_x"


def test_an_unusable_app_key_from_a_secret_keeps_the_reports(github: FakeGitHub, tmp_path: Path,
                                                             logged: list[str]) -> None:
    _app(github)
    got = parse_settings(_section(app_id=4242, app_key={"secret": "gh-app"}, installation_id=31337), env=ENV)
    got.secrets.get = Secrets(**{"gh-app": "not a key"}).get  # type: ignore[method-assign]
    pub = Publisher(GitHubClient(github.url, got.auth(), policy=FAST), Outbox(tmp_path / "o.json"))
    assert _statuses(pub, 2) == [False, False] and len(pub.outbox.pending()) == 2
    failing, _ = _auth_lines(logged)
    assert len(failing) == 1 and "secret 'gh-app' (github.app_key)" in failing[0] and "PEM" in failing[0]


@pytest.mark.parametrize(("extra", "key", "words"), [
    ({"app_id": 1, "app_key_secret": "gh-app"}, "github.app_key_secret", "replaced by app_key: {secret"),
    ({"app_id": 1}, "github.app_key_file", "private key"),
    ({"app_id": "x1", "app_key": {"secret": "gh-app"}}, "github.app_id", "numeric"),
    ({"app_id": 1, "app_key": {"secret": "gh-app"}, "token_env": "T"}, "github.token_env", "not both"),
    ({"app_key": {"secret": "gh-app"}}, "github.app_key", "app_id"),
    ({"app_id": 1, "app_key": "-----BEGIN RSA"}, "github.app_key", "never the value itself"),
    ({"app_id": 1, "app_key": {"secret": ""}}, "github.app_key", "{secret: NAME}"),
    ({"app_id": 1, "app_key": {"secret": "a"}, "app_key_file": "k"}, "github.app_key", "give one of"),
])
def test_settings_name_what_is_wrong_with_an_app(tmp_path: Path, extra: dict, key: str, words: str) -> None:
    with pytest.raises(GitHubConfigError) as e:
        parse_settings(_section(**extra), env=ENV)
    assert key in str(e.value) and words in str(e.value)
    assert "PRIVATE KEY" not in str(e.value) and "BEGIN RSA" not in str(e.value)


# An EC key on secp112r1: PEM that parses, of a kind OpenSSL here does not offer (a throwaway).
UNSUPPORTED_CURVE_PEM = b"""-----BEGIN EC PRIVATE KEY-----
MD4CAQEEDivg0pOOCUzE+Exp0/SLoAcGBSuBBAAGoSADHgAEriZm+BaX28gVwDY0
las/nLOkY/alh5kfAAqIQQ==
-----END EC PRIVATE KEY-----
"""


def _key_file(tmp_path: Path, pem: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "app.pem"
    path.write_bytes(pem)
    path.chmod(mode)
    return path


def test_an_app_key_on_an_unsupported_curve_is_named_not_a_traceback(tmp_path: Path) -> None:
    """Fails on the old code: cryptography's UnsupportedAlgorithm escaped load_private_key (and
    master.cfg, which turns only ValueErrors into configuration errors)."""
    key = _key_file(tmp_path, UNSUPPORTED_CURVE_PEM)
    with pytest.raises(GitHubConfigError) as e:
        parse_settings(_section(app_id=4242, app_key_file=str(key)), env=ENV)
    assert "github.app_key_file" in str(e.value) and "is RSA" in str(e.value)
    assert "PRIVATE KEY" not in str(e.value)


@pytest.mark.parametrize(("mode", "words"), [(0o644, "every user"), (0o604, "every user"),
                                              (0o640, "its group")])
def test_a_key_file_others_can_read_is_refused_as_ssh_refuses_it(tmp_path: Path, mode: int,
                                                                 words: str) -> None:
    """Fails on the old code: a key file anyone could read was used without a word."""
    key = _key_file(tmp_path, PEM, mode)
    with pytest.raises(GitHubConfigError) as e:
        parse_settings(_section(app_id=4242, app_key_file=str(key)), env=ENV)
    assert "github.app_key_file" in str(e.value) and words in str(e.value) and "chmod 600" in str(e.value)
    key.chmod(0o600)
    assert isinstance(parse_settings(_section(app_id=4242, app_key_file=str(key)), env=ENV).auth(), AppTokens)
    key.chmod(0o400)
    assert isinstance(parse_settings(_section(app_id=4242, app_key_file=str(key)), env=ENV).auth(), AppTokens)


def test_token_and_webhook_secret_files_follow_the_same_rule(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("ghp_x\n")
    token.chmod(0o644)
    with pytest.raises(GitHubConfigError, match="github.token_file: .* every user"):
        parse_settings({"repo": REPO, "token_file": str(token), "webhook_secret_env": "HOOK"}, env=ENV)
    token.chmod(0o600)
    token.write_bytes(b"\xff\xfe")
    with pytest.raises(GitHubConfigError, match="github.token_file: .* not UTF-8"):
        parse_settings({"repo": REPO, "token_file": str(token), "webhook_secret_env": "HOOK"}, env=ENV)


def _imported(module: Path) -> set[str]:
    """Every module of ``github/`` that ``module`` imports, ``if TYPE_CHECKING:`` blocks included."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module)
    return found


def test_the_client_and_the_app_credentials_share_a_token_protocol_and_import_not_each_other() -> None:
    """Fails on the old code: ``app_auth`` imported ``client`` under ``TYPE_CHECKING`` for the
    protocol's types, and ``client`` imported ``app_auth``."""
    from buildbot_bsdkm.github import app_auth, client, tokens

    assert "client" not in _imported(Path(app_auth.__file__))
    assert not {"app_auth", "client"} & _imported(Path(tokens.__file__))
    assert {"tokens"} <= _imported(Path(app_auth.__file__)) & _imported(Path(client.__file__))
