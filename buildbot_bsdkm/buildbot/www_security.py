"""Who may use the master's web UI and REST API: ``bsdkm.yml``'s ``www:`` section → auth/authz.

The change hook shares the web port, so a master that receives GitHub webhooks is reachable
from outside. Such a master (a ``github:`` section, or a ``www:`` section) gets these defaults:
anonymous users may read (or nothing, ``anonymous: none``); forcing, stopping, cancelling and
rebuilding need a login, and only ``admins`` (default: every logged-in user) may do them.
A master with neither section listens on 127.0.0.1 only, is reachable by local users alone,
and keeps Buildbot's open defaults, which the local tooling (``scripts/master.sh``) relies on.

```yaml
www:
  url: https://ci.example.org/bsdkm/   # buildbotURL: links in statuses and comments point here
  anonymous: read                      # or none
  admins: [alice, bob]                 # may force/stop/cancel; default: any logged-in user
  auth:
    type: htpasswd                     # user:password file (Apache htpasswd, crypt/MD5/plain)
    file: /etc/bsdkm-ci/www.htpasswd
  # auth: {type: github, client_id_env: BSDKM_OAUTH_ID, client_secret_env: BSDKM_OAUTH_SECRET}
  #   (or client_secret_file; an OAuth app whose callback is <url>auth/login)
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ADMIN_ROLE = "bsdkm-admins"
VIEWER_ROLE = "bsdkm-viewers"
KNOWN_KEYS = frozenset({"url", "anonymous", "admins", "auth"})
AUTH_TYPES = ("htpasswd", "github")


class WwwConfigError(ValueError):
    """The ``www:`` section is wrong; the message names the key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"www.{key}: {problem}")


def exposed(config: Any) -> bool:
    return bool(getattr(config, "github", None)) or bool(getattr(config, "www", None))


def _secret(auth: Mapping[str, Any], name: str, env: Mapping[str, str]) -> str:
    if f"{name}_file" in auth:
        path = Path(str(auth[f"{name}_file"]))
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise WwwConfigError(f"auth.{name}_file", f"cannot read {path}: {e.strerror}") from None
    elif f"{name}_env" in auth:
        variable = str(auth[f"{name}_env"])
        value = env.get(variable, "").strip()
        if not value:
            raise WwwConfigError(f"auth.{name}_env", f"environment variable ${variable} is not set or empty")
    else:
        raise WwwConfigError(f"auth.{name}_env", f"give {name}_env or {name}_file (never the value itself)")
    if not value:
        raise WwwConfigError(f"auth.{name}_file", "is empty")
    return value


def make_auth(section: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    from buildbot.plugins import util

    auth = section.get("auth")
    if auth is None:
        return None
    if not isinstance(auth, Mapping) or auth.get("type") not in AUTH_TYPES:
        raise WwwConfigError("auth.type", f"must be one of {', '.join(AUTH_TYPES)}")
    if auth["type"] == "htpasswd":
        path = Path(str(auth.get("file") or ""))
        if not path.is_file():
            raise WwwConfigError("auth.file", f"{path} is not a readable user:password file")
        return util.HTPasswdAuth(str(path))
    return util.GitHubAuth(_secret(auth, "client_id", env), _secret(auth, "client_secret", env))


class _LoggedIn:
    """Every logged-in user gets the admin role (used when ``admins`` is not given)."""

    def getRolesFromUser(self, userDetails: Mapping[str, Any]) -> list[str]:
        return [ADMIN_ROLE, VIEWER_ROLE] if userDetails.get("username") else []

    def setAuthz(self, authz: Any) -> None:
        self.authz = authz
        self.master = authz.master


def make_authz(section: Mapping[str, Any]) -> Any:
    from buildbot.plugins import util

    admins = section.get("admins")
    if admins is not None and (not isinstance(admins, list) or not all(isinstance(a, str) for a in admins)):
        raise WwwConfigError("admins", "must be a list of user names")
    anonymous = section.get("anonymous", "read")
    if anonymous not in ("read", "none"):
        raise WwwConfigError("anonymous", f"must be read or none, not {anonymous!r}")
    rules = [util.AnyControlEndpointMatcher(role=ADMIN_ROLE, defaultDeny=True)]
    if anonymous == "none":
        rules.append(util.AnyEndpointMatcher(role=VIEWER_ROLE, defaultDeny=True))
    matchers: list[Any] = (
        [util.RolesFromUsername(roles=[ADMIN_ROLE, VIEWER_ROLE], usernames=list(admins)), _Viewers()]
        if admins
        else [_LoggedIn()]
    )
    return util.Authz(allowRules=rules, roleMatchers=matchers)


class _Viewers(_LoggedIn):
    def getRolesFromUser(self, userDetails: Mapping[str, Any]) -> list[str]:
        return [VIEWER_ROLE] if userDetails.get("username") else []


def public_url(section: Mapping[str, Any], default: str) -> str:
    url = section.get("url")
    if url is None:
        return default
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise WwwConfigError("url", f"must be an http(s) URL, not {url!r}")
    return url if url.endswith("/") else url + "/"


def apply_www_security(c: dict[str, Any], config: Any, env: Mapping[str, str] | None = None) -> None:
    """Set ``buildbotURL`` and the web UI's auth/authz in ``BuildmasterConfig`` ``c``."""
    section = getattr(config, "www", None) or {}
    if not isinstance(section, Mapping):
        raise WwwConfigError("", "must be a mapping")
    unknown = sorted(set(section) - KNOWN_KEYS)
    if unknown:
        raise WwwConfigError(unknown[0], f"unknown key (known: {', '.join(sorted(KNOWN_KEYS))})")
    c["buildbotURL"] = public_url(section, c["buildbotURL"])
    if not exposed(config):
        return
    auth = make_auth(section, os.environ if env is None else env)
    if auth is not None:
        c["www"]["auth"] = auth
    c["www"]["authz"] = make_authz(section)
