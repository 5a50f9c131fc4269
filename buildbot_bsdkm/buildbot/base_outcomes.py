"""Base-branch outcomes in the master's database, beside the perf history (triage).

The Gate step of a build that may record (``may_record``: a build of the base branch, not a PR)
stores one outcome per (target, variant, kernel kind) of its verdict in ``bsdkm_base_outcomes``
(``outcome_store.OutcomeSqlStore``, on the master's ``db_url``: sqlite or PostgreSQL). A PR build's
Gate step first writes the newest outcomes of its (target, variant) to the worker as
``<run dir>/base-outcomes.json``, which ``bsdkm-ci stage gate`` hands to the triage: a failure
already on the base is ``pre-existing``, not the PR's. The PR's code runs on that worker, so what
the master keeps for the PR comment and status (``bsdkm_base_outcomes``) is what it read from the
database, never a file the worker wrote back. ``has_outcome`` tells FetchSource whether a
PR build must build and load its base for correctness because nothing is recorded yet.

Like the perf history this is best effort: a database problem never fails a build (the gate then
triages without a base and says so).
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet import threads
from twisted.python import log

from ..config.worker_trust import may_record_history
from ..contract import BASE_OUTCOMES_FILE, PR_NUMBER_PROPERTY
from ..model import RunResult
from ..policy import Verdict
from ..triage.outcome_store import OutcomeSqlStore
from ..triage.outcomes import outcomes_of
from .perf_history import master_db_url

WINDOW = 10  # base builds a PR is triaged against: "in N of the last M base builds"
_stores: dict[str, OutcomeSqlStore] = {}


def _db_url(master: Any) -> str | None:
    """The master's database, unless it is an in-memory one (Buildbot's tests): a table there would
    live in our own engine only, not in the master's database, and outlive nothing."""
    url = master_db_url(master)
    return None if not url or url in ("sqlite://", "sqlite:///:memory:") else url


def store_for(db_url: str) -> OutcomeSqlStore:
    if db_url not in _stores:
        _stores[db_url] = OutcomeSqlStore(db_url)
    return _stores[db_url]


def may_record(step: Any) -> bool:
    """Whether this build's outcomes describe the base branch: the one rule every recording obeys,
    shared with the perf history (``worker_trust.may_record_history``).

    A PR build never records (its failures are the PR's), nor a forced build of a typed revision,
    nor one an ``untrusted`` worker ran; anything else that reached the gate is a build of the
    configured source: a push to the base, the nightly or a release run.
    """
    return may_record_history(step)


def _add(db_url: str, records: list[dict[str, Any]]) -> int:
    store = store_for(db_url)
    return len([store.add(r) for r in records])


async def record(step: Any, runs: list[RunResult], verdict: Verdict) -> int:
    """Store this base-branch build's outcomes; returns how many records were stored."""
    if not may_record(step):
        return 0
    try:
        commit = step.getProperty("got_revision") or step.getProperty("revision")
        records = [o.to_dict() for o in
                   outcomes_of(runs, verdict, commit=commit if isinstance(commit, str) else None)]
    except Exception as e:  # noqa: BLE001 - outcomes are best effort; the build's verdict is not at stake
        log.msg(f"bsdkm: base outcomes not stored: {type(e).__name__}: {e}")
        return 0
    return await record_documents(step, records)


async def record_documents(step: Any, records: list[dict[str, Any]]) -> int:
    """Store outcomes a worker wrote (a release run's ``RELEASE_OUTCOMES_FILE``), by the same rule."""
    if not may_record(step):
        return 0
    try:
        db_url = _db_url(step.master)
        if not db_url:
            return 0
        # As the perf history: an outcome must say which machine it is of (runs of ours always do),
        # or the triage could not leave another machine's out.
        good = [r for r in records if isinstance(r, dict) and r.get("fingerprint")]
        return await threads.deferToThread(_add, db_url, good) if good else 0
    except Exception as e:  # noqa: BLE001 - outcomes are best effort; the build's verdict is not at stake
        log.msg(f"bsdkm: base outcomes not stored: {type(e).__name__}: {e}")
        return 0


def enabled(master: Any) -> bool:
    """Whether this master keeps outcomes at all (a database of its own, not an in-memory one)."""
    return bool(_db_url(master))


def _window(db_url: str, target: str, variant: str, n: int) -> list[dict[str, Any]]:
    return store_for(db_url).window(target, variant, n)


async def window(master: Any, target: str, variant: str, n: int = WINDOW) -> list[dict[str, Any]]:
    """The newest ``n`` outcomes per kernel kind of (target, variant); [] when none or unreadable."""
    try:
        db_url = _db_url(master)
        if not db_url:
            return []
        return await threads.deferToThread(_window, db_url, target, variant, n)
    except Exception as e:  # noqa: BLE001 - without outcomes the PR build builds its base instead
        log.msg(f"bsdkm: base outcomes not read: {type(e).__name__}: {e}")
        return []


async def has_outcome(master: Any, target: str, variant: str) -> bool:
    return bool(await window(master, target, variant, 1))


async def provide(step: Any) -> list[dict[str, Any]]:
    """Put the base's outcomes next to a PR build's run on the worker, before it is gated; returns
    them, as read from the database (what the master judges the PR by, whatever the worker says)."""
    if not step.getProperty(PR_NUMBER_PROPERTY):
        return []
    records = await window(step.master, step.target, step.variant)
    if not records:
        return []
    try:
        await step.downloadFileContentToWorker(f"{step.run_dir()}/{BASE_OUTCOMES_FILE}",
                                               json.dumps({"base_outcomes": records}, indent=2))
    except Exception as e:  # noqa: BLE001 - the gate then triages without them (and says so)
        log.msg(f"bsdkm: base outcomes not provided: {type(e).__name__}: {e}")
    return records
