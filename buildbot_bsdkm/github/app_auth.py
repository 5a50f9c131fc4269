"""Who the master is on GitHub: a personal token, or a GitHub App's installation tokens.

An installation token lasts an hour; ``AppTokens`` gets one with a JWT signed by the App's private
key, keeps it, and gets the next one before it runs out (and at once when GitHub refuses it).
The bot's own login, which tells our report comment from a copy of its marker, is the App's slug
with ``[bot]``, or the personal token's user.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twisted.internet import defer

from .auth_health import AuthHealth
from .request_errors import CredentialsError, GitHubError
from .tokens import ApiCaller, ApiResponse, SecretSource, TokenSource

__all__ = ["AppKeyError", "AppTokens", "KeyFromSecret", "SecretSource", "SecretToken", "StaticToken",
           "TokenSource", "app_jwt", "load_private_key"]

# GitHub accepts an App JWT for at most 10 minutes; issued a minute in the past against clock drift.
JWT_LIFETIME_S = 540
JWT_BACKDATE_S = 60
# A new installation token this long before the old one expires (or a quarter of its life, if less).
REFRESH_BEFORE_S = 300.0
# After GitHub refused to give a token, this long before asking again: every kept report is re-sent
# in one pass, and one question per pass is enough.
FAILURE_COOLDOWN_S = 10.0


class AppKeyError(ValueError):
    """The App's private key cannot be used; the message says why, never the key."""


def load_private_key(pem: bytes, where: str) -> Any:
    """The RSA private key of a GitHub App (the PEM file GitHub lets one download)."""
    try:
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:  # pragma: no cover - the [buildbot] extra has it
        raise AppKeyError(f"{where}: GitHub App keys need the 'cryptography' package "
                        "(pip install 'buildbot-bsdkm[buildbot]')") from None
    try:
        key = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise AppKeyError(f"{where}: not a PEM private key without a passphrase ({first})") from None
    except UnsupportedAlgorithm as e:  # e.g. an EC key on a curve OpenSSL does not offer
        raise AppKeyError(f"{where}: a key of a kind this machine cannot use ({e}); a GitHub App key "
                          "is RSA") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise AppKeyError(f"{where}: a GitHub App key is RSA, this one is not")
    return key


def app_jwt(app_id: str, key: Any, now: float) -> str:
    import jwt

    claims = {"iat": int(now) - JWT_BACKDATE_S, "exp": int(now) + JWT_LIFETIME_S, "iss": str(app_id)}
    return str(jwt.encode(claims, key, algorithm="RS256"))


def _expiry(text: Any) -> float:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class _UserToken:
    """A token of a user: whose it is, ``GET /user`` says, asked once."""

    _login: str | None = None

    async def login(self, client: ApiCaller) -> str | None:
        if self._login is None:
            got = await client.request("GET", "/user")
            login = got.data.get("login") if isinstance(got.data, dict) else None
            self._login = str(login) if login else None
        return self._login


class SecretToken(_UserToken):
    """A personal token that one of the master's secrets providers gives (``token: {secret: NAME}``).

    Read when first needed and kept; read again after GitHub refuses it, so a rotated secret is
    picked up without a restart.
    """

    refreshable = True  # after a 401: read the secret again, once

    def __init__(self, name: str, source: SecretSource) -> None:
        self.name = name
        self._source = source
        self._token: str | None = None
        self._seen: list[str] = []  # every value read, so none can reach a log line
        self.health = AuthHealth()

    async def authorization(self, client: ApiCaller) -> str:
        if self._token is None:
            token = (await self._source.get(self.name)).strip()
            if not token:
                raise CredentialsError(f"secret {self.name!r} (github.token) is empty")
            self._token = token
            self._seen = [*self._seen[-3:], token]
        return f"Bearer {self._token}"

    def refused(self, authorization: str) -> None:
        if self._token is not None and authorization == f"Bearer {self._token}":
            self._token = None

    def secrets(self) -> tuple[str, ...]:
        return tuple(self._seen)


class KeyFromSecret:
    """A GitHub App's private key that one of the master's secrets providers gives
    (``app_key: {secret: NAME}``), read and checked when it is first needed."""

    def __init__(self, name: str, source: SecretSource) -> None:
        self.name = name
        self._source = source

    async def load(self) -> Any:
        pem = await self._source.get(self.name)
        try:
            return load_private_key(pem.encode("utf-8"), f"secret {self.name!r} (github.app_key)")
        except AppKeyError as e:
            raise CredentialsError(str(e)) from None


class StaticToken(_UserToken):
    """A personal (or fine-grained) token: the same header every time."""

    refreshable = False

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("GitHub token is empty: set github.token_env or github.token_file")
        self._token = token
        self.health = AuthHealth()

    async def authorization(self, client: ApiCaller) -> str:
        return f"Bearer {self._token}"

    def refused(self, authorization: str) -> None:
        return None

    def secrets(self) -> tuple[str, ...]:
        return (self._token,)


@dataclass
class _Installation:
    token: str
    expires_at: float
    got_at: float


