"""The ``github:`` section of ``bsdkm.yml`` → typed settings (secrets come from env or files).

Read when the master starts; errors name the line of the key in ``bsdkm.yml`` (``Config.github``
keeps it, ``yaml_reader.LocatedDict``). A secret comes from the master's environment (``*_env``), a
private file (``*_file``), or one of the master's ``secretsProviders`` (``{secret: NAME}``, read when
first needed: ``master_secrets``).

Example::

    github:
      repo: wolfSSL/wolfssl
      token_env: GITHUB_TOKEN            # or token_file: /run/secrets/gh-token, or token: {secret: NAME}
      # or a GitHub App: app_id: 123456, app_key_file: /etc/bsdkm/app.pem (or app_key: {secret: NAME})
      webhook_secret_env: BSDKM_WEBHOOK_SECRET   # or webhook_secret_file, or webhook_secret: {secret: NAME}
      trusted_users: [wolfSSL-Bot]
      retest_phrases: ["retest this please", "test this please"]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..support.private_file import exposure
from ..support.redact import has_credentials, redact_url
from ..support.yaml_reader import LocatedError, located
from .app_auth import (
    AppKeyError,
    AppTokens,
    KeyFromSecret,
    SecretToken,
    StaticToken,
    load_private_key,
)
from .master_secrets import MasterSecrets, SecretRef
from .spacing import DEFAULT_WRITE_INTERVAL_S, WriteSpacing
from .tokens import TokenSource
from .triggers import DEFAULT_APPROVE_PHRASES, DEFAULT_RETEST_PHRASES, TriggerConfig
from .trust import TRUSTED_ASSOCIATIONS, TrustPolicy
from .webhook_signature import DEFAULT_MAX_BODY_BYTES

KNOWN_KEYS = frozenset(
    {
        "repo",
        "api_url",
        "clone_url",
        "token_env",
        "token_file",
        "token",
        "app_id",
        "app_key_file",
        "app_key",
        "installation_id",
        "webhook_secret_env",
        "webhook_secret_file",
        "webhook_secret",
        "trusted_users",
        "trusted_associations",
        "retest_phrases",
        "approve_phrases",
        "max_payload_bytes",
        "outbox",
        "reply_window_s",
        "resend_interval_s",
        "answer_within_s",
        "write_interval_s",
        "statuses",
        "comment",
        "dialect",
        "bot_login",
    }
)
ASSOCIATIONS = frozenset(
    {
        "OWNER",
        "MEMBER",
        "COLLABORATOR",
        "CONTRIBUTOR",
        "FIRST_TIME_CONTRIBUTOR",
        "FIRST_TIMER",
        "MANNEQUIN",
        "NONE",
    }
)


class GitHubConfigError(LocatedError):
    """The ``github:`` section is wrong; ``file:line: github.<key>: problem`` when the section came from
    a file (``Config.github`` is a ``LocatedDict``: the line of the key, else of the section), else
    ``github.<key>: problem``."""

    def __init__(self, key: str, problem: str, *, section: Any = None) -> None:
        file, line = located(section, f"github.{key}")
        super().__init__(file, line, f"github.{key}", problem)


@dataclass(frozen=True)
class GitHubSettings:
    repo: str
    token: str = field(repr=False)  # "" when the token is a secret of the master, or an App's
    webhook_secret: str | SecretRef = field(repr=False)
    api_url: str = "https://api.github.com"
    clone_url: str = ""
    trust: TrustPolicy = field(default_factory=TrustPolicy)
    triggers: TriggerConfig = field(default_factory=TriggerConfig)
    max_payload_bytes: int = DEFAULT_MAX_BODY_BYTES
    outbox: str = "github-outbox.json"
    reply_window_s: float = 3600.0
    resend_interval_s: float = 60.0
    # The hook answers once the event is acted on or this long after it is in the inbox, whichever
    # comes first: GitHub gives up on a delivery after 10 s.
    answer_within_s: float = 0.2
    statuses: bool = True
    comment: bool = True
    dialect: str = "github"
    bot_login: str | None = None  # the login our comments appear under; else the App's or the token's
    # The personal token, or the App's installation tokens (then ``token`` is empty); one per
    # settings, so every client of this master shares one cached installation token.
    credentials: TokenSource | None = field(default=None, repr=False, compare=False)
    # The master's secretsProviders, for {secret: NAME}: bound to the master when its services start.
    secrets: MasterSecrets = field(default_factory=MasterSecrets, repr=False, compare=False)
    secret_refs: tuple[tuple[str, SecretRef], ...] = ()  # (key, {secret: NAME}) read through them
    # The installation's write slot: every client of these credentials spaces its writes by it.
    writes: WriteSpacing = field(default_factory=WriteSpacing, repr=False, compare=False)

    def auth(self) -> TokenSource:
        return self.credentials if self.credentials is not None else StaticToken(self.token)

    @property
    def repos(self) -> tuple[str, ...]:
        """Repositories whose events are acted on; any other is refused."""
        return (self.repo,)


def _strings(section: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = section.get(key, list(default))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise GitHubConfigError(key, "must be a list of non-empty strings", section=section)
    return tuple(value)


def _number(section: Mapping[str, Any], key: str, default: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise GitHubConfigError(key, f"must be a positive number, not {value!r}", section=section)
    return float(value)


def _flag(section: Mapping[str, Any], key: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise GitHubConfigError(key, f"must be true or false, not {value!r}", section=section)
    return value


def _private(path: Path, key: str, section: Mapping[str, Any]) -> None:
    """Refuse a credential file others may read, as ssh refuses such a private key."""
    problem = exposure(path)
    if problem:
        raise GitHubConfigError(key, f"{path} is {problem}: whoever can read it can act as this CI on "
                                f"GitHub; chmod 600 {path}", section=section)


def _secret_ref(section: Mapping[str, Any], key: str) -> SecretRef | None:
    """``key: {secret: NAME}``, or None when ``key`` is not given."""
    if key not in section:
        return None
    value = section[key]
    name = value.get("secret") if isinstance(value, Mapping) and set(value) == {"secret"} else None
    if not isinstance(name, str) or not name.strip():
        raise GitHubConfigError(key, f"must be {{secret: NAME}}, a secret of the master's secretsProviders "
                                f"(never the value itself; or {key}_env, {key}_file)", section=section)
    return SecretRef(name.strip())


def _one_of(section: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    given = [k for k in keys if k in section]
    if len(given) > 1:
        raise GitHubConfigError(given[1], f"give one of {', '.join(keys)}, not {given[0]} too",
                                section=section)


def _secret(
    section: Mapping[str, Any], name: str, default_env: str, env: Mapping[str, str]
) -> str | SecretRef:
    file_key, env_key = f"{name}_file", f"{name}_env"
    _one_of(section, (env_key, file_key, name))
    ref = _secret_ref(section, name)
    if ref is not None:
        return ref
    if file_key in section:
        path = Path(str(section[file_key]))
        _private(path, file_key, section)
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise GitHubConfigError(file_key, f"cannot read {path}: {e.strerror}", section=section) from None
        except UnicodeDecodeError:
            raise GitHubConfigError(file_key, f"{path} is not UTF-8 text", section=section) from None
        if not value:
            raise GitHubConfigError(file_key, f"{path} is empty", section=section)
        return value
    variable = str(section.get(env_key, default_env))
    value = env.get(variable, "").strip()
    if not value:
        raise GitHubConfigError(env_key, f"environment variable ${variable} is not set or empty",
                                section=section)
    return value


APP_KEYS = ("app_id", "app_key_file", "app_key", "installation_id")


def _app(section: Mapping[str, Any], repo: str, secrets: MasterSecrets) -> AppTokens:
    """``app_id`` + the private key (a file, or ``{secret: NAME}`` of the master's secretsProviders)."""
    for key in ("token_env", "token_file", "token"):
        if key in section:
            raise GitHubConfigError(key, "give a token or a GitHub App (app_id), not both", section=section)
    app_id = section.get("app_id")
    if isinstance(app_id, bool) or not (isinstance(app_id, int) and app_id > 0
                                        or isinstance(app_id, str) and app_id.strip().isdigit()):
        raise GitHubConfigError("app_id", f"must be the App's numeric id, not {app_id!r}", section=section)
    installation = section.get("installation_id")
    if installation is not None and (isinstance(installation, bool) or not isinstance(installation, int)
                                     or installation <= 0):
        raise GitHubConfigError("installation_id", f"must be a positive number, not {installation!r}",
                                section=section)
    _one_of(section, ("app_key_file", "app_key"))
    ref = _secret_ref(section, "app_key")
    if ref is not None:
        # Checked when first needed: only the running master's providers can give it.
        return AppTokens(str(app_id).strip(), KeyFromSecret(ref.name, secrets), repo,
                         installation_id=installation)
    if "app_key_file" not in section:
        raise GitHubConfigError("app_key_file", "a GitHub App needs its private key: app_key_file (a PEM "
                                "file) or app_key: {secret: NAME} (a secret of the master)", section=section)
    path = Path(str(section["app_key_file"]))
    _private(path, "app_key_file", section)
    try:
        pem = path.read_bytes()
    except OSError as e:
        raise GitHubConfigError("app_key_file", f"cannot read the key file {path}: {e.strerror}",
                                section=section) from None
    try:
        key = load_private_key(pem, str(path))
    except AppKeyError as e:
        raise GitHubConfigError("app_key_file", str(e), section=section) from None
    return AppTokens(str(app_id).strip(), key, repo, installation_id=installation)


def parse_settings(
    section: Mapping[str, Any] | None,
    *,
    env: Mapping[str, str] | None = None,
    variants: frozenset[str] = frozenset(),
    targets: frozenset[str] = frozenset(),
) -> GitHubSettings:
    env = os.environ if env is None else env
    if not isinstance(section, Mapping) or not section:
        raise GitHubConfigError("repo", "the github section is missing (need at least github.repo)",
                                section=section)
    if "app_key_secret" in section:
        raise GitHubConfigError("app_key_secret", "replaced by app_key: {secret: NAME}, which any of the "
                                "master's secretsProviders can give (SecretInAFile reads secrets/NAME)",
                                section=section)
    unknown = sorted(set(section) - KNOWN_KEYS)
    if unknown:
        raise GitHubConfigError(unknown[0], f"unknown key (known: {', '.join(sorted(KNOWN_KEYS))})",
                                section=section)
    repo = section.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1 or not all(repo.split("/")):
        raise GitHubConfigError("repo", f"must be owner/name, not {repo!r}", section=section)
    associations = _strings(section, "trusted_associations", tuple(sorted(TRUSTED_ASSOCIATIONS)))
    bad = sorted({a.upper() for a in associations} - ASSOCIATIONS)
    if bad:
        raise GitHubConfigError("trusted_associations", f"unknown author_association {bad[0]!r}",
                                section=section)
    try:
        triggers = TriggerConfig(
            retest_phrases=_strings(section, "retest_phrases", DEFAULT_RETEST_PHRASES),
            approve_phrases=_strings(section, "approve_phrases", DEFAULT_APPROVE_PHRASES),
            known_variants=variants,
            known_targets=targets,
        )
    except ValueError as e:
        raise GitHubConfigError("retest_phrases", str(e), section=section) from None
    clone_url = str(section.get("clone_url") or f"https://github.com/{repo}.git")
    if has_credentials(clone_url):
        # It becomes every PR build's "repository" property and the fetch step's command line,
        # both shown in the web UI: a token there is a token for anyone who can read a build.
        raise GitHubConfigError("clone_url", f"carries credentials ({redact_url(clone_url)}): give the "
                                "workers a git credential helper instead", section=section)
    api_url = str(section.get("api_url", "https://api.github.com")).rstrip("/")
    if not api_url.startswith(("http://", "https://")):
        raise GitHubConfigError("api_url", f"must be an http(s) URL, not {api_url!r}", section=section)
    secrets = MasterSecrets()
    token = ""
    if "app_id" in section:
        credentials: TokenSource | None = _app(section, repo, secrets)
    else:
        stray = [k for k in APP_KEYS if k in section]
        if stray:
            raise GitHubConfigError(stray[0], "belongs to a GitHub App: give app_id too", section=section)
        given = _secret(section, "token", "GITHUB_TOKEN", env)
        if isinstance(given, SecretRef):
            credentials = SecretToken(given.name, secrets)
        else:
            token, credentials = given, StaticToken(given)
    refs = tuple((key, ref) for key in ("token", "app_key", "webhook_secret")
                 if (ref := _secret_ref(section, key)) is not None)
    return GitHubSettings(
        repo=repo,
        token=token,
        credentials=credentials,
        secrets=secrets,
        secret_refs=refs,
        webhook_secret=_secret(section, "webhook_secret", "BSDKM_WEBHOOK_SECRET", env),
        api_url=api_url,
        clone_url=clone_url,
        trust=TrustPolicy.build(_strings(section, "trusted_users", ()), associations),
        triggers=triggers,
        max_payload_bytes=int(_number(section, "max_payload_bytes", DEFAULT_MAX_BODY_BYTES)),
        outbox=str(section.get("outbox", "github-outbox.json")),
        reply_window_s=_number(section, "reply_window_s", 3600.0),
        resend_interval_s=_number(section, "resend_interval_s", 60.0),
        answer_within_s=_number(section, "answer_within_s", GitHubSettings.answer_within_s),
        writes=WriteSpacing(_number(section, "write_interval_s", DEFAULT_WRITE_INTERVAL_S)),
        statuses=_flag(section, "statuses", True),
        comment=_flag(section, "comment", True),
        dialect=str(section.get("dialect", "github")),
        bot_login=str(section["bot_login"]) if section.get("bot_login") else None,
    )
