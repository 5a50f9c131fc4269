"""Base-branch outcomes stored where the perf history lives: a directory (the CLI's and the
Action's, ``bsdkm-ci history``) and the Buildbot master's database (sqlite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import pg_server

from buildbot_bsdkm.perf.store import StoreError
from buildbot_bsdkm.triage.outcome_store import OutcomeDirStore, OutcomeSqlStore, describe, latest

PANIC = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"


def outcome(i: int, kernel: str = "debug", verdict: str = "fail", target: str = "freebsd-kmod-qemu",
            **kw) -> dict:
    return {"target": target, "variant": "intelasm", "kernel": kernel, "verdict": verdict,
            "signatures": [PANIC] if verdict == "fail" else [], "commit": f"c{i:02d}", "version": "5.9.2",
            "date": f"2026-11-{i + 1:02d}T02:00:00Z", "fingerprint": "f00d", **kw}


def check_store(store) -> None:
    for i in range(12):
        store.add(outcome(i))
        store.add(outcome(i, "release", "pass"))
    store.add(outcome(0, target="userspace", kernel="", verdict="pass"))
    got = store.window("freebsd-kmod-qemu", "intelasm", 3)
    assert [(r["kernel"], r["commit"]) for r in got] == [
        ("debug", "c09"), ("release", "c09"), ("debug", "c10"), ("release", "c10"),
        ("debug", "c11"), ("release", "c11")]  # the newest three of each kernel, oldest first
    assert got[-2]["signatures"] == [PANIC] and got[-1]["signatures"] == []
    assert {r["kernel"]: r["commit"] for r in latest(got)} == {"debug": "c11", "release": "c11"}
    assert store.window("userspace", "intelasm")[0]["kernel"] == ""
    assert store.window("freebsd-kmod-qemu", "noasm") == []
    assert sorted(store.pairs()) == [("freebsd-kmod-qemu", "intelasm"), ("userspace", "intelasm")]
    with pytest.raises(StoreError, match="verdict"):
        store.add(outcome(1, verdict="maybe"))
    with pytest.raises(StoreError, match="not a plain name"):
        store.add(outcome(1, target="../../etc"))
    (line, _) = describe(got)
    assert line.startswith("freebsd-kmod-qemu/intelasm (debug kernel): fail at 5.9.2 "
                           "(3 of the last 3 failed)")


def test_directory_store(tmp_path: Path) -> None:
    check_store(OutcomeDirStore(tmp_path / "history"))
    assert (tmp_path / "history" / "outcomes" / "userspace" / "intelasm" / "default").is_dir()


def test_sql_store_on_sqlite(tmp_path: Path) -> None:
    store = OutcomeSqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    check_store(store)
    store.close()
    again = OutcomeSqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")  # kept across a restart
    assert len(again.window("freebsd-kmod-qemu", "intelasm", 1)) == 2
    again.close()


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with pg_server(prefix="bsdkm-outcomes-pg-") as pg:
        yield pg.url


@pytest.mark.slow
def test_sql_store_on_postgresql(postgres_url: str) -> None:
    store = OutcomeSqlStore(postgres_url)
    check_store(store)
    store.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "buildbot_bsdkm.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_history_add_records_outcomes_and_history_shows_them(tmp_path: Path) -> None:
    from buildbot_bsdkm.model import LogResult, RunResult, SelfTest, StageFailure, to_json

    failing = RunResult("intelasm", "userspace", logs=[LogResult(
        "test.log", tests=[SelfTest("AES-GCM", False, code=-216), SelfTest("SHA-256", True)], complete=True)],
        failure=StageFailure("load", "self-test failed", reason="selftest"),
        metadata={"fingerprint": {"id": "f00d"}, "source_commit": "a" * 40, "wolfssl_version": "5.9.2"})
    results = tmp_path / "results.json"
    results.write_text(to_json([failing]))
    store = tmp_path / "store"
    added = _cli("history", "add", "--store", str(store), str(results))
    assert added.returncode == 0, added.stderr
    shown = _cli("history", "outcomes", "--store", str(store), "--json", str(tmp_path / "o.json"))
    assert shown.returncode == 0, shown.stderr
    assert "base outcome userspace/intelasm: fail at 5.9.2" in shown.stdout
    assert "selftest: AES-GCM (-216)" in shown.stdout
    (rec,) = json.loads((tmp_path / "o.json").read_text())["base_outcomes"]
    assert rec["commit"] == "a" * 40 and rec["verdict"] == "fail"
    show = _cli("history", "show", "--store", str(store))
    assert show.returncode == 0, show.stderr
    assert "outcomes" not in show.stdout.split("base outcome")[0]  # not mistaken for a fingerprint
    assert "base outcome userspace/intelasm: fail" in show.stdout


def test_history_outcomes_reads_a_masters_database_and_exports_for_base_results(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    store = OutcomeSqlStore(url)
    for i in range(3):
        store.add(outcome(i))
    store.close()
    shown = _cli("history", "outcomes", "--db", url, "--window", "2", "--json", str(tmp_path / "base.json"))
    assert shown.returncode == 0, shown.stderr
    assert "freebsd-kmod-qemu/intelasm (debug kernel): fail at 5.9.2 (2 of the last 2 failed)" in shown.stdout
    doc = json.loads((tmp_path / "base.json").read_text())
    assert [o["commit"] for o in doc["base_outcomes"]] == ["c01", "c02"]
    from buildbot_bsdkm.triage.outcomes import outcomes_from_document

    assert [o.signatures for o in outcomes_from_document(doc, "base.json")] == [[PANIC], [PANIC]]
    bad = _cli("history", "outcomes", "--db", "nosuchdialect://x")
    assert bad.returncode == 2 and "--db" in bad.stderr
