"""A real master killed with SIGKILL and started again loses
no report, no approval, no supersede bookkeeping and no "already acted on" mark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from github_fake.master import Master, write_config
from github_fake.restart import kill_and_restart_scenario
from github_fake.server import FakeGitHub
from pg_server import Postgres, pg_server

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with pg_server() as pg:
        yield pg


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()
    assert fake.invalid == []


def _force(session: requests.Session, master: Master) -> int:
    body = {"jsonrpc": "2.0", "method": "force", "id": 1,
            "params": {"builderNames": ["userspace/noasm"], "reason": "www auth test"}}
    return session.post(f"{master.url}api/v2/forceschedulers/force", json=body, timeout=30).status_code


def _only_a_logged_in_admin_may_force(master: Master) -> None:
    """On a real master: the htpasswd login from bsdkm.yml's www: section."""
    with requests.Session() as anonymous:
        assert _force(anonymous, master) == 403
    for user, password, allowed in (("bob", "bob-pw", False), ("alice", "wrong", False),
                                    ("alice", "alice-pw", True)):
        with requests.Session() as session:
            session.get(f"{master.url}auth/login", auth=(user, password), timeout=30)
            assert (_force(session, master) == 200) is allowed, user


def test_restart_on_postgresql_loses_no_report_approval_or_supersede_entry(
    postgres: Postgres, github: FakeGitHub, tmp_path: Path
) -> None:
    # The sqlite run of the same scenario is at the end of test_gh_master.py (its module master).
    db_url = postgres.url
    config = write_config(tmp_path / "bsdkm.yml", github.url, bot_login="bsdkm-ci[bot]")
    htpasswd = tmp_path / "www.htpasswd"
    htpasswd.write_text("alice:alice-pw\nbob:bob-pw\n")
    doc = yaml.safe_load(config.read_text())
    doc["www"] = {"auth": {"type": "htpasswd", "file": str(htpasswd)}, "admins": ["alice"]}
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    master = Master(tmp_path, github).start(config, with_worker=False, db_url=db_url)
    try:
        kill_and_restart_scenario(master, github)
        _only_a_logged_in_admin_may_force(master)
    finally:
        master.stop()
    assert not (master.layout.master / "state.sqlite").exists()
    rows = postgres.pg("psql", "-h", "127.0.0.1", "-p", str(postgres.port), "-d", "bsdkm", "-Atc",
                       "select count(*) from object_state where name like 'pr:%'")
    assert int(rows.strip()) >= 2  # the PR records really are in PostgreSQL
