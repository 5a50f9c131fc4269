"""Base-branch results into the perf history table of the master's own database.

CollectResults calls ``provide`` and ``record`` with the runs it read back. ``provide`` writes the
newest window of this run's (fingerprint, target, variant) history to the worker as
``<run dir>/history.json``, which ``bsdkm-ci stage gate`` reads for the learned limits (and as
the base of a build without one). ``record``: a build that may record history
(``worker_trust.may_record_history``: not a PR, not a forced build of a typed revision, not on an
``untrusted`` worker) and whose run is healthy (every stage passed, logs complete, no
failed self-test) is stored per machine fingerprint in ``bsdkm_perf_history``, next to
Buildbot's own tables on the master's ``db_url`` (sqlite by default, PostgreSQL when set).
Storing is best effort: history is never a reason to fail a build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet import threads
from twisted.python import log

from ..config.worker_trust import may_record_history
from ..contract import HISTORY_FILE
from ..model import RunResult, to_json
from ..perf import fingerprint
from ..perf.store import SqlStore, not_healthy

_stores: dict[str, SqlStore] = {}


def master_db_url(master: Any) -> str | None:
    """The master's db_url, a relative sqlite path made absolute against its basedir as Buildbot does."""
    db = getattr(getattr(master, "config", None), "db", None)
    url = db.get("db_url") if isinstance(db, dict) else getattr(db, "db_url", None)  # Buildbot 4: DBConfig
    if not isinstance(url, str):
        return None
    prefix = "sqlite:///"
    basedir = getattr(master, "basedir", None)
    if url.startswith(prefix) and not url[len(prefix):].startswith("/") and basedir:
        return prefix + str(Path(basedir) / url[len(prefix):])
    return url


def healthy(run: RunResult) -> bool:
    return not_healthy(run) is None and fingerprint.of_run(run.metadata) is not None


def store_for(db_url: str) -> SqlStore:
    if db_url not in _stores:
        _stores[db_url] = SqlStore(db_url)
    return _stores[db_url]


def _window(db_url: str, runs: list[RunResult], n: int) -> list[RunResult]:
    store = store_for(db_url)
    out: list[RunResult] = []
    for r in runs:
        fp = fingerprint.of_run(r.metadata)
        if fp:
            out += [h for _, h in store.window(fp, r.target, r.variant, n)]
    return out


async def provide(step: Any, runs: list[RunResult], n: int = 30) -> int:
    """Put the history window next to the run on the worker, before it is gated; returns its size."""
    try:
        db_url = master_db_url(step.master)
        if not db_url or not any(fingerprint.of_run(r.metadata) for r in runs):
            return 0
        history = await threads.deferToThread(_window, db_url, runs, n)
        if not history:
            return 0
        await step.downloadFileContentToWorker(f"{step.run_dir()}/{HISTORY_FILE}", to_json(history))
        return len(history)
    except Exception as e:  # noqa: BLE001 - without history the gate says so (no base/history note)
        log.msg(f"bsdkm: perf history not provided: {type(e).__name__}: {e}")
        return 0


def _add(db_url: str, runs: list[RunResult], commit: str | None) -> int:
    store = store_for(db_url)
    return len([store.add(r, commit) for r in runs])


async def record(step: Any, runs: list[RunResult]) -> int:
    """Store the healthy runs of a base-branch build; returns how many were stored."""
    keep = [r for r in runs if healthy(r)]
    if not keep or not may_record_history(step):
        return 0
    try:
        db_url = master_db_url(step.master)
        if not db_url:
            return 0
        commit = step.getProperty("got_revision") or step.getProperty("revision")
        return await threads.deferToThread(_add, db_url, keep, commit if isinstance(commit, str) else None)
    except Exception as e:  # noqa: BLE001 - history is best effort; the build's verdict is not at stake
        log.msg(f"bsdkm: perf history not stored: {type(e).__name__}: {e}")
        return 0
