"""Who may use the master's web UI and REST API: ``bsdkm.yml``'s ``www:`` section → auth/authz.

The change hook shares the web port, so a master that receives GitHub webhooks is reachable
from outside. Such a master (a ``github:`` section, or a ``www:`` section) gets these defaults:
anonymous users may read (or nothing, ``anonymous: none``); forcing, stopping, cancelling and
rebuilding need a login, and only ``admins`` may do them (with an htpasswd file, default: every
user in it). Anyone can make a GitHub account, so with GitHub login a master refuses to start
unless ``admins`` or ``auth.orgs`` (organizations, or ``org/team``) says who is an admin; with
``anonymous: none`` only they may read.
A master with neither section listens on 127.0.0.1 only, is reachable by local users alone,
and keeps Buildbot's open defaults, which the local tooling (``scripts/master.sh``) relies on.

```yaml
www:
  url: https://ci.example.org/bsdkm/   # buildbotURL: links in statuses and comments point here
  anonymous: read                      # or none
  admins: [alice, bob]                 # may force/stop/cancel; default (htpasswd): any user in the file
  auth:
    type: htpasswd                     # Buildbot's HTPasswdAuth: user:password lines, the password plain
    file: /etc/bsdkm-ci/www.htpasswd   # (relative: to bsdkm.yml's directory); keep it mode 0600
  # auth: {type: github, client_id_env: BSDKM_OAUTH_ID, client_secret_env: BSDKM_OAUTH_SECRET,
  #        orgs: [wolfSSL/ci-admins]}  # or admins: [...]; one of them is required
  #   (or client_secret_file; an OAuth app whose callback is <url>auth/login)
```
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..support.yaml_reader import LocatedError, located

ADMIN_ROLE = "bsdkm-admins"
VIEWER_ROLE = "bsdkm-viewers"
KNOWN_KEYS = frozenset({"url", "anonymous", "admins", "auth"})
AUTH_TYPES = ("htpasswd", "github")
# A GitHub organization login, or org/team-slug (GitHubAuth reports teams as both name and slug).
ORG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][A-Za-z0-9 _.-]*)?")


class WwwConfigError(LocatedError):
    """The ``www:`` section is wrong: ``file:line: www.<key>: problem`` when the section came from
    a file (``Config.www`` is a ``LocatedDict``), else ``www.<key>: problem``."""

    def __init__(self, key: str, problem: str, *, section: Any = None) -> None:
        name = f"www.{key}" if key else "www"
        file, line = located(section, name)
        super().__init__(file, line, name, problem)


def exposed(config: Any) -> bool:
    return bool(getattr(config, "github", None)) or bool(getattr(config, "www", None))


def _secret(section: Mapping[str, Any], name: str, env: Mapping[str, str]) -> str:
    auth = section["auth"]
    if f"{name}_file" in auth:
        path = Path(str(auth[f"{name}_file"]))
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise WwwConfigError(f"auth.{name}_file", f"cannot read {path}: {e.strerror}",
                                 section=section) from None
    elif f"{name}_env" in auth:
        variable = str(auth[f"{name}_env"])
        value = env.get(variable, "").strip()
        if not value:
            raise WwwConfigError(f"auth.{name}_env", f"environment variable ${variable} is not set or empty",
                                 section=section)
    else:
        raise WwwConfigError(f"auth.{name}_env", f"give {name}_env or {name}_file (never the value itself)",
                             section=section)
    if not value:
        raise WwwConfigError(f"auth.{name}_file", "is empty", section=section)
    return value


def auth_type(section: Mapping[str, Any]) -> str | None:
    auth = section.get("auth")
    if auth is None:
        return None
    if not isinstance(auth, Mapping) or auth.get("type") not in AUTH_TYPES:
        raise WwwConfigError("auth.type", f"must be one of {', '.join(AUTH_TYPES)}", section=section)
    return str(auth["type"])


def admin_orgs(section: Mapping[str, Any]) -> list[str]:
    """``auth.orgs``: GitHub organizations and ``org/team``s whose members are admins."""
    auth = section.get("auth")
    orgs = auth.get("orgs") if isinstance(auth, Mapping) else None
    if orgs is None:
        return []
    if auth_type(section) != "github":
        raise WwwConfigError("auth.orgs", "names GitHub organizations: only with auth type github",
                             section=section)
    if not isinstance(orgs, list) or not orgs or not all(isinstance(o, str) and ORG_RE.fullmatch(o)
                                                          for o in orgs):
        raise WwwConfigError("auth.orgs", f"must be a list of GitHub organizations or org/team, not {orgs!r}",
                             section=section)
    return list(orgs)


def make_auth(section: Mapping[str, Any], env: Mapping[str, str], base: Path | None = None) -> Any:
    """``base``: the directory a relative ``auth.file`` is in (bsdkm.yml's own, as for its policy)."""
    from buildbot.plugins import util

    kind = auth_type(section)
    if kind is None:
        return None
    auth = section["auth"]
    if kind == "htpasswd":
        path = Path(str(auth.get("file") or ""))
        if base is not None and str(path) and not path.is_absolute():
            path = base / path
        if not path.is_file():
            raise WwwConfigError("auth.file", f"{path} is not a readable user:password file", section=section)
        return util.HTPasswdAuth(str(path))
    teams = any("/" in o for o in admin_orgs(section))
    client_id, client_secret = _secret(section, "client_id", env), _secret(section, "client_secret", env)
    if teams:  # team membership is only in GitHub's GraphQL API
        return util.GitHubAuth(client_id, client_secret, apiVersion=4, getTeamsMembership=True)
    return util.GitHubAuth(client_id, client_secret)


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
        raise WwwConfigError("admins", "must be a list of user names", section=section)
    anonymous = section.get("anonymous", "read")
    if anonymous not in ("read", "none"):
        raise WwwConfigError("anonymous", f"must be read or none, not {anonymous!r}", section=section)
    kind, orgs = auth_type(section), admin_orgs(section)
    if kind == "github" and not admins and not orgs:
        raise WwwConfigError("auth", "with GitHub login anyone with a GitHub account can log in: say who "
                             "may force, stop and read with www.admins (GitHub user names) or "
                             "www.auth.orgs (organizations or org/team)", section=section)
    rules = [util.AnyControlEndpointMatcher(role=ADMIN_ROLE, defaultDeny=True)]
    if anonymous == "none":
        rules.append(util.AnyEndpointMatcher(role=VIEWER_ROLE, defaultDeny=True))
    matchers: list[Any] = []
    if admins:
        matchers.append(util.RolesFromUsername(roles=[ADMIN_ROLE, VIEWER_ROLE], usernames=list(admins)))
    if orgs:
        matchers.append(_Members(orgs))
    if kind != "github":  # an htpasswd file lists only people someone let in
        matchers.append(_Viewers() if matchers else _LoggedIn())
    return util.Authz(allowRules=rules, roleMatchers=matchers)


class _Viewers(_LoggedIn):
    def getRolesFromUser(self, userDetails: Mapping[str, Any]) -> list[str]:
        return [VIEWER_ROLE] if userDetails.get("username") else []


class _Members(_LoggedIn):
    """Admins: members of any of these GitHub organizations or teams (GitHubAuth's ``groups``)."""

    def __init__(self, orgs: list[str]) -> None:
        self.orgs = {o.lower() for o in orgs}

    def getRolesFromUser(self, userDetails: Mapping[str, Any]) -> list[str]:
        groups = userDetails.get("groups") or []
        member = userDetails.get("username") and any(str(g).lower() in self.orgs for g in groups)
        return [ADMIN_ROLE, VIEWER_ROLE] if member else []


def public_url(section: Mapping[str, Any], default: str) -> str:
    url = section.get("url")
    if url is None:
        return default
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise WwwConfigError("url", f"must be an http(s) URL, not {url!r}", section=section)
    return url if url.endswith("/") else url + "/"


def apply_www_security(c: dict[str, Any], config: Any, env: Mapping[str, str] | None = None) -> None:
    """Set ``buildbotURL`` and the web UI's auth/authz in ``BuildmasterConfig`` ``c``."""
    section = getattr(config, "www", None) or {}
    if not isinstance(section, Mapping):
        raise WwwConfigError("", "must be a mapping")
    unknown = sorted(set(section) - KNOWN_KEYS)
    if unknown:
        raise WwwConfigError(unknown[0], f"unknown key (known: {', '.join(sorted(KNOWN_KEYS))})",
                             section=section)
    c["buildbotURL"] = public_url(section, c["buildbotURL"])
    if not exposed(config):
        return
    where = getattr(config, "path", None)
    auth = make_auth(section, os.environ if env is None else env, Path(where).parent if where else None)
    if auth is not None:
        c["www"]["auth"] = auth
    c["www"]["authz"] = make_authz(section)
