"""``bsdkm-ci force DIR BUILDER...``: build now on a running master, wait, print each build's verdict.

What the web UI's force button does, from the master's machine: no GitHub, no change, the
configuration's own source. DIR is the master's directory (``bsdkm-ci init master DIR``); the web
UI's address is read from its ``bsdkm.yml`` (``master:``), or given with ``--url``. A master whose
web UI needs a login (``www.auth``) is logged in to as the first admin of its own htpasswd file when
this user can read it (the file ``init master`` writes); otherwise give ``--user`` and ``--password-file``.

One line per build: the builder, Buildbot's result, the verdict, the attempts and the self-test
summary. Exit 0 every build succeeded, 1 one did not, 2 unusable input (no such master or builder,
no answer from the master, a refused login).
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config.bsdkm_yml import ConfigError, load_config
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError

API_WAIT_S = 120.0  # a master just started by `buildbot start` answers within this on a busy machine


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("force", help="build now on a running Buildbot master and print each verdict",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="the master's directory")
    p.add_argument("builders", nargs="+", metavar="BUILDER", help="builder names, e.g. userspace/noasm")
    p.add_argument("--url", help="the web UI's address (default: from DIR's bsdkm.yml, master:)")
    p.add_argument("--user", help="log in to the web UI as this user (www.auth)")
    p.add_argument("--password-file", metavar="FILE", help="the user's password, alone in the file")
    p.add_argument("--reason", default="bsdkm-ci force", help="the reason the build shows")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the builds (3600)")
    p.set_defaults(func=run)


def _master(directory: Path) -> tuple[str, tuple[str, str] | None]:
    """The web UI's address, and the login the master's own htpasswd file holds for this user."""
    # Buildbot is the [buildbot] extra: imported once run() has found it installed.
    from ..buildbot.master_config import MasterSettingsError, listening, load_master_settings

    if not (directory / "buildbot.tac").is_file():
        raise UsageError(f"{directory}: no Buildbot master here (no buildbot.tac)")
    try:
        settings = load_master_settings(directory)
        path = settings.config_path or directory / "bsdkm.yml"
        config = load_config(path)
    except (MasterSettingsError, ConfigError) as e:
        raise UsageError(str(e)) from None
    own = htpasswd_login(getattr(config, "www", None), Path(path).parent)
    return listening(config, settings).www_url, own


def htpasswd_login(www: Any, base: Path) -> tuple[str, str] | None:
    """The first admin of the master's htpasswd file (``www.auth``), when this user may read it: on the
    master's machine, its admin's login is at hand, as the force button is to them in the web UI."""
    auth = www.get("auth") if isinstance(www, Mapping) else None
    if not isinstance(auth, Mapping) or auth.get("type") != "htpasswd":
        return None
    path = Path(str(auth.get("file") or ""))
    path = path if path.is_absolute() else base / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    admins = www.get("admins") or []
    for line in lines:
        user, sep, password = line.partition(":")
        if sep and user.strip() and (not admins or user.strip() in admins):
            return user.strip(), password.strip()
    return None


def _login(url: str, user: str | None, password_file: str | None, own: tuple[str, str] | None = None) -> Any:
    import requests

    session = requests.Session()
    if not user and not password_file:
        if own is None:
            return session
        user, password = own
    elif not (user and password_file):
        raise UsageError("--user and --password-file go together")
    else:
        try:
            password = Path(password_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise UsageError(f"--password-file {password_file}: cannot read it: {e.strerror}") from None
    try:
        r = session.get(url + "auth/login", auth=(user, password), timeout=30)
    except requests.RequestException as e:
        raise UsageError(f"{url}: no answer: {e}") from None
    if r.status_code != 200:
        raise UsageError(f"{url}: the login of {user} was refused (HTTP {r.status_code})")
    return session


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("buildbot") is None:  # the base install: the CLI and the Action only
        raise UsageError("Buildbot is not installed here: install the Buildbot extra "
                         "(pip install 'buildbot-bsdkm[buildbot]')")
    # requests and the master's REST client come with the [buildbot] extra, found just above.
    import requests

    from ..buildbot.control import ControlError, Rest, verdict_lines

    url, own = _master(Path(args.dir)) if not args.url else (args.url.rstrip("/") + "/", None)
    rest = Rest(url, session=_login(url, args.user, args.password_file, own))
    try:
        have = rest.wait(rest.builder_names, f"the master's web UI at {url} (is the master started?)",
                         timeout=API_WAIT_S)
        unknown = [b for b in args.builders if b not in have.values()]
        if unknown:
            raise UsageError(f"no builder {', '.join(unknown)} on this master (it has: "
                             f"{', '.join(sorted(have.values()))})")
        bsid = force(rest, args.builders, args.reason)
        ids = {name: builder_id for builder_id, name in have.items()}
        pages = ", ".join(f"{url}#/builders/{ids[b]}" for b in args.builders)
        print(f"bsdkm-ci: forced {', '.join(args.builders)}; waiting for the build(s): {pages}", flush=True)
        rest.wait_buildset(bsid, timeout=args.timeout)
        lines, ok = verdict_lines(rest, bsid)
    except ControlError as e:
        raise UsageError(str(e)) from None
    except requests.RequestException as e:
        raise UsageError(f"{url}: no answer: {e}") from None
    print("\n".join(lines))
    return EXIT_OK if ok else EXIT_FAILED


def force(rest: Any, builders: list[str], reason: str) -> int:
    """The buildset id; a refusal for want of a login says which options log in."""
    from ..buildbot.control import ControlError  # the [buildbot] extra's, as in run()

    try:
        return int(rest.force(builders, reason))
    except ControlError as e:
        if "HTTP 403" in str(e):
            raise UsageError("this master lets only a logged-in admin force builds (its bsdkm.yml has "
                             "github: or www:; www.auth says who logs in): give --user NAME "
                             "--password-file FILE") from None
        raise
