"""``bsdkm.yml``'s ``master:`` section: where a Buildbot master listens.

```yaml
master:
  www_port: 8010          # the web UI, its REST API and GitHub's webhook
  workers_port: 9989      # workers connect here
  listen:
    www: 127.0.0.1        # a proxy in front publishes the webhook (or 0.0.0.0: every interface)
    workers: 127.0.0.1    # 0.0.0.0 (or this machine's address) for workers on other machines
```

Both listen on loopback unless told otherwise. Buildbot's worker protocol is not encrypted: the
commands, their output and the configuration the master sends its workers cross the network as
they are, and a worker's password is all a connection needs. Opening it to other machines is a
decision about the network in between (a private one, a VPN, an SSH tunnel), so it is the
admin's to make (``bsdkm-ci init master --workers-listen 0.0.0.0``, or this section).

The master's database URL is not here: it may hold a password, and this file goes to every worker.
``bsdkm-ci init master --db-url`` keeps it as the master's secret ``db-url`` (``DB_URL_SECRET``).

Pure (the core): ``buildbot/master_config.py`` turns it into Buildbot's endpoints.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from ..support.yaml_reader import At
from ..support.yaml_schema import Section, integer, string

DEFAULT_WWW_PORT = 8010
DEFAULT_WORKERS_PORT = 9989
# The web UI stays on loopback unless asked: without www.auth anyone who reaches it may force builds.
DEFAULT_WWW_LISTEN = "127.0.0.1"
# Loopback until the admin opens it: the worker protocol is cleartext (see above).
DEFAULT_WORKERS_LISTEN = "127.0.0.1"
DEFAULT_DB_URL = "sqlite:///state.sqlite"
DB_URL_SECRET = "db-url"  # <master>/secrets/db-url: the database URL `init master --db-url` gave


@dataclass(frozen=True)
class MasterListen:
    www_port: int = DEFAULT_WWW_PORT
    workers_port: int = DEFAULT_WORKERS_PORT
    www_listen: str = DEFAULT_WWW_LISTEN
    workers_listen: str = DEFAULT_WORKERS_LISTEN


def _port(at: At) -> int:
    port = at.integer(minimum=1)
    if port > 65535:
        raise at.error(f"must be a TCP port (1-65535), not {port}")
    return port


def _address(at: At) -> str:
    text = at.string().strip()
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise at.error(f"must be an IP address (127.0.0.1, 0.0.0.0 for every interface, ::), "
                       f"not {text!r}") from None
    return text


_PORT = integer(1, 65535, read=_port)
_ADDRESS = string(_address, r"^[0-9A-Fa-f:.]+$")
LISTEN = Section({"www": _ADDRESS, "workers": _ADDRESS})
MASTER = Section({"www_port": _PORT, "workers_port": _PORT, "listen": LISTEN.kind(null=True)})


def read_master(at: At) -> MasterListen:
    m = MASTER.mapping(at)
    listen = LISTEN.mapping(m["listen"]) if "listen" in m and not m["listen"].is_null() else {}
    got = MasterListen(
        www_port=MASTER.get(m, "www_port", DEFAULT_WWW_PORT),
        workers_port=MASTER.get(m, "workers_port", DEFAULT_WORKERS_PORT),
        www_listen=LISTEN.get(listen, "www", DEFAULT_WWW_LISTEN),
        workers_listen=LISTEN.get(listen, "workers", DEFAULT_WORKERS_LISTEN),
    )
    if got.www_port == got.workers_port:
        raise (m.get("workers_port") or at).error(
            f"the web UI and the workers cannot share port {got.www_port}")
    return got


def stored_db_url(secrets_dir: Path) -> str | None:
    """The database URL kept in the master's secrets directory, or None when none is kept there
    (ValueError, naming the file, when one is there but cannot be used)."""
    path = secrets_dir / DB_URL_SECRET
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"{path}: cannot read the master's database URL: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: the master's database URL is not UTF-8 text") from None
    if not value:
        raise ValueError(f"{path}: empty; it holds the master's database URL (or remove it: sqlite)")
    return value
