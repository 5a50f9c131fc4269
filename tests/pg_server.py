"""A throw-away PostgreSQL server on loopback for the tests that run a master (or a store) on it.

One ``initdb`` in a temporary directory owned by ``postgres``, trust authentication, a free port, a
database ``bsdkm``; stopped and removed afterwards: ``with pg_server() as pg: ...`` (a test module's
fixture yields it).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DATABASE = "bsdkm"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bin(name: str) -> str:
    """A server program: on PATH, else in Debian's versioned directory (not on PATH by default)."""
    found = shutil.which(name) or next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))), None)
    if found is None:
        pytest.fail(f"PostgreSQL (Debian package postgresql) is not installed: {name} not found")
    return str(found)


@dataclass
class Postgres:
    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def pg(self, *args: str, check: bool = True) -> str:
        """A PostgreSQL program as the ``postgres`` user; its standard output."""
        done = subprocess.run(["runuser", "-u", "postgres", "--", *args], check=check, capture_output=True,
                              text=True, timeout=120)
        return done.stdout

    def psql(self, sql: str) -> str:
        return self.pg("psql", "-h", "127.0.0.1", "-p", str(self.port), "-d", DATABASE, "-Atc", sql)


@contextlib.contextmanager
def pg_server(prefix: str = "bsdkm-pg-") -> Iterator[Postgres]:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    base = Path(tempfile.mkdtemp(prefix=prefix))
    shutil.chown(base, "postgres", "postgres")
    pg = Postgres(base / "db", _free_port())
    try:
        pg.pg(initdb, "-D", str(pg.data), "-A", "trust", "-U", "postgres")
        pg.pg(pg_ctl, "-D", str(pg.data), "-w", "-l", str(base / "pg.log"), "-o",
              f"-p {pg.port} -k {base} -c listen_addresses=127.0.0.1", "start")
        pg.pg("createdb", "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", DATABASE)
        yield pg
    finally:
        pg.pg(pg_ctl, "-D", str(pg.data), "-m", "fast", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)