class AppTokens:
    """A GitHub App's installation tokens for one repository, refreshed before they expire.

    A token GitHub will not give (the App reinstalled under a new installation id, a JWT refused
    for clock skew, no installation on the repository) is a ``CredentialsError``: the report waits
    in the outbox. A 401 or 404 from the token endpoint forgets the installation id, which is then
    looked up again (at once after a 404: the App was reinstalled).
    """

    refreshable = True

    def __init__(self, app_id: str, key: Any, repo: str, *, installation_id: int | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.app_id = str(app_id)
        self._key = key
        self.repo = repo
        self.installation_id = installation_id
        self._clock = clock
        self._monotonic = monotonic  # the cooldown after a refusal must not follow clock corrections
        self._current: _Installation | None = None
        self._lock = defer.DeferredLock()
        self._slug: str | None = None
        self._issued: list[str] = []  # every token seen, so none can reach a log line
        self._refusal: tuple[float, CredentialsError] | None = None  # (until, why) after GitHub said no
        self.tokens_issued = 0  # how many installation tokens were fetched (measurements, tests)
        self.health = AuthHealth(clock)

    async def _signing_key(self) -> Any:
        if isinstance(self._key, KeyFromSecret):
            self._key = await self._key.load()  # kept once it is a key: a rotation needs a reconfig
        return self._key

    async def _jwt(self) -> str:
        key = await self._signing_key()
        try:
            token = app_jwt(self.app_id, key, self._clock())
        except Exception as e:  # noqa: BLE001 - a key PyJWT cannot sign with: say so, keep the report
            raise CredentialsError(f"GitHub App {self.app_id}: cannot sign its JWT: {type(e).__name__}: "
                                   f"{e}") from None
        self._issued.append(token)
        del self._issued[:-16]
        return token

    def _fresh(self) -> str | None:
        cur = self._current
        if cur is None:
            return None
        life = max(cur.expires_at - cur.got_at, 0.0)
        if cur.expires_at - self._clock() > min(REFRESH_BEFORE_S, life / 4):
            return cur.token
        return None

    async def authorization(self, client: ApiCaller) -> str:
        token = self._fresh()
        if token is None:
            await self._lock.acquire()
            try:
                token = self._fresh() or await self._token_unless_refused(client)
            finally:
                self._lock.release()
        return f"Bearer {token}"

    async def _token_unless_refused(self, client: ApiCaller) -> str:
        if self._refusal is not None:
            until, why = self._refusal
            if self._monotonic() < until:
                raise CredentialsError(str(why), why.status)
        try:
            token = await self._new_token(client)
        except CredentialsError as e:
            self._refusal = (self._monotonic() + FAILURE_COOLDOWN_S, e)
            raise
        self._refusal = None
        return token

    async def _installation(self, client: ApiCaller) -> int:
        if self.installation_id is None:
            signed = await self._jwt()
            try:
                got = await client.request("GET", f"/repos/{self.repo}/installation",
                                           authorization=f"Bearer {signed}", quiet=True)
            except GitHubError as e:
                raise CredentialsError(f"GitHub App {self.app_id}: cannot find its installation on "
                                       f"{self.repo}: {e}", e.status) from None
            found = got.data.get("id") if isinstance(got.data, dict) else None
            if not isinstance(found, int):
                raise CredentialsError(f"GitHub App {self.app_id}: no installation on {self.repo}")
            self.installation_id = found
        return self.installation_id

    async def _new_token(self, client: ApiCaller) -> str:
        got = await self._ask_token(client)
        if got is None:  # the App was reinstalled under a new installation id: look it up, once
            got = await self._ask_token(client)
        if got is None:
            raise CredentialsError(f"GitHub App {self.app_id}: no installation token for {self.repo} even "
                                   "after looking its installation up again (404)", 404)
        data = got.data if isinstance(got.data, dict) else {}
        token = str(data.get("token") or "")
        if not token:
            raise CredentialsError(f"GitHub App {self.app_id}: the installation token answer has no token")
        now = self._clock()
        self._issued.append(token)
        del self._issued[:-16]
        self._current = _Installation(token, _expiry(data.get("expires_at")) or now + 3600, now)
        self.tokens_issued += 1
        return token

    async def _ask_token(self, client: ApiCaller) -> ApiResponse | None:
        """The token endpoint's answer; None after a 404, with the installation id forgotten."""
        installation = await self._installation(client)
        signed = await self._jwt()
        try:
            return await client.request("POST", f"/app/installations/{installation}/access_tokens", {},
                                        authorization=f"Bearer {signed}", idempotent=True, quiet=True)
        except GitHubError as e:
            if e.status in (401, 404):
                self.installation_id = None  # whichever it is, the next attempt asks GitHub again
            if e.status == 404:
                return None
            if e.status == 401:
                raise CredentialsError(f"GitHub App {self.app_id}: its JWT was refused (a wrong key, or this "
                                       f"machine's clock is off): {e}", 401) from None
            raise CredentialsError(f"GitHub App {self.app_id}: no installation token: {e}",
                                   e.status) from None

    def refused(self, authorization: str) -> None:
        """GitHub said 401 to this header: revoked, or expired early; the next call gets a new one."""
        if self._current is not None and authorization == f"Bearer {self._current.token}":
            self._current = None

    async def login(self, client: ApiCaller) -> str | None:
        if self._slug is None:
            got = await client.request("GET", "/app", authorization=f"Bearer {await self._jwt()}")
            slug = got.data.get("slug") if isinstance(got.data, dict) else None
            self._slug = str(slug) if slug else None
        return f"{self._slug}[bot]" if self._slug else None

    def secrets(self) -> tuple[str, ...]:
        return tuple(self._issued)
